//! Bounds on untrusted YAML and JSON, checked in one linear pass over the text before any
//! parser sees it: how deeply it nests, and (YAML) how many nodes a document holds and which
//! tags it uses.
//!
//! Why before: libyaml (under serde_yaml_ng) spends time quadratic in the nesting of flow
//! collections (`[[[[...]]]]`: every token looks at every open level) and reports its own
//! recursion limit (128) only after it has read the whole document into events. A 1 MiB
//! body nested 100,000 deep held a core for minutes. With this pass first, every parse that
//! starts nests at most [`MAX_DEPTH`] levels, and costs time linear in the text.
//!
//! The YAML pass mirrors libyaml's scanner where it decides structure: flow indicators,
//! quoted, plain and block scalars (and where each ends), comments, anchors, aliases, tags,
//! directives, document markers, indentation and simple keys (including libyaml's limit of
//! one line and 1,024 bytes for an implicit key). Brackets in scalars and comments are text.
//! It counts collections as the parser opens them: block mappings and sequences (also a
//! sequence at its mapping's indentation), flow collections, and the one-pair mappings of a
//! flow sequence (`[a: b]`). Where the text is not YAML the pass goes on where libyaml would
//! stop with an error; the parser then refuses the text anyway.
//!
//! It also counts each document's nodes, because the parser holds a document's events in
//! memory (about 100 bytes each) before anything is built from them: without a bound, 1 MiB
//! of `[],[],...` held 700,000 of them. The count never exceeds what the parser makes, so a
//! refusal is true: scalars, aliases and collections as they open, and an empty node where an
//! indicator (`-`, `?`, `:`) or a property (`&a`, `!t`) is followed by an indicator instead of
//! its node, where the next key of a block mapping follows a `:` (`a:\nb: 1`), and where a
//! flow mapping's key has no `:` (`{a, b}`) and where a block `?` key has none. What it
//! leaves uncounted (an empty key before `:`, some empty values of nested `?` keys) is next
//! to a node it counts, so the parser makes at most twice the count; [`crate::yaml`] counts
//! exactly while it builds.

use std::fmt;

/// The deepest nesting palisade reads in what it is sent (request bodies, the portal's
/// editor, kubeconfigs, policy files): a policy document nests 7 levels, a kubeconfig 5.
pub const MAX_DEPTH: usize = 64;

/// The deepest nesting `palisade check` reads in manifests: what the YAML parser itself
/// accepts (its recursion limit), so that no manifest it read before is refused now.
pub const MAX_MANIFEST_DEPTH: usize = 128;

/// The most nodes (keys, values, items) one YAML document palisade is sent may hold: a
/// policy document holds about 40, a kubeconfig a few hundred. It bounds what a parse holds
/// in memory (see [`crate::yaml::peak_bound`]): the parser's events for a document (at most
/// two per node counted) stay below 2^17, the size its list of them doubles to next.
pub const MAX_NODES: usize = 50_000;

/// What a YAML text may hold: how deeply it nests, and how many nodes a document holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub depth: usize,
    pub nodes: usize,
}

/// The limits of every YAML text palisade is sent (request bodies, the portal's editor,
/// kubeconfigs, policy files).
pub const LIMITS: Limits = Limits {
    depth: MAX_DEPTH,
    nodes: MAX_NODES,
};

/// The limits of the manifests `palisade check` reads from the user's own files: as deep as
/// the parser reads, and as many nodes as they hold.
pub const MANIFEST_LIMITS: Limits = Limits {
    depth: MAX_MANIFEST_DEPTH,
    nodes: usize::MAX,
};

/// The tags a YAML text may carry besides local ones (`!name`, refused later naming the
/// node): the core schema's, which the parser resolves itself.
pub const ACCEPTED_TAGS: [&str; 7] = [
    "!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq",
];

/// An implicit (simple) key must end within this many bytes of its start (libyaml's rule).
const SIMPLE_KEY_BYTES: usize = 1024;

/// Why a text is refused before it is parsed, and where (1-based line and column in
/// characters, as the YAML parser counts them; `offset` in bytes).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line} column {column}: {why}")]
pub struct Refusal {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
    pub why: Why,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The text opens a collection deeper than the limit.
    TooDeep { limit: usize },
    /// A document holds more nodes than the limit.
    TooManyNodes { limit: usize },
    /// A tag the parser would drop or read otherwise than palisade: any `!!` tag outside
    /// [`ACCEPTED_TAGS`], a verbatim tag (`!<...>`), a named handle (`!e!x`).
    Tag(String),
    /// `%TAG` redefines what `!!str` means.
    TagDirective,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::TooDeep { limit } => write!(f, "nesting deeper than {limit} levels"),
            Why::TooManyNodes { limit } => write!(f, "{}", too_many_nodes(*limit)),
            Why::Tag(tag) => write!(
                f,
                "the YAML tag {} is not accepted; the tags accepted are {}",
                shown(tag),
                ACCEPTED_TAGS.join(", ")
            ),
            Why::TagDirective => f.write_str("%TAG directives are not accepted"),
        }
    }
}

/// The words of a refusal for a document of more than `limit` nodes.
pub fn too_many_nodes(limit: usize) -> String {
    format!("more than {limit} nodes (keys, values, items) in one document")
}

/// A tag for a message: control characters escaped, at most 64 characters.
fn shown(tag: &str) -> String {
    let mut text: String = tag
        .chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect();
    if tag.chars().count() > 64 {
        text.push_str("...");
    }
    text
}

/// Refuses a YAML text (a stream of documents) that nests deeper than `limit` or carries a
/// tag palisade does not read; otherwise the deepest nesting of any of its documents. Its
/// documents may hold any number of nodes.
pub fn yaml_depth(text: &str, limit: usize) -> Result<usize, Refusal> {
    yaml_within(
        text,
        Limits {
            depth: limit,
            nodes: usize::MAX,
        },
    )
}

/// Refuses a YAML text (a stream of documents) that nests deeper than `limits.depth`, one of
/// whose documents holds more than `limits.nodes` nodes, or that carries a tag palisade does
/// not read; otherwise the deepest nesting of any of its documents.
pub fn yaml_within(text: &str, limits: Limits) -> Result<usize, Refusal> {
    Yaml::new(text, limits).run().map(|scan| scan.deepest)
}

/// What the pass found in a text it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scan {
    /// The deepest nesting of any document.
    deepest: usize,
    /// The most nodes counted in one document.
    nodes: usize,
}

/// The most nodes one document of `text` holds, as the pre-scan counts them (never more than
/// the parser makes; see the module's words), or why it refuses the text (deeper than
/// `depth`, a tag).
pub fn yaml_nodes(text: &str, depth: usize) -> Result<usize, Refusal> {
    Yaml::new(
        text,
        Limits {
            depth,
            nodes: usize::MAX,
        },
    )
    .run()
    .map(|scan| scan.nodes)
}

/// [`yaml_within`] with [`LIMITS`].
pub fn check_yaml(text: &str) -> Result<(), Refusal> {
    yaml_within(text, LIMITS).map(|_| ())
}

/// Refuses a JSON text that nests deeper than `limit`; otherwise its deepest nesting.
/// Brackets in strings are text; whatever else the text holds is the JSON parser's to judge.
pub fn json_depth(bytes: &[u8], limit: usize) -> Result<usize, Refusal> {
    let (mut depth, mut deepest) = (0_usize, 0_usize);
    let (mut in_string, mut escaped) = (false, false);
    let (mut line, mut column) = (1_usize, 1_usize);
    for (offset, &byte) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > limit {
                        return Err(Refusal {
                            line,
                            column,
                            offset,
                            why: Why::TooDeep { limit },
                        });
                    }
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        if byte == b'\n' {
            line += 1;
            column = 1;
        } else if byte & 0xC0 != 0x80 {
            // Not a UTF-8 continuation byte: the next character.
            column += 1;
        }
    }
    Ok(deepest)
}

/// [`json_depth`] with [`MAX_DEPTH`].
pub fn check_json(bytes: &[u8]) -> Result<(), Refusal> {
    json_depth(bytes, MAX_DEPTH).map(|_| ())
}

/// A position in the text: byte offset, 0-based line and column (in characters).
#[derive(Clone, Copy, Debug)]
struct Mark {
    offset: usize,
    line: usize,
    column: usize,
}

/// Reads the text a character at a time, counting lines and columns as libyaml does.
struct Cursor<'t> {
    text: &'t str,
    at: Mark,
}

/// What libyaml's reader accepts; anything else stops it (`control characters are not
/// allowed`), so for the scanner the text ends there.
fn readable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn is_break(c: Option<char>) -> bool {
    matches!(c, Some('\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}'))
}

fn is_blank(c: Option<char>) -> bool {
    matches!(c, Some(' ' | '\t'))
}

/// Blank, line break or the end.
fn is_blankz(c: Option<char>) -> bool {
    c.is_none() || is_blank(c) || is_break(c)
}

/// libyaml's `IS_ALPHA`: what anchors and tag handles are made of.
fn is_word(c: Option<char>) -> bool {
    matches!(c, Some('0'..='9' | 'A'..='Z' | 'a'..='z' | '_' | '-'))
}

/// The characters of a tag's URI (outside `!<...>`).
fn is_uri(c: Option<char>) -> bool {
    is_word(c)
        || matches!(
            c,
            Some(
                ';' | '/'
                    | '?'
                    | ':'
                    | '@'
                    | '&'
                    | '='
                    | '+'
                    | '$'
                    | '.'
                    | '%'
                    | '!'
                    | '~'
                    | '*'
                    | '\''
                    | '('
                    | ')'
            )
        )
}

impl<'t> Cursor<'t> {
    /// The character `ahead` characters on, `None` at the end of what libyaml reads.
    fn peek_at(&self, ahead: usize) -> Option<char> {
        let mut chars = self.text.get(self.at.offset..)?.chars();
        for _ in 0..ahead {
            chars.next().filter(|c| readable(*c))?;
        }
        chars.next().filter(|c| readable(*c))
    }

    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    /// Moves past one character that is not a line break.
    fn skip(&mut self) {
        if let Some(c) = self.peek() {
            self.at.offset += c.len_utf8();
            self.at.column += 1;
        }
    }

    /// Moves past one line break (`\r\n` is one).
    fn skip_break(&mut self) {
        match self.peek() {
            Some('\r') if self.peek_at(1) == Some('\n') => self.at.offset += 2,
            Some(c) => self.at.offset += c.len_utf8(),
            None => return,
        }
        self.at.line += 1;
        self.at.column = 0;
    }

    /// `---` or `...` at the start of a line, followed by a blank, a break or the end.
    fn at_document_marker(&self) -> bool {
        if self.at.column != 0 {
            return false;
        }
        let first = self.peek();
        matches!(first, Some('-' | '.'))
            && self.peek_at(1) == first
            && self.peek_at(2) == first
            && is_blankz(self.peek_at(3))
    }
}

/// A collection the parser has open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    /// A block mapping or sequence whose entries start at this column.
    BlockMapping(i64),
    BlockSequence(i64),
    /// A block sequence at the indentation of the mapping it is a value of (`key:\n- a`).
    IndentlessSequence(i64),
    FlowMapping,
    FlowSequence,
    /// The one-pair mapping of a flow sequence's entry (`[a: b]`).
    Pair,
}

/// A possible implicit key: where it starts, the deepest nesting reached since, and whether
/// an indicator was waiting for a node when it started.
#[derive(Clone, Copy, Debug)]
struct Key {
    at: Mark,
    deepest: usize,
    after_pending: bool,
}

/// libyaml keeps one possible key per flow level (level 0: block context).
#[derive(Clone, Copy, Debug, Default)]
struct Level {
    key: Option<Key>,
    /// The deepest nesting reached since this level opened.
    deepest: usize,
    /// In a flow mapping: whether the entry being read has a node, and a `:`.
    entry_node: bool,
    entry_colon: bool,
}

struct Yaml<'t> {
    cursor: Cursor<'t>,
    limit: usize,
    /// libyaml's scanner state: flow level, indentation stack, whether a key may start here.
    flow_level: usize,
    indent: i64,
    indents: Vec<i64>,
    simple_key_allowed: bool,
    levels: Vec<Level>,
    /// The collections open now, outermost first.
    open: Vec<Open>,
    deepest: usize,
    max_nodes: usize,
    /// The nodes of this document counted so far, and the most of any document.
    nodes: usize,
    most_nodes: usize,
    /// An indicator (`-`, `?`, `:`) or a property (`&a`, `!t`) was read and its node was not
    /// yet: if an indicator comes first, the node is empty.
    pending: bool,
    /// The column of a block `?` key whose `:` has not come (yet).
    explicit_key: Option<i64>,
}

impl<'t> Yaml<'t> {
    fn new(text: &'t str, limits: Limits) -> Self {
        Yaml {
            cursor: Cursor {
                text,
                at: Mark {
                    offset: 0,
                    line: 0,
                    column: 0,
                },
            },
            limit: limits.depth,
            flow_level: 0,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: true,
            levels: vec![Level::default()],
            open: Vec::new(),
            deepest: 0,
            max_nodes: limits.nodes,
            nodes: 0,
            most_nodes: 0,
            pending: false,
            explicit_key: None,
        }
    }

    /// Counts a node of this document, made by the token at `at`.
    fn node(&mut self, at: Mark) -> Result<(), Refusal> {
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            return Err(self.refuse(
                at,
                Why::TooManyNodes {
                    limit: self.max_nodes,
                },
            ));
        }
        Ok(())
    }

    /// A token that is a node (a scalar, an alias, a collection): it is the node an indicator
    /// before it was waiting for, if one was.
    fn fill(&mut self, at: Mark) -> Result<(), Refusal> {
        self.pending = false;
        self.level().entry_node = true;
        self.node(at)
    }

    /// The end of a flow mapping's entry (`,` or `}`): a key without a `:` has an empty value.
    fn end_entry(&mut self, at: Mark) -> Result<(), Refusal> {
        let in_mapping = self.open.last() == Some(&Open::FlowMapping);
        let level = self.level();
        let keyed = std::mem::take(&mut level.entry_node) && !level.entry_colon;
        level.entry_colon = false;
        if in_mapping && keyed {
            self.node(at)?;
        }
        Ok(())
    }

    /// An indicator that a node follows (`-`, `?`, `:`): if the previous one's node never
    /// came, that node was empty.
    fn slot(&mut self, at: Mark) -> Result<(), Refusal> {
        if self.pending {
            self.node(at)?;
        }
        self.pending = true;
        Ok(())
    }

    /// A token after which no node comes for the indicator before it (`,`, `]`, `}`, the end
    /// of a document): its node was empty.
    fn close_slot(&mut self, at: Mark) -> Result<(), Refusal> {
        if std::mem::take(&mut self.pending) {
            self.node(at)?;
        }
        Ok(())
    }

    /// The end of a document: the next counts its nodes from 0.
    fn end_document(&mut self, at: Mark) -> Result<(), Refusal> {
        self.close_slot(at)?;
        if self.explicit_key.take().is_some() {
            self.node(at)?;
        }
        self.most_nodes = self.most_nodes.max(self.nodes);
        self.nodes = 0;
        Ok(())
    }

    fn refuse(&self, at: Mark, why: Why) -> Refusal {
        Refusal {
            line: at.line + 1,
            column: at.column + 1,
            offset: at.offset,
            why,
        }
    }

    fn level(&mut self) -> &mut Level {
        let index = self.levels.len() - 1;
        &mut self.levels[index]
    }

    /// Records that the nesting reached `depth` because of the token at `at`.
    fn reach(&mut self, depth: usize, at: Mark) -> Result<(), Refusal> {
        if depth > self.limit {
            return Err(self.refuse(at, Why::TooDeep { limit: self.limit }));
        }
        self.deepest = self.deepest.max(depth);
        let level = self.level();
        level.deepest = level.deepest.max(depth);
        if let Some(key) = &mut level.key {
            key.deepest = key.deepest.max(depth);
        }
        Ok(())
    }

    /// A collection opens: a level, and a node.
    fn push(&mut self, open: Open, at: Mark) -> Result<(), Refusal> {
        self.open.push(open);
        self.reach(self.open.len(), at)?;
        self.fill(at)
    }

    /// A collection that starts before the key at `key` (a block mapping, or a flow
    /// sequence's pair, found when its `:` is read): everything read since the key start is
    /// one level deeper than it was counted.
    fn wrap_key(&mut self, open: Open, key: Key) -> Result<(), Refusal> {
        self.reach(key.deepest + 1, key.at)?;
        self.push(open, key.at)
    }

    fn save_simple_key(&mut self) {
        if self.simple_key_allowed {
            let key = Key {
                at: self.cursor.at,
                deepest: self.open.len(),
                after_pending: self.pending,
            };
            self.level().key = Some(key);
        }
    }

    fn remove_simple_key(&mut self) {
        self.level().key = None;
    }

    /// The level's key, if it can still be one: on this line and within 1,024 bytes.
    fn live_key(&mut self) -> Option<Key> {
        let now = self.cursor.at;
        self.level()
            .key
            .take()
            .filter(|key| key.at.line == now.line && key.at.offset + SIMPLE_KEY_BYTES >= now.offset)
    }

    /// libyaml's `roll_indent`: a block collection starts at `column` if it is deeper than
    /// the current one. Whether it started.
    fn roll_indent(&mut self, column: i64) -> bool {
        if self.flow_level == 0 && self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
            true
        } else {
            false
        }
    }

    /// libyaml's `unroll_indent`: block collections deeper than `column` end.
    fn unroll_indent(&mut self, column: i64) {
        if self.flow_level != 0 {
            return;
        }
        while self.indent > column {
            self.indent = self.indents.pop().unwrap_or(-1);
        }
        while let Some(
            Open::BlockMapping(at) | Open::BlockSequence(at) | Open::IndentlessSequence(at),
        ) = self.open.last()
        {
            if *at <= column {
                break;
            }
            self.open.pop();
        }
    }

    fn increase_flow_level(&mut self, open: Open, at: Mark) -> Result<(), Refusal> {
        self.push(open, at)?;
        self.flow_level += 1;
        self.levels.push(Level {
            deepest: self.open.len(),
            ..Level::default()
        });
        Ok(())
    }

    fn decrease_flow_level(&mut self) {
        if self.flow_level == 0 {
            return;
        }
        if self.open.last() == Some(&Open::Pair) {
            self.open.pop();
        }
        if matches!(
            self.open.last(),
            Some(Open::FlowMapping | Open::FlowSequence)
        ) {
            self.open.pop();
        }
        self.flow_level -= 1;
        if let Some(inner) = self.levels.pop() {
            let outer = self.level();
            outer.deepest = outer.deepest.max(inner.deepest);
            if let Some(key) = &mut outer.key {
                key.deepest = key.deepest.max(inner.deepest);
            }
        }
    }

    fn run(mut self) -> Result<Scan, Refusal> {
        loop {
            self.skip_to_next_token();
            let at = self.cursor.at;
            let column = i64::try_from(at.column).unwrap_or(i64::MAX);
            self.unroll_indent(column);
            if self.flow_level == 0 && self.explicit_key.is_some_and(|key| column < key) {
                // The mapping of a `?` key that had no `:` ended: its value was empty.
                self.explicit_key = None;
                self.node(at)?;
            }
            let Some(c) = self.cursor.peek() else {
                self.end_document(at)?;
                return Ok(Scan {
                    deepest: self.deepest,
                    nodes: self.most_nodes,
                });
            };
            let next = self.cursor.peek_at(1);
            let block_entry = c == '-' && is_blankz(next);
            // A sequence at its mapping's indentation ends at the first token there that is
            // not one of its entries.
            if self.flow_level == 0
                && !block_entry
                && self.open.last() == Some(&Open::IndentlessSequence(column))
            {
                self.open.pop();
            }
            if at.column == 0 && c == '%' {
                self.end_document(at)?;
                self.directive()?;
                continue;
            }
            if self.cursor.at_document_marker() {
                self.end_document(at)?;
                self.unroll_indent(-1);
                self.remove_simple_key();
                self.simple_key_allowed = false;
                for _ in 0..3 {
                    self.cursor.skip();
                }
                continue;
            }
            match c {
                '[' | '{' => {
                    self.save_simple_key();
                    let open = if c == '[' {
                        Open::FlowSequence
                    } else {
                        Open::FlowMapping
                    };
                    self.increase_flow_level(open, at)?;
                    self.simple_key_allowed = true;
                    self.cursor.skip();
                }
                ']' | '}' => {
                    self.close_slot(at)?;
                    self.end_entry(at)?;
                    self.remove_simple_key();
                    self.decrease_flow_level();
                    self.simple_key_allowed = false;
                    self.cursor.skip();
                }
                ',' => {
                    self.close_slot(at)?;
                    self.end_entry(at)?;
                    self.remove_simple_key();
                    if self.flow_level > 0 && self.open.last() == Some(&Open::Pair) {
                        self.open.pop();
                    }
                    self.simple_key_allowed = true;
                    self.cursor.skip();
                }
                '-' if block_entry => {
                    if self.flow_level == 0 {
                        if self.roll_indent(column) {
                            self.push(Open::BlockSequence(column), at)?;
                        } else if self.open.last() == Some(&Open::BlockMapping(column)) {
                            self.push(Open::IndentlessSequence(column), at)?;
                        }
                    }
                    self.slot(at)?;
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.cursor.skip();
                }
                '?' if self.flow_level > 0 || is_blankz(next) => {
                    if self.flow_level == 0 {
                        if self.roll_indent(column) {
                            self.push(Open::BlockMapping(column), at)?;
                        }
                        if self.explicit_key.replace(column) == Some(column) {
                            // The previous `?` key of this mapping had no `:`.
                            self.node(at)?;
                        }
                    } else if self.open.last() == Some(&Open::FlowSequence) {
                        self.push(Open::Pair, at)?;
                    }
                    self.slot(at)?;
                    self.remove_simple_key();
                    self.simple_key_allowed = self.flow_level == 0;
                    self.cursor.skip();
                }
                ':' if self.flow_level > 0 || is_blankz(next) => {
                    if let Some(key) = self.live_key() {
                        // The key token goes where the key started.
                        let key_column = i64::try_from(key.at.column).unwrap_or(i64::MAX);
                        if self.flow_level == 0 {
                            if self.roll_indent(key_column) {
                                self.wrap_key(Open::BlockMapping(key_column), key)?;
                            } else if key.after_pending {
                                // A key of the mapping the indicator before it was in: the
                                // value that indicator waited for was empty (`a:\nb: 1`).
                                self.node(key.at)?;
                            }
                            if self.explicit_key == Some(key_column) {
                                // A `?` key of this mapping before it had no `:`.
                                self.explicit_key = None;
                                self.node(key.at)?;
                            }
                        } else if self.open.last() == Some(&Open::FlowSequence) {
                            self.wrap_key(Open::Pair, key)?;
                        }
                        self.simple_key_allowed = false;
                    } else {
                        if self.flow_level == 0 && self.roll_indent(column) {
                            self.push(Open::BlockMapping(column), at)?;
                        }
                        if self.flow_level == 0 && self.explicit_key == Some(column) {
                            // The value of the `?` key before it.
                            self.explicit_key = None;
                        }
                        self.simple_key_allowed = self.flow_level == 0;
                    }
                    self.level().entry_colon = true;
                    self.slot(at)?;
                    self.cursor.skip();
                }
                '*' | '&' => {
                    self.save_simple_key();
                    if c == '*' {
                        self.fill(at)?;
                    } else {
                        // A property: its node follows, or is empty.
                        self.pending = true;
                    }
                    self.simple_key_allowed = false;
                    self.cursor.skip();
                    while is_word(self.cursor.peek()) {
                        self.cursor.skip();
                    }
                }
                '!' => {
                    self.save_simple_key();
                    // A property: its node follows, or is empty.
                    self.pending = true;
                    self.simple_key_allowed = false;
                    self.tag()?;
                }
                '|' | '>' if self.flow_level == 0 => {
                    self.fill(at)?;
                    self.remove_simple_key();
                    self.simple_key_allowed = true;
                    self.block_scalar();
                }
                '\'' | '"' => {
                    self.save_simple_key();
                    self.fill(at)?;
                    self.simple_key_allowed = false;
                    self.flow_scalar(c == '\'');
                }
                _ if self.starts_plain(c, next) => {
                    self.save_simple_key();
                    self.fill(at)?;
                    self.simple_key_allowed = false;
                    if self.plain_scalar() {
                        self.simple_key_allowed = true;
                    }
                }
                // libyaml stops here (`found character that cannot start any token`).
                _ => self.cursor.skip(),
            }
        }
    }

    /// libyaml's `scan_to_next_token`: blanks, comments and line breaks.
    fn skip_to_next_token(&mut self) {
        loop {
            if self.cursor.at.column == 0 && self.cursor.peek() == Some('\u{FEFF}') {
                self.cursor.skip();
            }
            loop {
                match self.cursor.peek() {
                    Some(' ') => self.cursor.skip(),
                    Some('\t') if self.flow_level > 0 || !self.simple_key_allowed => {
                        self.cursor.skip();
                    }
                    _ => break,
                }
            }
            if self.cursor.peek() == Some('#') {
                while !is_break(self.cursor.peek()) && self.cursor.peek().is_some() {
                    self.cursor.skip();
                }
            }
            if !is_break(self.cursor.peek()) {
                return;
            }
            self.cursor.skip_break();
            if self.flow_level == 0 {
                self.simple_key_allowed = true;
            }
        }
    }

    /// The rest of a `%` line; `%TAG` is refused.
    fn directive(&mut self) -> Result<(), Refusal> {
        let at = self.cursor.at;
        self.unroll_indent(-1);
        self.remove_simple_key();
        self.simple_key_allowed = false;
        self.cursor.skip();
        let start = self.cursor.at.offset;
        while is_word(self.cursor.peek()) {
            self.cursor.skip();
        }
        if self.cursor.text.get(start..self.cursor.at.offset) == Some("TAG") {
            return Err(self.refuse(at, Why::TagDirective));
        }
        while !is_break(self.cursor.peek()) && self.cursor.peek().is_some() {
            self.cursor.skip();
        }
        Ok(())
    }

    /// A tag (libyaml's `scan_tag`): `!!core` tags pass, and so do local ones (`!name`,
    /// refused after parsing, naming the node); every other form is refused here.
    fn tag(&mut self) -> Result<(), Refusal> {
        let at = self.cursor.at;
        let start = at.offset;
        self.cursor.skip();
        if self.cursor.peek() == Some('<') {
            while !is_blankz(self.cursor.peek()) && self.cursor.peek() != Some('>') {
                self.cursor.skip();
            }
            if self.cursor.peek() == Some('>') {
                self.cursor.skip();
            }
            let tag = self
                .cursor
                .text
                .get(start..self.cursor.at.offset)
                .unwrap_or("!<");
            return Err(self.refuse(at, Why::Tag(tag.to_owned())));
        }
        while is_word(self.cursor.peek()) {
            self.cursor.skip();
        }
        let handle_end = self.cursor.at.offset;
        let named = if self.cursor.peek() == Some('!') {
            self.cursor.skip();
            true
        } else {
            false
        };
        while is_uri(self.cursor.peek()) {
            self.cursor.skip();
        }
        let tag = self
            .cursor
            .text
            .get(start..self.cursor.at.offset)
            .unwrap_or("!");
        if named {
            // `!!suffix` (the secondary handle) or `!name!suffix` (a named handle, which only
            // a %TAG directive could define).
            let secondary = handle_end == start + 1;
            if !(secondary && ACCEPTED_TAGS.contains(&tag)) {
                return Err(self.refuse(at, Why::Tag(tag.to_owned())));
            }
        }
        Ok(())
    }

    /// A `|` or `>` scalar (libyaml's `scan_block_scalar`): its header, then every line
    /// indented at least as deeply as its content.
    fn block_scalar(&mut self) {
        self.cursor.skip();
        let mut increment = 0_i64;
        let digit = |c: Option<char>| c.and_then(|c| c.to_digit(10)).map(i64::from);
        match self.cursor.peek() {
            Some('+' | '-') => {
                self.cursor.skip();
                if let Some(d) = digit(self.cursor.peek()) {
                    increment = d;
                    self.cursor.skip();
                }
            }
            c => {
                if let Some(d) = digit(c) {
                    increment = d;
                    self.cursor.skip();
                    if matches!(self.cursor.peek(), Some('+' | '-')) {
                        self.cursor.skip();
                    }
                }
            }
        }
        while is_blank(self.cursor.peek()) {
            self.cursor.skip();
        }
        // A comment, and anything else libyaml refuses, to the end of the line.
        while !is_break(self.cursor.peek()) && self.cursor.peek().is_some() {
            self.cursor.skip();
        }
        self.cursor.skip_break();
        let mut indent = 0_i64;
        if increment != 0 {
            indent = if self.indent >= 0 {
                self.indent + increment
            } else {
                increment
            };
        }
        self.block_scalar_breaks(&mut indent);
        while self.column() == indent && self.cursor.peek().is_some() {
            while !is_break(self.cursor.peek()) && self.cursor.peek().is_some() {
                self.cursor.skip();
            }
            if self.cursor.peek().is_none() {
                return;
            }
            self.cursor.skip_break();
            self.block_scalar_breaks(&mut indent);
        }
    }

    fn column(&self) -> i64 {
        i64::try_from(self.cursor.at.column).unwrap_or(i64::MAX)
    }

    /// libyaml's `scan_block_scalar_breaks`: empty lines and the indentation of the next one;
    /// fixes the content's indentation when the header did not give it.
    fn block_scalar_breaks(&mut self, indent: &mut i64) {
        let mut max_indent = 0_i64;
        loop {
            while (*indent == 0 || self.column() < *indent) && self.cursor.peek() == Some(' ') {
                self.cursor.skip();
            }
            max_indent = max_indent.max(self.column());
            if !is_break(self.cursor.peek()) {
                break;
            }
            self.cursor.skip_break();
        }
        if *indent == 0 {
            *indent = max_indent.max(self.indent + 1).max(1);
        }
    }

    /// A single- or double-quoted scalar (libyaml's `scan_flow_scalar`), to its closing quote.
    fn flow_scalar(&mut self, single: bool) {
        let quote = if single { '\'' } else { '"' };
        self.cursor.skip();
        loop {
            // libyaml stops at a document marker or the end inside quotes.
            if self.cursor.at_document_marker() || self.cursor.peek().is_none() {
                return;
            }
            while !is_blankz(self.cursor.peek()) {
                let c = self.cursor.peek();
                if single && c == Some('\'') && self.cursor.peek_at(1) == Some('\'') {
                    self.cursor.skip();
                    self.cursor.skip();
                } else if c == Some(quote) {
                    break;
                } else if !single && c == Some('\\') {
                    self.cursor.skip();
                    if is_break(self.cursor.peek()) {
                        self.cursor.skip_break();
                        break;
                    }
                    self.cursor.skip();
                } else {
                    self.cursor.skip();
                }
            }
            if self.cursor.peek() == Some(quote) {
                self.cursor.skip();
                return;
            }
            while is_blank(self.cursor.peek()) || is_break(self.cursor.peek()) {
                if is_break(self.cursor.peek()) {
                    self.cursor.skip_break();
                } else {
                    self.cursor.skip();
                }
            }
        }
    }

    /// Whether `c` (followed by `next`) starts a plain scalar (libyaml's test, in its order).
    fn starts_plain(&self, c: char, next: Option<char>) -> bool {
        let indicator = is_blankz(Some(c)) || "-?:,[]{}#&*!|>'\"%@`".contains(c);
        !indicator
            || (c == '-' && !is_blank(next))
            || (self.flow_level == 0 && (c == '?' || c == ':') && !is_blankz(next))
    }

    /// A plain scalar (libyaml's `scan_plain_scalar`), with the blanks and line breaks after
    /// it; in block context it goes on over lines indented deeper than the current block.
    /// Whether it ended after a line break (a key may start there).
    fn plain_scalar(&mut self) -> bool {
        let indent = self.indent + 1;
        let mut after_break = false;
        loop {
            if self.cursor.at_document_marker() || self.cursor.peek() == Some('#') {
                break;
            }
            while !is_blankz(self.cursor.peek()) {
                let c = self.cursor.peek();
                let next = self.cursor.peek_at(1);
                let flow = self.flow_level > 0;
                if (c == Some(':')
                    && (is_blankz(next)
                        || (flow && matches!(next, Some(',' | '?' | '[' | ']' | '{' | '}')))))
                    || (flow && matches!(c, Some(',' | '[' | ']' | '{' | '}')))
                {
                    break;
                }
                self.cursor.skip();
                after_break = false;
            }
            if !(is_blank(self.cursor.peek()) || is_break(self.cursor.peek())) {
                break;
            }
            while is_blank(self.cursor.peek()) || is_break(self.cursor.peek()) {
                if is_break(self.cursor.peek()) {
                    self.cursor.skip_break();
                    after_break = true;
                } else {
                    self.cursor.skip();
                }
            }
            if self.flow_level == 0 && self.column() < indent {
                break;
            }
        }
        after_break
    }
}

#[cfg(test)]
mod tests;
