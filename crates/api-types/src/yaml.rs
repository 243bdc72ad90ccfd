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
                let mut track = serde_path_to_error::Track::new();
                let typed =
                    T::deserialize(serde_path_to_error::Deserializer::new(value, &mut track))
                        .map_err(|error| {
                            let pointer = crate::pointer::from_path("", &track.path());
                            YamlError {
                                line: None,
                                column: None,
                                message: bare_message(&error),
                                pointer: Some(pointer),
                            }
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
