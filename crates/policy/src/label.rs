//! Kubernetes label keys and values, and the requirements of a `requiredLabels` rule.

use std::fmt;

/// A label key by Kubernetes rules: an optional DNS-1123 subdomain prefix and `/`, then a name
/// of at most 63 characters (`[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelKey(String);

/// A label value by Kubernetes rules: empty, or at most 63 characters of the name alphabet.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelValue(String);

/// Why a text is not a label key or value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label key must not be empty")]
    EmptyKey,
    #[error("label key prefix '{0}' is not a DNS subdomain of at most 253 characters")]
    InvalidPrefix(String),
    #[error("label key name '{0}' must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit")]
    InvalidKeyName(String),
    #[error("label value '{0}' must be empty or at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit")]
    InvalidValue(String),
}

fn is_label_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            bytes.len() <= 63
                && alnum(first)
                && alnum(last)
                && bytes
                    .iter()
                    .all(|&b| alnum(b) || b == b'-' || b == b'_' || b == b'.')
        }
        _ => false,
    }
}

fn is_dns_subdomain(text: &str) -> bool {
    text.len() <= 253 && !text.is_empty() && text.split('.').all(crate::name::is_dns_label)
}

impl LabelKey {
    pub fn parse(text: &str) -> Result<Self, LabelError> {
        if text.is_empty() {
            return Err(LabelError::EmptyKey);
        }
        let name = match text.split_once('/') {
            Some((prefix, name)) => {
                if !is_dns_subdomain(prefix) {
                    return Err(LabelError::InvalidPrefix(prefix.to_owned()));
                }
                name
            }
            None => text,
        };
        if !is_label_name(name) {
            return Err(LabelError::InvalidKeyName(name.to_owned()));
        }
        Ok(LabelKey(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl LabelValue {
    pub fn parse(text: &str) -> Result<Self, LabelError> {
        if text.is_empty() || is_label_name(text) {
            Ok(LabelValue(text.to_owned()))
        } else {
            Err(LabelError::InvalidValue(text.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LabelKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for LabelValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One required label: the key, and the exact value it must have, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelRequirement {
    key: LabelKey,
    value: Option<LabelValue>,
}

impl LabelRequirement {
    /// A requirement. An empty value is "any value" (SPEC 1); the caller reports that
    /// normalisation, so it is made explicit here: `value` must be non-empty or absent.
    pub fn new(key: LabelKey, value: Option<LabelValue>) -> Self {
        let value = value.filter(|value| !value.as_str().is_empty());
        LabelRequirement { key, value }
    }

    pub fn key(&self) -> &LabelKey {
        &self.key
    }

    pub fn value(&self) -> Option<&LabelValue> {
        self.value.as_ref()
    }

    /// True when `found` (the object's value for the key, if any) satisfies the requirement.
    pub fn is_met_by(&self, found: Option<&str>) -> bool {
        match (&self.value, found) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(want), Some(found)) => want.as_str() == found,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_kubernetes_syntax() {
        for ok in ["team", "app.kubernetes.io/name", "a", "A_b.c-D", "x/y"] {
            assert!(LabelKey::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Example.com/a",
            "a/b/c",
            "/a",
            "a/",
            "a b",
            &"a".repeat(64),
        ] {
            assert!(LabelKey::parse(bad).is_err(), "{bad}");
        }
        assert!(LabelKey::parse(&format!("{}/a", "a".repeat(254))).is_err());
    }

    #[test]
    fn values_follow_kubernetes_syntax() {
        for ok in ["", "web", "v1.2_3-x", &"a".repeat(63)] {
            assert!(LabelValue::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["-a", "a b", "a/b", "ä", &"a".repeat(64)] {
            assert!(LabelValue::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn empty_value_means_any_value() {
        let key = LabelKey::parse("team").unwrap();
        let any = LabelRequirement::new(key.clone(), Some(LabelValue::parse("").unwrap()));
        assert_eq!(any.value(), None);
        assert!(any.is_met_by(Some("")));
        assert!(!any.is_met_by(None));
        let web = LabelRequirement::new(key, Some(LabelValue::parse("web").unwrap()));
        assert!(web.is_met_by(Some("web")));
        assert!(!web.is_met_by(Some("Web")));
    }
}
