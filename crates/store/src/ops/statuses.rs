//! Policies' install status in each cluster, as the reconciler last saw it (SPEC 3.4).

use super::find_all;
use crate::sql::record;
use crate::sql::{Arg::Text, Conn, Fields};
use crate::{PolicyStatusRecord, Result};

const DELETE_OF: &str = "DELETE FROM policy_status WHERE cluster = $1 AND boundary = $2";
const INSERT: &str = "INSERT INTO policy_status \
     (boundary, policy, cluster, policy_etag, status, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const SELECT_OF_BOUNDARY: &str =
    "SELECT boundary, policy, cluster, policy_etag, status, updated_at \
     FROM policy_status WHERE boundary = $1 ORDER BY policy, cluster";

fn policy_status(row: &dyn Fields) -> sqlx::Result<PolicyStatusRecord> {
    record! { row, PolicyStatusRecord {
        boundary: text, policy: text, cluster: text, policy_etag: text, status: text,
        updated_at: text,
    } }
}

/// Forgets every status of `boundary`'s policies in `cluster`.
pub(crate) async fn delete_of<C: Conn>(c: &mut C, cluster: &str, boundary: &str) -> Result<()> {
    c.execute(DELETE_OF, &[Text(cluster), Text(boundary)])
        .await?;
    Ok(())
}

/// Replaces every status of `boundary`'s policies in `cluster` with `statuses`.
pub(crate) async fn replace<C: Conn>(
    c: &mut C,
    cluster: &str,
    boundary: &str,
    statuses: &[PolicyStatusRecord],
) -> Result<()> {
    delete_of(c, cluster, boundary).await?;
    for status in statuses {
        let args = [
            Text(boundary),
            Text(&status.policy),
            Text(cluster),
            Text(&status.policy_etag),
            Text(&status.status),
            Text(&status.updated_at),
        ];
        c.execute(INSERT, &args).await?;
    }
    Ok(())
}

/// The boundary's policy statuses, by policy and cluster.
pub(crate) async fn of_boundary<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<PolicyStatusRecord>> {
    find_all(c, SELECT_OF_BOUNDARY, &[Text(boundary)], policy_status).await
}
