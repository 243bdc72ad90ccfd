//! `palisade resource create|update`: the compute-plan rule is decided by the server.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use palisade_api_types::resource::Resource;
use palisade_api_types::view::ResourceView;
use reqwest::Method;
use serde_json::{json, Value};

use super::{
    decode_at, plans_of, print_body, print_warnings, resource_target, Answer, Api, Connection,
    Failure, Format, Outcome,
};
use crate::help;

#[derive(Debug, Args)]
pub struct ResourceFields {
    /// The plan, e.g. small (every type but container_instance, which takes --component,
    /// and static_web_app, which takes none).
    #[arg(long, value_name = "PLAN")]
    plan: Option<String>,
    /// The image to run (app, function), e.g. ghcr.io/acme/web:1.4.
    #[arg(long, value_name = "IMAGE")]
    image: Option<String>,
    /// A git URL that a build turns into an image, instead of --image (app, function,
    /// static_web_app).
    #[arg(long, value_name = "GIT_URL")]
    source: Option<String>,
    /// A label for the resource and its workload (app, container_instance, function,
    /// static_web_app). Repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// A container-instance component, each with its own plan. Repeatable; on update the
    /// list given replaces the stored one.
    #[arg(long = "component", value_name = "NAME:PLAN:IMAGE")]
    components: Vec<String>,
    /// The cluster the workload runs in (app, container_instance, function, static_web_app;
    /// the boundary's default when omitted).
    #[arg(long, value_name = "CLUSTER")]
    cluster: Option<String>,
    /// The boundary-labelled namespace the workload runs in (workload types, as --cluster;
    /// the boundary's default when omitted).
    #[arg(long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// How many pods run the workload (default 1). A change of replicas alone scales the
    /// workload without re-checking it.
    #[arg(long, value_name = "N")]
    replicas: Option<u32>,
    /// Code to build instead of --image or --source (function, static_web_app): a directory
    /// (sent as a .tar.gz) or one file, at most 8 MiB.
    #[arg(long, value_name = "DIR|FILE")]
    upload: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Create a resource; a plan the boundary's policies disallow is refused.
    ///
    /// Create a resource. For app, container_instance (every component), postgresql,
    /// sqlserver, qdrant and valkey the plan is checked against the boundary's policies: a
    /// disallowed plan is refused with the API's message and exit code 1. Plans of functions
    /// are accepted with a warning; static web apps take no plan.
    #[command(after_help = help::RESOURCE_CREATE)]
    Create {
        /// The boundary.
        boundary: String,
        /// The resource type.
        #[arg(long = "type", value_name = "TYPE", value_parser = help::resource_types())]
        resource_type: String,
        /// The resource's name (a DNS-1123 label).
        #[arg(long, value_name = "NAME")]
        name: String,
        #[command(flatten)]
        fields: ResourceFields,
    },
    /// Change a resource (a JSON merge patch); moving it to a disallowed plan is refused.
    ///
    /// Change a resource with a JSON merge patch of the fields given. Only a move to another
    /// plan (or a new component) is checked against the boundary's policies; any other
    /// change succeeds, even for a resource on a plan a policy now disallows.
    #[command(after_help = help::RESOURCE_UPDATE)]
    Update {
        /// The boundary, type and name, e.g. shop/app/web. TYPE is one of app, container_instance,
        /// postgresql, sqlserver, qdrant, valkey, function, static_web_app.
        #[arg(value_name = "BOUNDARY/TYPE/NAME")]
        target: String,
        #[command(flatten)]
        fields: ResourceFields,
    },
}

fn resource_body(fields: &ResourceFields) -> Result<serde_json::Map<String, Value>, Failure> {
    let mut body = serde_json::Map::new();
    for (key, value) in [
        ("plan", &fields.plan),
        ("image", &fields.image),
        ("source", &fields.source),
        ("cluster", &fields.cluster),
        ("namespace", &fields.namespace),
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
    if let Some(replicas) = fields.replicas {
        body.insert("replicas".into(), json!(replicas));
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

/// The bytes of `--upload`: a file as it is, a directory as a .tar.gz of its files (sorted,
/// without owners or times, so the same tree always gives the same archive).
fn upload_bytes(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    let failed = |e: std::io::Error| Failure(format!("--upload {}: {e}", path.display()));
    let metadata = std::fs::metadata(path).map_err(failed)?;
    if !metadata.is_dir() {
        return std::fs::read(path).map_err(failed);
    }
    let mut files = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(failed)? {
            let entry = entry.map_err(failed)?;
            let kind = entry.file_type().map_err(failed)?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut archive = tar::Builder::new(encoder);
    archive.mode(tar::HeaderMode::Deterministic);
    for file in &files {
        let name = file.strip_prefix(path).unwrap_or(file);
        archive.append_path_with_name(file, name).map_err(failed)?;
    }
    archive
        .into_inner()
        .and_then(flate2::write::GzEncoder::finish)
        .map_err(failed)
}

/// Uploads `path` to the boundary; answers the upload's id.
fn upload(api: &Api, boundary: &str, path: &std::path::Path) -> Result<String, Failure> {
    let bytes = upload_bytes(path)?;
    let answer = api.send(
        api.request(Method::POST, &format!("/v1/boundaries/{boundary}/uploads"))
            .header("content-type", "application/octet-stream")
            .body(bytes),
    )?;
    let view: palisade_api_types::view::UploadView = answer.decode()?;
    Ok(view.id)
}

fn print_resource(connection: &Connection, answer: &Answer, verb: &str) -> Outcome {
    let view: ResourceView = answer.decode()?;
    let resource: Resource = decode_at(&answer.request, "", &view.body)?;
    print_warnings(&answer.warnings);
    if connection.output != Format::Table {
        return print_body(connection.output, &answer.body);
    }
    println!(
        "resource {}/{}/{} {verb} (plan {})",
        view.boundary,
        resource.resource_type,
        resource.name,
        plans_of(&resource)
    );
    if let (Some(cluster), Some(namespace)) = (&resource.cluster, &resource.namespace) {
        println!(
            "placed in {cluster}/{namespace}; follow it with: palisade get resources {}",
            view.boundary
        );
    }
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
            if let Some(path) = &fields.upload {
                body.insert(
                    "upload".into(),
                    Value::String(upload(&api, boundary, path)?),
                );
            }
            body.insert("type".into(), Value::String(resource_type.clone()));
            body.insert("name".into(), Value::String(name.clone()));
            let answer = api.send(
                api.request(
                    Method::POST,
                    &format!("/v1/boundaries/{boundary}/resources"),
                )
                .json(&Value::Object(body)),
            )?;
            print_resource(connection, &answer, "created")
        }
        ResourceCommand::Update { target, fields } => {
            let p = resource_target(target)?;
            let mut body = resource_body(fields)?;
            if let Some(path) = &fields.upload {
                body.insert("upload".into(), Value::String(upload(&api, p[0], path)?));
            }
            if body.is_empty() {
                return Err(Failure(
                    "nothing to update: give --plan, --image, --source, --upload, --label, --component, --cluster, --namespace or --replicas"
                        .into(),
                ));
            }
            let answer = api.send(
                api.request(
                    Method::PATCH,
                    &format!("/v1/boundaries/{}/resources/{}/{}", p[0], p[1], p[2]),
                )
                .header("content-type", "application/merge-patch+json")
                .body(Value::Object(body).to_string()),
            )?;
            print_resource(connection, &answer, "updated")
        }
    }
}
