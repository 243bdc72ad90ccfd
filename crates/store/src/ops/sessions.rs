//! Portal sessions that ended (signed out) before they expired. A session lives in its sealed
//! cookie; what the store keeps is only the id of each one ended, until it would have expired.

use super::exists;
use crate::sql::{Arg::Text, Conn};
use crate::Result;

const INSERT: &str = "INSERT INTO ended_sessions (id, expires_at) VALUES ($1, $2) \
     ON CONFLICT (id) DO NOTHING";
/// Those past their expiry, a bounded batch at a time.
const FORGET: &str = "DELETE FROM ended_sessions WHERE id IN \
     (SELECT id FROM ended_sessions WHERE expires_at <= $1 LIMIT 100)";
const ENDED: &str = "SELECT EXISTS (SELECT 1 FROM ended_sessions WHERE id = $1) AS found";

/// Records that session `id` ended, and forgets some of those past their expiry.
pub(crate) async fn end<C: Conn>(c: &mut C, id: &str, expires_at: &str) -> Result<()> {
    c.execute(FORGET, &[Text(&crate::now())]).await?;
    c.execute(INSERT, &[Text(id), Text(expires_at)]).await?;
    Ok(())
}

pub(crate) async fn ended<C: Conn>(c: &mut C, id: &str) -> Result<bool> {
    Ok(exists(c, ENDED, &[Text(id)]).await?)
}
