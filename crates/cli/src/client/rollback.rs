//! `palisade rollback B/P --to N` (SPEC 8): the spec of version N of a policy becomes its
//! current one, as a new version, at once.

use clap::Args;
use palisade_api_types::view::{PolicyView, RollbackRequest};
use reqwest::Method;

use super::{encode, printable, split_target, Api, Connection, Failure, Outcome};

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The boundary and the policy, e.g. shop/trusted.
    #[arg(value_name = "BOUNDARY/POLICY")]
    pub target: String,
    /// The version whose spec becomes the current one (see `palisade describe policy`).
    #[arg(long = "to", value_name = "VERSION")]
    pub to: i64,
    /// Roll it out by the stages of the policy's spec.rollout instead of at once.
    #[arg(long)]
    pub staged: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// What a rollback did, in one line: `rolled back to version 1: now version 3`, or
/// `unchanged` when the policy's spec was that version's already.
pub(crate) fn outcome_line(before: &PolicyView, after: &PolicyView, to: i64) -> String {
    let subject = format!("boundarypolicy {}/{}", after.boundary, after.name);
    if after.version == before.version {
        format!(
            "{subject} unchanged: version {} has the spec of version {to} already",
            after.version
        )
    } else {
        format!(
            "{subject} rolled back to version {to}: now version {}",
            after.version
        )
    }
}

pub fn rollback(args: &RollbackArgs) -> Outcome {
    let api = Api::new(&args.connection)?;
    let p = split_target(&args.target, 2, "BOUNDARY/POLICY")?;
    let path = format!("/v1/boundaries/{}/policies/{}", encode(p[0]), encode(p[1]));
    // The version rolled back from is the one read here: a change in between is a 412.
    let before: PolicyView = api.get(&path)?.decode()?;
    let request = RollbackRequest {
        version: args.to,
        staged: args.staged.then_some(true),
    };
    let body = serde_json::to_value(&request)
        .map_err(|e| Failure(format!("cannot encode the request: {e}")))?;
    let answer = api.send_relocated(
        api.request(Method::POST, &format!("{path}/rollback"))
            .header("if-match", format!("\"{}\"", before.etag))
            .json(&body),
        &|m| m.strip_prefix("/version: ").map(|m| format!("--to: {m}")),
    )?;
    let Some(after) = answer.for_table::<PolicyView>(args.connection.output)? else {
        return Ok(());
    };
    println!("{}", printable(&outcome_line(&before, &after, args.to)));
    let subject = format!("boundarypolicy {}/{}", after.boundary, after.name);
    for warning in after.warnings.iter().flatten() {
        eprintln!("{}", printable(&format!("warning: {subject}: {warning}")));
    }
    Ok(())
}
