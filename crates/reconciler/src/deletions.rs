//! The objects palisade deletes itself, remembered for a while by uid: their deletion, seen by
//! a drift watch, is no drift. Every writer that deletes notes it here first; the watches ask.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long palisade remembers that it deleted an object.
const REMEMBER_DELETIONS: Duration = Duration::from_secs(300);

/// Uids of objects palisade deleted lately, and when.
static DELETING: LazyLock<Mutex<HashMap<String, Instant>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Notes that palisade is about to delete the object with `uid`: its deletion is no drift.
pub(crate) fn deleting(uid: Option<&str>) {
    let Some(uid) = uid else { return };
    if let Ok(mut deleting) = DELETING.lock() {
        deleting.retain(|_, at| at.elapsed() < REMEMBER_DELETIONS);
        deleting.insert(uid.to_owned(), Instant::now());
    }
}

/// Whether palisade deleted the object with `uid` lately (every installation's watch of a
/// cluster may ask: the parameters' definition is one for all of them).
pub(crate) fn deleted_by_palisade(uid: Option<&str>) -> bool {
    uid.is_some_and(|uid| DELETING.lock().is_ok_and(|d| d.contains_key(uid)))
}
