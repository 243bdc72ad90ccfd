//! Client commands: talk to a palisade server named by `PALISADE_URL` with the token in
//! `PALISADE_TOKEN`. Output is a table, or the API's JSON or YAML bodies with `-o`. Every
//! failure is one line on stderr and exit code 1.

mod access;
mod admin;
mod apply;
mod config;
mod delete;
mod describe;
mod diff;
mod exception;
mod get;
mod preview;
mod resource;
mod rollback;
mod rollout;
mod token;
mod version;

pub use admin::{boundary, cluster, namespace, BoundaryCommand, ClusterCommand, NamespaceCommand};
pub use apply::{apply, ApplyArgs};
pub use config::{config, ConfigCommand};
pub use delete::{delete, DeleteKind};
pub use describe::{describe, DescribeKind};
pub use diff::{diff, DiffArgs};
pub use exception::{exception, ExceptionCommand};
pub use get::{get, Kind};
pub use preview::{preview, PreviewArgs};
pub use resource::{resource, ResourceCommand};
pub use rollback::{rollback, RollbackArgs};
pub use rollout::{rollout, RolloutCommand};
pub use token::{token, TokenCommand};
pub use version::{version, VersionArgs};

use std::fmt::Display;
use std::path::{Path, PathBuf};

use crate::contexts::{self, Config, Given, Target};
use clap::{Args, ValueEnum};
use palisade_api_types::resource::Resource;
use palisade_api_types::view::{
    BoundaryList, ClusterList, ExceptionList, NamespaceList, PolicyList, ResourceList, TokenList,
};
use palisade_api_types::ErrorBody;
use reqwest::blocking::{Client, RequestBuilder};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum Format {
    /// Columns for people (the default).
    #[default]
    Table,
    /// The API's JSON body.
    Json,
    /// The API's body as YAML.
    Yaml,
    /// One name per line, as the other commands take it (lists of `get` only).
    Name,
    /// The table with more columns (lists of `get` only).
    Wide,
}

impl Format {
    /// `-o name` and `-o wide`, which only lists of `get` print.
    fn is_for_lists(self) -> bool {
        matches!(self, Format::Name | Format::Wide)
    }
}

/// Where the server is and who is calling; read from the environment unless given.
#[derive(Debug, Args)]
pub struct Connection {
    /// The palisade server's URL [default: the context's, else http://127.0.0.1:8080].
    #[arg(
        long,
        visible_alias = "server",
        env = "PALISADE_URL",
        value_name = "URL",
        global = true,
        help_heading = "Global Options"
    )]
    url: Option<String>,
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
    /// A PEM file of CA certificates to trust for an https:// URL, in addition to the
    /// built-in and system ones (for a server whose certificate a private CA signed).
    #[arg(
        long,
        env = "PALISADE_CA_FILE",
        value_name = "FILE",
        global = true,
        help_heading = "Global Options"
    )]
    ca_file: Option<PathBuf>,
    /// The context of the config file to use instead of its current one (see `palisade
    /// config`); --url, --token, --ca-file and their PALISADE_* variables still win.
    #[arg(
        long,
        value_name = "NAME",
        global = true,
        help_heading = "Global Options"
    )]
    context: Option<String>,
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

/// The innermost error of `error`'s source chain, in its own words.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// What `transport` says of a certificate no trusted CA signed (see [`unreachable_cause`]).
const UNKNOWN_ISSUER: &str = "is not signed by a trusted certificate authority";

/// The CA certificates of `--ca-file`; a file that cannot be read or holds none is an error
/// naming it.
fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, Failure> {
    let named = |why: &dyn Display| Failure(format!("{}: {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| named(&e))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|_| named(&"not a PEM file of certificates"))?;
    if certificates.is_empty() {
        return Err(named(
            &"no certificate in it (the CA's certificates are expected, PEM encoded)",
        ));
    }
    Ok(certificates)
}

impl Connection {
    /// The server, token and CA file to use: each as given (flag, then PALISADE_* variable),
    /// else from the config file's context, else the default URL.
    fn target(&self) -> Result<Target, Failure> {
        let given = Given {
            url: self.url.clone(),
            token: self.token.clone(),
            ca_file: self.ca_file.clone(),
            context: self.context.clone(),
        };
        let (config, path) = if given.is_complete() {
            (Config::default(), PathBuf::new())
        } else {
            let path = contexts::default_location().map_err(|e| Failure(e.to_string()))?;
            (
                Config::load(&path).map_err(|e| Failure(e.to_string()))?,
                path,
            )
        };
        given
            .resolve(&config, &path)
            .map_err(|e| Failure(e.to_string()))
    }
}

struct Api<'c> {
    client: Client,
    connection: &'c Connection,
    target: Target,
}

impl<'c> Api<'c> {
    /// A client for a command that prints a table, JSON or YAML (`-o name|wide` are refused).
    fn new(connection: &'c Connection) -> Result<Self, Failure> {
        if connection.output.is_for_lists() {
            return Err(Failure(
                "-o name and -o wide are for the lists of palisade get; use table, json or yaml"
                    .to_owned(),
            ));
        }
        Self::listing(connection)
    }

    /// A client for `get`, which prints every output format.
    fn listing(connection: &'c Connection) -> Result<Self, Failure> {
        let target = connection.target()?;
        Self::to(connection, target)
    }

    /// A client of `target` (whatever `connection` says of the server), printing as
    /// `connection` says.
    fn to(connection: &'c Connection, target: Target) -> Result<Self, Failure> {
        let mut builder = Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            // The built-in and system roots are read only when they can be needed.
            .tls_built_in_root_certs(target.url.starts_with("https:"));
        if let Some(path) = &target.ca_file {
            for certificate in ca_certificates(path)? {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder.build().map_err(|e| match &target.ca_file {
            // The CA file's certificates are parsed here, when the trust store is made.
            Some(path) => Failure(format!(
                "{}: not a usable CA certificate ({})",
                path.display(),
                // rustls says "peer" of any certificate it cannot parse.
                innermost(&e).trim_start_matches("invalid peer certificate: ")
            )),
            None => Failure(format!(
                "cannot set up HTTP: {}",
                palisade_reconciler::cause::transport(&e)
            )),
        })?;
        Ok(Api {
            client,
            connection,
            target,
        })
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{}", self.target.url.trim_end_matches('/'), path);
        let mut request = self.client.request(method, url);
        if let Some(token) = &self.target.token {
            request = request.bearer_auth(token.trim());
        }
        request
    }

    /// Sends a request; returns its answer (the JSON body, Null when empty, and the Warning
    /// headers), or the error answer as one line.
    fn send(&self, request: RequestBuilder) -> Result<Answer, Failure> {
        self.send_relocated(request, &|_| None)
    }

    /// [`Api::send`], where the message of a 400 `invalid_request` (which starts with the
    /// field's JSON Pointer in the body) may be said again by `relocate` in terms of what the
    /// body was made from, e.g. `<file>:<doc>: /spec/rules/0: ...`.
    fn send_relocated(
        &self,
        request: RequestBuilder,
        relocate: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Answer, Failure> {
        let (client, request) = request.build_split();
        let request = request.map_err(|e| self.unreachable(&e))?;
        let name = format!("{} {}", request.method(), path_of(request.url()));
        let response = client.execute(request).map_err(|e| self.unreachable(&e))?;
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
            .map_err(|e| Failure(format!("cannot read the answer to {name}: {e}")))?;
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 if self.target.token.is_none() => " (set PALISADE_TOKEN)",
                _ => "",
            };
            return Err(Failure(match serde_json::from_str::<ErrorBody>(&text) {
                Ok(ErrorBody { error }) => {
                    let message = match error.code {
                        palisade_api_types::ErrorCode::InvalidRequest => {
                            relocate(&error.message).unwrap_or(error.message)
                        }
                        _ => error.message,
                    };
                    format!("{} [{}]{hint}", printable(&message), code_name(&error.code))
                }
                // Not palisade's error body (e.g. a proxy's page): the status is all there is.
                Err(_) => format!("HTTP {status} [unknown]{hint}"),
            }));
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .map_err(|e| unreadable(&name, format_args!("it is not JSON ({e})")))?
        };
        Ok(Answer {
            request: name,
            body,
            warnings,
        })
    }

    fn unreachable(&self, error: &reqwest::Error) -> Failure {
        let cause = unreachable_cause(error);
        let hint = match &self.target.ca_file {
            _ if !cause.contains(UNKNOWN_ISSUER) => String::new(),
            Some(path) => format!(" (nor by a CA of {})", path.display()),
            None => " (trust its CA with --ca-file or PALISADE_CA_FILE)".to_owned(),
        };
        Failure(format!(
            "cannot reach palisade at {}: {cause}{hint}",
            self.target.url
        ))
    }

    /// `GET path` (the path may carry a query).
    fn get(&self, path: &str) -> Result<Answer, Failure> {
        self.send(self.request(Method::GET, path))
    }
}

/// A request's path and query, as the request is named in messages (`GET /v1/boundaries`).
fn path_of(url: &reqwest::Url) -> String {
    match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    }
}

/// An error code as it is written on the wire (`compute_plan_not_allowed`).
fn code_name(code: &palisade_api_types::ErrorCode) -> String {
    serde_json::to_string(code)
        .map(|text| text.trim_matches('"').to_owned())
        .unwrap_or_else(|_| format!("{code:?}"))
}

/// A successful answer.
struct Answer {
    /// The request it answers, e.g. `GET /v1/boundaries`.
    request: String,
    /// The body as it came (what `-o json|yaml` prints); Null when empty.
    body: Value,
    /// The texts of the `Warning` headers.
    warnings: Vec<String>,
}

impl Answer {
    /// The body as the API type it must be; a body that is not is an error naming the
    /// request and what is wrong.
    fn decode<T: DeserializeOwned>(&self) -> Result<T, Failure> {
        decode_at(&self.request, "", &self.body)
    }

    /// The body decoded as `T` for a table; `None` when `format` asks for the body itself,
    /// which is printed then (after it decoded: a body of the wrong shape fails either way).
    fn for_table<T: DeserializeOwned>(&self, format: Format) -> Result<Option<T>, Failure> {
        let value = self.decode()?;
        if format != Format::Table {
            print_body(format, &self.body)?;
            return Ok(None);
        }
        Ok(Some(value))
    }
}

/// Why the answer to `request` cannot be used.
fn unreadable(request: &str, why: impl Display) -> Failure {
    Failure(format!(
        "the server's answer to {request} could not be read: {why}"
    ))
}

/// Decodes `value`, found at `at` (e.g. `items[2].spec`; empty: the body) in the answer to
/// `request`; an error names the field: `items[2].spec.rules: missing field ...`.
fn decode_at<T: DeserializeOwned>(request: &str, at: &str, value: &Value) -> Result<T, Failure> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (at, inner.as_str()) {
            (at, ".") => at.to_owned(),
            ("", inner) => inner.to_owned(),
            (at, inner) if inner.starts_with('[') => format!("{at}{inner}"),
            (at, inner) => format!("{at}.{inner}"),
        };
        let error = e.into_inner();
        if path.is_empty() {
            unreadable(request, error)
        } else {
            unreadable(request, format_args!("{path}: {error}"))
        }
    })
}

/// `299 palisade "text"` -> `text` (printable).
fn warning_text(header: &str) -> String {
    let text = header
        .splitn(3, ' ')
        .nth(2)
        .map(|t| t.trim_matches('"'))
        .unwrap_or(header);
    printable(text)
}

/// Text that came from the server, fit to print on a terminal: every control character (the
/// ESC of an escape sequence, a carriage return, a line break, ...) written as its escape
/// (`\u{1b}`, `\r`, `\n`), so that what a server or a stored document says can neither move
/// the cursor, rewrite what is shown, nor forge lines. Everything else is left as it is.
pub(crate) fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// [`printable`] line by line: a text of several lines (YAML, a diff) keeps its line breaks.
pub(crate) fn printable_lines(text: &str) -> String {
    text.split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n")
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
        Format::Yaml | Format::Table | Format::Name | Format::Wide => {
            let yaml = serde_yaml_ng::to_string(body).unwrap_or_default();
            print!("{}", printable_lines(&yaml));
        }
    }
    Ok(())
}

/// An optional field in a table: `-` when absent.
fn cell(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    print!("{}", table(headers, rows, ""));
}

/// Columns aligned under `headers`, each line starting with `indent`.
fn table(headers: &[&str], rows: Vec<Vec<String>>, indent: &str) -> String {
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|row| row.iter().map(|c| printable(c)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cells: Vec<String>| {
        let mut out = String::from(indent);
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                out.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    };
    line(headers.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row);
    }
    text
}

/// A resource's plans in one cell: `small`, `worker=small,web=medium` for components, `-`
/// for none.
fn plans_of(resource: &Resource) -> String {
    match &resource.components {
        Some(components) => components
            .iter()
            .map(|c| format!("{}={}", c.name, c.plan))
            .collect::<Vec<_>>()
            .join(","),
        None => cell(resource.plan.as_deref()),
    }
}

/// A page of a list (`{"items": [...], "continue"?}`), as its API type.
trait Page: DeserializeOwned {
    type Item;
    fn into_parts(self) -> (Vec<Self::Item>, Option<String>);
}

macro_rules! pages {
    ($($list:ty => $item:ty),* $(,)?) => {
        $(impl Page for $list {
            type Item = $item;
            fn into_parts(self) -> (Vec<$item>, Option<String>) {
                (self.items, self.continue_token)
            }
        })*
    };
}

pages! {
    BoundaryList => palisade_api_types::view::Boundary,
    ClusterList => palisade_api_types::view::ClusterView,
    PolicyList => palisade_api_types::view::PolicyView,
    ResourceList => palisade_api_types::view::ResourceView,
    TokenList => palisade_api_types::view::TokenView,
    NamespaceList => palisade_api_types::view::NamespaceView,
    ExceptionList => palisade_api_types::view::ExceptionView,
    palisade_api_types::view::History => palisade_api_types::view::HistoryEntry,
}

/// The items of a page as they came, for `-o json|yaml`.
#[derive(Deserialize)]
struct RawPage {
    items: Vec<Value>,
}

/// Every page of a list: the items, and the body to print (`{"items": [...]}`, the items as
/// they came).
struct Listed<T> {
    request: String,
    items: Vec<T>,
    body: Value,
}

/// Reads every page of a list.
fn all_pages<L: Page>(api: &Api, path: &str) -> Result<Listed<L::Item>, Failure> {
    let mut items = Vec::new();
    let mut raw = Vec::new();
    let mut next: Option<String> = None;
    let request = format!("GET {path}");
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = match &next {
            None => format!("{path}{separator}limit=1000"),
            Some(token) => format!("{path}{separator}limit=1000&continue={}", encode(token)),
        };
        let answer = api.get(&url)?;
        // Named without the paging parameters, as the command asked for it.
        let page: L = decode_at(&request, "", &answer.body)?;
        let RawPage { items: page_raw } = decode_at(&request, "", &answer.body)?;
        raw.extend(page_raw);
        let (page_items, continue_token) = page.into_parts();
        items.extend(page_items);
        match continue_token {
            Some(token) => next = Some(token),
            None => break,
        }
    }
    Ok(Listed {
        request,
        items,
        body: serde_json::json!({ "items": raw }),
    })
}

/// Percent-encodes a query value.
/// The API path of the exception `name` of `boundary`.
fn exception_path(boundary: &str, name: &str) -> String {
    format!(
        "/v1/boundaries/{}/exceptions/{}",
        encode(boundary),
        encode(name)
    )
}

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
