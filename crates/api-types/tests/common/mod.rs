//! What the document tests share.

use palisade_api_types::yaml::documents;
use palisade_api_types::PolicyDocument;
use palisade_policy::Catalog;

/// The first error of the only document of `text`: YAML reading, then validation.
pub fn outcome(text: &str) -> Result<(), String> {
    let mut docs = documents::<PolicyDocument>(text);
    assert_eq!(docs.len(), 1, "{text}");
    let (_, document) = docs.remove(0);
    let document = document.map_err(|e| e.to_string())?;
    document
        .validate(&Catalog::builtin())
        .map(|_| ())
        .map_err(|e| e.to_string())
}
