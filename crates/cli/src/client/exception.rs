//! `palisade exception request -f FILE` and `palisade exception approve B/NAME` (SPEC 7): a
//! developer's requests, and their approval by an admin or boundary-admin of the boundary.

use clap::Subcommand;
use palisade_api_types::view::ExceptionView;
use palisade_api_types::ExceptionDocument;
use reqwest::Method;

use super::preview::{documents, read_files};
use super::{encode, print_body, split_target, Api, Connection, Failure, Format, Outcome};
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

pub fn exception(connection: &Connection, command: &ExceptionCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        ExceptionCommand::Request { files } => {
            let texts = read_files(files)?;
            let mut answers = Vec::new();
            for (at, document) in documents::<ExceptionDocument>(&texts)? {
                let path = format!(
                    "/v1/boundaries/{}/exceptions/{}",
                    encode(&document.metadata.boundary),
                    encode(&document.metadata.name)
                );
                let spec = serde_json::to_value(&document.spec)
                    .map_err(|e| Failure(format!("{at}: cannot encode the spec: {e}")))?;
                let answer = api
                    .send_relocated(api.request(Method::PUT, &path).json(&spec), &|m| {
                        m.starts_with('/').then(|| format!("{at}: /spec{m}"))
                    })?;
                let view: ExceptionView = answer.decode()?;
                if connection.output == Format::Table {
                    println!(
                        "boundaryexception {}/{} {}",
                        view.boundary, view.name, view.status
                    );
                    for warning in view.warnings.iter().flatten() {
                        eprintln!(
                            "warning: boundaryexception {}/{}: {warning}",
                            view.boundary, view.name
                        );
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
            let path = format!(
                "/v1/boundaries/{}/exceptions/{}/approve",
                encode(p[0]),
                encode(p[1])
            );
            let answer = api.send(api.request(Method::POST, &path))?;
            let view: ExceptionView = answer.decode()?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
            println!(
                "boundaryexception {}/{} {} (approved by {}, until {})",
                view.boundary,
                view.name,
                view.status,
                view.approved_by.as_deref().unwrap_or("-"),
                view.expires_at
            );
        }
    }
    Ok(())
}
