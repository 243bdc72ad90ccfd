//! Client commands: talk to a palisade server named by `PALISADE_URL` with the token in
//! `PALISADE_TOKEN`. Output is a table, or the API's JSON or YAML bodies with `-o`. Every
//! failure is one line on stderr and exit code 1.

mod admin;
mod apply;
mod delete;
mod get;
mod resource;
mod token;
mod version;

pub use admin::{boundary, cluster, namespace, BoundaryCommand, ClusterCommand, NamespaceCommand};
pub use apply::{apply, ApplyArgs};
pub use delete::{delete, DeleteKind};
pub use get::{get, Kind};
pub use resource::{resource, ResourceCommand};
pub use token::{token, TokenCommand};
pub use version::{version, VersionArgs};

use clap::{Args, ValueEnum};
use reqwest::blocking::{Client, RequestBuilder};
use reqwest::Method;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum Format {
    /// Columns for people (the default).
    #[default]
    Table,
    /// The API's JSON body.
    Json,
    /// The API's body as YAML.
    Yaml,
}

/// Where the server is and who is calling; read from the environment unless given.
#[derive(Debug, Args)]
pub struct Connection {
    /// The palisade server's URL.
    #[arg(
        long,
        visible_alias = "server",
        env = "PALISADE_URL",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL",
        global = true,
        help_heading = "Global Options"
    )]
    url: String,
    /// An API token (`palisade serve` writes the first admin token to
    /// <data-dir>/admin.token).
    #[arg(
        long,
        env = "PALISADE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        global = true,
        help_heading = "Global Options"
    )]
    token: Option<String>,
    /// Output format.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value_t = Format::Table,
        global = true,
        display_order = 100
    )]
    output: Format,
}

/// A failure to print as one line.
pub struct Failure(pub String);

type Outcome = Result<(), Failure>;

/// Why a request did not reach palisade, in words: connection refused, name not resolved,
/// timed out, TLS verification failed, or an unusable URL.
fn unreachable_cause(error: &reqwest::Error) -> String {
    let cause = palisade_reconciler::cause::transport(error);
    if error.is_builder() {
        format!("the URL is not valid ({cause})")
    } else if error.is_timeout() {
        "timed out".to_owned()
    } else {
        cause
    }
}

struct Api<'c> {
    client: Client,
    connection: &'c Connection,
}

impl<'c> Api<'c> {
    fn new(connection: &'c Connection) -> Result<Self, Failure> {
        let client = Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| Failure(format!("cannot set up HTTP: {e}")))?;
        Ok(Api { client, connection })
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{}", self.connection.url.trim_end_matches('/'), path);
        let mut request = self.client.request(method, url);
        if let Some(token) = &self.connection.token {
            request = request.bearer_auth(token.trim());
        }
        request
    }

    /// Sends a request; returns the JSON body (Null when empty) and the Warning headers.
    fn send(&self, request: RequestBuilder) -> Result<(Value, Vec<String>), Failure> {
        let response = request.send().map_err(|e| {
            Failure(format!(
                "cannot reach palisade at {}: {}",
                self.connection.url,
                unreachable_cause(&e)
            ))
        })?;
        let status = response.status();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(warning_text)
            .collect();
        let text = response
            .text()
            .map_err(|e| Failure(format!("cannot read the answer: {e}")))?;
        let body: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok((body, warnings));
        }
        let code = body["error"]["code"].as_str().unwrap_or("unknown");
        let message = body["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("HTTP {status}"));
        let hint = match status.as_u16() {
            401 if self.connection.token.is_none() => " (set PALISADE_TOKEN)",
            _ => "",
        };
        Err(Failure(format!("{message} [{code}]{hint}")))
    }
}

/// `299 palisade "text"` -> `text`.
fn warning_text(header: &str) -> String {
    header
        .splitn(3, ' ')
        .nth(2)
        .map(|t| t.trim_matches('"').to_owned())
        .unwrap_or_else(|| header.to_owned())
}

fn print_warnings(warnings: &[String]) {
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
}

fn print_body(format: Format, body: &Value) -> Outcome {
    match format {
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(body).unwrap_or_default());
        }
        Format::Yaml | Format::Table => {
            print!("{}", serde_yaml_ng::to_string(body).unwrap_or_default());
        }
    }
    Ok(())
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(headers.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row);
    }
}

fn items(body: &Value) -> Vec<Value> {
    body["items"].as_array().cloned().unwrap_or_default()
}

fn plans_of(resource: &Value) -> String {
    match resource["components"].as_array() {
        Some(components) => components
            .iter()
            .map(|c| format!("{}={}", cell(&c["name"]), cell(&c["plan"])))
            .collect::<Vec<_>>()
            .join(","),
        None => cell(&resource["plan"]),
    }
}

fn rule_kinds(spec: &Value) -> String {
    spec["rules"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .filter_map(|r| r.as_object().and_then(|o| o.keys().next().cloned()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Reads every page of a list.
fn all_pages(api: &Api, path: &str) -> Result<Value, Failure> {
    let mut all = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = match &next {
            None => format!("{path}{separator}limit=1000"),
            Some(token) => format!("{path}{separator}limit=1000&continue={}", encode(token)),
        };
        let (body, _) = api.send(api.request(Method::GET, &url))?;
        all.extend(items(&body));
        match body["continue"].as_str() {
            Some(token) => next = Some(token.to_owned()),
            None => break,
        }
    }
    Ok(json!({"items": all}))
}

/// Percent-encodes a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn split_target<'t>(text: &'t str, parts: usize, shape: &str) -> Result<Vec<&'t str>, Failure> {
    let split: Vec<&str> = text.split('/').collect();
    if split.len() != parts || split.iter().any(|p| p.is_empty()) {
        return Err(Failure(format!("'{text}' must be written {shape}")));
    }
    Ok(split)
}

/// `BOUNDARY/TYPE/NAME`, with a type the platform knows (the error lists them).
fn resource_target(text: &str) -> Result<Vec<&str>, Failure> {
    let parts = split_target(text, 3, "BOUNDARY/TYPE/NAME")?;
    palisade_policy::ResourceType::parse(parts[1])
        .map_err(|e| Failure(format!("'{text}': {e}")))?;
    Ok(parts)
}
