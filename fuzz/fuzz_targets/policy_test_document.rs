#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_api_types::policy_test::PolicyTestDocument;

// `palisade test` reads each YAML document as a value, then as a PolicyTest (strictly, field
// errors named by pointer), then validates it: none of it may panic on any text.
fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for (_index, value) in palisade_api_types::yaml::each_document_within::<serde_json::Value>(
        &text,
        palisade_api_types::nesting::MAX_MANIFEST_DEPTH,
    ) {
        let Ok(value) = value else { continue };
        if let Ok(document) = palisade_api_types::json::typed::<PolicyTestDocument>(&value) {
            let _ = document.validate();
        }
    }
});
