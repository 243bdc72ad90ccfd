//! `palisade preview -f FILE` and the preview `palisade apply --dry-run` prints: for every
//! BoundaryPolicy document, `POST /v1/boundaries/{b}/policies/{p}/preview` with its spec.
//!
//! Exit code: 0 when no document would deny anything, 1 when one would, 2 when a preview could
//! not be made (bad input, an unreachable server, a cluster that could not be read).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use palisade_api_types::view::{Finding, Preview};
use palisade_api_types::PolicyDocument;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{printable, Api, Connection, Failure, Format};
use crate::input::{located, read_text, shown, yaml_files};

/// `-f FILE|DIR|-`, repeatable: the BoundaryPolicy documents of `apply` and `preview`.
#[derive(Debug, Args)]
pub struct PolicyFiles {
    /// A file of BoundaryPolicy documents (several may be separated by `---`), a directory
    /// whose *.yaml/*.yml files are all read, or `-` for standard input. Repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PreviewArgs {
    #[command(flatten)]
    pub files: PolicyFiles,
    #[command(flatten)]
    pub connection: Connection,
}

/// What the previews found, for the exit code.
#[derive(Debug, Default)]
pub struct Verdict {
    pub denied: u64,
    pub unreadable: Vec<String>,
}

impl Verdict {
    pub fn exit_code(&self) -> ExitCode {
        if !self.unreadable.is_empty() {
            eprintln!(
                "error: the preview is incomplete: {} could not be read",
                self.unreadable.join(", ")
            );
            ExitCode::from(2)
        } else if self.denied > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// Every file `files` name (directories expanded), read once: (name as shown, content).
pub fn read_files(files: &[PathBuf]) -> Result<Vec<(String, String)>, Failure> {
    let mut out = Vec::new();
    for file in files {
        for path in yaml_files(file).map_err(Failure)? {
            let content = read_text(&path).map_err(Failure)?;
            out.push((shown(&path), content));
        }
    }
    Ok(out)
}

/// The documents of the files read, each read as `T` (a `PolicyDocument`, or the YAML value
/// `apply` sends) with where it came from (`file:index`). A document that cannot be read is an
/// error naming its file and the line in it, as `check` names it.
pub fn documents<T: DeserializeOwned>(
    texts: &[(String, String)],
) -> Result<Vec<(String, T)>, Failure> {
    let mut out = Vec::new();
    for (name, content) in texts {
        for (index, document) in palisade_api_types::yaml::each_document::<T>(content) {
            let document = document.map_err(|e| Failure(located(name, &e, index)))?;
            out.push((format!("{name}:{index}"), document));
        }
    }
    if out.is_empty() {
        return Err(Failure("no BoundaryPolicy document was given".into()));
    }
    Ok(out)
}

/// The preview of one document, found at `at` (`file:index`), whole: every page the API
/// answered (it pages the findings like a list), joined into one body without `continue`. A
/// spec the server refuses is named by the document's place and its pointer in the document
/// (`/spec/...`).
pub(super) fn preview_body(
    api: &Api<'_>,
    at: &str,
    document: &PolicyDocument,
) -> Result<Value, Failure> {
    let path = format!(
        "/v1/boundaries/{}/policies/{}/preview",
        document.metadata.boundary, document.metadata.name
    );
    let spec = serde_json::to_vec(&document.spec)
        .map_err(|e| Failure(format!("cannot encode the spec: {e}")))?;
    let mut whole: Option<Value> = None;
    let mut next: Option<String> = None;
    loop {
        let url = match &next {
            None => format!("{path}?limit=1000"),
            Some(token) => format!("{path}?limit=1000&continue={}", super::encode(token)),
        };
        let answer = api.send_relocated(
            api.request(Method::POST, &url)
                .header("content-type", "application/json")
                .body(spec.clone()),
            &|message| {
                Some(if message.starts_with('/') {
                    format!("{at}: /spec{message}")
                } else {
                    format!("{at}: {message}")
                })
            },
        )?;
        // Checked here, so that what is printed can be read.
        let page = answer.decode::<Preview>()?;
        next = page.continue_token;
        let mut body = answer.body;
        if let Some(fields) = body.as_object_mut() {
            fields.remove("continue");
        }
        whole = Some(match whole {
            None => body,
            Some(mut whole) => {
                join_page(&mut whole, body);
                whole
            }
        });
        if next.is_none() {
            break;
        }
    }
    whole.ok_or_else(|| Failure("the preview answered no page".into()))
}

/// Appends a later page's findings to the preview read so far: each cluster's `denied`,
/// `warned` and `loosened` to the same cluster's, and `grandfathered`. Every page carries
/// every cluster and the whole summary, so the rest is kept from the first page.
fn join_page(whole: &mut Value, page: Value) {
    let append = |into: &mut Value, from: &Value| {
        if let (Some(into), Some(from)) = (into.as_array_mut(), from.as_array()) {
            into.extend(from.iter().cloned());
        }
    };
    let clusters = page["clusters"].as_array().cloned().unwrap_or_default();
    for cluster in &clusters {
        let same = whole["clusters"]
            .as_array_mut()
            .and_then(|list| list.iter_mut().find(|c| c["cluster"] == cluster["cluster"]));
        if let Some(same) = same {
            for list in ["denied", "warned", "loosened"] {
                append(&mut same[list], &cluster[list]);
            }
        }
    }
    append(&mut whole["grandfathered"], &page["grandfathered"]);
}

/// What the previews say, for the exit code.
pub fn verdict_of(bodies: &[Value]) -> Result<Verdict, Failure> {
    let mut verdict = Verdict::default();
    for body in bodies {
        let preview: Preview = super::decode_at("the preview", "", body)?;
        verdict.denied += preview.summary.objects;
        verdict.unreadable.extend(
            preview
                .clusters
                .iter()
                .filter(|c| c.error.is_some())
                .map(|c| format!("cluster {}", c.cluster)),
        );
    }
    Ok(verdict)
}

/// Previews every document; prints the previews (a table, or `{"items": [...]}`).
pub(super) fn preview_documents(
    api: &Api<'_>,
    format: Format,
    documents: &[(String, PolicyDocument)],
) -> Result<Verdict, Failure> {
    let mut bodies = Vec::new();
    for (at, document) in documents {
        let body = preview_body(api, at, document)?;
        if format == Format::Table {
            let preview: Preview = super::decode_at("the preview", "", &body)?;
            print_preview(&preview);
        }
        bodies.push(body);
    }
    if format != Format::Table {
        super::print_body(
            format,
            &serde_json::json!({ "items": Value::Array(bodies.clone()) }),
        )?;
    }
    verdict_of(&bodies)
}

fn workload(finding: &Finding) -> String {
    let replicas = match finding.workload.replicas {
        1 => "1 replica".to_owned(),
        n => format!("{n} replicas"),
    };
    if finding.owners.is_empty() {
        replicas
    } else {
        format!(
            "{}/{}, {replicas}",
            finding.workload.kind, finding.workload.name
        )
    }
}

fn print_findings<'f>(label: &str, cluster: &str, findings: impl IntoIterator<Item = &'f Finding>) {
    for f in findings {
        let stage = f
            .stage
            .map(|s| format!(" at stage {s}"))
            .unwrap_or_default();
        let line = format!(
            "{label} {cluster} {}/{}/{} ({}){stage}: {}",
            f.namespace,
            f.kind,
            f.name,
            workload(f),
            f.message
        );
        println!("{}", printable(&line));
    }
}

/// The table form: a summary line, then one line per finding.
pub fn print_preview(preview: &Preview) {
    let s = &preview.summary;
    let read: Vec<&str> = preview
        .clusters
        .iter()
        .filter(|c| c.error.is_none())
        .map(|c| c.cluster.as_str())
        .collect();
    let read = if read.is_empty() {
        "none".to_owned()
    } else {
        read.join(", ")
    };
    println!(
        "preview {}/{} ({}): {} denied ({} workloads, {} replicas at risk), {} warned, {} loosened, {} resources grandfathered; clusters read: {read}",
        preview.boundary,
        preview.policy,
        preview.mode,
        s.objects,
        s.workloads,
        s.replicas_at_risk,
        s.warned,
        s.loosened,
        s.resources_grandfathered,
    );
    for cluster in &preview.clusters {
        if let Some(error) = &cluster.error {
            println!(
                "{}",
                printable(&format!("unreadable {}: {error}", cluster.cluster))
            );
            continue;
        }
        print_findings(
            "denied",
            &cluster.cluster,
            cluster.denied.iter().map(|d| &d.finding),
        );
        print_findings("warned", &cluster.cluster, &cluster.warned);
        print_findings("loosened", &cluster.cluster, &cluster.loosened);
    }
    for resource in &preview.grandfathered {
        let line = format!(
            "grandfathered {}/{} ({}): {}",
            resource.resource_type,
            resource.name,
            resource.plans.join(", "),
            resource.message
        );
        println!("{}", printable(&line));
    }
}

/// `palisade preview -f FILE`.
pub fn preview(args: &PreviewArgs) -> ExitCode {
    let run = || -> Result<Verdict, Failure> {
        let api = Api::new(&args.connection)?;
        let documents = documents(&read_files(&args.files.files)?)?;
        preview_documents(&api, args.connection.output, &documents)
    };
    match run() {
        Ok(verdict) => verdict.exit_code(),
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_join_into_the_whole_preview() {
        let finding = |name: &str| serde_json::json!({"name": name});
        let mut whole = serde_json::json!({
            "summary": {"objects": 3},
            "clusters": [
                {"cluster": "a", "denied": [finding("1"), finding("2")], "warned": [], "loosened": []},
                {"cluster": "b", "denied": [], "warned": [], "loosened": []},
            ],
            "grandfathered": [],
        });
        join_page(
            &mut whole,
            serde_json::json!({
                "summary": {"objects": 3},
                "clusters": [
                    {"cluster": "a", "denied": [finding("3")], "warned": [], "loosened": []},
                    {"cluster": "b", "denied": [], "warned": [], "loosened": [finding("4")]},
                ],
                "grandfathered": [{"type": "app", "name": "web"}],
            }),
        );
        assert_eq!(
            whole,
            serde_json::json!({
                "summary": {"objects": 3},
                "clusters": [
                    {"cluster": "a", "denied": [finding("1"), finding("2"), finding("3")],
                     "warned": [], "loosened": []},
                    {"cluster": "b", "denied": [], "warned": [], "loosened": [finding("4")]},
                ],
                "grandfathered": [{"type": "app", "name": "web"}],
            })
        );
    }
}
