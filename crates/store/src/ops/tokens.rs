//! API tokens. Only the SHA-256 of a token's secret is stored.

use super::{find, find_all, on_insert, touched};
use crate::sql::record;
use crate::sql::{
    Arg::{OptText, Text},
    Conn, Fields,
};
use crate::{Result, StoreError, TokenRecord};

const INSERT: &str = "INSERT INTO tokens \
     (id, secret_sha256, role, boundary, created_at, expires_at, created_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
const COUNT: &str = "SELECT COUNT(*) AS n FROM tokens";
const SELECT_BY_HASH: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE secret_sha256 = $1";
const SELECT: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE id = $1";
/// `$1`: a boundary, or NULL for every token.
const SELECT_ALL: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE ($1 IS NULL OR boundary = $1) ORDER BY created_at, id";
const DELETE: &str = "DELETE FROM tokens WHERE id = $1";
/// The admin tokens that have not expired at `$1`, `$2` among them or not.
const OTHER_ADMINS: &str = "SELECT COUNT(*) AS n FROM tokens \
     WHERE role = 'admin' AND id <> $2 AND (expires_at IS NULL OR expires_at > $1)";

fn token(row: &dyn Fields) -> sqlx::Result<TokenRecord> {
    record! { row, TokenRecord {
        id: text, secret_sha256: text, role: text, boundary: opt_text, created_at: text,
        expires_at: opt_text, created_by: text,
    } }
}

/// `Conflict` when the id or the secret is taken, `NotFound` when the boundary is unknown.
pub(crate) async fn create<C: Conn>(c: &mut C, token: &TokenRecord) -> Result<()> {
    let args = [
        Text(&token.id),
        Text(&token.secret_sha256),
        Text(&token.role),
        OptText(token.boundary.as_deref()),
        Text(&token.created_at),
        OptText(token.expires_at.as_deref()),
        Text(&token.created_by),
    ];
    c.execute(INSERT, &args)
        .await
        .map_err(|e| on_insert(e, "token"))?;
    Ok(())
}

/// Creates `token` when there is none at all, under a database-wide lock
/// (`Conn::LOCK_DATABASE`) so that two replicas starting together make one.
pub(crate) async fn bootstrap_admin<C: Conn>(c: &mut C, token: &TokenRecord) -> Result<bool> {
    if let Some(lock) = C::LOCK_DATABASE {
        c.execute(lock, &[]).await?;
    }
    let count = c.fetch_optional(COUNT, &[], |row| row.int("n")).await?;
    if count.unwrap_or(0) > 0 {
        return Ok(false);
    }
    create(c, token).await?;
    Ok(true)
}

pub(crate) async fn by_secret_hash<C: Conn>(c: &mut C, secret_sha256: &str) -> Result<TokenRecord> {
    find(c, SELECT_BY_HASH, &[Text(secret_sha256)], token).await
}

/// All tokens (`boundary` `None`), or those of one boundary; by creation time.
pub(crate) async fn list<C: Conn>(c: &mut C, boundary: Option<&str>) -> Result<Vec<TokenRecord>> {
    find_all(c, SELECT_ALL, &[OptText(boundary)], token).await
}

pub(crate) async fn get<C: Conn>(c: &mut C, id: &str) -> Result<TokenRecord> {
    find(c, SELECT, &[Text(id)], token).await
}

/// Deletes the token; `Conflict` when it is the last admin token that has not expired (no
/// one could manage tokens or clusters again), decided under the database-wide lock
/// (`Conn::LOCK_DATABASE`) so that two deletes at once cannot both pass.
pub(crate) async fn delete<C: Conn>(c: &mut C, id: &str) -> Result<()> {
    if let Some(lock) = C::LOCK_DATABASE {
        c.execute(lock, &[]).await?;
    }
    let now = crate::now();
    let record = get(c, id).await?;
    let unexpired = record
        .expires_at
        .as_deref()
        .is_none_or(|expires| expires > now.as_str());
    if record.role == "admin" && unexpired {
        let others = c
            .fetch_optional(OTHER_ADMINS, &[Text(&now), Text(id)], |row| row.int("n"))
            .await?;
        if others.unwrap_or(0) == 0 {
            return Err(StoreError::Conflict(format!(
                "token '{id}' is the last admin token"
            )));
        }
    }
    touched(c.execute(DELETE, &[Text(id)]).await?)
}
