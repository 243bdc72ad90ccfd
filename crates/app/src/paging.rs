//! Lists with `limit` and `continue` (SPEC 4.1): items in key order, at most `limit` of them,
//! after the `continue` key of the previous page.

use crate::error::{AppError, AppResult};

/// What a caller asks of a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// At most this many items (1-1000, default 100).
    pub limit: Option<u32>,
    /// The `continue` value of the previous page.
    pub continue_token: Option<String>,
}

/// One page of a list and the key to continue after, if more follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub continue_token: Option<String>,
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

    /// Pages a list already in key order: items after `continue`, at most `limit`.
    pub fn page<T>(&self, items: Vec<T>, key: impl Fn(&T) -> String) -> AppResult<Page<T>> {
        let limit = self.limit()?;
        let mut rest: Vec<T> = match &self.continue_token {
            None => items,
            Some(after) => items
                .into_iter()
                .filter(|item| key(item) > *after)
                .collect(),
        };
        let continue_token = if rest.len() > limit {
            rest.truncate(limit);
            rest.last().map(&key)
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

    #[test]
    fn pages_continue_after_the_last_key() {
        let request = PageRequest {
            limit: Some(2),
            continue_token: None,
        };
        let first = request.page(vec!["a", "b", "c"], |s| (*s).to_owned());
        assert_eq!(
            first.ok(),
            Some(Page {
                items: vec!["a", "b"],
                continue_token: Some("b".into())
            })
        );
        let next = PageRequest {
            limit: Some(2),
            continue_token: Some("b".into()),
        };
        let second = next.page(vec!["a", "b", "c"], |s| (*s).to_owned());
        assert_eq!(second.map(|p| p.items).ok(), Some(vec!["c"]));
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
