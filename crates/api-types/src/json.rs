//! Strict JSON bodies: exactly one JSON value (nothing after it), no key twice in an object,
//! and errors that start with the JSON Pointer of the field and name no Rust type.

use std::fmt;

use serde::de::{DeserializeOwned, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::document::DocumentError;

/// A body that is not what it must be; the message starts with the field's JSON Pointer or
/// with `the body ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBody(pub String);

/// Parses `bytes` as one JSON value. A duplicate key is a 400 naming it
/// (`/components/0/name: is given twice`); anything after the value is a 400 too. A body
/// nested deeper than [`crate::nesting::MAX_DEPTH`] is refused before it is parsed
/// (`the body: line 1 column 65: nesting deeper than 64 levels`).
pub fn parse_value(bytes: &[u8]) -> Result<Value, InvalidBody> {
    crate::nesting::check_json(bytes).map_err(|e| InvalidBody(format!("the body: {e}")))?;
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

/// Converts a parsed body into `T`, with the errors of [`parse`]: a body that is not an object
/// is `the body must be a JSON object, got ...`, a field's error starts with its pointer.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, InvalidBody> {
    typed(&value).map_err(|e| {
        if e.pointer.is_empty() && !value.is_object() {
            InvalidBody(format!(
                "the body must be a JSON object, got {}",
                crate::resource::json_kind(&value)
            ))
        } else {
            InvalidBody(e.to_string())
        }
    })
}

/// Reads `value` as `T`, strictly: every struct must be a JSON object (serde would also take
/// an array of its fields in order), every enum one of its values. An error names the field
/// by its pointer (relative to `value`) and says what is wrong in words, never naming a Rust
/// type.
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, DocumentError> {
    serde_path_to_error::deserialize(Strict(value)).map_err(|e| {
        let pointer = crate::pointer::from_path("", e.path());
        let message = e.into_inner().to_string();
        let (pointer, message) = describe(&pointer, &message);
        DocumentError { pointer, message }
    })
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
    if let Some(value) = backticked(message, "unknown variant ") {
        let expected = message
            .split_once(", expected ")
            .map_or("", |(_, rest)| rest);
        let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        return (
            pointer.to_owned(),
            format!("must be one of {}, got '{value}'", names.join(", ")),
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

/// What a struct with `fields` must be, in words.
fn object_with(fields: &[&str]) -> String {
    match fields {
        [] => "an empty object".to_owned(),
        [one] => format!("an object with the field {one}"),
        many => format!("an object with the fields {}", many.join(", ")),
    }
}

/// A value's kind as serde words it (`sequence`, `integer `1``), for [`describe`].
fn unexpected(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => {
            if n.is_f64() {
                format!("floating point `{n}`")
            } else {
                format!("integer `{n}`")
            }
        }
        Value::String(text) => format!("string {text:?}"),
        Value::Array(_) => "sequence".to_owned(),
        Value::Object(_) => "map".to_owned(),
    }
}

/// A deserializer of a `serde_json::Value` that takes a struct only from an object and an
/// enum only from one of its names; otherwise it reads values as `serde_json` does.
struct Strict<'a>(&'a Value);

impl<'de> serde::Deserializer<'de> for Strict<'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(text) => visitor.visit_borrowed_str(text),
            Value::Array(items) => {
                let mut seq = StrictSeq(items.iter());
                let out = visitor.visit_seq(&mut seq)?;
                match seq.0.len() {
                    0 => Ok(out),
                    _ => Err(serde_json::Error::invalid_length(
                        items.len(),
                        &"fewer elements",
                    )),
                }
            }
            Value::Object(map) => visitor.visit_map(StrictMap {
                entries: map.iter(),
                value: None,
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(serde_json::Error::custom(format!(
                "invalid type: {}, expected {}",
                unexpected(other),
                object_with(fields)
            ))),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        use serde::de::IntoDeserializer;
        match self.0 {
            Value::String(text) => visitor.visit_enum(text.as_str().into_deserializer()),
            // An enum with data (`{"variant": ...}`): serde_json's own reading.
            Value::Object(_) => self.0.deserialize_enum(name, variants, visitor),
            other => Err(serde_json::Error::custom(format!(
                "invalid type: {}, expected one of {}",
                unexpected(other),
                variants.join(", ")
            ))),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map identifier
    }
}

struct StrictSeq<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for StrictSeq<'de> {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0
            .next()
            .map(|item| seed.deserialize(Strict(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct StrictMap<'a> {
    entries: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> MapAccess<'de> for StrictMap<'de> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.next() {
            None => Ok(None),
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(serde::de::value::BorrowedStrDeserializer::new(key))
                    .map(Some)
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Strict(value)),
            None => Err(serde_json::Error::custom(
                "a value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
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
    fn a_struct_is_read_from_an_object_only() {
        // serde alone would read `["a"]` as a Sample named a.
        assert_eq!(
            message(r#"["a"]"#),
            "the body must be a JSON object, got an array"
        );
        let spec = |body: &str| match parse::<crate::PolicySpec>(body.as_bytes()) {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.to_string(),
        };
        let cases = [
            (r#"{"rules":[{"disallowLatestTag":{}}]}"#, "ok"),
            (
                r#"{"rules":[{"disallowLatestTag":[]}]}"#,
                "/rules/0/disallowLatestTag: must be an empty object, got an array",
            ),
            (
                r#"{"rules":[{"allowedComputePlans":["small"]}]}"#,
                "/rules/0/allowedComputePlans: must be an object with the field plans, got an array",
            ),
            (
                r#"{"rules":[{"requiredLabels":{"labels":[["team"]]}}]}"#,
                "/rules/0/requiredLabels/labels/0: must be an object with the fields key, value, got an array",
            ),
            (
                r#"{"mode":"strict","rules":[]}"#,
                "/mode: must be one of enforce, audit, got 'strict'",
            ),
            (
                r#"{"mode":1,"rules":[]}"#,
                "/mode: must be one of enforce, audit, got 1",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(spec(body), expected, "body {body}");
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
                proptest::prop_assert!(!message.contains("invalid type"), "{}", message);
                proptest::prop_assert!(!message.contains("invalid length"), "{}", message);
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
