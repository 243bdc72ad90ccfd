//! Client commands: talk to a palisade server named by `PALISADE_URL` with the token in
//! `PALISADE_TOKEN`. Output is a table, or the API's JSON or YAML bodies with `-o`. Every
//! failure is one line on stderr and exit code 1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use reqwest::blocking::{Client, RequestBuilder};
use reqwest::Method;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct Connection {
    /// The server, e.g. http://127.0.0.1:8080.
    #[arg(
        long,
        env = "PALISADE_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// An API token.
    #[arg(long, env = "PALISADE_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table, global = true)]
    output: Format,
}

#[derive(Debug, Subcommand)]
pub enum Kind {
    Boundaries,
    Clusters,
    /// Policies of a boundary.
    Policies {
        boundary: String,
    },
    /// Resources of a boundary.
    Resources {
        boundary: String,
        #[arg(long = "type")]
        resource_type: Option<String>,
        /// Only resources whose current plan the policies now disallow.
        #[arg(long)]
        grandfathered: bool,
    },
    Tokens,
    /// Namespaces of a boundary, in every cluster.
    Namespaces {
        boundary: String,
    },
    /// Plan picker data of a boundary for a type.
    Plans {
        boundary: String,
        #[arg(long = "type")]
        resource_type: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DeleteKind {
    Boundary {
        name: String,
    },
    /// `BOUNDARY/NAME`.
    Policy {
        name: String,
    },
    /// `BOUNDARY/TYPE/NAME`.
    Resource {
        name: String,
    },
    Token {
        id: String,
    },
    /// Removes palisade's objects from the cluster, then forgets it.
    Cluster {
        name: String,
        /// Forget the cluster even when it cannot be reached (its objects stay there).
        #[arg(long)]
        force: bool,
    },
    /// `BOUNDARY/NAMESPACE`: palisade releases the namespace (removes its boundary label).
    Namespace {
        name: String,
        #[arg(long)]
        cluster: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create a namespace labelled for the boundary: `palisade namespace create shop/web --cluster prod-1`.
    Create {
        /// `BOUNDARY/NAMESPACE`.
        target: String,
        #[arg(long)]
        cluster: String,
    },
    /// Label an existing, unlabelled namespace for the boundary.
    Adopt {
        /// `BOUNDARY/NAMESPACE`.
        target: String,
        #[arg(long)]
        cluster: String,
    },
}

#[derive(Debug, Args)]
pub struct ResourceFields {
    /// The plan (not for container instances: use --component).
    #[arg(long)]
    plan: Option<String>,
    #[arg(long)]
    image: Option<String>,
    #[arg(long)]
    source: Option<String>,
    /// `KEY=VALUE`, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Container-instance component `NAME:PLAN:IMAGE`, repeatable (replaces the list).
    #[arg(long = "component", value_name = "NAME:PLAN:IMAGE")]
    components: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// `palisade resource create shop --type app --name web --plan small --image ...`
    Create {
        boundary: String,
        #[arg(long = "type")]
        resource_type: String,
        #[arg(long)]
        name: String,
        #[command(flatten)]
        fields: ResourceFields,
    },
    /// `palisade resource update shop/app/web --plan medium` (a merge patch).
    Update {
        /// `BOUNDARY/TYPE/NAME`.
        target: String,
        #[command(flatten)]
        fields: ResourceFields,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    Create {
        #[arg(long)]
        role: String,
        #[arg(long)]
        boundary: Option<String>,
        #[arg(long)]
        expires_in_days: Option<u32>,
    },
    List,
    Revoke {
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BoundaryCommand {
    Create {
        name: String,
        #[arg(long)]
        display_name: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Register a cluster's credentials (admin).
    Add {
        name: String,
        #[arg(long)]
        kubeconfig: PathBuf,
    },
    /// Attach a cluster to a boundary (admin).
    Attach { boundary: String, cluster: String },
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

pub fn get(connection: &Connection, kind: &Kind) -> Outcome {
    let api = Api::new(connection)?;
    let format = connection.output;
    match kind {
        Kind::Boundaries => {
            let body = all_pages(&api, "/v1/boundaries")?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|b| {
                    vec![
                        cell(&b["name"]),
                        cell(&b["display_name"]),
                        cell(&b["created_at"]),
                    ]
                })
                .collect();
            print_table(&["NAME", "DISPLAY NAME", "CREATED"], rows);
        }
        Kind::Clusters => {
            let body = all_pages(&api, "/v1/clusters")?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|c| {
                    let admission = if c["admission"]["enforced"].as_bool() == Some(true) {
                        "enforced".to_owned()
                    } else {
                        format!("not enforced: {}", cell(&c["admission"]["reason"]))
                    };
                    vec![
                        cell(&c["name"]),
                        cell(&c["kubernetes_version"]),
                        admission,
                        cell(&c["last_error"]),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "KUBERNETES", "ADMISSION RULES", "LAST ERROR"],
                rows,
            );
        }
        Kind::Policies { boundary } => {
            let body = all_pages(&api, &format!("/v1/boundaries/{boundary}/policies"))?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|p| {
                    vec![
                        cell(&p["name"]),
                        cell(&p["spec"]["mode"]),
                        p["spec"]["scope"]["clusters"]
                            .as_array()
                            .map(|c| cell(&Value::Array(c.clone())))
                            .unwrap_or_else(|| "all clusters".into()),
                        rule_kinds(&p["spec"]),
                        install_status(p),
                        cell(&p["updated_at"]),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "MODE", "SCOPE", "RULES", "STATUS", "UPDATED"],
                rows,
            );
        }
        Kind::Namespaces { boundary } => {
            let body = all_pages(&api, &format!("/v1/boundaries/{boundary}/namespaces"))?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|n| {
                    vec![
                        cell(&n["cluster"]),
                        cell(&n["name"]),
                        cell(&n["created_at"]),
                    ]
                })
                .collect();
            print_table(&["CLUSTER", "NAMESPACE", "CREATED"], rows);
        }
        Kind::Resources {
            boundary,
            resource_type,
            grandfathered,
        } => {
            let mut path = format!("/v1/boundaries/{boundary}/resources");
            let mut query = Vec::new();
            if let Some(ty) = resource_type {
                query.push(format!("type={}", encode(ty)));
            }
            if *grandfathered {
                query.push("grandfathered=true".into());
            }
            if !query.is_empty() {
                path = format!("{path}?{}", query.join("&"));
            }
            let body = all_pages(&api, &path)?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let mut headers = vec!["TYPE", "NAME", "PLAN", "UPDATED"];
            if *grandfathered {
                headers.push("DISALLOWED BY");
            }
            let rows = items(&body)
                .iter()
                .map(|r| {
                    let mut row = vec![
                        cell(&r["type"]),
                        cell(&r["name"]),
                        plans_of(r),
                        cell(&r["updated_at"]),
                    ];
                    if *grandfathered {
                        row.push(cell(&r["denied_by"]));
                    }
                    row
                })
                .collect();
            print_table(&headers, rows);
        }
        Kind::Tokens => return token(connection, &TokenCommand::List),
        Kind::Plans {
            boundary,
            resource_type,
        } => {
            let (body, _) = api.send(api.request(
                Method::GET,
                &format!(
                    "/v1/boundaries/{boundary}/plans?type={}",
                    encode(resource_type)
                ),
            ))?;
            if format != Format::Table {
                return print_body(format, &body);
            }
            let rows = body["plans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|p| {
                    vec![
                        cell(&p["name"]),
                        cell(&p["cpu"]),
                        cell(&p["memory"]),
                        if p["allowed"].as_bool() == Some(true) {
                            "yes".into()
                        } else {
                            "no".into()
                        },
                        p["reason"]
                            .as_str()
                            .or(p["audit_warning"].as_str())
                            .unwrap_or("")
                            .to_owned(),
                    ]
                })
                .collect();
            print_table(&["PLAN", "CPU", "MEMORY", "ALLOWED", "REASON"], rows);
            if body["enforced"].as_bool() == Some(false) {
                eprintln!("note: the API does not enforce plans of {resource_type}");
            }
        }
    }
    Ok(())
}

/// A policy's per-cluster install status in one cell: `prod-1: enforced; edge-1: pending`.
fn install_status(policy: &Value) -> String {
    let clusters = policy["status"]["clusters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if clusters.is_empty() {
        return "-".to_owned();
    }
    clusters
        .iter()
        .map(|c| format!("{}: {}", cell(&c["cluster"]), cell(&c["status"])))
        .collect::<Vec<_>>()
        .join("; ")
}

fn split_target<'t>(text: &'t str, parts: usize, shape: &str) -> Result<Vec<&'t str>, Failure> {
    let split: Vec<&str> = text.split('/').collect();
    if split.len() != parts || split.iter().any(|p| p.is_empty()) {
        return Err(Failure(format!("'{text}' must be written {shape}")));
    }
    Ok(split)
}

pub fn delete(connection: &Connection, kind: &DeleteKind) -> Outcome {
    let api = Api::new(connection)?;
    let (path, what) = match kind {
        DeleteKind::Boundary { name } => {
            (format!("/v1/boundaries/{name}"), format!("boundary {name}"))
        }
        DeleteKind::Policy { name } => {
            let p = split_target(name, 2, "BOUNDARY/NAME")?;
            (
                format!("/v1/boundaries/{}/policies/{}", p[0], p[1]),
                format!("boundarypolicy {name}"),
            )
        }
        DeleteKind::Resource { name } => {
            let p = split_target(name, 3, "BOUNDARY/TYPE/NAME")?;
            (
                format!("/v1/boundaries/{}/resources/{}/{}", p[0], p[1], p[2]),
                format!("resource {name}"),
            )
        }
        DeleteKind::Token { id } => (format!("/v1/tokens/{id}"), format!("token {id}")),
        DeleteKind::Cluster { name, force } => (
            if *force {
                format!("/v1/clusters/{name}?force=true")
            } else {
                format!("/v1/clusters/{name}")
            },
            format!("cluster {name}"),
        ),
        DeleteKind::Namespace { name, cluster } => {
            let p = split_target(name, 2, "BOUNDARY/NAMESPACE")?;
            (
                format!(
                    "/v1/boundaries/{}/clusters/{cluster}/namespaces/{}",
                    p[0], p[1]
                ),
                format!("namespace {name} in cluster {cluster}"),
            )
        }
    };
    api.send(api.request(Method::DELETE, &path))?;
    println!("{what} deleted");
    Ok(())
}

pub fn apply(connection: &Connection, file: &Path, dry_run: bool) -> Outcome {
    let api = Api::new(connection)?;
    let mut text = String::new();
    for path in crate::check::yaml_files(file).map_err(Failure)? {
        let content = std::fs::read_to_string(&path)
            .map_err(|e| Failure(format!("{}: {e}", path.display())))?;
        if !text.is_empty() {
            text.push_str("\n---\n");
        }
        text.push_str(&content);
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

fn resource_body(fields: &ResourceFields) -> Result<serde_json::Map<String, Value>, Failure> {
    let mut body = serde_json::Map::new();
    for (key, value) in [
        ("plan", &fields.plan),
        ("image", &fields.image),
        ("source", &fields.source),
    ] {
        if let Some(value) = value {
            body.insert(key.into(), Value::String(value.clone()));
        }
    }
    if !fields.labels.is_empty() {
        let mut labels = BTreeMap::new();
        for label in &fields.labels {
            let (key, value) = label
                .split_once('=')
                .ok_or_else(|| Failure(format!("--label '{label}' must be KEY=VALUE")))?;
            labels.insert(key.to_owned(), Value::String(value.to_owned()));
        }
        body.insert("labels".into(), json!(labels));
    }
    if !fields.components.is_empty() {
        let mut components = Vec::new();
        for component in &fields.components {
            let parts: Vec<&str> = component.splitn(3, ':').collect();
            if parts.len() != 3 {
                return Err(Failure(format!(
                    "--component '{component}' must be NAME:PLAN:IMAGE"
                )));
            }
            components.push(json!({"name": parts[0], "plan": parts[1], "image": parts[2]}));
        }
        body.insert("components".into(), Value::Array(components));
    }
    Ok(body)
}

fn print_resource(connection: &Connection, body: &Value, verb: &str) -> Outcome {
    if connection.output != Format::Table {
        return print_body(connection.output, body);
    }
    println!(
        "resource {}/{}/{} {verb} (plan {})",
        cell(&body["boundary"]),
        cell(&body["type"]),
        cell(&body["name"]),
        plans_of(body)
    );
    Ok(())
}

pub fn resource(connection: &Connection, command: &ResourceCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        ResourceCommand::Create {
            boundary,
            resource_type,
            name,
            fields,
        } => {
            let mut body = resource_body(fields)?;
            body.insert("type".into(), Value::String(resource_type.clone()));
            body.insert("name".into(), Value::String(name.clone()));
            let (answer, warnings) = api.send(
                api.request(
                    Method::POST,
                    &format!("/v1/boundaries/{boundary}/resources"),
                )
                .json(&Value::Object(body)),
            )?;
            print_warnings(&warnings);
            print_resource(connection, &answer, "created")
        }
        ResourceCommand::Update { target, fields } => {
            let p = split_target(target, 3, "BOUNDARY/TYPE/NAME")?;
            let body = resource_body(fields)?;
            if body.is_empty() {
                return Err(Failure(
                    "nothing to update: give --plan, --image, --source, --label or --component"
                        .into(),
                ));
            }
            let (answer, warnings) = api.send(
                api.request(
                    Method::PATCH,
                    &format!("/v1/boundaries/{}/resources/{}/{}", p[0], p[1], p[2]),
                )
                .header("content-type", "application/merge-patch+json")
                .body(Value::Object(body).to_string()),
            )?;
            print_warnings(&warnings);
            print_resource(connection, &answer, "updated")
        }
    }
}

pub fn token(connection: &Connection, command: &TokenCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        TokenCommand::Create {
            role,
            boundary,
            expires_in_days,
        } => {
            let mut body = json!({"role": role});
            if let Some(b) = boundary {
                body["boundary"] = json!(b);
            }
            if let Some(days) = expires_in_days {
                body["expires_in_days"] = json!(days);
            }
            let (answer, _) = api.send(api.request(Method::POST, "/v1/tokens").json(&body))?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer);
            }
            eprintln!(
                "token {} ({}{}) created; it is shown once:",
                cell(&answer["id"]),
                cell(&answer["role"]),
                answer["boundary"]
                    .as_str()
                    .map(|b| format!(" of {b}"))
                    .unwrap_or_default()
            );
            println!("{}", cell(&answer["secret"]));
        }
        TokenCommand::List => {
            let body = all_pages(&api, "/v1/tokens")?;
            if connection.output != Format::Table {
                return print_body(connection.output, &body);
            }
            let rows = items(&body)
                .iter()
                .map(|t| {
                    vec![
                        cell(&t["id"]),
                        cell(&t["role"]),
                        cell(&t["boundary"]),
                        cell(&t["expires_at"]),
                        cell(&t["created_at"]),
                    ]
                })
                .collect();
            print_table(&["ID", "ROLE", "BOUNDARY", "EXPIRES", "CREATED"], rows);
        }
        TokenCommand::Revoke { id } => {
            api.send(api.request(Method::DELETE, &format!("/v1/tokens/{id}")))?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}

pub fn boundary(connection: &Connection, command: &BoundaryCommand) -> Outcome {
    let api = Api::new(connection)?;
    let BoundaryCommand::Create { name, display_name } = command;
    let mut body = json!({"name": name});
    if let Some(display) = display_name {
        body["display_name"] = json!(display);
    }
    let (answer, _) = api.send(api.request(Method::POST, "/v1/boundaries").json(&body))?;
    if connection.output != Format::Table {
        return print_body(connection.output, &answer);
    }
    println!("boundary {name} created");
    Ok(())
}

pub fn cluster(connection: &Connection, command: &ClusterCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        ClusterCommand::Add { name, kubeconfig } => {
            let text = std::fs::read_to_string(kubeconfig)
                .map_err(|e| Failure(format!("{}: {e}", kubeconfig.display())))?;
            let (answer, _) = api.send(
                api.request(Method::PUT, &format!("/v1/clusters/{name}"))
                    .json(&json!({"kubeconfig": text})),
            )?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer);
            }
            println!("cluster {name} saved");
        }
        ClusterCommand::Attach { boundary, cluster } => {
            api.send(api.request(
                Method::PUT,
                &format!("/v1/boundaries/{boundary}/clusters/{cluster}"),
            ))?;
            println!("cluster {cluster} attached to boundary {boundary}");
        }
    }
    Ok(())
}

pub fn namespace(connection: &Connection, command: &NamespaceCommand) -> Outcome {
    let api = Api::new(connection)?;
    let (target, cluster, adopt) = match command {
        NamespaceCommand::Create { target, cluster } => (target, cluster, false),
        NamespaceCommand::Adopt { target, cluster } => (target, cluster, true),
    };
    let p = split_target(target, 2, "BOUNDARY/NAMESPACE")?;
    let (answer, _) = api.send(
        api.request(
            Method::PUT,
            &format!(
                "/v1/boundaries/{}/clusters/{cluster}/namespaces/{}",
                p[0], p[1]
            ),
        )
        .json(&json!({"adopt": adopt})),
    )?;
    if connection.output != Format::Table {
        return print_body(connection.output, &answer);
    }
    println!(
        "namespace {target} {} in cluster {cluster}",
        answer["action"].as_str().unwrap_or("saved")
    );
    Ok(())
}
