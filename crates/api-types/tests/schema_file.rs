//! The published JSON Schemas of `BoundaryPolicy`, `BoundaryException` and `PolicyTest` are the ones the
//! types generate: regenerate them with `UPDATE_SCHEMAS=1 cargo test -p palisade-api-types
//! --test schema_file`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly"
)]

use std::path::Path;

use palisade_api_types::schema;

#[test]
fn the_published_schemas_are_the_generated_ones() {
    for (file, schema) in [
        (schema::PATH, schema::boundary_policy()),
        (schema::EXCEPTION_PATH, schema::boundary_exception()),
        (schema::POLICY_TEST_PATH, schema::policy_test()),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(file);
        let generated = format!("{}\n", serde_json::to_string_pretty(&schema).unwrap());
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let published = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            published == generated,
            "{file} is not the schema the types generate; run UPDATE_SCHEMAS=1 cargo test -p palisade-api-types --test schema_file",
        );
    }
}

/// The exceptions guide's documents use only the exception schema's keys.
#[test]
fn the_exceptions_guide_uses_only_the_schema_s_keys() {
    let schema = schema::boundary_exception();
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/exceptions.md"),
    )
    .unwrap();
    let mut checked = 0;
    for block in guide.split("```yaml\n").skip(1) {
        let text = block.split("```").next().unwrap_or_default();
        if !text.contains("kind: BoundaryException") {
            continue;
        }
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let value: serde_json::Value = serde::Deserialize::deserialize(document).unwrap();
            if value["kind"] == "BoundaryException" {
                keys_known(&schema, &schema, &value, "docs/exceptions.md");
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no BoundaryException in docs/exceptions.md");
}

/// Every example policy of the repository is a document the schema describes: its keys are
/// the schema's, at every level (a small check of the shape, not a full validator).
#[test]
fn the_examples_use_only_the_schema_s_keys() {
    let schema = schema::boundary_policy();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies");
    let mut checked = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: serde_json::Value = serde::Deserialize::deserialize(document).unwrap();
            if value.is_null() {
                continue;
            }
            keys_known(&schema, &schema, &value, &path.display().to_string());
            checked += 1;
        }
    }
    assert!(checked > 0, "no example policy in {}", root.display());
}

/// Follows `$ref`s and `anyOf` of `schema` down `value`, asserting each object key is a property.
fn keys_known(
    root: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
) {
    if let Some(reference) = schema["$ref"].as_str() {
        let target = root.pointer(reference.trim_start_matches('#')).unwrap();
        return keys_known(root, target, value, at);
    }
    if let Some(options) = schema["anyOf"].as_array() {
        if value.is_null() {
            return;
        }
        let option = options.iter().find(|o| o["type"] != "null").unwrap();
        return keys_known(root, option, value, at);
    }
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                let property = schema["properties"].get(key);
                match property {
                    Some(property) => keys_known(root, property, item, &format!("{at}/{key}")),
                    None => assert!(
                        schema["additionalProperties"].is_object(),
                        "{at}: key {key} is not in the schema"
                    ),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                keys_known(root, &schema["items"], item, &format!("{at}/{i}"));
            }
        }
        _ => {}
    }
}
