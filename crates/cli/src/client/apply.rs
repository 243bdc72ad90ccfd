//! `palisade apply -f`: BoundaryPolicy documents to `POST /v1/apply`, all or nothing.

use clap::Args;
use palisade_api_types::view::ApplyResults;
use reqwest::Method;

use super::preview::{
    documents, preview_body, preview_documents, read_files, verdict_of, PolicyFiles, Verdict,
};
use super::{print_body, print_warnings, Api, Connection, Failure, Format};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub files: PolicyFiles,
    /// Validate, show what would change and preview what each policy would deny in the
    /// clusters; write nothing. Exit 0 when nothing would be denied, 1 when something would,
    /// 2 when the preview could not be made.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// `palisade apply`; with `--dry-run`, also the previews (see [`super::preview`]).
pub fn apply(args: &ApplyArgs) -> Result<Option<Verdict>, Failure> {
    let connection = &args.connection;
    let dry_run = args.dry_run;
    let api = Api::new(connection)?;
    let texts = read_files(&args.files.files)?;
    let mut text = String::new();
    for (_, content) in &texts {
        if !text.is_empty() {
            text.push_str("\n---\n");
        }
        text.push_str(content);
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
    if dry_run && connection.output != Format::Table {
        // One body: what would change and what each policy would deny.
        let documents = documents(&texts)?;
        let mut previews = Vec::new();
        for (_, document) in &documents {
            previews.push(preview_body(&api, document)?);
        }
        let verdict = verdict_of(&previews)?;
        print_body(
            connection.output,
            &serde_json::json!({"results": answer.body["results"], "previews": previews}),
        )?;
        return Ok(Some(verdict));
    }
    if connection.output != Format::Table {
        print_body(connection.output, &answer.body)?;
        return Ok(None);
    }
    let suffix = if dry_run { " (dry run)" } else { "" };
    for result in applied.results {
        let subject = format!("boundarypolicy {}/{}", result.boundary, result.name);
        println!("{subject} {}{suffix}", result.action);
        for warning in result.warnings {
            eprintln!("warning: {subject}: {warning}");
        }
    }
    if !dry_run {
        return Ok(None);
    }
    let documents = documents(&texts)?;
    Ok(Some(preview_documents(&api, Format::Table, &documents)?))
}
