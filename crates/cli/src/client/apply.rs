//! `palisade apply -f`: BoundaryPolicy documents to `POST /v1/apply`, all or nothing.

use std::path::PathBuf;

use clap::Args;
use palisade_api_types::view::ApplyResults;
use reqwest::Method;

use super::{print_body, print_warnings, Api, Connection, Failure, Format, Outcome};
use crate::input::{read_text, yaml_files};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A file of BoundaryPolicy documents (several may be separated by `---`), a directory
    /// whose *.yaml/*.yml files are all read, or `-` for standard input. Repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    pub files: Vec<PathBuf>,
    /// Validate and show what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub connection: Connection,
}

pub fn apply(args: &ApplyArgs) -> Outcome {
    let connection = &args.connection;
    let dry_run = args.dry_run;
    let api = Api::new(connection)?;
    let mut text = String::new();
    for file in &args.files {
        for path in yaml_files(file).map_err(Failure)? {
            let content = read_text(&path).map_err(Failure)?;
            if !text.is_empty() {
                text.push_str("\n---\n");
            }
            text.push_str(&content);
        }
    }
    let path = if dry_run {
        "/v1/apply?dry_run=true"
    } else {
        "/v1/apply"
    };
    let answer = api.send(
        api.request(Method::POST, path)
            .header("content-type", "application/yaml")
            .body(text),
    )?;
    let applied: ApplyResults = answer.decode()?;
    print_warnings(&answer.warnings);
    if connection.output != Format::Table {
        return print_body(connection.output, &answer.body);
    }
    let suffix = if dry_run { " (dry run)" } else { "" };
    for result in applied.results {
        let subject = format!("boundarypolicy {}/{}", result.boundary, result.name);
        println!("{subject} {}{suffix}", result.action);
        for warning in result.warnings {
            eprintln!("warning: {subject}: {warning}");
        }
    }
    Ok(())
}
