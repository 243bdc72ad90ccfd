//! The `source` of a resource: the git repository the platform builds it from. Only one safe
//! form is accepted, checked before anything clones or builds from it:
//!
//! `https://<host>[:<port>]/<path>` — the scheme exactly `https://`; a host that is a DNS name
//! (letters, digits and `-` labels joined by `.`, the last one starting with a letter) or an
//! IPv4 address, neither loopback, link-local, private nor unspecified (nor `localhost`: SPEC 5
//! v3.1; names are resolved by the build Job, whose egress docs/operations.md restricts); a
//! port 1–65535; no user
//! information (`user:secret@`); a path of letters, digits, `-`, `.`, `_`, `~`, `/`, `+`, `,`,
//! `=`, `:`, `@` and `%XX` escapes; no query, no fragment; no white space, control characters,
//! quotes or other non-ASCII characters; at most 2,048 bytes. Other git transports (`ssh://`,
//! `git@host:path`, `git://`, `file://`, `ext::`) are refused.

/// The longest source accepted, in bytes.
pub const MAX_SOURCE_LEN: usize = 2048;

/// Why a text is not an accepted source. The messages never repeat the text: it may be huge
/// or hold control characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 2048 bytes, got {0}")]
    TooLong(usize),
    #[error("must not contain white space, control characters, quotes or non-ASCII characters")]
    BadCharacter,
    #[error("must be an https:// git URL (e.g. https://github.com/acme/web.git); other schemes and git transports are not accepted")]
    NotHttps,
    #[error(
        "must not carry user information or credentials (user@ or user:password@ before the host)"
    )]
    UserInfo,
    #[error("must name a host: a DNS name or an IPv4 address, optionally with a port 1-65535")]
    BadHost,
    #[error("must not name a loopback, link-local, private or unspecified address (here {0}): build Jobs fetch it from inside the cluster")]
    InternalAddress(&'static str),
    #[error("must not have a query (?) or a fragment (#)")]
    QueryOrFragment,
    #[error("has a path character that is not accepted; use letters, digits, '-', '.', '_', '~', '/', '+', ',', '=', ':', '@' and %XX escapes")]
    BadPath,
}

/// Checks a resource's `source`.
pub fn validate_source(text: &str) -> Result<(), SourceError> {
    if text.trim().is_empty() {
        return Err(SourceError::Empty);
    }
    if text.len() > MAX_SOURCE_LEN {
        return Err(SourceError::TooLong(text.len()));
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) || text.contains(['"', '\'', '`']) {
        return Err(SourceError::BadCharacter);
    }
    let rest = text.strip_prefix("https://").ok_or(SourceError::NotHttps)?;
    if rest.contains(['?', '#']) {
        return Err(SourceError::QueryOrFragment);
    }
    let (authority, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(SourceError::UserInfo);
    }
    if !is_authority(authority) {
        return Err(SourceError::BadHost);
    }
    let host = authority
        .split_once(':')
        .map_or(authority, |(host, _)| host);
    if let Some(kind) = internal_host(host) {
        return Err(SourceError::InternalAddress(kind));
    }
    if !is_path(path) {
        return Err(SourceError::BadPath);
    }
    Ok(())
}

fn is_authority(authority: &str) -> bool {
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    let port_ok = port.is_none_or(|port| {
        !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p))
    });
    port_ok && (is_dns_name(host) || is_ipv4(host))
}

/// What kind of internal address `host` names, if it does (SPEC 5, v3.1): an IPv4 literal
/// that is loopback, link-local (the cloud metadata service), private or unspecified, or the
/// name `localhost` (RFC 6761).
fn internal_host(host: &str) -> Option<&'static str> {
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return Some("loopback");
    }
    if !is_ipv4(host) {
        return None;
    }
    let octets: Vec<u8> = host.split('.').filter_map(|p| p.parse().ok()).collect();
    let address = std::net::Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]);
    if address.is_loopback() {
        Some("loopback")
    } else if address.is_link_local() {
        Some("link-local")
    } else if address.is_private() || (octets[0] == 100 && (64..128).contains(&octets[1])) {
        Some("private")
    } else if octets[0] == 0 {
        Some("unspecified")
    } else {
        None
    }
}

fn is_dns_name(host: &str) -> bool {
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                bytes.len() <= 63
                    && first.is_ascii_alphanumeric()
                    && last.is_ascii_alphanumeric()
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            }
            _ => false,
        }
    };
    // A name whose last label starts with a digit is an address to many resolvers (`127.1`,
    // `2130706433`, `0x7f.1`), and no top-level domain does: only dotted quads are addresses.
    let tld_ok = host
        .rsplit('.')
        .next()
        .is_some_and(|tld| tld.starts_with(|c: char| c.is_ascii_alphabetic()));
    !host.is_empty() && host.len() <= 253 && host.split('.').all(label_ok) && tld_ok
}

fn is_ipv4(host: &str) -> bool {
    let parts: Vec<&str> = host.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        })
}

fn is_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let b = bytes[index];
        if b == b'%' {
            let escape_ok = bytes
                .get(index + 1..index + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit));
            if !escape_ok {
                return false;
            }
            index += 3;
            continue;
        }
        let allowed = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.' | b'_' | b'~' | b'/' | b'+' | b',' | b'=' | b':' | b'@'
            );
        if !allowed {
            return false;
        }
        index += 1;
    }
    true
}
