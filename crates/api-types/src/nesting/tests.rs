use proptest::prelude::*;
use serde_yaml_ng::Value;

use super::*;

fn depth(text: &str) -> Result<usize, String> {
    yaml_depth(text, usize::MAX).map_err(|e| e.to_string())
}

/// The nesting of a parsed value: what the pre-scan must find.
fn value_depth(value: &Value) -> usize {
    match value {
        Value::Sequence(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Mapping(map) => {
            1 + map
                .iter()
                .map(|(k, v)| value_depth(k).max(value_depth(v)))
                .max()
                .unwrap_or(0)
        }
        Value::Tagged(tagged) => value_depth(&tagged.value),
        _ => 0,
    }
}

/// The deepest document of a stream, as serde_yaml_ng reads it; `None` when it refuses it.
fn parsed_depth(text: &str) -> Option<usize> {
    let mut deepest = 0;
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).ok()?;
        deepest = deepest.max(value_depth(&value));
    }
    Some(deepest)
}

#[test]
fn depth_counts_collections_as_the_parser_opens_them() {
    let cases = [
        ("", 0),
        ("a", 0),
        ("# [[[", 0),
        ("a: b", 1),
        ("- a", 1),
        ("[a]", 1),
        ("{a: b}", 1),
        ("a: [b, {c: d}]", 3),
        ("a:\n- b\n- c\nd: e\n", 2),
        ("a:\n  - b\n", 2),
        ("a:\n- - b\n  - c\n- d: e\n  f: g\nh: i\n", 3),
        ("- - - a\n", 3),
        ("- a: b\n  c: d\n- e\n", 2),
        ("[a: b]", 2),
        ("[a: [b]]", 3),
        ("[[a]: b]", 3),
        ("[? a : b]", 2),
        ("{[a]: b}", 2),
        ("[a]: b", 2),
        ("[[a]]: b\n", 3),
        ("? [a]\n: b\n", 2),
        ("? - a\n: - b\n", 2),
        ("a: '[[[ ]] ''['", 1),
        ("a: \"{{\\\"[ \\\\\"", 1),
        ("a: b # [[[\n", 1),
        ("# [[[\na: b\n", 1),
        ("a: |\n  [[[\n  {{\n\n   ]]\nb: c\n", 1),
        ("a: >-\n  [[[\n", 1),
        ("a: |2\n   [[[\n", 1),
        ("- |\n  [\n- x\n", 1),
        ("a: b[c]{d}, e\n", 1),
        ("a: b\n  [c {d\n", 1),
        ("a: &x [b]\nc: *x\n", 2),
        ("--- [a]\n--- [[b]]\n...\n", 2),
        ("a: [\n  b,\n  [c] # ]]]\n]\n", 3),
        ("[\"a]\", 'b]', c]", 1),
        ("{\"a\":[1,{\"b\":null}]}", 3),
        ("a: !!str [\n", 2),
        ("a:\n  b:\n    c:\n      - d\n", 4),
    ];
    for (text, expected) in cases {
        assert_eq!(depth(text), Ok(expected), "{text:?}");
        if !text.ends_with("[\n") {
            assert_eq!(
                parsed_depth(text),
                Some(expected),
                "serde_yaml_ng on {text:?}"
            );
        }
    }
}

/// The most nodes the pre-scan counts in one document of `text`.
fn counted(text: &str) -> Result<usize, String> {
    yaml_nodes(text, usize::MAX).map_err(|e| e.to_string())
}

/// The nodes of a parsed value: every key, value and item, empty ones included.
fn value_nodes(value: &Value) -> usize {
    match value {
        Value::Sequence(items) => 1 + items.iter().map(value_nodes).sum::<usize>(),
        Value::Mapping(map) => {
            1 + map
                .iter()
                .map(|(k, v)| value_nodes(k) + value_nodes(v))
                .sum::<usize>()
        }
        Value::Tagged(tagged) => value_nodes(&tagged.value),
        _ => 1,
    }
}

/// The most nodes serde_yaml_ng makes of one document of a stream (aliases expanded; an
/// empty document is one null); `None` when it refuses the stream.
fn parsed_nodes(text: &str) -> Option<usize> {
    let mut most = 0;
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(document).ok()?;
        most = most.max(value_nodes(&value));
    }
    Some(most)
}

#[test]
fn nodes_are_counted_as_the_parser_makes_them() {
    let cases = [
        ("", 0),
        ("a", 1),
        ("a: b", 3),
        ("a:\nb: 1\n", 5),
        ("a:\n  b:\nc:\n", 7),
        ("- a\n- b\n", 3),
        ("-\n-\n-\n", 4),
        ("- - \n- x\n", 4),
        ("- a: 1\n  b:\n- c\n", 7),
        ("key:\n- a: 1\n  b: 2\n", 8),
        ("[a, b, c]", 4),
        ("[a, b, ]", 3),
        ("[[], []]", 3),
        ("[a: b]", 4),
        ("[a: b, c: ]", 7),
        ("{a: b, c: }", 5),
        ("{a, b}", 5),
        ("[{a}, {b}]", 7),
        ("{[a]}", 4),
        ("? a\n: b\n", 3),
        ("? a\n? b\n", 5),
        ("? a\nb: 1\n", 5),
        ("- ? a\n- b\n", 5),
        ("- ? a\n  : b\n", 4),
        ("a: &x [b, c]\nd: *x\n", 7),
        ("a: !!str\nb: 1\n", 5),
        ("a: |\n  x\n  y\nb: >\n  z\n", 5),
        ("a: 'x'\nb: \"y\"\n", 5),
        ("--- [a]\n--- [b, c, d]\n...\n", 4),
        ("a: b\n---\nc\n", 3),
        ("!", 1),
        ("[!a, &b, !c d]", 4),
        ("- &a\n- !b\n- c\n", 4),
        ("a: !!str\n&x b: 1\n", 5),
        ("a: &x\n  b: c\n", 5),
    ];
    for (text, expected) in cases {
        assert_eq!(counted(text), Ok(expected), "{text:?}");
        // The parser makes a null of an empty text; the count leaves it out.
        if !text.contains('*') && !text.is_empty() {
            assert_eq!(
                parsed_nodes(text),
                Some(expected),
                "serde_yaml_ng on {text:?}"
            );
        }
    }
}

#[test]
fn a_document_of_too_many_nodes_is_refused_where_the_limit_is_passed() {
    let limits = Limits {
        depth: MAX_DEPTH,
        nodes: 10,
    };
    let refused = |text: &str| yaml_within(text, limits).map_err(|e| e.to_string());
    let words = "more than 10 nodes (keys, values, items) in one document";
    assert_eq!(refused("[a, b, c, d, e, f, g, h, i]"), Ok(1));
    assert_eq!(
        refused("[a, b, c, d, e, f, g, h, i, j]"),
        Err(format!("line 1 column 29: {words}"))
    );
    // Empty values count: the mapping, five keys and their values, then `f`.
    assert_eq!(
        refused("a:\nb:\nc:\nd:\ne:\nf:\n"),
        Err(format!("line 6 column 1: {words}"))
    );
    assert_eq!(
        refused("-\n-\n-\n-\n-\n-\n-\n-\n-\n-\n-\n"),
        Err(format!("line 11 column 1: {words}"))
    );
    // Per document.
    assert_eq!(
        refused("[a, b, c, d, e, f, g, h, i]\n---\n[a, b, c, d, e]\n"),
        Ok(1)
    );
    // The count of the whole stream is the largest of one document.
    assert_eq!(counted("[a, b]\n--- [c, d, e]\n"), Ok(4));
}

#[test]
fn too_deep_is_refused_where_the_limit_is_passed() {
    let refused = |text: &str, limit: usize| yaml_depth(text, limit).map_err(|e| e.to_string());
    assert_eq!(
        refused(&"[".repeat(100_000), 64),
        Err("line 1 column 65: nesting deeper than 64 levels".into())
    );
    let annotations = format!("metadata:\n  annotations: {{x: {}}}", "[".repeat(100_000));
    assert_eq!(
        refused(&annotations, 64),
        Err("line 2 column 81: nesting deeper than 64 levels".into())
    );
    assert_eq!(
        refused(&format!("{}x", "- ".repeat(100)), 64),
        Err("line 1 column 129: nesting deeper than 64 levels".into())
    );
    // A key whose content is 64 deep, in a mapping: 65 levels, found at the key's start.
    let key = format!("a:\n  {}{}: x\n", "[".repeat(63), "]".repeat(63));
    assert_eq!(
        refused(&key, 64),
        Err("line 2 column 3: nesting deeper than 64 levels".into())
    );
    assert_eq!(refused(&key, 65), Ok(65));
    let blocks: String = (0..70)
        .map(|level| format!("{}k{level}:\n", "  ".repeat(level)))
        .collect();
    assert_eq!(
        refused(&blocks, 64),
        Err("line 65 column 129: nesting deeper than 64 levels".into())
    );
    assert_eq!(
        yaml_depth(&"[".repeat(65), 64).map_err(|e| e.offset),
        Err(64)
    );
}

#[test]
fn only_the_core_schema_tags_pass() {
    let cases = [
        ("a: !!str 1", Ok(1)),
        ("a: !!map {b: !!seq [!!int 1, !!float 2, !!bool true, !!null ~]}", Ok(3)),
        ("a: !local x", Ok(1)),
        ("a: ! x", Ok(1)),
        ("a: '!!binary x'", Ok(1)),
        ("a: x!!binary", Ok(1)),
        ("a: b # !!binary\n", Ok(1)),
        ("a: |\n  !!binary\n", Ok(1)),
        (
            "a: !!binary aGVsbG8=",
            Err("line 1 column 4: the YAML tag !!binary is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq"),
        ),
        (
            "a:\n  - !!python/object:os.system [ls]",
            Err("line 2 column 5: the YAML tag !!python/object:os.system is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq"),
        ),
        (
            "!<tag:yaml.org,2002:str> x",
            Err("line 1 column 1: the YAML tag !<tag:yaml.org,2002:str> is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq"),
        ),
        (
            "a: !e!foo x",
            Err("line 1 column 4: the YAML tag !e!foo is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq"),
        ),
        (
            "a: !!st%72 x",
            Err("line 1 column 4: the YAML tag !!st%72 is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq"),
        ),
        (
            "%TAG !! tag:example.com,2000:\n---\na: !!str x",
            Err("line 1 column 1: %TAG directives are not accepted"),
        ),
        ("%YAML 1.1\n---\na: b", Ok(1)),
    ];
    for (text, expected) in cases {
        assert_eq!(depth(text), expected.map_err(str::to_owned), "{text:?}");
    }
}

#[test]
fn json_depth_skips_strings() {
    assert_eq!(json_depth(br#"{"a": "[[[[", "b": ["\"[", {}]}"#, 64), Ok(3));
    assert_eq!(json_depth(b"[[1], [[2]]]", 64), Ok(3));
    assert_eq!(
        json_depth(format!("{{\"a\":\n {}", "[".repeat(100_000)).as_bytes(), 64)
            .map_err(|e| e.to_string()),
        Err("line 2 column 65: nesting deeper than 64 levels".into())
    );
    assert_eq!(
        json_depth("{\"é\": [".as_bytes(), 1).map_err(|e| e.to_string()),
        Err("line 1 column 7: nesting deeper than 1 levels".into())
    );
}

/// Scalar texts with every character that means something somewhere in YAML.
const TEXTS: [&str; 20] = [
    "x", "a[b", "c]d", "e{f}", "g#h", "i: j", "k #l", "[m", "{n", "#o", "'p'", "\"q\"", "r, s",
    "t]", "- u", "? v", "w:", "--- y", "z\\", "é[ü",
];

#[derive(Clone, Debug)]
enum Key {
    Plain,
    Quoted,
    /// A flow sequence as the key (`[k1, x]: v`): one level of its own.
    Sequence,
}

#[derive(Clone, Debug)]
enum Tree {
    Text(usize),
    List(Vec<Tree>),
    Map(Vec<(Key, Tree)>),
}

impl Tree {
    fn depth(&self) -> usize {
        match self {
            Tree::Text(_) => 0,
            Tree::List(items) => 1 + items.iter().map(Tree::depth).max().unwrap_or(0),
            Tree::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(key, value)| {
                        value.depth().max(usize::from(matches!(key, Key::Sequence)))
                    })
                    .max()
                    .unwrap_or(0)
            }
        }
    }
}

fn tree() -> impl Strategy<Value = Tree> {
    let leaf = (0..TEXTS.len()).prop_map(Tree::Text);
    leaf.prop_recursive(8, 64, 4, |inner| {
        let key = prop_oneof![Just(Key::Plain), Just(Key::Quoted), Just(Key::Sequence)];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Tree::List),
            proptest::collection::vec((key, inner), 0..4).prop_map(Tree::Map),
        ]
    })
}

/// Writes trees as YAML in every style, chosen at random: block and flow collections,
/// sequences at their mapping's indentation and compact ones, pairs in flow sequences,
/// explicit and complex keys, plain (also over several lines), quoted and block scalars,
/// comments, anchors, aliases, tags and several documents.
struct Emitter {
    out: String,
    random: u64,
    anchors: Vec<String>,
    keys: usize,
}

fn plain_ok(text: &str, flow: bool) -> bool {
    text.chars().next().is_some_and(char::is_alphanumeric)
        && !text.contains(": ")
        && !text.ends_with(':')
        && !text.contains(" #")
        && (!flow || !text.contains([',', '[', ']', '{', '}', ':']))
}

impl Emitter {
    fn roll(&mut self, n: u64) -> u64 {
        // xorshift64
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        self.random % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.roll(100) < percent
    }

    fn spaces(&mut self, n: usize) {
        self.out.push_str(&" ".repeat(n));
    }

    fn comment(&mut self) -> &'static str {
        if self.chance(20) {
            " # [{'\" #"
        } else {
            ""
        }
    }

    fn comment_line(&mut self, column: usize) {
        if self.chance(10) {
            let at = self.roll(column as u64 + 3) as usize;
            self.spaces(at);
            self.out.push_str("# ]] {{ - ? :\n");
        }
    }

    fn key_name(&mut self) -> String {
        self.keys += 1;
        format!("k{}", self.keys)
    }

    /// A scalar on one line; in flow context when `flow`.
    fn scalar(&mut self, text: usize, flow: bool) -> String {
        if !self.anchors.is_empty() && self.chance(10) {
            let pick = self.roll(self.anchors.len() as u64) as usize;
            return format!("*{}", self.anchors[pick]);
        }
        let text = TEXTS[text];
        let mut out = String::new();
        if self.chance(15) {
            out.push_str("!!str ");
        }
        let anchor = if self.chance(15) {
            let name = format!("a{}", self.anchors.len());
            out.push_str(&format!("&{name} "));
            Some(name)
        } else {
            None
        };
        match self.roll(3) {
            0 if plain_ok(text, flow) => out.push_str(text),
            1 => out.push_str(&format!("'{}'", text.replace('\'', "''"))),
            _ => out.push_str(&format!(
                "\"{}\"",
                text.replace('\\', "\\\\").replace('"', "\\\"")
            )),
        }
        if let Some(name) = anchor {
            self.anchors.push(name);
        }
        out
    }

    /// A `|` or `>` scalar whose lines are indented to `column`, from its header on.
    fn block_scalar(&mut self, column: usize) {
        let header = ["|", ">", "|-", ">+", "|2", ">2-"][self.roll(6) as usize];
        self.out.push_str(header);
        let comment = self.comment();
        self.out.push_str(comment);
        self.out.push('\n');
        for line in 0..=self.roll(3) {
            if line > 0 && self.chance(20) {
                self.out.push('\n');
            }
            let extra = if line > 0 && self.chance(30) { 2 } else { 0 };
            self.spaces(column + extra);
            let text = TEXTS[self.roll(TEXTS.len() as u64) as usize];
            self.out.push_str(text);
            self.out.push('\n');
        }
    }

    /// A scalar after `key:` or `- ` in block context, with its line end; plain ones may go on
    /// over lines indented to `continued`.
    fn block_scalar_value(&mut self, text: usize, continued: usize) {
        if self.chance(20) {
            self.block_scalar(continued);
            return;
        }
        let scalar = self.scalar(text, false);
        self.out.push_str(&scalar);
        if plain_ok(&scalar, false) && self.chance(20) {
            let more = TEXTS[self.roll(TEXTS.len() as u64) as usize];
            if plain_ok(more, false) {
                self.out.push('\n');
                self.spaces(continued);
                self.out.push_str(more);
            }
        }
        let comment = self.comment();
        self.out.push_str(comment);
        self.out.push('\n');
    }

    fn flow(&mut self, tree: &Tree, indent: usize) -> String {
        match tree {
            Tree::Text(text) => self.scalar(*text, true),
            Tree::List(items) => {
                let mut out = String::new();
                if self.chance(10) {
                    out.push_str("!!seq ");
                }
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.separator(indent));
                    }
                    match item {
                        Tree::Map(entries) if entries.len() == 1 && self.chance(50) => {
                            // A pair: `[k: v]` is a sequence of one one-pair mapping.
                            let (key, value) = &entries[0];
                            let key = self.flow_key(key);
                            out.push_str(&key);
                            out.push_str(": ");
                            out.push_str(&self.flow(value, indent + 1));
                        }
                        _ => out.push_str(&self.flow(item, indent + 1)),
                    }
                }
                out.push(']');
                out
            }
            Tree::Map(entries) => {
                let mut out = String::new();
                if self.chance(10) {
                    out.push_str("!!map ");
                }
                out.push('{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.separator(indent));
                    }
                    let key = self.flow_key(key);
                    out.push_str(&key);
                    out.push_str(if key.ends_with('"') && self.chance(30) {
                        ":"
                    } else {
                        ": "
                    });
                    out.push_str(&self.flow(value, indent + 1));
                }
                out.push('}');
                out
            }
        }
    }

    fn separator(&mut self, indent: usize) -> String {
        match self.roll(3) {
            0 => ", ".into(),
            1 => format!(",\n{}", " ".repeat(indent)),
            _ => format!(", # ]] }}\n{}", " ".repeat(indent)),
        }
    }

    /// A key on one line.
    fn flow_key(&mut self, key: &Key) -> String {
        let name = self.key_name();
        match key {
            Key::Plain => name,
            Key::Quoted => format!("\"{name}\""),
            Key::Sequence => format!("[{name}, x]"),
        }
    }

    /// What follows `key:` of a block mapping at `column`.
    fn block_value(&mut self, tree: &Tree, column: usize) {
        match tree {
            Tree::List(items) if !items.is_empty() && self.chance(70) => {
                if self.chance(10) {
                    self.out.push_str(" !!seq");
                }
                self.out.push('\n');
                let at = if self.chance(50) { column } else { column + 2 };
                self.block_list(items, at, false);
            }
            Tree::Map(entries) if !entries.is_empty() && self.chance(70) => {
                if self.chance(10) {
                    // Not one aliases refer to: an alias of a mapping nests it again.
                    self.keys += 1;
                    self.out.push_str(&format!(" &m{}", self.keys));
                }
                self.out.push('\n');
                self.block_map(entries, column + 2, false);
            }
            Tree::Text(text) => {
                self.out.push(' ');
                self.block_scalar_value(*text, column + 2);
            }
            _ => {
                self.out.push(' ');
                let flow = self.flow(tree, column + 1);
                self.out.push_str(&flow);
                let comment = self.comment();
                self.out.push_str(comment);
                self.out.push('\n');
            }
        }
    }

    /// What follows `- ` of a block sequence at `column`.
    fn item_value(&mut self, tree: &Tree, column: usize) {
        match tree {
            Tree::List(items) if !items.is_empty() && self.chance(70) => {
                let compact = self.chance(50);
                if !compact {
                    self.out.push('\n');
                }
                self.block_list(items, column + 2, compact);
            }
            Tree::Map(entries) if !entries.is_empty() && self.chance(70) => {
                let compact = self.chance(50);
                if !compact {
                    self.out.push('\n');
                }
                self.block_map(entries, column + 2, compact);
            }
            Tree::Text(text) => self.block_scalar_value(*text, column + 2),
            _ => {
                let flow = self.flow(tree, column + 1);
                self.out.push_str(&flow);
                self.out.push('\n');
            }
        }
    }

    fn block_list(&mut self, items: &[Tree], column: usize, first_inline: bool) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !first_inline {
                self.comment_line(column);
                self.spaces(column);
            }
            self.out.push_str("- ");
            self.item_value(item, column);
        }
    }

    fn block_map(&mut self, entries: &[(Key, Tree)], column: usize, first_inline: bool) {
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 || !first_inline {
                self.comment_line(column);
                self.spaces(column);
            }
            if matches!(key, Key::Sequence) && self.chance(50) {
                let key = self.flow_key(key);
                self.out.push_str(&format!("? {key}\n"));
                self.spaces(column);
                self.out.push(':');
            } else {
                let key = self.flow_key(key);
                self.out.push_str(&key);
                self.out.push(':');
            }
            self.block_value(value, column);
        }
    }

    fn document(&mut self, tree: &Tree) {
        match tree {
            Tree::List(items) if !items.is_empty() && self.chance(70) => {
                self.block_list(items, 0, false);
            }
            Tree::Map(entries) if !entries.is_empty() && self.chance(70) => {
                self.block_map(entries, 0, false);
            }
            Tree::Text(text) if self.chance(30) => self.block_scalar(2),
            _ => {
                let flow = self.flow(tree, 1);
                self.out.push_str(&flow);
                self.out.push('\n');
            }
        }
    }
}

fn emit(documents: &[Tree], seed: u64) -> String {
    let mut emitter = Emitter {
        out: String::new(),
        random: seed | 1,
        anchors: Vec::new(),
        keys: 0,
    };
    for (i, document) in documents.iter().enumerate() {
        if i > 0 || emitter.chance(30) {
            emitter.out.push_str("---\n");
        }
        emitter.document(document);
        if emitter.chance(10) {
            emitter.out.push_str("...\n");
        }
        // Aliases refer to anchors of the same document.
        emitter.anchors.clear();
    }
    emitter.out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Documents written in every style: the pre-scan finds the nesting the parser builds,
    /// and it refuses them only above their depth.
    #[test]
    fn the_prescan_finds_the_depth_the_parser_builds(
        documents in proptest::collection::vec(tree(), 1..3),
        seed in any::<u64>(),
    ) {
        let text = emit(&documents, seed);
        let expected = documents.iter().map(Tree::depth).max().unwrap_or(0);
        prop_assert_eq!(parsed_depth(&text), Some(expected), "serde_yaml_ng on:\n{}", text);
        prop_assert_eq!(yaml_depth(&text, usize::MAX), Ok(expected), "{}", text);
        prop_assert_eq!(yaml_depth(&text, expected), Ok(expected), "{}", text);
        if expected > 0 {
            let refused = yaml_depth(&text, expected - 1);
            prop_assert!(
                matches!(refused, Err(Refusal { why: Why::TooDeep { .. }, .. })),
                "{:?}: {}", refused, text
            );
        }
    }

    /// Anything made of YAML's indicators that serde_yaml_ng reads: the pre-scan finds the
    /// nesting it builds (never less: that would let a deep text through).
    #[test]
    fn the_prescan_finds_the_depth_of_any_text_the_parser_reads(text in "[\\[\\]{}\\-:?,#'\"|>!&*% \t\n\rab1.]{0,80}") {
        if let Some(parsed) = parsed_depth(&text) {
            match yaml_depth(&text, usize::MAX) {
                Ok(found) => prop_assert_eq!(found, parsed, "{:?}", text),
                // A tag the parser would drop: refused, whatever the depth.
                Err(Refusal { why: Why::Tag(_) | Why::TagDirective, .. }) => {}
                Err(other) => prop_assert!(false, "{:?} for {:?}", other, text),
            }
        }
    }

    /// Documents written in every style: the pre-scan never counts more nodes than the
    /// parser makes (a refusal is true), and at least half of them.
    #[test]
    fn the_prescan_counts_the_nodes_the_parser_makes(
        documents in proptest::collection::vec(tree(), 1..3),
        seed in any::<u64>(),
    ) {
        let text = emit(&documents, seed);
        if let (Some(parsed), Ok(found)) = (parsed_nodes(&text), counted(&text)) {
            prop_assert!(found <= parsed, "{} > {} in:\n{}", found, parsed, text);
            if !text.contains('*') {
                prop_assert!(2 * found >= parsed, "{} < {} / 2 in:\n{}", found, parsed, text);
            }
        }
    }

    /// Anything made of YAML's indicators that serde_yaml_ng reads: never more nodes than it
    /// makes.
    #[test]
    fn the_prescan_counts_no_more_nodes_than_any_text_holds(text in "[\\[\\]{}\\-:?,#'\"|>!&*% \t\n\rab1.]{0,80}") {
        if let (Some(parsed), Ok(found)) = (parsed_nodes(&text), counted(&text)) {
            prop_assert!(found <= parsed, "{} > {} in {:?}", found, parsed, text);
            if !text.contains('*') {
                prop_assert!(2 * found + 1 >= parsed, "{} < ({} - 1) / 2 in {:?}", found, parsed, text);
            }
        }
    }

    /// JSON texts: the depth of the value they were written from.
    #[test]
    fn json_depth_is_the_depth_of_the_value(documents in proptest::collection::vec(tree(), 1..2)) {
        let value = json_of(&documents[0]);
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let expected = json_value_depth(&value);
        prop_assert_eq!(json_depth(text.as_bytes(), usize::MAX), Ok(expected));
        // JSON is YAML too.
        prop_assert_eq!(yaml_depth(&text, usize::MAX), Ok(expected), "{}", text);
    }
}

fn json_value_depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => {
            1 + items.iter().map(json_value_depth).max().unwrap_or(0)
        }
        serde_json::Value::Object(map) => 1 + map.values().map(json_value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn json_of(tree: &Tree) -> serde_json::Value {
    match tree {
        Tree::Text(text) => serde_json::Value::String(TEXTS[*text].to_owned()),
        Tree::List(items) => serde_json::Value::Array(items.iter().map(json_of).collect()),
        Tree::Map(entries) => serde_json::Value::Object(
            entries
                .iter()
                .enumerate()
                .map(|(i, (key, value))| {
                    let value = match key {
                        // JSON keys are strings: a sequence key becomes a sequence value.
                        Key::Sequence => serde_json::json!([json_of(value)]),
                        _ => json_of(value),
                    };
                    (format!("k{i} [{{"), value)
                })
                .collect(),
        ),
    }
}
