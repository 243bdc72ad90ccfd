//! Versioned, historied boundary documents (policies and exceptions; staged rollouts next):
//! the use cases every kind shares, written once over [`DocumentKind`]. A document lives in a
//! boundary under a name, carries an etag, and has a history; what a kind adds (a policy's
//! statuses, an exception's approval and placement) stays in its own module, which answers
//! the kind's views through the trait.

use futures::future::BoxFuture;
use palisade_api_types::view::{History, HistoryEntry};
use palisade_store::{Store, StoreError, WriteAction};
use serde::Serialize;

use crate::caller::Access;
use crate::error::{AppError, AppResult};
use crate::paging::PageRequest;
use crate::policies::SaveCondition;
use crate::App;

/// The store's answer.
pub(crate) type Stored<'a, T> = BoxFuture<'a, palisade_store::Result<T>>;
/// A use case's answer.
pub(crate) type Answer<'a, T> = BoxFuture<'a, AppResult<T>>;

/// A kind of versioned boundary document: its names, its store operations and its views.
pub trait DocumentKind: Send + Sync + 'static {
    /// The document as stored.
    type Record: Send;
    /// One entry of its history, as stored.
    type HistoryEntry: Send;
    /// The document as the API answers it.
    type View: Serialize + Send;
    /// A page of the boundary's documents, as the API answers it.
    type List: Serialize + Send;

    /// The kind in messages and paths (`policy 'x' not found in boundary 'b'`).
    const NOUN: &'static str;
    /// The list a page of the boundary's documents continues (`policies of b`).
    const PLURAL: &'static str;
    /// The list a page of a document's history continues, before `boundary/name`.
    const HISTORY_OF: &'static str;
    /// Whether only admins and boundary-admins write (otherwise every role of the boundary
    /// does, and the kind decides what a developer's write means).
    const ADMINS_WRITE: bool;
    /// Whether a write may ask to create only (`If-None-Match: *`).
    const CREATE_ONLY: bool;

    fn get<'a>(store: &'a dyn Store, boundary: &'a str, name: &'a str) -> Stored<'a, Self::Record>;
    fn delete<'a>(
        store: &'a dyn Store,
        boundary: &'a str,
        name: &'a str,
        if_match: Option<&'a str>,
        actor: &'a str,
    ) -> Stored<'a, ()>;
    fn history<'a>(
        store: &'a dyn Store,
        boundary: &'a str,
        name: &'a str,
        after: Option<i64>,
        limit: u32,
    ) -> Stored<'a, Vec<Self::HistoryEntry>>;
    /// A history entry as the API answers it, with its sequence number.
    fn history_entry(entry: Self::HistoryEntry) -> (i64, HistoryEntry);

    fn name(view: &Self::View) -> &str;
    fn etag(view: &Self::View) -> &str;
    fn list(items: Vec<Self::View>, continue_token: Option<String>) -> Self::List;

    /// The boundary's documents, by name, as the API shows them.
    fn views<'a>(app: &'a App, access: &'a Access) -> Answer<'a, Vec<Self::View>>;
    /// One document as the API shows it.
    fn view<'a>(app: &'a App, access: &'a Access, name: &'a str) -> Answer<'a, Self::View>;
    /// Validates and saves the spec of document `name`.
    fn save<'a>(
        app: &'a App,
        access: &'a Access,
        name: &'a str,
        spec_json: &'a [u8],
        condition: SaveCondition,
    ) -> Answer<'a, (Self::View, WriteAction)>;
}

/// Declares a kind of document: `impl DocumentKind for $kind` from its types (record,
/// history entry, view, list), its words (noun, plural, the history's list), who writes and
/// whether a write may create only, the `Store` methods of the kind, what a history entry's
/// `action` and `version` are (`$entry` the entry), and the `App` methods that answer its views and save it
/// (a save answers `view` and `action`).
macro_rules! document_kind {
    ($kind:ident: $record:ty, $history_entry:ty, $view:ty, $list:ident;
     $noun:literal, $plural:literal, $history_of:literal, admins_write: $admins:literal,
     create_only: $create:literal; store: $get:ident, $delete:ident, $history:ident;
     action($entry:ident) = $action:expr, version = $version:expr; app: $views:ident, $one:ident, $save:ident) => {
        impl $crate::documents::DocumentKind for $kind {
            type Record = $record;
            type HistoryEntry = $history_entry;
            type View = $view;
            type List = $list;
            const NOUN: &'static str = $noun;
            const PLURAL: &'static str = $plural;
            const HISTORY_OF: &'static str = $history_of;
            const ADMINS_WRITE: bool = $admins;
            const CREATE_ONLY: bool = $create;

            fn get<'a>(
                store: &'a dyn palisade_store::Store,
                boundary: &'a str,
                name: &'a str,
            ) -> $crate::documents::Stored<'a, $record> {
                store.$get(boundary, name)
            }

            fn delete<'a>(
                store: &'a dyn palisade_store::Store,
                boundary: &'a str,
                name: &'a str,
                if_match: Option<&'a str>,
                actor: &'a str,
            ) -> $crate::documents::Stored<'a, ()> {
                store.$delete(boundary, name, if_match, actor)
            }

            fn history<'a>(
                store: &'a dyn palisade_store::Store,
                boundary: &'a str,
                name: &'a str,
                after: Option<i64>,
                limit: u32,
            ) -> $crate::documents::Stored<'a, Vec<$history_entry>> {
                store.$history(boundary, name, after, limit)
            }

            fn history_entry(
                $entry: $history_entry,
            ) -> (i64, palisade_api_types::view::HistoryEntry) {
                let action = $action;
                let version = $version;
                let entry = palisade_api_types::view::HistoryEntry {
                    actor: $entry.actor,
                    at: $entry.at,
                    action,
                    version,
                    before: $crate::documents::json_of($entry.before_json),
                    after: $crate::documents::json_of($entry.after_json),
                };
                ($entry.seq, entry)
            }

            fn name(view: &$view) -> &str {
                &view.name
            }

            fn etag(view: &$view) -> &str {
                &view.etag
            }

            fn list(items: Vec<$view>, continue_token: Option<String>) -> $list {
                $list {
                    items,
                    continue_token,
                }
            }

            fn views<'a>(
                app: &'a $crate::App,
                access: &'a $crate::caller::Access,
            ) -> $crate::documents::Answer<'a, Vec<$view>> {
                Box::pin(app.$views(access))
            }

            fn view<'a>(
                app: &'a $crate::App,
                access: &'a $crate::caller::Access,
                name: &'a str,
            ) -> $crate::documents::Answer<'a, $view> {
                Box::pin(app.$one(access, name))
            }

            fn save<'a>(
                app: &'a $crate::App,
                access: &'a $crate::caller::Access,
                name: &'a str,
                spec_json: &'a [u8],
                condition: $crate::policies::SaveCondition,
            ) -> $crate::documents::Answer<'a, ($view, palisade_store::WriteAction)> {
                Box::pin(async move {
                    let saved = app.$save(access, name, spec_json, condition).await?;
                    Ok((saved.view, saved.action))
                })
            }
        }
    };
}
pub(crate) use document_kind;

/// A stored document's JSON text as a value (`None` for none, or text that is not JSON).
pub(crate) fn json_of(text: Option<String>) -> Option<serde_json::Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// 404 naming the document and its boundary.
pub(crate) fn not_found<K: DocumentKind>(boundary: &str, name: &str) -> AppError {
    AppError::NotFound(format!(
        "{} '{name}' not found in boundary '{boundary}'",
        K::NOUN
    ))
}

/// A store error about document `name`: `NotFound` names it.
pub(crate) fn from_store<'a, K: DocumentKind>(
    boundary: &'a str,
    name: &'a str,
) -> impl Fn(StoreError) -> AppError + 'a {
    move |e| match e {
        StoreError::NotFound => not_found::<K>(boundary, name),
        other => AppError::from_store(other, K::NOUN),
    }
}

impl App {
    /// The stored document `name` of the caller's boundary; 404 naming it.
    pub async fn stored<K: DocumentKind>(
        &self,
        access: &Access,
        name: &str,
    ) -> AppResult<K::Record> {
        let boundary = access.boundary();
        K::get(&*self.store, boundary, name)
            .await
            .map_err(from_store::<K>(boundary, name))
    }

    /// One document as the API shows it; 404 naming it.
    pub async fn document<K: DocumentKind>(
        &self,
        access: &Access,
        name: &str,
    ) -> AppResult<K::View> {
        K::view(self, access, name).await
    }

    /// A page of the boundary's documents.
    pub async fn list_documents<K: DocumentKind>(
        &self,
        access: &Access,
        page: &PageRequest,
    ) -> AppResult<K::List> {
        let views = K::views(self, access).await?;
        let list = format!("{} of {}", K::PLURAL, access.boundary());
        let page = page.page(&self.continue_tokens(), &list, views, |v| {
            K::name(v).to_owned()
        })?;
        Ok(K::list(page.items, page.continue_token))
    }

    /// Deletes a document (boundary-admin or admin; `if_match`: the etag the caller read).
    pub async fn delete_document<K: DocumentKind>(
        &self,
        access: &Access,
        name: &str,
        if_match: Option<&str>,
    ) -> AppResult<()> {
        access.caller().require_boundary_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        let actor = access.caller().actor();
        K::delete(&*self.store, boundary, name, if_match, &actor)
            .await
            .map_err(from_store::<K>(boundary, name))?;
        tracing::info!(%boundary, kind = K::NOUN, %name, %actor, "{} deleted", K::NOUN);
        Ok(())
    }

    /// A page of a document's history, oldest first, read as one page from the store.
    pub async fn document_history<K: DocumentKind>(
        &self,
        access: &Access,
        name: &str,
        page: &PageRequest,
    ) -> AppResult<History> {
        let boundary = access.boundary();
        let list = format!("{}{boundary}/{name}", K::HISTORY_OF);
        let (after, read) = self.history_window(&list, page)?;
        let entries = K::history(&*self.store, boundary, name, after, read)
            .await
            .map_err(from_store::<K>(boundary, name))?;
        let entries = entries.into_iter().map(K::history_entry).collect();
        self.history_page(&list, entries, read)
    }

    /// The window of a history page: the sequence number it starts after (the `continue`
    /// token's, or the 400 naming `/continue`), and how many entries to read: one more than
    /// the limit, to know whether another page follows.
    pub(crate) fn history_window(
        &self,
        list: &str,
        page: &PageRequest,
    ) -> AppResult<(Option<i64>, u32)> {
        let limit = page.limit()?;
        let after = match page.after(&self.continue_tokens(), list)? {
            None => None,
            Some(key) => Some(key.parse::<i64>().map_err(|_| {
                AppError::invalid("/continue", "is not a continue token of this list")
            })?),
        };
        let read = u32::try_from(limit).unwrap_or(1000).saturating_add(1);
        Ok((after, read))
    }

    /// The page of `list` whose entries (oldest first, with their sequence numbers) the store
    /// read in a window of `read` (the limit and one more): at most the limit, and the token
    /// that continues after the last of them when more follow.
    pub(crate) fn history_page(
        &self,
        list: &str,
        mut entries: Vec<(i64, HistoryEntry)>,
        read: u32,
    ) -> AppResult<History> {
        let limit = usize::try_from(read.saturating_sub(1)).unwrap_or(usize::MAX);
        let continue_token = if entries.len() > limit {
            entries.truncate(limit);
            match entries.last() {
                Some((seq, _)) => Some(self.continue_tokens().issue(list, &seq.to_string())?),
                None => None,
            }
        } else {
            None
        };
        Ok(History {
            items: entries.into_iter().map(|(_, entry)| entry).collect(),
            continue_token,
        })
    }
}
