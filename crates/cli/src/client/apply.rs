//! `palisade apply -f`: BoundaryPolicy and BoundaryException documents to `POST /v1/apply`,
//! all or nothing.

use clap::Args;
use palisade_api_types::view::ApplyResults;
use reqwest::Method;

use super::preview::{
    documents, preview_body, preview_documents, read_files, verdict_of, PolicyFiles, Verdict,
};
use super::{print_body, print_warnings, printable, Answer, Api, Connection, Failure, Format};

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
    let (_, answer) = send_documents(&api, &texts, dry_run)?;
    let applied: ApplyResults = answer.decode()?;
    print_warnings(&answer.warnings);
    if dry_run && connection.output != Format::Table {
        // One body: what would change and what each policy would deny.
        let documents = policy_documents(&texts)?;
        let mut previews = Vec::new();
        for (at, document) in &documents {
            previews.push(preview_body(&api, at, document)?);
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
        let subject = format!(
            "{} {}/{}",
            result.kind.to_lowercase(),
            result.boundary,
            result.name
        );
        println!(
            "{} {}{suffix}",
            printable(&subject),
            printable(&result.action)
        );
        for warning in result.warnings {
            eprintln!("warning: {}: {}", printable(&subject), printable(&warning));
        }
    }
    if !dry_run {
        return Ok(None);
    }
    let documents = policy_documents(&texts)?;
    Ok(Some(preview_documents(&api, Format::Table, &documents)?))
}

/// The documents of `texts`, sent to `POST /v1/apply` (with `?dry_run=true` when `dry_run`):
/// the documents as read, each with where it came from (`file:index`), and the answer.
pub(super) fn send_documents(
    api: &Api<'_>,
    texts: &[(String, String)],
    dry_run: bool,
) -> Result<(Vec<(String, serde_yaml_ng::Value)>, Answer), Failure> {
    // Read here, so that a document that is not YAML is named by its file and the line in it
    // (as `check` names it), and sent as read, one after another, so that the server's
    // pointers (`/<n>/...`: the n-th document of the body) name a file and document too. The
    // server reads every document as a YAML value first as well: sending the values is sending
    // what it would have read.
    let read: Vec<(String, serde_yaml_ng::Value)> = documents(texts)?;
    let mut text = String::new();
    for (at, value) in &read {
        let document = serde_yaml_ng::to_string(value)
            .map_err(|e| Failure(format!("{at}: cannot encode the document: {e}")))?;
        text.push_str("---\n");
        text.push_str(&document);
    }
    let path = if dry_run {
        "/v1/apply?dry_run=true"
    } else {
        "/v1/apply"
    };
    let answer = api.send_relocated(
        api.request(Method::POST, path)
            .header("content-type", "application/yaml")
            .body(text),
        &|message| relocate(&read, message),
    )?;
    Ok((read, answer))
}

/// The BoundaryPolicy documents of the files (exceptions have nothing to preview).
fn policy_documents(
    texts: &[(String, String)],
) -> Result<Vec<(String, palisade_api_types::PolicyDocument)>, Failure> {
    let mut out = Vec::new();
    for (at, value) in documents::<serde_yaml_ng::Value>(texts)? {
        if value.get("kind").and_then(serde_yaml_ng::Value::as_str)
            == Some(palisade_api_types::exception::KIND)
        {
            continue;
        }
        let document =
            serde_yaml_ng::from_value(value).map_err(|e| Failure(format!("{at}: {e}")))?;
        out.push((at, document));
    }
    Ok(out)
}

/// The server's `/<n><pointer>: <message>` about the n-th document of the body, said of the
/// file and document it was read from: `<file>:<doc>: <pointer>: <message>`. None for a message
/// that names no document.
fn relocate<T>(read: &[(String, T)], message: &str) -> Option<String> {
    let rest = message.strip_prefix('/')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let (at, _) = read.get(rest[..digits].parse::<usize>().ok()?)?;
    let rest = &rest[digits..];
    if rest.starts_with('/') {
        Some(format!("{at}: {rest}"))
    } else if rest.starts_with(':') {
        Some(format!("{at}{rest}"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::relocate;

    #[test]
    fn a_pointer_into_the_body_names_the_file_and_document() {
        let read = [("a.yaml:0", ()), ("b.yaml:2", ())].map(|(at, v)| (at.to_owned(), v));
        for (message, expected) in [
            (
                "/1/spec/rules: too many",
                Some("b.yaml:2: /spec/rules: too many"),
            ),
            ("/0: not a mapping", Some("a.yaml:0: not a mapping")),
            ("/2/spec: no such document", None),
            ("/1x: not a pointer into the body", None),
            ("the body holds no document", None),
            ("/12", None),
        ] {
            assert_eq!(relocate(&read, message).as_deref(), expected, "{message}");
        }
    }
}
