#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_policy::{ImageRef, RegistryPrefix};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let image = ImageRef::new(&s);
    let has_digest = image.has_digest();
    let _ = image.tag();
    let latest = image.is_latest();
    assert_eq!(has_digest, s.contains('@'));
    if s.contains('@') {
        assert!(!latest, "image with '@' classified as latest: {s:?}");
    }

    if let Ok((prefix, _trimmed)) = RegistryPrefix::parse(&s) {
        let text = prefix.as_str();
        assert!(!text.ends_with('/'), "prefix has trailing '/': {text:?} from {s:?}");
        assert!(
            ImageRef::new(text).is_under(&prefix),
            "prefix not under itself: {text:?} from {s:?}"
        );
        // The image must also be under the prefix it parsed into.
        assert!(
            image.is_under(&prefix),
            "input not under its own prefix: {s:?}"
        );
        match RegistryPrefix::parse(text) {
            Ok((again, trimmed)) => {
                assert_eq!(again, prefix, "re-parse changed the prefix: {s:?}");
                assert!(!trimmed, "re-parse trimmed again: {text:?} from {s:?}");
            }
            Err(e) => panic!("re-parse of {text:?} (from {s:?}) failed: {e}"),
        }
        assert!(prefix.component_count() >= 1);
    }
});
