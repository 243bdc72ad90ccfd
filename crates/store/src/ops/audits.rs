//! The audit's reports: per policy and cluster, what the policy's rules find among the objects
//! already stored there. Written only by the reconciler.

use super::find_all;
use crate::sql::record;
use crate::sql::{
    Arg::{Int, OptText, Text},
    Conn, Fields,
};
use crate::{AuditRecord, Result};

const DELETE_OF: &str = "DELETE FROM audit_report WHERE cluster = $1 AND boundary = $2";
const INSERT: &str = "INSERT INTO audit_report \
     (boundary, policy, cluster, policy_etag, taken_at, error, checked, violations, findings) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
const SELECT_OF_POLICY: &str = "SELECT boundary, policy, cluster, policy_etag, taken_at, error, \
     checked, violations, findings \
     FROM audit_report WHERE boundary = $1 AND policy = $2 ORDER BY cluster";

fn audit(row: &dyn Fields) -> sqlx::Result<AuditRecord> {
    record! { row, AuditRecord {
        boundary: text, policy: text, cluster: text, policy_etag: text, taken_at: text,
        error: opt_text, checked: int, violations: int, findings_json: text("findings"),
    } }
}

/// Replaces every report of `boundary`'s policies in `cluster` with `reports`.
pub(crate) async fn replace<C: Conn>(
    c: &mut C,
    cluster: &str,
    boundary: &str,
    reports: &[AuditRecord],
) -> Result<()> {
    c.execute(DELETE_OF, &[Text(cluster), Text(boundary)])
        .await?;
    for report in reports {
        let args = [
            Text(boundary),
            Text(&report.policy),
            Text(cluster),
            Text(&report.policy_etag),
            Text(&report.taken_at),
            OptText(report.error.as_deref()),
            Int(report.checked),
            Int(report.violations),
            Text(&report.findings_json),
        ];
        c.execute(INSERT, &args).await?;
    }
    Ok(())
}

/// The reports of one policy, by cluster.
pub(crate) async fn of_policy<C: Conn>(
    c: &mut C,
    boundary: &str,
    policy: &str,
) -> Result<Vec<AuditRecord>> {
    find_all(c, SELECT_OF_POLICY, &[Text(boundary), Text(policy)], audit).await
}
