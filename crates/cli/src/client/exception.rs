//! `palisade exception request -f FILE` and `palisade exception approve B/NAME` (SPEC 7): a
//! developer's requests, and their approval by an admin or boundary-admin of the boundary.

use clap::Subcommand;
use palisade_api_types::view::ExceptionView;
use palisade_api_types::ExceptionDocument;
use reqwest::Method;

use super::preview::{documents, read_files};
use super::{
    exception_path, print_body, printable, printable_lines, split_target, Api, Connection, Failure,
    Format, Outcome,
};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum ExceptionCommand {
    /// Save the BoundaryException documents of the files; a developer's are requests that
    /// apply nothing until approved.
    ///
    /// Save each BoundaryException document of the files (`-` for standard input) with `PUT
    /// /v1/boundaries/{b}/exceptions/{e}`. Written with a developer token, each is a request
    /// (`status: requested`) that lets nothing past until an admin or boundary-admin of the
    /// boundary approves it; written by them, it is active at once. Prints one line per
    /// document: `boundaryexception shop/legacy-nginx requested` (or `active`).
    #[command(after_help = help::EXCEPTION_REQUEST)]
    Request {
        /// A file of BoundaryException documents, a directory of such files, or `-`.
        #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
        files: Vec<std::path::PathBuf>,
    },
    /// Approve a requested exception (admin or boundary-admin; not the requester).
    #[command(after_help = help::EXCEPTION_APPROVE)]
    Approve {
        /// The boundary and the exception, e.g. shop/legacy-nginx.
        #[arg(value_name = "BOUNDARY/NAME")]
        target: String,
    },
}

/// `text` with each line indented by two spaces.
fn indented(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

pub fn exception(connection: &Connection, command: &ExceptionCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        ExceptionCommand::Request { files } => {
            let texts = read_files(files)?;
            let mut answers = Vec::new();
            for (at, document) in documents::<ExceptionDocument>(&texts)? {
                let path = exception_path(&document.metadata.boundary, &document.metadata.name);
                let spec = serde_json::to_value(&document.spec)
                    .map_err(|e| Failure(format!("{at}: cannot encode the spec: {e}")))?;
                let answer = api
                    .send_relocated(api.request(Method::PUT, &path).json(&spec), &|m| {
                        m.starts_with('/').then(|| format!("{at}: /spec{m}"))
                    })?;
                let view: ExceptionView = answer.decode()?;
                if connection.output == Format::Table {
                    let subject = format!("boundaryexception {}/{}", view.boundary, view.name);
                    println!("{}", printable(&format!("{subject} {}", view.status)));
                    for warning in view.warnings.iter().flatten() {
                        eprintln!("{}", printable(&format!("warning: {subject}: {warning}")));
                    }
                }
                answers.push(answer.body);
            }
            if connection.output != Format::Table {
                return print_body(connection.output, &serde_json::json!({ "items": answers }));
            }
        }
        ExceptionCommand::Approve { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let path = exception_path(p[0], p[1]);
            // What is approved is what was read and shown: the spec read here, by its etag.
            let read: ExceptionView = api.get(&path)?.decode()?;
            let spec = serde_yaml_ng::to_string(&read.spec)
                .map_err(|e| Failure(format!("cannot show the spec of {target}: {e}")))?;
            let shown = format!(
                "approving boundaryexception {}/{} ({}, requested by {}), this spec:\n{}",
                read.boundary,
                read.name,
                read.status,
                read.requested_by,
                indented(&spec)
            );
            if connection.output == Format::Table {
                print!("{}", printable_lines(&shown));
            } else {
                // Standard output stays the API's body.
                eprint!("{}", printable_lines(&shown));
            }
            let answer = api.send(
                api.request(Method::POST, &format!("{path}/approve"))
                    .header("if-match", format!("\"{}\"", read.etag)),
            )?;
            let Some(view) = answer.for_table::<ExceptionView>(connection.output)? else {
                return Ok(());
            };
            let line = format!(
                "boundaryexception {}/{} {} (approved by {}, until {})",
                view.boundary,
                view.name,
                view.status,
                view.approved_by.as_deref().unwrap_or("-"),
                view.expires_at
            );
            println!("{}", printable(&line));
        }
    }
    Ok(())
}
