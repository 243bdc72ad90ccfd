//! DNS-1123 label names: boundaries, policies, clusters, resources, components.

use std::fmt;

/// The longest DNS-1123 label.
pub const MAX_NAME_LEN: usize = 63;

/// A DNS-1123 label: lowercase letters, digits and `-`, starting and ending with an
/// alphanumeric character, at most 63 characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

/// Why a text is not a DNS-1123 label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 63 characters, got {0}")]
    TooLong(usize),
    #[error("'{0}' is not a DNS label: use lowercase letters, digits and '-', starting and ending with a letter or digit")]
    Invalid(String),
}

impl Name {
    /// Parses a DNS-1123 label.
    pub fn parse(text: &str) -> Result<Self, NameError> {
        if text.is_empty() {
            return Err(NameError::Empty);
        }
        if text.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong(text.len()));
        }
        if !is_dns_label(text) {
            return Err(NameError::Invalid(text.to_owned()));
        }
        Ok(Name(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// True when `text` is a DNS-1123 label of any length.
pub(crate) fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_rejects_like_kubernetes() {
        for ok in ["a", "shop", "size-limits", "a1", "1a", &"a".repeat(63)] {
            assert!(Name::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(Name::parse(""), Err(NameError::Empty));
        assert_eq!(Name::parse(&"a".repeat(64)), Err(NameError::TooLong(64)));
        for bad in ["A", "-a", "a-", "a_b", "a.b", "a b", "ä"] {
            assert!(
                matches!(Name::parse(bad), Err(NameError::Invalid(_))),
                "{bad}"
            );
        }
    }
}
