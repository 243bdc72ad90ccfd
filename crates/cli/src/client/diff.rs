//! `palisade diff -f`: the stored BoundaryPolicy and BoundaryException documents against the
//! files, as unified diffs (as `kubectl diff`).
//!
//! The server decides what differs: the files go to `POST /v1/apply?dry_run=true` first, so a
//! document `apply` would report `unchanged` prints nothing, and the exit code agrees with
//! `apply` exactly. Both sides are then printed as the normalised YAML that `get policy -o
//! yaml` prints: what the server would store, not what the file spells (`docker.io/library/`
//! is shown as `docker.io/library`, `mode: enforce` is always written).

use std::process::ExitCode;

use clap::Args;
use palisade_api_types::document::{spec_of, PolicyMetadata};
use palisade_api_types::exception::ExceptionSpec;
use palisade_api_types::view::{ApplyResult, ApplyResults, ExceptionView};
use palisade_api_types::{ExceptionDocument, PolicyDocument};
use palisade_policy::{Catalog, Name};
use serde::Serialize;

use super::apply::send_documents;
use super::get::Policy;
use super::preview::{read_files, PolicyFiles};
use super::{
    decode_at, encode, exception_path, print_warnings, printable, printable_lines, unreadable, Api,
    Connection, Failure, Format,
};

#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub files: PolicyFiles,
    #[command(flatten)]
    pub connection: Connection,
}

/// `palisade diff`: exit 0 when every document is stored as the files say, 1 when one differs
/// (or is not stored yet), 2 when the files or the server could not be read.
pub fn diff(args: &DiffArgs) -> ExitCode {
    match differences(args) {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::from(1),
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// Prints the diffs; true when something differs.
fn differences(args: &DiffArgs) -> Result<bool, Failure> {
    if args.connection.output != Format::Table {
        return Err(Failure(
            "diff prints unified diffs only; -o json|yaml is not supported".to_owned(),
        ));
    }
    let api = Api::new(&args.connection)?;
    let texts = read_files(&args.files.files)?;
    let (read, answer) = send_documents(&api, &texts, true)?;
    let results: ApplyResults = answer.decode()?;
    print_warnings(&answer.warnings);
    if results.results.len() != read.len() {
        return Err(unreadable(
            &answer.request,
            format_args!(
                "{} results for {} documents",
                results.results.len(),
                read.len()
            ),
        ));
    }
    let mut differs = false;
    for ((at, value), result) in read.into_iter().zip(&results.results) {
        let subject = format!(
            "{} {}/{}",
            result.kind.to_lowercase(),
            result.boundary,
            result.name
        );
        if result.action == "unchanged" {
            continue;
        }
        // The save warnings of what would change (those of an unchanged document were seen
        // when it was saved).
        for warning in &result.warnings {
            eprintln!("warning: {}: {}", printable(&subject), printable(warning));
        }
        differs = true;
        let is_exception = result.kind == palisade_api_types::exception::KIND;
        let file = if is_exception {
            exception_text(&at, value)?
        } else {
            policy_text(&at, value)?
        };
        let (live, live_name, status) = match result.action.as_str() {
            "created" => (String::new(), "not stored", None),
            _ if is_exception => {
                let (text, status) = stored_exception(&api, result)?;
                (text, "live", Some(status))
            }
            _ => (stored_policy(&api, result)?, "live", None),
        };
        let diff = similar::TextDiff::from_lines(&live, &file);
        let printed = diff
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("{subject} ({live_name})"),
                &format!("{subject} ({at})"),
            )
            .to_string();
        if printed.is_empty() {
            // The same document, yet apply would write it: a requested exception it would
            // approve, or a difference this client does not show.
            match status {
                Some(status) if status == "requested" => {
                    println!("{subject}: the same document; apply would approve the request")
                }
                _ => println!(
                    "{subject}: the same document as shown; apply would still write it ({})",
                    result.action
                ),
            }
        } else {
            print!("{}", printable_lines(&printed));
        }
    }
    Ok(differs)
}

/// Why a document of the files cannot be shown.
fn unusable(at: &str, why: impl std::fmt::Display) -> Failure {
    Failure(format!("{at}: {why}"))
}

fn yaml(at: &str, document: &impl Serialize) -> Result<String, Failure> {
    serde_yaml_ng::to_string(document)
        .map_err(|e| unusable(at, format_args!("cannot encode the document: {e}")))
}

/// A BoundaryPolicy document of the files as the server stores it: its spec validated and
/// written back (the server's normalisations: a registry prefix's trailing `/` dropped,
/// `value: ""` as any value, `mode: enforce` written out). A spec this client's catalog cannot
/// validate (the server's has other plans) is shown as written.
fn policy_text(at: &str, value: serde_yaml_ng::Value) -> Result<String, Failure> {
    let mut document: PolicyDocument =
        serde_yaml_ng::from_value(value).map_err(|e| unusable(at, e))?;
    if let Ok(valid) = document.validate(&Catalog::builtin()) {
        document.spec = spec_of(&valid.policy);
    }
    yaml(at, &document)
}

/// A BoundaryException document of the files as the server stores it: `expiresAt` in the
/// stored time format and the reason as kept; metadata holds its name and boundary only.
fn exception_text(at: &str, value: serde_yaml_ng::Value) -> Result<String, Failure> {
    let mut document: ExceptionDocument =
        serde_yaml_ng::from_value(value).map_err(|e| unusable(at, e))?;
    let name = Name::parse(&document.metadata.name)
        .map_err(|e| unusable(at, format_args!("/metadata/name: {e}")))?;
    let exception = document
        .spec
        .decode_stored(name)
        .map_err(|e| unusable(at, format_args!("/spec{e}")))?;
    // As the server keeps it: whole seconds are written without `.000`.
    document.spec.expires_at = exception.expires_at.replace(".000Z", "Z");
    document.spec.reason = exception.reason;
    document.metadata = PolicyMetadata {
        name: document.metadata.name,
        boundary: document.metadata.boundary,
        labels: Default::default(),
        annotations: Default::default(),
    };
    yaml(at, &document)
}

/// The stored policy of `result`, as `get policy -o yaml` prints it.
fn stored_policy(api: &Api<'_>, result: &ApplyResult) -> Result<String, Failure> {
    let answer = api.get(&format!(
        "/v1/boundaries/{}/policies/{}",
        encode(&result.boundary),
        encode(&result.name)
    ))?;
    let policy = Policy::read(&answer.request, "", answer.decode()?)?;
    yaml(&answer.request, &policy.document())
}

/// The stored exception of `result` as a document, and its status (`requested`, `active`,
/// `expired`).
fn stored_exception(api: &Api<'_>, result: &ApplyResult) -> Result<(String, String), Failure> {
    let answer = api.get(&exception_path(&result.boundary, &result.name))?;
    let view: ExceptionView = answer.decode()?;
    let spec: ExceptionSpec = decode_at(&answer.request, "spec", &view.spec)?;
    let document = ExceptionDocument {
        api_version: palisade_api_types::document::API_VERSION.to_owned(),
        kind: palisade_api_types::exception::KIND.to_owned(),
        metadata: PolicyMetadata {
            name: view.name,
            boundary: view.boundary,
            labels: Default::default(),
            annotations: Default::default(),
        },
        spec,
    };
    Ok((yaml(&answer.request, &document)?, view.status))
}
