//! Installation-wide settings, one value per key.

use super::name;
use crate::sql::{Arg::Text, Conn};
use crate::{Result, StoreError};

/// The key of the installation id.
const INSTALLATION_ID: &str = "installation_id";

const INSERT: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
const SELECT: &str = "SELECT value AS name FROM settings WHERE key = $1";

/// This installation's id: the one stored, or `candidate`, stored for good when none is.
pub(crate) async fn installation_id<C: Conn>(c: &mut C, candidate: &str) -> Result<String> {
    or_insert(c, INSTALLATION_ID, candidate).await
}

/// The value stored under `key`, or `candidate` stored and returned when there is none.
async fn or_insert<C: Conn>(c: &mut C, key: &str, candidate: &str) -> Result<String> {
    c.execute(INSERT, &[Text(key), Text(candidate)]).await?;
    c.fetch_optional(SELECT, &[Text(key)], name)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("setting {key} vanished")))
}
