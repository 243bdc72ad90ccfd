#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_api_types::PolicyDocument;
use palisade_policy::Catalog;
use std::sync::OnceLock;

static CATALOG: OnceLock<Catalog> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let catalog = CATALOG.get_or_init(Catalog::builtin);

    if let Ok(document) = PolicyDocument::from_json(data) {
        let _ = document.validate(catalog);
    }

    let text = String::from_utf8_lossy(data);
    for (_index, result) in palisade_api_types::yaml::documents::<PolicyDocument>(&text) {
        if let Ok(document) = result {
            let _ = document.validate(catalog);
        }
    }
});
