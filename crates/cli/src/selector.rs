//! Label selectors of `get ... -l`: `key=value`, `key==value`, `key!=value`, `key` and `!key`,
//! separated by commas, all of which must hold (Kubernetes' equality-based selectors).

use std::collections::BTreeMap;

use palisade_policy::label::{LabelError, LabelKey, LabelValue};

/// One requirement on an object's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(LabelKey, LabelValue),
    NotEquals(LabelKey, LabelValue),
    Exists(LabelKey),
    Absent(LabelKey),
}

/// A parsed selector: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("the selector is empty")]
    Empty,
    #[error("'{0}' is empty between commas")]
    EmptyRequirement(String),
    #[error("'{requirement}': {problem}")]
    Label {
        requirement: String,
        problem: LabelError,
    },
    #[error("'{0}': only =, == and != are understood (key=value, key!=value, key, !key)")]
    Operator(String),
}

impl Selector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Err(SelectorError::Empty);
        }
        text.split(',')
            .map(|part| requirement(part.trim(), text))
            .collect::<Result<Vec<_>, _>>()
            .map(Selector)
    }

    /// True when `labels` meet every requirement (absent labels are none).
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |key: &LabelKey| labels.and_then(|l| l.get(&key.to_string()));
        self.0.iter().all(|r| match r {
            Requirement::Equals(key, value) => get(key) == Some(&value.to_string()),
            Requirement::NotEquals(key, value) => get(key) != Some(&value.to_string()),
            Requirement::Exists(key) => get(key).is_some(),
            Requirement::Absent(key) => get(key).is_none(),
        })
    }
}

fn requirement(part: &str, whole: &str) -> Result<Requirement, SelectorError> {
    if part.is_empty() {
        return Err(SelectorError::EmptyRequirement(whole.to_owned()));
    }
    let label = |problem| SelectorError::Label {
        requirement: part.to_owned(),
        problem,
    };
    let key = |text: &str| LabelKey::parse(text.trim()).map_err(label);
    let value = |text: &str| LabelValue::parse(text.trim()).map_err(label);
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(key(k)?, value(v)?));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        if v.contains('=') {
            return Err(SelectorError::Operator(part.to_owned()));
        }
        return Ok(Requirement::Equals(key(k)?, value(v)?));
    }
    if part.contains(['<', '>', '(', ')', ' ']) {
        return Err(SelectorError::Operator(part.to_owned()));
    }
    match part.strip_prefix('!') {
        Some(k) => Ok(Requirement::Absent(key(k)?)),
        None => Ok(Requirement::Exists(key(part)?)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn selectors_match_as_kubernetes_equality_selectors() {
        let labels: BTreeMap<String, String> = [("team", "web"), ("tier", "front")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        for (selector, expected) in [
            ("team=web", true),
            ("team==web", true),
            ("team=db", false),
            ("team!=db", true),
            ("team!=web", false),
            ("owner!=x", true),
            ("team", true),
            ("owner", false),
            ("!owner", true),
            ("!team", false),
            ("team=web,tier=front", true),
            ("team=web, tier=back", false),
            ("team=", false),
        ] {
            let parsed = Selector::parse(selector).unwrap();
            assert_eq!(parsed.matches(Some(&labels)), expected, "{selector}");
        }
        let none = Selector::parse("!team,owner!=x").unwrap();
        assert!(none.matches(None));
        assert!(!Selector::parse("team").unwrap().matches(None));
    }

    #[test]
    fn a_malformed_selector_says_what_is_wrong() {
        for (selector, message) in [
            ("", "the selector is empty"),
            ("team=web,", "'team=web,' is empty between commas"),
            ("Team Name=web", "'Team Name=web': label key name 'Team Name' must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
            ("team=a b", "'team=a b': label value 'a b' must be empty or at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
            ("team=a=b", "'team=a=b': only =, == and != are understood (key=value, key!=value, key, !key)"),
            ("team in (a)", "'team in (a)': only =, == and != are understood (key=value, key!=value, key, !key)"),
        ] {
            assert_eq!(
                Selector::parse(selector).unwrap_err().to_string(),
                message,
                "{selector}"
            );
        }
    }
}
