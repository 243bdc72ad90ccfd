//! `palisade apply -f`: BoundaryPolicy documents to `POST /v1/apply`, all or nothing.

use std::path::PathBuf;

use clap::Args;
use reqwest::Method;

use super::{cell, print_body, print_warnings, Api, Connection, Failure, Format, Outcome};
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
    let (body, warnings) = api.send(
        api.request(Method::POST, path)
            .header("content-type", "application/yaml")
            .body(text),
    )?;
    print_warnings(&warnings);
    if connection.output != Format::Table {
        return print_body(connection.output, &body);
    }
    let suffix = if dry_run { " (dry run)" } else { "" };
    for result in body["results"].as_array().cloned().unwrap_or_default() {
        let subject = format!(
            "boundarypolicy {}/{}",
            cell(&result["boundary"]),
            cell(&result["name"])
        );
        println!("{subject} {}{suffix}", cell(&result["action"]));
        for warning in result["warnings"].as_array().cloned().unwrap_or_default() {
            eprintln!("warning: {subject}: {}", cell(&warning));
        }
    }
    Ok(())
}
