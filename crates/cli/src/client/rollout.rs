//! `palisade rollout status|promote|abort B/P` (SPEC 8): where a policy's staged rollout is,
//! and moving it on or back by hand.

use clap::{Args, Subcommand};
use palisade_api_types::view::{PolicyView, RolloutView};
use reqwest::Method;

use super::{encode, printable, split_target, Api, Connection, Outcome};

#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Where the rollout of the policy's current version is.
    #[command(after_help = crate::help::ROLLOUT)]
    Status(RolloutArgs),
    /// Move the rollout to its next stage now (after the last: done).
    #[command(after_help = crate::help::ROLLOUT)]
    Promote(RolloutArgs),
    /// Put the previous version back everywhere; the version stays in the history, aborted.
    #[command(after_help = crate::help::ROLLOUT)]
    Abort(RolloutArgs),
}

#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The boundary and the policy, e.g. shop/trusted.
    #[arg(value_name = "BOUNDARY/POLICY")]
    pub target: String,
    #[command(flatten)]
    pub connection: Connection,
}

/// A rollout in one line, as `palisade get policies` and `palisade rollout` print it:
/// `rolling out v4: stage 2/3, 0 denials, next 14:00` (UTC), `rolling out v4: stage 2/3,
/// paused: 3 requests denied`, `v4 rolled out`, `v4 aborted: v3 in force`.
pub(crate) fn rollout_line(rollout: &RolloutView) -> String {
    let version = rollout.version;
    match rollout.state.as_str() {
        "done" => format!("v{version} rolled out"),
        "aborted" => match rollout.previous_version {
            Some(previous) => format!("v{version} aborted: v{previous} in force"),
            None => format!("v{version} aborted: not in force"),
        },
        state => {
            let mut line = format!(
                "rolling out v{version}: stage {}/{}",
                rollout.stage, rollout.stages
            );
            match (&rollout.reason, &rollout.next_promotion_at) {
                (Some(reason), _) if state == "paused" => {
                    line.push_str(&format!(", {reason}"));
                }
                (_, Some(next)) => line.push_str(&format!(
                    ", {} denials, next {}",
                    rollout.denials,
                    clock(next)
                )),
                _ => line.push_str(&format!(", {} denials, waits for promote", rollout.denials)),
            }
            line
        }
    }
}

/// `14:00` of an RFC 3339 time (UTC, as the server writes it); the text itself otherwise.
fn clock(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|t| t.with_timezone(&chrono::Utc).format("%H:%M").to_string())
        .unwrap_or_else(|_| at.to_owned())
}

pub fn rollout(command: &RolloutCommand) -> Outcome {
    let (args, step) = match command {
        RolloutCommand::Status(args) => (args, None),
        RolloutCommand::Promote(args) => (args, Some("promote")),
        RolloutCommand::Abort(args) => (args, Some("abort")),
    };
    let api = Api::new(&args.connection)?;
    let p = split_target(&args.target, 2, "BOUNDARY/POLICY")?;
    let path = format!("/v1/boundaries/{}/policies/{}", encode(p[0]), encode(p[1]));
    let subject = format!("boundarypolicy {}/{}", p[0], p[1]);
    let Some(step) = step else {
        let Some(policy) = api
            .get(&path)?
            .for_table::<PolicyView>(args.connection.output)?
        else {
            return Ok(());
        };
        let line = match &policy.rollout {
            Some(rollout) => rollout_line(rollout),
            None => format!("v{} in force everywhere: no rollout", policy.version),
        };
        println!("{}", printable(&format!("{subject} {line}")));
        return Ok(());
    };
    let answer = api.send(api.request(Method::POST, &format!("{path}/rollout/{step}")))?;
    let Some(rollout) = answer.for_table::<RolloutView>(args.connection.output)? else {
        return Ok(());
    };
    let done = if step == "promote" {
        "promoted"
    } else {
        "aborted"
    };
    println!(
        "{}",
        printable(&format!("{subject} {done}: {}", rollout_line(&rollout)))
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mk_rollout(state: &str) -> RolloutView {
        RolloutView {
            version: 4,
            previous_version: Some(3),
            state: state.to_owned(),
            stage: 2,
            stages: 3,
            started_at: "2026-12-07T13:00:00Z".to_owned(),
            stage_started_at: "2026-12-07T13:00:00Z".to_owned(),
            denials: 0,
            next_promotion_at: Some("2026-12-07T14:00:00Z".to_owned()),
            reason: None,
        }
    }

    #[test]
    fn a_rollout_in_one_line() {
        assert_eq!(
            rollout_line(&mk_rollout("running")),
            "rolling out v4: stage 2/3, 0 denials, next 14:00"
        );
        let manual = RolloutView {
            next_promotion_at: None,
            ..mk_rollout("running")
        };
        assert_eq!(
            rollout_line(&manual),
            "rolling out v4: stage 2/3, 0 denials, waits for promote"
        );
        let paused = RolloutView {
            next_promotion_at: None,
            denials: 3,
            reason: Some("paused: 3 requests denied".to_owned()),
            ..mk_rollout("paused")
        };
        assert_eq!(
            rollout_line(&paused),
            "rolling out v4: stage 2/3, paused: 3 requests denied"
        );
        assert_eq!(rollout_line(&mk_rollout("done")), "v4 rolled out");
        assert_eq!(
            rollout_line(&mk_rollout("aborted")),
            "v4 aborted: v3 in force"
        );
    }
}
