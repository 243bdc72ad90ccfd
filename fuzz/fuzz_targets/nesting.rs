#![no_main]

//! The pre-scan that bounds untrusted YAML and JSON before parsing (`nesting`): it never
//! panics, it never finds less nesting than the parsers build (finding less would let a
//! deep text reach them), and it never counts more nodes in a document than the YAML parser
//! makes (counting more would refuse a document for nodes it does not hold).

use libfuzzer_sys::fuzz_target;
use palisade_api_types::nesting::{json_depth, yaml_depth, yaml_nodes, Refusal, Why};

fn json_value_depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(json_value_depth).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(json_value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn yaml_value_depth(value: &serde_yaml_ng::Value) -> usize {
    use serde_yaml_ng::Value;
    match value {
        Value::Sequence(items) => 1 + items.iter().map(yaml_value_depth).max().unwrap_or(0),
        Value::Mapping(map) => {
            1 + map
                .iter()
                .map(|(k, v)| yaml_value_depth(k).max(yaml_value_depth(v)))
                .max()
                .unwrap_or(0)
        }
        Value::Tagged(tagged) => yaml_value_depth(&tagged.value),
        _ => 0,
    }
}

/// Every key, value and item of a parsed value, empty ones included.
fn yaml_value_nodes(value: &serde_yaml_ng::Value) -> usize {
    use serde_yaml_ng::Value;
    match value {
        Value::Sequence(items) => 1 + items.iter().map(yaml_value_nodes).sum::<usize>(),
        Value::Mapping(map) => {
            1 + map
                .iter()
                .map(|(k, v)| yaml_value_nodes(k) + yaml_value_nodes(v))
                .sum::<usize>()
        }
        Value::Tagged(tagged) => yaml_value_nodes(&tagged.value),
        _ => 1,
    }
}

fuzz_target!(|data: &[u8]| {
    // JSON: the depth of the value serde_json reads (it stops at 128 levels itself).
    let found = json_depth(data, usize::MAX);
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        assert_eq!(found.ok(), Some(json_value_depth(&value)));
    }

    let text = String::from_utf8_lossy(data);
    let found = yaml_depth(&text, usize::MAX);
    // With aliases the parser's values nest what the aliases name again: not the text's depth.
    if text.contains('*') {
        return;
    }
    let mut parsed = 0;
    // The most nodes of one document, when the parser reads every document.
    let mut nodes = Some(0);
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        match serde::Deserialize::deserialize(document) {
            Ok(value) => {
                parsed = yaml_value_depth(&value).max(parsed);
                nodes = nodes.map(|n: usize| n.max(yaml_value_nodes(&value)));
            }
            Err(error) => {
                if error.to_string().starts_with("recursion limit exceeded") {
                    // Deeper than the parser's 128 levels: the pre-scan must see as much.
                    parsed = 129;
                }
                nodes = None;
                break;
            }
        }
    }
    match found {
        Ok(depth) => assert!(depth >= parsed, "{depth} < {parsed}: {text:?}"),
        // A tag the parser would drop: refused whatever the depth.
        Err(Refusal { why: Why::Tag(_) | Why::TagDirective, .. }) => {}
        Err(other) => panic!("{other} with no limit: {text:?}"),
    }

    if let (Some(nodes), Ok(counted)) = (nodes, yaml_nodes(&text, usize::MAX)) {
        assert!(counted <= nodes, "{counted} > {nodes} nodes: {text:?}");
    }

    // The readers built on it never panic either.
    let _ = palisade_api_types::yaml::documents::<serde_json::Value>(&text);
    let _ = palisade_api_types::yaml::value(&text);
});
