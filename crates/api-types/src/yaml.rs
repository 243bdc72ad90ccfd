//! YAML reading with positions: multi-document streams, errors with line and column.
//!
//! YAML is read with `serde_yaml_ng`, a maintained fork of the archived `serde_yaml`. Every
//! text is bounded before the parser sees it (see [`crate::nesting`]: nesting, nodes per
//! document and tags), and while values are built: aliases may not expand a text into more
//! values than it has bytes (plus [`ALIAS_ALLOWANCE`]), into more bytes of strings than twice
//! its size (plus [`ALIAS_ALLOWANCE`]), nor a document into more values than twice
//! [`nesting::MAX_NODES`] or deeper than the limit. So what a parse holds is proportional to
//! what the limits allow: [`peak_bound`].

use std::cell::Cell;
use std::fmt;

use serde::de::{
    DeserializeOwned, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use serde_yaml_ng::value::{Tag, TaggedValue};
use serde_yaml_ng::{Mapping, Value};

use crate::nesting::{self, Limits, Refusal};

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

/// How many values aliases may add to a text beyond one per byte of it, and how many bytes of
/// strings beyond two per byte of it.
pub const ALIAS_ALLOWANCE: usize = 65_536;

/// The most heap memory reading `text` takes, with [`nesting::LIMITS`] ([`each_document`],
/// [`each_json_document`], [`value`], and a kubeconfig's `normalise`), the caller keeping
/// nothing: what one document holds while it is read (the parser's events, the YAML value,
/// the JSON value and what it is read as) grows with its bytes, and the nodes of a document,
/// aliases expanded, are bounded. `tests/parse_memory.rs` checks it on the worst texts known.
pub fn peak_bound(text: impl AsRef<[u8]>) -> usize {
    let text = text.as_ref();
    // Without a `*` there is no alias to expand.
    let aliases = if text.contains(&b'*') {
        PEAK_ALIASES
    } else {
        0
    };
    text.len()
        .saturating_mul(PEAK_PER_BYTE)
        .saturating_add(aliases)
        .min(PEAK_PER_DOCUMENT)
        .saturating_add(PEAK_BASE)
}

/// At most this many bytes per byte of text: an event of the parser (about 100 bytes, in a
/// list up to twice as long as needed, copied when it grows) and a value (about 100 bytes)
/// per byte or so. Measured: at most 308 (1 KiB texts, the parser's buffers included).
const PEAK_PER_BYTE: usize = 384;
/// What aliases may add: the values [`ALIAS_ALLOWANCE`] lets them build. Measured: at most
/// 15.4 MiB (a kubeconfig, read as YAML and as JSON at once).
const PEAK_ALIASES: usize = 20 << 20;
/// What reading one document of [`nesting::MAX_NODES`] nodes holds at most, with the next
/// document's events. Measured: at most 24.7 MiB.
const PEAK_PER_DOCUMENT: usize = 32 << 20;
/// The parser's buffers.
const PEAK_BASE: usize = 256 << 10;

/// Refuses a text before it is parsed: deeper than [`nesting::MAX_DEPTH`], with a document of
/// more than [`nesting::MAX_NODES`] nodes, or with a tag palisade does not read. Every reader here runs it first; a caller that wants to name the
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
    each_document_limited(text, nesting::LIMITS)
}

/// [`each_document`] for texts that may nest up to `max_depth` levels and hold any number of
/// nodes (`palisade check`'s manifests, the user's own files).
pub fn each_document_within<T: DeserializeOwned>(
    text: &str,
    max_depth: usize,
) -> impl Iterator<Item = (usize, Result<T, YamlError>)> + '_ {
    each_document_limited(
        text,
        Limits {
            depth: max_depth,
            ..nesting::MANIFEST_LIMITS
        },
    )
}

/// [`each_document`] within `limits`. A text that passes them, or carries a tag palisade
/// does not read, is read up to where that is found: the documents before it are read as
/// usual, and the document it is in is that refusal.
pub fn each_document_limited<T: DeserializeOwned>(
    text: &str,
    limits: Limits,
) -> impl Iterator<Item = (usize, Result<T, YamlError>)> + '_ {
    json_documents(text, limits)
        .map(|(index, json)| (index, json.and_then(|json| from_json::<T>(&json))))
}

/// [`each_document`] as JSON values: what a reader that looks at a document before it knows
/// its type reads (an apply: its `kind`), without a second copy of it.
pub fn each_json_document(
    text: &str,
) -> impl Iterator<Item = (usize, Result<serde_json::Value, YamlError>)> + '_ {
    json_documents(text, nesting::LIMITS)
}

fn json_documents(
    text: &str,
    limits: Limits,
) -> impl Iterator<Item = (usize, Result<serde_json::Value, YamlError>)> + '_ {
    let mut refusal = nesting::yaml_within(text, limits).err();
    // Only what the pre-scan accepted reaches the parser.
    let readable = refusal
        .as_ref()
        .map_or(text, |r| text.get(..r.offset).unwrap_or_default());
    let mut stream = serde_yaml_ng::Deserializer::from_str(readable)
        .enumerate()
        .peekable();
    let budget = Budget::of(text, limits.nodes);
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
        // Built before the parser reads the next document (below), so that one document's
        // events are held at a time.
        let built = bounded_value(document, &budget, limits.depth);
        if refusal.is_some() && stream.peek().is_none() {
            // The last document read is the one the refusal cut short.
            ended = true;
            return refusal.take().map(|r| (index, Err(YamlError::refused(&r))));
        }
        match built {
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
                // The YAML value is taken apart as the JSON one is built, so the two are not
                // held whole at once.
                return Some((index, to_json(value, &mut String::new())));
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

/// A document read as JSON ([`each_json_document`]) read as `T`, as a JSON body is: a struct
/// only from a mapping, an enum only from one of its names, errors in words.
pub fn from_json<T: DeserializeOwned>(json: &serde_json::Value) -> Result<T, YamlError> {
    crate::json::typed::<T>(json).map_err(|error| YamlError {
        line: None,
        column: None,
        pointer: Some(error.pointer),
        message: error.message,
    })
}

/// A YAML document (custom tags already refused) as the JSON value it stands for. A mapping
/// key must be a string, as in JSON; a number that JSON cannot hold (`.nan`, `.inf`) is null,
/// as `serde_json` reads it. `pointer` is the value's JSON Pointer (left as it was found).
fn to_json(
    value: serde_yaml_ng::Value,
    pointer: &mut String,
) -> Result<serde_json::Value, YamlError> {
    use serde_yaml_ng::Value;
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(b),
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
        Value::String(text) => serde_json::Value::String(text),
        Value::Sequence(items) => {
            let mut array = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let length = pointer.len();
                pointer.push_str(&format!("/{i}"));
                array.push(to_json(item, pointer)?);
                pointer.truncate(length);
            }
            serde_json::Value::Array(array)
        }
        Value::Mapping(map) => {
            let mut object = serde_json::Map::with_capacity(map.len());
            for (key, item) in map {
                let Value::String(key) = key else {
                    return Err(YamlError {
                        line: None,
                        column: None,
                        message: format!("must have strings as keys, got {}", key_words(&key)),
                        pointer: Some(pointer.clone()),
                    });
                };
                let length = pointer.len();
                pointer.push('/');
                pointer.push_str(&crate::pointer::escape(&key));
                let item = to_json(item, pointer)?;
                pointer.truncate(length);
                object.insert(key, item);
            }
            serde_json::Value::Object(object)
        }
        Value::Tagged(tagged) => to_json(tagged.value, pointer)?,
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
/// [`nesting::MAX_DEPTH`], holds more than [`nesting::MAX_NODES`] nodes or carries a tag
/// palisade does not read.
pub fn value(text: &str) -> Result<Value, ValueError> {
    nesting::check_yaml(text).map_err(ValueError::Refused)?;
    let budget = Budget::of(text, nesting::MAX_NODES);
    // A document at a time, as `serde_yaml_ng::from_str` reads, but the first one's events
    // are let go before the parser reads the second (which only says there is one).
    let mut documents = serde_yaml_ng::Deserializer::from_str(text);
    let Some(first) = documents.next() else {
        return Ok(Value::Null);
    };
    let value = bounded_value(first, &budget, nesting::MAX_DEPTH)
        .map_err(|e| ValueError::Invalid(e.error))?;
    if documents.next().is_some() {
        return Err(ValueError::Invalid(YamlError {
            line: None,
            column: None,
            pointer: None,
            message: "deserializing from YAML containing more than one document is not \
                      supported"
                .to_owned(),
        }));
    }
    Ok(value)
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
    budget.values.set(0);
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

/// How many values and bytes of strings a text's documents may still build, of how many, and
/// how many values the document being built holds, of how many.
struct Budget {
    left: Cell<usize>,
    allowed: usize,
    bytes_left: Cell<usize>,
    bytes_allowed: usize,
    values: Cell<usize>,
    max_values: usize,
}

impl Budget {
    /// One value per byte of the text, plus [`ALIAS_ALLOWANCE`], and two bytes of strings per
    /// byte of it (an escape such as `\L` writes 3 bytes for 2), plus [`ALIAS_ALLOWANCE`]; and
    /// per document, twice the nodes it may hold (`max_nodes`: the pre-scan counts at least
    /// half of what the parser makes). Without aliases no text comes near any of them.
    fn of(text: &str, max_nodes: usize) -> Self {
        let allowed = text.len().saturating_add(ALIAS_ALLOWANCE);
        let bytes_allowed = text.len().saturating_mul(2).saturating_add(ALIAS_ALLOWANCE);
        Budget {
            left: Cell::new(allowed),
            allowed,
            bytes_left: Cell::new(bytes_allowed),
            bytes_allowed,
            values: Cell::new(0),
            max_values: max_nodes.saturating_mul(2),
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
    /// Takes one value from the budget, and one of the document's.
    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        let values = self.budget.values.get() + 1;
        if values > self.budget.max_values {
            return Err(self.stop(format!(
                "aliases expand the document to more than {} values (twice the {} nodes it \
                 may hold)",
                self.budget.max_values,
                self.budget.max_values / 2
            )));
        }
        self.budget.values.set(values);
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

    /// Takes a string of `bytes` from the budget (a value, and its bytes).
    fn take_string<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.take()?;
        match self.budget.bytes_left.get().checked_sub(bytes) {
            Some(left) => {
                self.budget.bytes_left.set(left);
                Ok(())
            }
            None => Err(self.stop(format!(
                "aliases expand the text to more than {} bytes of strings (two per byte of \
                 it, plus {ALIAS_ALLOWANCE})",
                self.budget.bytes_allowed
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
        self.take_string(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.take_string(v.len())?;
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
        // Without the room it grew into (4 values for 1, 2 KiB for 17).
        items.shrink_to_fit();
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
        mapping.shrink_to_fit();
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
