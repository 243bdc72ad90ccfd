//! `palisade check -o sarif` (SPEC 4.2 v3): the findings as one SARIF 2.1.0 log, for
//! code-scanning tools. Each denial is a result of level `error`, each audit-mode warning one
//! of level `warning`; its rule is `<policy>/<RuleKind>` (e.g. `trusted/AllowedRegistries`),
//! its message palisade's exact message, its location the manifest file and the line where
//! the object's YAML document starts.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

/// One finding of one object.
pub struct Finding<'a> {
    pub file: &'a str,
    /// The YAML document's index in the file (0-based, as the text output shows it).
    pub document: usize,
    /// `<Kind>/<name>`.
    pub object: String,
    pub policy: &'a str,
    /// The rule kind (`AllowedRegistries`); `None` for a warning, which names its policy only.
    pub rule: Option<&'a str>,
    pub message: &'a str,
    pub denial: bool,
}

/// The 1-based line where each YAML document of `text` starts: its `---` marker, or line 1.
pub fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    let mut content = false;
    for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if marker {
            if !content && starts.len() == 1 {
                // A first marker before any content opens the first document.
                starts[0] = number;
            } else {
                starts.push(number);
            }
            content = false;
            continue;
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            content = true;
        }
    }
    starts
}

/// The SARIF log of `findings`; `lines` gives each file's document start lines.
pub fn log(findings: &[Finding<'_>], lines: &HashMap<String, Vec<usize>>) -> Value {
    let mut rules: BTreeMap<String, String> = BTreeMap::new();
    let results: Vec<Value> = findings
        .iter()
        .map(|f| {
            let id = match f.rule {
                Some(rule) => format!("{}/{rule}", f.policy),
                None => f.policy.to_owned(),
            };
            let description = match f.rule {
                Some(rule) => format!("Policy '{}' ({rule})", f.policy),
                None => format!("Policy '{}' (audit)", f.policy),
            };
            rules.entry(id.clone()).or_insert(description);
            let line = lines
                .get(f.file)
                .and_then(|l| l.get(f.document))
                .copied()
                .unwrap_or(1);
            json!({
                "ruleId": id,
                "level": if f.denial { "error" } else { "warning" },
                "message": {"text": f.message},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.file.replace('\\', "/")},
                        "region": {"startLine": line},
                    },
                    "logicalLocations": [{"name": f.object, "kind": "object"}],
                }],
                "properties": {"document": f.document},
            })
        })
        .collect();
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(id, text)| json!({"id": id, "shortDescription": {"text": text}}))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "palisade",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_start_at_their_marker() {
        let cases: [(&str, &[usize]); 5] = [
            ("a: 1\n", &[1]),
            ("---\na: 1\n", &[1]),
            ("# c\n---\na: 1\n---\nb: 2\n", &[2, 4]),
            ("a: 1\n---\nb: 2\n---\nc: 3\n", &[1, 2, 4]),
            ("a: 1\n--- \n---\nc: 3\n", &[1, 2, 3]),
        ];
        for (text, starts) in cases {
            assert_eq!(document_lines(text), starts, "{text:?}");
        }
    }
}
