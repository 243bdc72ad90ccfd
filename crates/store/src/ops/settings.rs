//! Installation-wide settings, one value per key.

use super::name;
use crate::sql::{Arg::Text, Conn};
use crate::{Result, StoreError};

/// The key of the installation id.
const INSTALLATION_ID: &str = "installation_id";

const INSERT: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
const REPLACE: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value";
const SELECT: &str = "SELECT value AS name FROM settings WHERE key = $1";

/// This installation's id: the one stored, or `candidate`, stored for good when none is.
pub(crate) async fn installation_id<C: Conn>(c: &mut C, candidate: &str) -> Result<String> {
    or_insert(c, INSTALLATION_ID, candidate).await
}

/// The key of the encryption key's check value.
const ENCRYPTION_KEY_CHECK: &str = "encryption_key_check";

/// The encryption key's check value: the one stored, or `candidate`, stored for good when
/// none is.
pub(crate) async fn encryption_key_check<C: Conn>(c: &mut C, candidate: &str) -> Result<String> {
    or_insert(c, ENCRYPTION_KEY_CHECK, candidate).await
}

/// Records `value` as the encryption key's check value, in place of any other.
pub(crate) async fn replace_encryption_key_check<C: Conn>(c: &mut C, value: &str) -> Result<()> {
    c.execute(REPLACE, &[Text(ENCRYPTION_KEY_CHECK), Text(value)])
        .await?;
    Ok(())
}

/// The encryption key's check value, if one is stored.
pub(crate) async fn stored_encryption_key_check<C: Conn>(c: &mut C) -> Result<Option<String>> {
    Ok(
        c.fetch_optional(SELECT, &[Text(ENCRYPTION_KEY_CHECK)], name)
            .await?,
    )
}

/// The value stored under `key`, or `candidate` stored and returned when there is none.
async fn or_insert<C: Conn>(c: &mut C, key: &str, candidate: &str) -> Result<String> {
    c.execute(INSERT, &[Text(key), Text(candidate)]).await?;
    c.fetch_optional(SELECT, &[Text(key)], name)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("setting {key} vanished")))
}
