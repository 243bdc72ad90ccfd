//! YAML reading with positions: multi-document streams, errors with line and column.
//!
//! YAML is read with `serde_yaml_ng`, a maintained fork of the archived `serde_yaml`.

use serde::de::DeserializeOwned;

/// A YAML syntax or type error, with the 1-based position the parser reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}", position_prefix(*.line, *.column), pointer_prefix(.pointer.as_deref()))]
pub struct YamlError {
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// JSON Pointer of the field, when the error concerns one.
    pub pointer: Option<String>,
    pub message: String,
}

fn pointer_prefix(pointer: Option<&str>) -> String {
    match pointer {
        Some(pointer) if !pointer.is_empty() => format!("{pointer}: "),
        _ => String::new(),
    }
}

fn position_prefix(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("line {line} column {column}: "),
        (Some(line), None) => format!("line {line}: "),
        _ => String::new(),
    }
}

/// The message of a serde_yaml_ng error without its trailing ` at line L column C`.
fn bare_message(error: &serde_yaml_ng::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(index) if text[index..].contains(" column ") => text[..index].to_owned(),
        _ => text,
    }
}

impl YamlError {
    fn from_yaml(error: &serde_yaml_ng::Error, pointer: Option<String>) -> Self {
        let location = error.location();
        YamlError {
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
            pointer,
            message: bare_message(error),
        }
    }
}

/// Reads every document of a YAML stream as `T`. Empty documents (`---` alone, comments) are
/// skipped. Each document keeps its 0-based index in the stream.
pub fn documents<T: DeserializeOwned>(text: &str) -> Vec<(usize, Result<T, YamlError>)> {
    each_document(text).collect()
}

/// [`documents`], one at a time: a document is parsed when it is asked for, so that a caller
/// that handles each before the next holds one document, not the stream.
pub fn each_document<T: DeserializeOwned>(
    text: &str,
) -> impl Iterator<Item = (usize, Result<T, YamlError>)> + '_ {
    let mut stream = serde_yaml_ng::Deserializer::from_str(text).enumerate();
    let mut ended = false;
    std::iter::from_fn(move || loop {
        if ended {
            return None;
        }
        let (index, document) = stream.next()?;
        let value: Result<serde_yaml_ng::Value, _> = serde::Deserialize::deserialize(document);
        match value {
            Ok(serde_yaml_ng::Value::Null) => continue,
            Ok(value) => {
                if let Some((pointer, tag)) = custom_tag(&value, String::new()) {
                    return Some((
                        index,
                        Err(YamlError {
                            line: None,
                            column: None,
                            pointer: Some(pointer),
                            message: format!(
                                "custom YAML tags are not accepted (found {})",
                                shown_tag(&tag)
                            ),
                        }),
                    ));
                }
                // Read as JSON, as a JSON body is: a struct only from a mapping, an enum only
                // from one of its names, errors in words.
                let typed = to_json(&value, String::new()).and_then(|json| {
                    crate::json::typed::<T>(&json).map_err(|error| YamlError {
                        line: None,
                        column: None,
                        pointer: Some(error.pointer),
                        message: error.message,
                    })
                });
                return Some((index, typed));
            }
            Err(error) => {
                // A syntax error ends the stream: the parser cannot resynchronise.
                ended = true;
                return Some((index, Err(YamlError::from_yaml(&error, None))));
            }
        }
    })
}

/// A YAML document (custom tags already refused) as the JSON value it stands for. A mapping
/// key must be a string, as in JSON; a number that JSON cannot hold (`.nan`, `.inf`) is null,
/// as `serde_json` reads it.
fn to_json(value: &serde_yaml_ng::Value, pointer: String) -> Result<serde_json::Value, YamlError> {
    use serde_yaml_ng::Value;
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(number) => {
            if let Some(u) = number.as_u64() {
                serde_json::Value::from(u)
            } else if let Some(i) = number.as_i64() {
                serde_json::Value::from(i)
            } else {
                number
                    .as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number)
            }
        }
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Sequence(items) => serde_json::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, format!("{pointer}/{i}")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Mapping(map) => {
            let mut object = serde_json::Map::new();
            for (key, item) in map {
                let Value::String(key) = key else {
                    return Err(YamlError {
                        line: None,
                        column: None,
                        message: format!("must have strings as keys, got {}", key_words(key)),
                        pointer: Some(pointer),
                    });
                };
                let at = format!("{pointer}/{}", crate::pointer::escape(key));
                object.insert(key.clone(), to_json(item, at)?);
            }
            serde_json::Value::Object(object)
        }
        Value::Tagged(tagged) => to_json(&tagged.value, pointer)?,
    })
}

/// A mapping key that is not a string, for a message.
fn key_words(key: &serde_yaml_ng::Value) -> String {
    use serde_yaml_ng::Value;
    match key {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Sequence(_) => "an array".to_owned(),
        Value::Mapping(_) => "a mapping".to_owned(),
        Value::String(text) => format!("'{text}'"),
        Value::Tagged(tagged) => key_words(&tagged.value),
    }
}

/// The first node (depth first, in document order) that carries a tag the reader did not
/// resolve itself: the core schema's `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!map`
/// and `!!seq` are resolved while reading, so what is left as `Value::Tagged` is a local
/// (`!name`) or non-specific (`!`) tag. Its JSON Pointer and the tag as written.
fn custom_tag(value: &serde_yaml_ng::Value, pointer: String) -> Option<(String, String)> {
    use serde_yaml_ng::Value;
    match value {
        Value::Tagged(tagged) => Some((pointer, tagged.tag.to_string())),
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| custom_tag(item, format!("{pointer}/{i}"))),
        Value::Mapping(map) => map.iter().find_map(|(key, item)| {
            if let Value::Tagged(tagged) = key {
                return Some((pointer.clone(), tagged.tag.to_string()));
            }
            let segment = match key {
                Value::String(text) => crate::pointer::escape(text),
                Value::Number(number) => number.to_string(),
                Value::Bool(flag) => flag.to_string(),
                Value::Null => "null".to_owned(),
                _ => "?".to_owned(),
            };
            custom_tag(key, pointer.clone())
                .or_else(|| custom_tag(item, format!("{pointer}/{segment}")))
        }),
        _ => None,
    }
}

/// A tag for a message: the non-specific tag `!` as written, control characters escaped, at
/// most 64 characters.
fn shown_tag(tag: &str) -> String {
    let tag = if tag == "!!" { "!" } else { tag };
    let mut shown: String = tag
        .chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect();
    if tag.chars().count() > 64 {
        shown.push_str("...");
    }
    shown
}
