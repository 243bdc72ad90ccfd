//! YAML reading with positions: multi-document streams, errors with line and column.
//!
//! YAML is read with `serde_yaml_ng`, a maintained fork of the archived `serde_yaml`. Every
//! text is bounded before the parser sees it (see [`crate::nesting`]: nesting and tags), and
//! while values are built: aliases may not expand a text into more values than it has bytes
//! (plus [`ALIAS_ALLOWANCE`]), nor nest it deeper than the limit.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    DeserializeOwned, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_yaml_ng::value::{Tag, TaggedValue};
use serde_yaml_ng::{Mapping, Value};

use crate::nesting::{self, Refusal};

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

    fn refused(refusal: &Refusal) -> Self {
        YamlError {
            line: Some(refusal.line),
            column: Some(refusal.column),
            pointer: None,
            message: refusal.why.to_string(),
        }
    }
}

/// How many values aliases may add to a text beyond one per byte of it.
pub const ALIAS_ALLOWANCE: usize = 65_536;

/// Refuses a text before it is parsed: deeper than [`nesting::MAX_DEPTH`], or with a tag
/// palisade does not read. Every reader here runs it first; a caller that wants to name the
/// whole text in its message (`the body: ...`) runs it itself.
pub fn check(text: &str) -> Result<(), Refusal> {
    nesting::check_yaml(text)
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
    each_document_within(text, nesting::MAX_DEPTH)
}

/// [`each_document`] for texts that may nest up to `max_depth` levels (`palisade check`'s
/// manifests). A text that nests deeper, or carries a tag palisade does not read, is read up
/// to where that is found: the documents before it are read as usual, and the document it
/// is in is that refusal.
pub fn each_document_within<T: DeserializeOwned>(
    text: &str,
    max_depth: usize,
) -> impl Iterator<Item = (usize, Result<T, YamlError>)> + '_ {
    let mut refusal = nesting::yaml_depth(text, max_depth).err();
    // Only what the pre-scan accepted reaches the parser.
    let readable = refusal
        .as_ref()
        .map_or(text, |r| text.get(..r.offset).unwrap_or_default());
    let mut stream = serde_yaml_ng::Deserializer::from_str(readable)
        .enumerate()
        .peekable();
    let budget = Budget::of(text);
    let mut ended = false;
    let mut last_index = 0;
    std::iter::from_fn(move || loop {
        if ended {
            return None;
        }
        let Some((index, document)) = stream.next() else {
            // The document the refusal cut short was read whole, or was empty.
            ended = true;
            return refusal
                .take()
                .map(|r| (last_index, Err(YamlError::refused(&r))));
        };
        last_index = index;
        if refusal.is_some() && stream.peek().is_none() {
            // The last document read is the one the refusal cut short.
            ended = true;
            return refusal.take().map(|r| (index, Err(YamlError::refused(&r))));
        }
        match bounded_value(document, &budget, max_depth) {
            Ok(Value::Null) => continue,
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
                // A syntax error ends the stream: the parser cannot resynchronise. One where
                // the refusal cut the text is the refusal.
                ended = true;
                let at = error.index.unwrap_or(0);
                if let Some(refused) = refusal.take().filter(|r| at >= r.offset) {
                    return Some((index, Err(YamlError::refused(&refused))));
                }
                return Some((index, Err(error.error)));
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

/// Reads a text of one YAML document as a value (a kubeconfig), bounded as
/// [`each_document`] reads: refused before parsing when it nests deeper than
/// [`nesting::MAX_DEPTH`] or carries a tag palisade does not read.
pub fn value(text: &str) -> Result<Value, ValueError> {
    nesting::check_yaml(text).map_err(ValueError::Refused)?;
    let budget = Budget::of(text);
    bounded_value(
        serde_yaml_ng::Deserializer::from_str(text),
        &budget,
        nesting::MAX_DEPTH,
    )
    .map_err(|e| ValueError::Invalid(e.error))
}

/// Why [`value`] read no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// Refused before parsing.
    #[error(transparent)]
    Refused(Refusal),
    /// Not YAML, or a bound met while building the value.
    #[error(transparent)]
    Invalid(YamlError),
}

/// A parse error and its byte offset, when the parser gave one.
struct ParseError {
    error: YamlError,
    index: Option<usize>,
}

/// Builds one document's value as serde_yaml_ng's own `Value` does, counting values against
/// `budget` (aliases are expanded as they are read) and refusing nesting deeper than
/// `max_depth` once aliases are expanded.
fn bounded_value<'de>(
    document: impl serde::Deserializer<'de, Error = serde_yaml_ng::Error>,
    budget: &Budget,
    max_depth: usize,
) -> Result<Value, ParseError> {
    let bound = Cell::new(None);
    let seed = Bounded {
        budget,
        bound: &bound,
        depth: 0,
        max_depth,
    };
    seed.deserialize(document).map_err(|error| {
        let index = error.location().map(|l| l.index());
        let mut error = YamlError::from_yaml(&error, None);
        if let Some(message) = bound.take() {
            // Our own words, without serde_yaml_ng's path.
            error.message = message;
        }
        ParseError { error, index }
    })
}

/// How many values a text's documents may still build, of how many.
struct Budget {
    left: Cell<usize>,
    allowed: usize,
}

impl Budget {
    /// One value per byte of the text, plus [`ALIAS_ALLOWANCE`]: without aliases no text
    /// comes near it.
    fn of(text: &str) -> Self {
        let allowed = text.len().saturating_add(ALIAS_ALLOWANCE);
        Budget {
            left: Cell::new(allowed),
            allowed,
        }
    }
}

/// A `Value` builder with a budget of values and a depth bound.
#[derive(Clone, Copy)]
struct Bounded<'b> {
    budget: &'b Budget,
    /// The message of the bound that stopped it, if one did.
    bound: &'b Cell<Option<String>>,
    depth: usize,
    max_depth: usize,
}

impl Bounded<'_> {
    /// Takes one value from the budget.
    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        match self.budget.left.get().checked_sub(1) {
            Some(left) => {
                self.budget.left.set(left);
                Ok(())
            }
            None => Err(self.stop(format!(
                "aliases expand the text to more than {} values (one per byte of it, plus \
                 {ALIAS_ALLOWANCE})",
                self.budget.allowed
            ))),
        }
    }

    fn stop<E: serde::de::Error>(&self, message: String) -> E {
        self.bound.set(Some(message.clone()));
        E::custom(message)
    }

    /// The builder for the values of a collection at this one's depth.
    fn inner<E: serde::de::Error>(&self) -> Result<Self, E> {
        if self.depth >= self.max_depth {
            return Err(self.stop(format!(
                "nesting deeper than {} levels once aliases are expanded",
                self.max_depth
            )));
        }
        Ok(Bounded {
            depth: self.depth + 1,
            ..*self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.take()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.take()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.take()?;
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.take()?;
        let inner = self.inner()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Sequence(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.take()?;
        let inner = self.inner()?;
        let mut mapping = Mapping::new();
        while let Some(key) = map.next_key_seed(inner)? {
            if mapping.contains_key(&key) {
                return Err(serde::de::Error::custom(duplicate(&key)));
            }
            let value = map.next_value_seed(inner)?;
            mapping.insert(key, value);
        }
        Ok(Value::Mapping(mapping))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        // A tagged node: serde_yaml_ng hands its tag as the variant.
        let (tag, contents): (String, _) = data.variant()?;
        if tag.is_empty() {
            return Err(serde::de::Error::custom("empty YAML tag is not allowed"));
        }
        let value = contents.newtype_variant_seed(self)?;
        Ok(Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(tag),
            value,
        })))
    }
}

/// serde_yaml_ng's words for a key given twice.
fn duplicate(key: &Value) -> String {
    match key {
        Value::Null => "duplicate entry with null key".to_owned(),
        Value::Bool(b) => format!("duplicate entry with key `{b}`"),
        Value::Number(n) => format!("duplicate entry with key {n}"),
        Value::String(s) => format!("duplicate entry with key {s:?}"),
        _ => "duplicate entry in YAML map".to_owned(),
    }
}

/// The first node (depth first, in document order) that carries a tag the reader did not
/// resolve itself: the core schema's `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!map`
/// and `!!seq` are resolved while reading, so what is left as `Value::Tagged` is a local
/// (`!name`) or non-specific (`!`) tag. Its JSON Pointer and the tag as written.
fn custom_tag(value: &Value, pointer: String) -> Option<(String, String)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, max_depth: usize) -> Vec<(usize, Result<Value, String>)> {
        each_document_within::<Value>(text, max_depth)
            .map(|(index, document)| (index, document.map_err(|e| e.to_string())))
            .collect()
    }

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_documents_before_a_refusal_are_read_and_the_refusal_is_its_document() {
        let text = format!("a: 1\n---\n---\nb: {}\n---\nc: 2\n", nested(100_000));
        let documents = read(&text, nesting::MAX_DEPTH);
        assert_eq!(documents.len(), 2, "{documents:?}");
        assert!(documents[0].1.is_ok());
        assert_eq!(
            documents[1],
            (
                2,
                Err("line 4 column 67: nesting deeper than 64 levels".to_owned())
            )
        );
        // Cut where the block nesting passes the limit, the document reads as YAML: still the
        // refusal.
        let blocks: String = (0..70)
            .map(|level| format!("{}k{level}:\n", "  ".repeat(level)))
            .collect();
        let documents = read(&format!("a: 1\n---\n{blocks}"), nesting::MAX_DEPTH);
        assert_eq!(
            documents[1],
            (
                1,
                Err("line 67 column 129: nesting deeper than 64 levels".to_owned())
            )
        );
        assert_eq!(documents.len(), 2);
        // A refusal in the first document, before which nothing parses.
        assert_eq!(
            read(&nested(65), nesting::MAX_DEPTH),
            [(
                0,
                Err("line 1 column 65: nesting deeper than 64 levels".to_owned())
            )]
        );
        // A syntax error before the refusal is the answer, as the parser would give it.
        let documents = read(&format!("a: [1\nb: {}", nested(100)), nesting::MAX_DEPTH);
        assert_eq!(documents.len(), 1);
        assert!(
            documents[0]
                .1
                .as_ref()
                .is_err_and(|e| !e.contains("nesting")),
            "{documents:?}"
        );
    }

    #[test]
    fn manifests_may_nest_as_deep_as_the_parser_reads() {
        let deep = format!("a: {}", nested(127));
        assert!(read(&deep, nesting::MAX_MANIFEST_DEPTH)[0].1.is_ok());
        assert_eq!(
            read(&deep, nesting::MAX_DEPTH)[0].1,
            Err("line 1 column 67: nesting deeper than 64 levels".to_owned())
        );
        assert_eq!(
            read(&format!("a: {}", nested(128)), nesting::MAX_MANIFEST_DEPTH)[0].1,
            Err("line 1 column 131: nesting deeper than 128 levels".to_owned())
        );
    }

    #[test]
    fn aliases_are_bounded_as_they_are_expanded() {
        // Each part is 40 deep; the alias puts one inside the other.
        let text = format!(
            "a: &x {}\nb: {}*x{}\n",
            nested(40),
            "[".repeat(40),
            "]".repeat(40)
        );
        let documents = read(&text, nesting::MAX_DEPTH);
        assert_eq!(
            documents[0].1,
            Err(
                "line 1 column 30: nesting deeper than 64 levels once aliases are expanded"
                    .to_owned()
            )
        );
        // A billion laughs: ten aliases of ten aliases of ...
        let mut text = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n".to_owned();
        for level in 1..9 {
            let previous = format!("*l{}", level - 1);
            text.push_str(&format!(
                "l{level}: &l{level} [{}]\n",
                [previous.as_str(); 10].join(", ")
            ));
        }
        let documents = read(&text, nesting::MAX_DEPTH);
        assert!(
            documents[0].1.as_ref().is_err_and(|e| e.contains(&format!(
                "aliases expand the text to more than {} values (one per byte of it, plus 65536)",
                text.len() + ALIAS_ALLOWANCE
            ))),
            "{documents:?}"
        );
        // Aliases that add a little are read.
        let text = "base: &b {x: 1, y: 2}\none: *b\ntwo: *b\n";
        assert!(read(text, nesting::MAX_DEPTH)[0].1.is_ok());
    }

    #[test]
    fn a_single_value_is_refused_before_it_is_parsed() {
        assert_eq!(
            value(&nested(100_000)).map_err(|e| e.to_string()),
            Err("line 1 column 65: nesting deeper than 64 levels".to_owned())
        );
        assert_eq!(
            value("a: !!binary YWJj").map_err(|e| e.to_string()),
            Err("line 1 column 4: the YAML tag !!binary is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq".to_owned())
        );
        assert!(matches!(value("a: [1"), Err(ValueError::Invalid(_))));
        assert_eq!(
            value("a: [1, {b: 2}]").ok(),
            serde_yaml_ng::from_str("a: [1, {b: 2}]").ok()
        );
    }
}
