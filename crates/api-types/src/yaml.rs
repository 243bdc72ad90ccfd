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
    let mut out = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value: Result<serde_yaml_ng::Value, _> = serde::Deserialize::deserialize(document);
        match value {
            Ok(serde_yaml_ng::Value::Null) => continue,
            Ok(value) => {
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
                out.push((index, typed));
            }
            Err(error) => {
                out.push((index, Err(YamlError::from_yaml(&error, None))));
                // A syntax error ends the stream: the parser cannot resynchronise.
                break;
            }
        }
    }
    out
}
