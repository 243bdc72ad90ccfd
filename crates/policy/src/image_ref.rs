//! Image references as they stand in a pod spec, and registry prefixes of `allowedRegistries`.
//!
//! Nothing is normalised: `nginx` is not `docker.io/library/nginx`, and comparisons are exact
//! and case-sensitive (SPEC 3.2).

use std::fmt;

/// An image string exactly as written in a container. Any text is an image reference here: the
/// rules classify it, they never reject it as malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageRef<'a>(&'a str);

/// The tag of an image that has no digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag<'a> {
    /// No `:` after the last `/`, or nothing after that `:`. Counts as latest.
    Missing,
    /// The text after the last `:` that follows the last `/`.
    Named(&'a str),
}

impl<'a> ImageRef<'a> {
    pub fn new(image: &'a str) -> Self {
        ImageRef(image)
    }

    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// An image containing `@` carries a digest, whatever else it says.
    pub fn has_digest(&self) -> bool {
        self.0.contains('@')
    }

    /// The tag per SPEC 3.2: `registry:5000/api` has none, `registry:5000` has `5000`.
    pub fn tag(&self) -> Tag<'a> {
        let last_segment = match self.0.rfind('/') {
            Some(slash) => &self.0[slash + 1..],
            None => self.0,
        };
        match last_segment.rfind(':') {
            Some(colon) if colon + 1 < last_segment.len() => Tag::Named(&last_segment[colon + 1..]),
            _ => Tag::Missing,
        }
    }

    /// True when DisallowLatestTag denies this image: no digest, and a missing, empty or
    /// `latest` tag.
    pub fn is_latest(&self) -> bool {
        !self.has_digest() && matches!(self.tag(), Tag::Missing | Tag::Named("latest"))
    }

    /// True when the image equals `prefix` or starts with `prefix` + `/`.
    pub fn is_under(&self, prefix: &RegistryPrefix) -> bool {
        match self.0.strip_prefix(prefix.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        }
    }
}

/// The longest image reference [`ImageRef::parse`] accepts, in bytes.
pub const MAX_IMAGE_LEN: usize = 4096;
/// The longest repository name (registry host and path) of an image reference, in characters.
pub const MAX_IMAGE_NAME_LEN: usize = 255;

/// Why a text is not an image reference (the grammar of the OCI distribution reference:
/// `[host[:port]/]path-component(/path-component)*[:tag][@algorithm:hex]`). The messages never
/// repeat the text itself: it may be huge or hold control characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 4096 bytes, got {0}")]
    TooLong(usize),
    #[error("must not contain white space, control characters, quotes or non-ASCII characters")]
    BadCharacter,
    #[error(
        "is not an image reference: its repository name must be at most 255 characters, got {0}"
    )]
    NameTooLong(usize),
    #[error("is not an image reference: the repository must be lowercase path components (letters, digits, single '.', '_', '__' or '-' separators) joined by '/', optionally after a registry host, e.g. ghcr.io/acme/web:1.4")]
    BadName,
    #[error("is not an image reference: the tag must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'")]
    BadTag,
    #[error("is not an image reference: the digest must be <algorithm>:<at least 32 hexadecimal digits>, e.g. sha256:<64 hex digits>")]
    BadDigest,
}

impl<'a> ImageRef<'a> {
    /// Checks `text` against the image-reference grammar. Admission rules never call this (an
    /// image in a pod spec is judged as written); platform resources do, before anything pulls
    /// or builds from their image.
    pub fn parse(text: &'a str) -> Result<Self, ImageRefError> {
        if text.is_empty() {
            return Err(ImageRefError::Empty);
        }
        if text.len() > MAX_IMAGE_LEN {
            return Err(ImageRefError::TooLong(text.len()));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) || text.contains(['"', '\'', '`', '\\']) {
            return Err(ImageRefError::BadCharacter);
        }
        let (name_and_tag, digest) = match text.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (text, None),
        };
        if let Some(digest) = digest {
            if !is_digest(digest) {
                return Err(ImageRefError::BadDigest);
            }
        }
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(colon) => (
                &name_and_tag[..last_slash + colon],
                Some(&name_and_tag[last_slash + colon + 1..]),
            ),
            None => (name_and_tag, None),
        };
        if let Some(tag) = tag {
            if !is_tag(tag) {
                return Err(ImageRefError::BadTag);
            }
        }
        if name.chars().count() > MAX_IMAGE_NAME_LEN {
            return Err(ImageRefError::NameTooLong(name.chars().count()));
        }
        let components: Vec<&str> = name.split('/').collect();
        let path = match components.split_first() {
            Some((host, rest)) if !rest.is_empty() && is_registry_host(host) => rest,
            _ => &components[..],
        };
        if path.is_empty() || !path.iter().all(|c| is_path_component(c)) {
            return Err(ImageRefError::BadName);
        }
        Ok(ImageRef(text))
    }
}

/// `[\w][\w.-]{0,127}`.
fn is_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    match bytes.split_first() {
        Some((&first, rest)) => {
            bytes.len() <= 128
                && word(first)
                && rest.iter().all(|&b| word(b) || b == b'.' || b == b'-')
        }
        None => false,
    }
}

/// `[A-Za-z][A-Za-z0-9]*([+._-][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let component_ok = |c: &str| {
        let bytes = c.as_bytes();
        bytes.first().is_some_and(u8::is_ascii_alphabetic)
            && bytes.iter().all(u8::is_ascii_alphanumeric)
    };
    hex.len() >= 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && algorithm.split(['+', '.', '_', '-']).all(component_ok)
}

/// The longest registry prefix accepted, in characters.
pub const MAX_PREFIX_LEN: usize = 255;

/// A registry host followed by zero or more repository path components, without a trailing
/// `/`: `ghcr.io/acme`, `registry:5000`, `localhost/team`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegistryPrefix(String);

/// Why a text is not a registry prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryPrefixError {
    #[error("registry prefix must not be empty")]
    Empty,
    #[error("registry prefix must be at most 255 characters, got {0}")]
    TooLong(usize),
    #[error("registry prefix '{0}' must start with a registry host: a name containing '.' or ':', or 'localhost' (e.g. docker.io/library, not library)")]
    NoHost(String),
    #[error("registry prefix '{0}' has an invalid registry host '{1}'")]
    InvalidHost(String, String),
    #[error("registry prefix '{0}' has an empty path component ('//')")]
    EmptyComponent(String),
    #[error("registry prefix '{0}' has an invalid repository component '{1}': use lowercase letters, digits and single '.', '_', '__' or '-' separators; no tag, digest, spaces or quotes")]
    InvalidComponent(String, String),
}

impl RegistryPrefix {
    /// Parses a prefix. One trailing `/` is dropped; the second value says whether it was, so
    /// that the caller can report the normalisation.
    pub fn parse(text: &str) -> Result<(Self, bool), RegistryPrefixError> {
        if text.is_empty() {
            return Err(RegistryPrefixError::Empty);
        }
        let length = text.chars().count();
        if length > MAX_PREFIX_LEN {
            return Err(RegistryPrefixError::TooLong(length));
        }
        let (body, trimmed) = match text.strip_suffix('/') {
            Some(body) => (body, true),
            None => (text, false),
        };
        let mut components = body.split('/');
        let host = components.next().unwrap_or_default();
        if host.is_empty() && body.is_empty() {
            return Err(RegistryPrefixError::Empty);
        }
        if host.is_empty() {
            return Err(RegistryPrefixError::EmptyComponent(text.to_owned()));
        }
        if !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(RegistryPrefixError::NoHost(text.to_owned()));
        }
        if !is_registry_host(host) {
            return Err(RegistryPrefixError::InvalidHost(
                text.to_owned(),
                host.to_owned(),
            ));
        }
        for component in components {
            if component.is_empty() {
                return Err(RegistryPrefixError::EmptyComponent(text.to_owned()));
            }
            if !is_path_component(component) {
                return Err(RegistryPrefixError::InvalidComponent(
                    text.to_owned(),
                    component.to_owned(),
                ));
            }
        }
        Ok((RegistryPrefix(body.to_owned()), trimmed))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Host plus path components; 3 or more usually name a repository.
    pub fn component_count(&self) -> usize {
        self.0.split('/').count()
    }
}

impl fmt::Display for RegistryPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `domain-component ('.' domain-component)* (':' port)?` of the image-reference grammar.
fn is_registry_host(host: &str) -> bool {
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let port_ok = port.is_none_or(|port| {
        !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
    });
    let component_ok = |component: &str| {
        let bytes = component.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                first.is_ascii_alphanumeric()
                    && last.is_ascii_alphanumeric()
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            }
            _ => false,
        }
    };
    port_ok && name.split('.').all(component_ok)
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` of the image-reference grammar.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut index = 0;
    let mut expect_alnum = true;
    while index < bytes.len() {
        let b = bytes[index];
        if alnum(b) {
            expect_alnum = false;
            index += 1;
            continue;
        }
        if expect_alnum {
            return false;
        }
        // A separator: '.', '_', '__' or one or more '-'.
        let run_start = index;
        match b {
            b'.' => index += 1,
            b'_' => {
                index += 1;
                if bytes.get(index) == Some(&b'_') {
                    index += 1;
                }
            }
            b'-' => {
                while bytes.get(index) == Some(&b'-') {
                    index += 1;
                }
            }
            _ => return false,
        }
        debug_assert!(index > run_start);
        expect_alnum = true;
    }
    !expect_alnum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(text: &str) -> RegistryPrefix {
        RegistryPrefix::parse(text).unwrap().0
    }

    #[test]
    fn tags_follow_the_last_slash() {
        let cases = [
            ("nginx", Tag::Missing),
            ("nginx:", Tag::Missing),
            ("nginx:1.27", Tag::Named("1.27")),
            ("registry:5000/api", Tag::Missing),
            ("registry:5000", Tag::Named("5000")),
            ("a:b:c", Tag::Named("c")),
            ("foo:latest/bar", Tag::Missing),
            ("localhost:5000/a/b:1.0", Tag::Named("1.0")),
        ];
        for (image, tag) in cases {
            assert_eq!(ImageRef::new(image).tag(), tag, "{image}");
        }
    }

    #[test]
    fn digests_are_always_allowed() {
        assert!(!ImageRef::new("nginx:latest@sha256:abc").is_latest());
        assert!(!ImageRef::new("nginx@sha256:abc").is_latest());
        assert!(ImageRef::new("nginx:latest").is_latest());
        assert!(ImageRef::new("nginx").is_latest());
        assert!(!ImageRef::new("nginx:LATEST").is_latest());
    }

    #[test]
    fn under_is_exact_and_component_wise() {
        let acme = prefix("ghcr.io/acme");
        assert!(ImageRef::new("ghcr.io/acme/web:1.4").is_under(&acme));
        assert!(ImageRef::new("ghcr.io/acme").is_under(&acme));
        assert!(!ImageRef::new("ghcr.io/acme-tools/web:1.4").is_under(&acme));
        assert!(!ImageRef::new("GHCR.IO/acme/web").is_under(&acme));
        let library = prefix("docker.io/library/");
        assert!(!ImageRef::new("nginx:1.27").is_under(&library));
        assert!(ImageRef::new("docker.io/library/nginx:1.27").is_under(&library));
        let repo = prefix("ghcr.io/acme/web");
        assert!(!ImageRef::new("ghcr.io/acme/web:1.4").is_under(&repo));
    }

    #[test]
    fn prefixes_need_a_host_and_valid_components() {
        assert_eq!(
            RegistryPrefix::parse("docker.io/library/"),
            Ok((prefix("docker.io/library"), true))
        );
        for ok in [
            "ghcr.io",
            "localhost",
            "localhost/x",
            "registry:5000/api",
            "a.b/c__d/e-f/g.h",
            "R.io/x",
        ] {
            assert!(RegistryPrefix::parse(ok).is_ok(), "{ok}");
        }
        let bad = [
            "",
            "/",
            "acme/web",
            "library",
            "ghcr.io/Acme",
            "ghcr.io/acme web",
            "ghcr.io/\"acme\"",
            "ghcr.io/acme@sha256",
            "ghcr.io/acme:1",
            "ghcr.io//acme",
            "ghcr.io/acme//",
            "ghcr.io/-a",
            "ghcr.io/a-",
            "ghcr.io/a___b",
            "ghcr.io:/a",
            "-ghcr.io/a",
        ];
        for text in bad {
            assert!(RegistryPrefix::parse(text).is_err(), "{text:?}");
        }
        assert!(matches!(
            RegistryPrefix::parse(&format!("ghcr.io/{}", "a".repeat(250))),
            Err(RegistryPrefixError::TooLong(_))
        ));
    }
}
