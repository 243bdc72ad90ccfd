//! Lists with `limit` and `continue` (SPEC 4.1): items in key order, at most `limit` of them,
//! after the item the `continue` token names.
//!
//! A continue token is the key of the last item returned, sealed (ChaCha20-Poly1305, under a
//! key derived from the installation's sealing key) and bound to the list it was issued for
//! ([`ContinueTokens`]). So a token opens only on that list and only if this installation
//! issued it; anything else is a 400 naming `/continue`. Replicas share the sealing key, so a
//! page issued by one continues on another.

use base64::Engine;

use crate::error::{AppError, AppResult};
use crate::sealing::SealingKey;

/// The purpose the continue tokens' key is derived for.
const PURPOSE: &str = "palisade continue tokens v1";

/// Longer `continue` values are refused unread; issued ones are far shorter.
const MAX_TOKEN_CHARS: usize = 4096;

/// What a caller asks of a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (1-1000, default 100).
    pub limit: Option<u32>,
    /// The `continue` value of the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list and the token to continue after it, if more follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub continue_token: Option<String>,
}

/// Issues and reads the continue tokens of lists.
#[derive(Clone, Debug)]
pub struct ContinueTokens(SealingKey);

/// The 400 of a `continue` that is not a token of the list.
fn not_a_token() -> AppError {
    AppError::invalid("/continue", "is not a continue token of this list")
}

impl ContinueTokens {
    /// The tokens of the installation whose sealing key is `key`.
    pub fn new(key: &SealingKey) -> Self {
        ContinueTokens(key.derive(PURPOSE))
    }

    /// The token that continues `list` after the item whose key is `key`.
    pub fn issue(&self, list: &str, key: &str) -> AppResult<String> {
        let sealed = self
            .0
            .seal_for(list.as_bytes(), key.as_bytes())
            .map_err(|e| AppError::Internal(format!("continue token: {e}")))?;
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
    }

    /// The key a token names, if this installation issued it for `list`; otherwise the 400.
    pub fn read(&self, list: &str, token: &str) -> AppResult<String> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(not_a_token());
        }
        let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| not_a_token())?;
        let key = self
            .0
            .open_for(list.as_bytes(), &sealed)
            .map_err(|_| not_a_token())?;
        String::from_utf8(key).map_err(|_| not_a_token())
    }
}

impl PageRequest {
    /// The limit, or `InvalidRequest` naming `/limit`.
    pub fn limit(&self) -> AppResult<usize> {
        match self.limit {
            None => Ok(100),
            Some(n) if (1..=1000).contains(&n) => Ok(n as usize),
            Some(n) => Err(AppError::invalid(
                "/limit",
                format!("must be from 1 to 1000, got {n}"),
            )),
        }
    }

    /// The key the page starts after: `None` for the first page (no `continue`, or an empty
    /// one), else the key the token names, or the 400 unless `tokens` issued it for `list`.
    pub fn after(&self, tokens: &ContinueTokens, list: &str) -> AppResult<Option<String>> {
        match self.continue_token.as_deref() {
            None | Some("") => Ok(None),
            Some(token) => tokens.read(list, token).map(Some),
        }
    }

    /// Pages `list`, whose items are already in key order: items after `continue`, at most
    /// `limit`, and a token for the next page when more follow.
    pub fn page<T>(
        &self,
        tokens: &ContinueTokens,
        list: &str,
        items: Vec<T>,
        key: impl Fn(&T) -> String,
    ) -> AppResult<Page<T>> {
        let limit = self.limit()?;
        let after = self.after(tokens, list)?;
        let mut rest: Vec<T> = match after {
            None => items,
            Some(after) => items.into_iter().filter(|item| key(item) > after).collect(),
        };
        let continue_token = if rest.len() > limit {
            rest.truncate(limit);
            match rest.last() {
                Some(last) => Some(tokens.issue(list, &key(last))?),
                None => None,
            }
        } else {
            None
        };
        Ok(Page {
            items: rest,
            continue_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(limit: u32, continue_token: Option<String>) -> PageRequest {
        PageRequest {
            limit: Some(limit),
            continue_token,
        }
    }

    #[test]
    fn pages_continue_after_the_last_key() {
        let tokens = ContinueTokens::new(&SealingKey::random());
        let items = || vec!["a", "b", "c"];
        let key = |s: &&str| (*s).to_owned();
        let first = request(2, None).page(&tokens, "letters", items(), key);
        let first = first.map_err(|e| e.to_string());
        assert_eq!(first.as_ref().map(|p| p.items.clone()), Ok(vec!["a", "b"]));
        let token = first.ok().and_then(|p| p.continue_token);
        assert!(token.is_some());
        let second = request(2, token).page(&tokens, "letters", items(), key);
        assert_eq!(
            second.map(|p| (p.items, p.continue_token)).ok(),
            Some((vec!["c"], None))
        );
    }

    #[test]
    fn a_token_opens_only_on_its_list_and_installation() {
        let key = SealingKey::random();
        let tokens = ContinueTokens::new(&key);
        let token = tokens.issue("boundaries", "shop").ok();
        assert_eq!(
            request(1, token.clone())
                .after(&tokens, "boundaries")
                .ok()
                .flatten()
                .as_deref(),
            Some("shop")
        );
        let refused = |tokens: &ContinueTokens, list: &str, token: Option<String>| {
            request(1, token)
                .after(tokens, list)
                .map_err(|e| e.to_string())
        };
        let message = Err("/continue: is not a continue token of this list".to_owned());
        assert_eq!(refused(&tokens, "clusters", token.clone()), message);
        let elsewhere = ContinueTokens::new(&SealingKey::random());
        assert_eq!(refused(&elsewhere, "boundaries", token), message);
        for text in ["shop", "not-a-key", "AAAA", "%%", ""] {
            let answer = refused(&tokens, "boundaries", Some(text.to_owned()));
            if text.is_empty() {
                assert_eq!(answer, Ok(None));
            } else {
                assert_eq!(answer, message, "{text}");
            }
        }
        // Sealing keys for other purposes do not open tokens either.
        let sealed = key.seal_for(b"boundaries", b"shop").unwrap_or_default();
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed);
        assert_eq!(refused(&tokens, "boundaries", Some(forged)), message);
    }

    #[test]
    fn a_limit_out_of_range_names_the_parameter() {
        let request = PageRequest {
            limit: Some(0),
            continue_token: None,
        };
        assert_eq!(
            request.limit().map_err(|e| e.to_string()),
            Err("/limit: must be from 1 to 1000, got 0".to_owned())
        );
    }
}
