//! `palisade get`: lists and single objects, as tables or the API's bodies.

use clap::Subcommand;
use palisade_api_types::document::{PolicyMetadata, API_VERSION, KIND};
use palisade_api_types::{PolicyDocument, PolicySpec};
use reqwest::Method;
use serde_json::Value;

use super::{
    all_pages, cell, encode, items, plans_of, print_body, print_table, rule_kinds, split_target,
    token, Api, Connection, Failure, Format, Outcome, TokenCommand,
};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum Kind {
    /// List the boundaries the token can see.
    #[command(after_help = help::GET_BOUNDARIES)]
    Boundaries,
    /// List the clusters, with their Kubernetes version and admission-rule status (admin).
    #[command(after_help = help::GET_CLUSTERS)]
    Clusters,
    /// List a boundary's policies, with their install status per cluster.
    #[command(after_help = help::GET_POLICIES)]
    Policies {
        /// The boundary.
        boundary: String,
    },
    /// Show one policy; with -o yaml or -o json, as a BoundaryPolicy document.
    ///
    /// Show one policy. With -o yaml or -o json the output is a BoundaryPolicy document
    /// (apiVersion, kind, metadata with name, boundary, labels and annotations, and the saved
    /// spec) that `palisade apply -f` takes back unchanged; the table shows its mode, scope,
    /// rules and install status.
    #[command(after_help = help::GET_POLICY)]
    Policy {
        /// The boundary and the policy, e.g. shop/size-limits.
        #[arg(value_name = "BOUNDARY/NAME")]
        target: String,
    },
    /// List a boundary's resources and their plans.
    #[command(after_help = help::GET_RESOURCES)]
    Resources {
        /// The boundary.
        boundary: String,
        /// Only resources of this type.
        #[arg(long = "type", value_name = "TYPE", value_parser = help::resource_types())]
        resource_type: Option<String>,
        /// Only resources whose current plan the policies now disallow (created before the
        /// policy), with the policies that disallow it.
        #[arg(long)]
        grandfathered: bool,
    },
    /// List API tokens (never their secrets).
    #[command(after_help = help::GET_TOKENS)]
    Tokens,
    /// List a boundary's namespaces, in every cluster.
    #[command(after_help = help::GET_NAMESPACES)]
    Namespaces {
        /// The boundary.
        boundary: String,
    },
    /// Show the plan picker of a boundary for a type: which plans its policies allow.
    #[command(after_help = help::GET_PLANS)]
    Plans {
        /// The boundary.
        boundary: String,
        /// The resource type.
        #[arg(long = "type", value_name = "TYPE", value_parser = help::resource_types())]
        resource_type: String,
    },
}

/// A stored policy (the API's view) as the document that saved it.
fn policy_document(view: &Value) -> Result<PolicyDocument, Failure> {
    let strings = |field: &str| -> Result<_, Failure> {
        match &view["metadata"][field] {
            Value::Null => Ok(Default::default()),
            value => serde_json::from_value(value.clone()).map_err(|e| {
                Failure(format!(
                    "the server's policy has unreadable metadata.{field}: {e}"
                ))
            }),
        }
    };
    let spec: PolicySpec = serde_json::from_value(view["spec"].clone())
        .map_err(|e| Failure(format!("the server's policy has an unreadable spec: {e}")))?;
    Ok(PolicyDocument {
        api_version: API_VERSION.to_owned(),
        kind: KIND.to_owned(),
        metadata: PolicyMetadata {
            name: cell(&view["name"]),
            boundary: cell(&view["boundary"]),
            labels: strings("labels")?,
            annotations: strings("annotations")?,
        },
        spec,
    })
}

const POLICY_HEADERS: [&str; 6] = ["NAME", "MODE", "SCOPE", "RULES", "STATUS", "UPDATED"];

fn policy_row(p: &Value) -> Vec<String> {
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
            let rows = items(&body).iter().map(policy_row).collect();
            print_table(&POLICY_HEADERS, rows);
        }
        Kind::Policy { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let (body, _) = api.send(api.request(
                Method::GET,
                &format!("/v1/boundaries/{}/policies/{}", p[0], p[1]),
            ))?;
            match format {
                Format::Table => print_table(&POLICY_HEADERS, vec![policy_row(&body)]),
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&policy_document(&body)?).unwrap_or_default()
                ),
                Format::Yaml => print!(
                    "{}",
                    serde_yaml_ng::to_string(&policy_document(&body)?).unwrap_or_default()
                ),
            }
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
