#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_policy::AdmissionObject;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        if let Ok(object) = AdmissionObject::from_json(&value) {
            let _ = object.is_checked();
            for image in object.images() {
                let _ = palisade_policy::ImageRef::new(image).is_latest();
            }
            let _ = object.label("team");
        }
    }
});
