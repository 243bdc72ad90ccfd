//! Strict JSON bodies: exactly one JSON value (nothing after it), no key twice in an object,
//! and errors that start with the JSON Pointer of the field and name no Rust type.

use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A body that is not what it must be; the message starts with the field's JSON Pointer or
/// with `the body ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBody(pub String);

/// Parses `bytes` as one JSON value. A duplicate key is a 400 naming it
/// (`/components/0/name: is given twice`); anything after the value is a 400 too.
pub fn parse_value(bytes: &[u8]) -> Result<Value, InvalidBody> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue {
        pointer: String::new(),
    }
    .deserialize(&mut deserializer)
    .map_err(|e| {
        let text = e.to_string();
        match text.split_once(" is given twice") {
            Some((pointer, _)) if text.starts_with('/') => {
                InvalidBody(format!("{pointer}: is given twice"))
            }
            _ => InvalidBody(format!("the body is not valid JSON: {e}")),
        }
    })?;
    deserializer.end().map_err(|e| {
        InvalidBody(format!(
            "the body is not valid JSON: it holds more than one JSON value ({e})"
        ))
    })?;
    Ok(value)
}

/// Parses `bytes` strictly (see [`parse_value`]) into `T`; a field error starts with the
/// field's JSON Pointer and says what is wrong in words.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, InvalidBody> {
    let value = parse_value(bytes)?;
    from_value(value)
}

/// Converts a parsed body into `T`, with the errors of [`parse`].
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, InvalidBody> {
    let is_object = value.is_object();
    serde_path_to_error::deserialize(value).map_err(|e| {
        let pointer = crate::pointer::from_path("", e.path());
        let message = e.into_inner().to_string();
        if pointer.is_empty() && !is_object {
            return InvalidBody(format!(
                "the body must be a JSON object, got {}",
                kind_of_message(&message)
            ));
        }
        let (pointer, what) = describe(&pointer, &message);
        InvalidBody(format!("{pointer}: {what}"))
    })
}

/// `invalid type: sequence, expected ...` → `an array`.
fn kind_of_message(message: &str) -> &'static str {
    let found = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid length "))
        .unwrap_or("");
    if found.starts_with("sequence") || message.starts_with("invalid length") {
        "an array"
    } else if found.starts_with("string") {
        "a string"
    } else if found.starts_with("integer") || found.starts_with("floating point") {
        "a number"
    } else if found.starts_with("boolean") {
        "a boolean"
    } else if found.starts_with("null") || found.starts_with("unit") {
        "null"
    } else {
        "something else"
    }
}

/// Turns serde's wording (which names Rust types) into the user's: the pointer of the field
/// the message is about, and what is wrong with it.
fn describe(pointer: &str, message: &str) -> (String, String) {
    if let Some(field) = backticked(message, "missing field ") {
        return (format!("{pointer}/{field}"), "is required".to_owned());
    }
    if let Some(field) = backticked(message, "duplicate field ") {
        return (format!("{pointer}/{field}"), "is given twice".to_owned());
    }
    if let Some(field) = backticked(message, "unknown field ") {
        let pointer = if pointer.ends_with(&format!("/{field}")) {
            pointer.to_owned()
        } else {
            format!("{pointer}/{field}")
        };
        let expected = message
            .split_once(", expected ")
            .map_or("", |(_, rest)| rest);
        let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let known = match names.as_slice() {
            [] => "; there are no fields here".to_owned(),
            [one] => format!("; the field is {one}"),
            many => format!("; the fields are {}", many.join(", ")),
        };
        return (pointer, format!("is not a known field{known}"));
    }
    let wrong = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "));
    if let Some((found, expected)) = wrong {
        return (
            pointer.to_owned(),
            format!(
                "must be {}, got {}",
                expected_words(expected),
                found_words(found)
            ),
        );
    }
    if message.starts_with("invalid length ") {
        return (pointer.to_owned(), "must be an object".to_owned());
    }
    (pointer.to_owned(), message.to_owned())
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?.strip_prefix('`')?;
    rest.split_once('`').map(|(field, _)| field)
}

/// serde's "expected" wording with Rust names replaced.
fn expected_words(expected: &str) -> String {
    if expected.starts_with("struct ") || expected.starts_with("a map") {
        "an object".to_owned()
    } else if expected.starts_with("a sequence") || expected.starts_with("a tuple") {
        "an array".to_owned()
    } else if expected.starts_with("u8")
        || expected.starts_with("u16")
        || expected.starts_with("u32")
        || expected.starts_with("u64")
        || expected.starts_with("usize")
    {
        "a whole number of at least 0".to_owned()
    } else if expected.starts_with("i32") || expected.starts_with("i64") {
        "a whole number".to_owned()
    } else if expected.starts_with("a boolean") || expected == "bool" {
        "true or false".to_owned()
    } else if expected.starts_with("enum ") {
        "one of the documented values".to_owned()
    } else {
        expected.replace('`', "'")
    }
}

fn found_words(found: &str) -> String {
    if found.starts_with("sequence") {
        "an array".to_owned()
    } else if found.starts_with("map") {
        "an object".to_owned()
    } else if found.starts_with("unit") || found.starts_with("null") {
        "null".to_owned()
    } else if let Some(text) = found.strip_prefix("string ") {
        text.to_owned()
    } else {
        // `integer `1``, `floating point `1.5``, `boolean `true``: the value itself.
        match found.split_once('`') {
            Some((_, value)) => value.trim_end_matches('`').to_owned(),
            None => found.to_owned(),
        }
    }
}

/// Builds a `serde_json::Value`, refusing a key given twice in one object.
struct StrictValue {
    pointer: String,
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue {
            pointer: format!("{}/{}", self.pointer, items.len()),
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let pointer = format!("{}/{}", self.pointer, crate::pointer::escape(&key));
            if object.contains_key(&key) {
                return Err(A::Error::custom(format!("{pointer} is given twice")));
            }
            let value = map.next_value_seed(StrictValue {
                pointer: pointer.clone(),
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only the parse errors are tested")]
    struct Sample {
        name: String,
        #[serde(default)]
        count: Option<u32>,
    }

    fn message(body: &str) -> String {
        match parse::<Sample>(body.as_bytes()) {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn body_errors_name_the_field_in_words() {
        let cases = [
            (r#"{"name":"a"}"#, "ok"),
            (
                r#"{"name":"a"} xx"#,
                "the body is not valid JSON: it holds more than one JSON value (trailing characters at line 1 column 14)",
            ),
            (r#"{"name":"a","name":"b"}"#, "/name: is given twice"),
            (r#"[]"#, "the body must be a JSON object, got an array"),
            (r#""x""#, "the body must be a JSON object, got a string"),
            (r#"{}"#, "/name: is required"),
            (
                r#"{"name":"a","nmae":"b"}"#,
                "/nmae: is not a known field; the fields are name, count",
            ),
            (r#"{"name":1}"#, "/name: must be a string, got 1"),
            (
                r#"{"name":"a","count":-1}"#,
                "/count: must be a whole number of at least 0, got -1",
            ),
            (r#"{"name":["a"]}"#, "/name: must be a string, got an array"),
        ];
        for (body, expected) in cases {
            assert_eq!(message(body), expected, "body {body}");
        }
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        let error = parse_value(br#"{"components":[{"name":"a"},{"name":"b","name":"c"}]}"#)
            .err()
            .map(|e| e.to_string());
        assert_eq!(error.as_deref(), Some("/components/1/name: is given twice"));
        let error = parse_value(br#"{"a/b":{"x":1,"x":2}}"#)
            .err()
            .map(|e| e.to_string());
        assert_eq!(error.as_deref(), Some("/a~1b/x: is given twice"));
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[ -~]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z~/]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Any text: an answer, never a panic; a 400 message never names a Rust type.
        #[test]
        fn any_text_is_parsed_or_refused_in_words(text in "\\PC{0,64}") {
            if let Err(e) = parse::<Sample>(text.as_bytes()) {
                let message = e.to_string();
                proptest::prop_assert!(!message.contains("struct "), "{}", message);
                proptest::prop_assert!(!message.contains("Sample"), "{}", message);
            }
        }

        /// Every JSON text without a duplicate key reads back as the value it was written from.
        #[test]
        fn serialised_values_read_back_unchanged(value in json_value()) {
            let text = value.to_string();
            let parsed = parse_value(text.as_bytes());
            proptest::prop_assert_eq!(parsed.ok(), Some(value));
        }
    }
}
