//! `palisade get`: lists and single objects, as tables or the API's bodies.

use std::collections::BTreeMap;

use clap::Subcommand;
use palisade_api_types::document::{ModeDoc, PolicyMetadata, RuleDoc, API_VERSION, KIND};
use palisade_api_types::resource::Resource;
use palisade_api_types::view::{
    BoundaryList, ClusterList, ExceptionList, ExceptionView, NamespaceList, Picker, PolicyList,
    PolicyReport, PolicyView, ResourceList,
};
use palisade_api_types::{PolicyDocument, PolicySpec};
use palisade_policy::RuleKind;
use serde::Deserialize;

use super::{
    all_pages, cell, decode_at, encode, plans_of, print_body, print_table, split_target, token,
    Api, Connection, Failure, Format, Outcome, TokenCommand,
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
    /// List a boundary's exceptions: policy, status, when each ends and how long is left, who
    /// asked and who approved.
    #[command(after_help = help::GET_EXCEPTIONS)]
    Exceptions {
        /// The boundary.
        boundary: String,
    },
    /// Show one exception; with -o yaml or -o json, as a BoundaryException document that
    /// `palisade apply -f` takes back.
    #[command(after_help = help::GET_EXCEPTIONS)]
    Exception {
        /// The boundary and the exception, e.g. shop/legacy-nginx.
        #[arg(value_name = "BOUNDARY/NAME")]
        target: String,
    },
    /// Show what the audit last found for a policy: a line per cluster, then the objects.
    ///
    /// Show the last audit of a policy: per cluster in its scope, when it was taken, how many
    /// objects were checked and how many violate the policy, then one line per violating
    /// object with its workload, replicas and the exact message. The audit runs after every
    /// policy change and every 10 minutes (`palisade serve --audit-interval`).
    #[command(after_help = help::GET_REPORT)]
    Report {
        /// The boundary and the policy, e.g. shop/no-latest.
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

/// The `metadata` of a policy view: the document's labels and annotations.
#[derive(Deserialize)]
struct ViewMetadata {
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

/// A policy view with its spec and metadata read as their types.
pub(super) struct Policy {
    view: PolicyView,
    spec: PolicySpec,
    metadata: ViewMetadata,
}

impl Policy {
    /// Reads the spec and metadata of `view`, found at `at` in the answer to `request`.
    pub(super) fn read(request: &str, at: &str, view: PolicyView) -> Result<Self, Failure> {
        let field = |name: &str| {
            if at.is_empty() {
                name.to_owned()
            } else {
                format!("{at}.{name}")
            }
        };
        Ok(Policy {
            spec: decode_at(request, &field("spec"), &view.spec)?,
            metadata: decode_at(request, &field("metadata"), &view.metadata)?,
            view,
        })
    }

    /// The policy as the document that saved it.
    pub(super) fn document(self) -> PolicyDocument {
        PolicyDocument {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            metadata: PolicyMetadata {
                name: self.view.name,
                boundary: self.view.boundary,
                labels: self.metadata.labels.unwrap_or_default(),
                annotations: self.metadata.annotations.unwrap_or_default(),
            },
            spec: self.spec,
        }
    }

    fn row(&self) -> Vec<String> {
        vec![
            self.view.name.clone(),
            cell(self.spec.mode.map(mode_name)),
            match &self.spec.scope {
                Some(scope) => scope.clusters.join(","),
                None => "all clusters".into(),
            },
            self.spec
                .rules
                .iter()
                .flat_map(rule_kinds)
                .map(RuleKind::document_key)
                .collect::<Vec<_>>()
                .join(","),
            install_status(&self.view),
            self.view.updated_at.clone(),
        ]
    }
}

fn mode_name(mode: ModeDoc) -> &'static str {
    match mode {
        ModeDoc::Enforce => "enforce",
        ModeDoc::Audit => "audit",
    }
}

/// The kinds of a rule (a saved rule has exactly one), in document order.
fn rule_kinds(rule: &RuleDoc) -> Vec<RuleKind> {
    [
        (
            rule.allowed_compute_plans.is_some(),
            RuleKind::AllowedComputePlans,
        ),
        (rule.required_labels.is_some(), RuleKind::RequiredLabels),
        (
            rule.allowed_registries.is_some(),
            RuleKind::AllowedRegistries,
        ),
        (
            rule.disallow_latest_tag.is_some(),
            RuleKind::DisallowLatestTag,
        ),
    ]
    .into_iter()
    .filter_map(|(set, kind)| set.then_some(kind))
    .collect()
}

const POLICY_HEADERS: [&str; 6] = ["NAME", "MODE", "SCOPE", "RULES", "STATUS", "UPDATED"];

pub fn get(connection: &Connection, kind: &Kind) -> Outcome {
    let api = Api::new(connection)?;
    let format = connection.output;
    match kind {
        Kind::Boundaries => {
            let list = all_pages::<BoundaryList>(&api, "/v1/boundaries")?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let rows = list
                .items
                .into_iter()
                .map(|b| vec![b.name, cell(b.display_name.as_deref()), b.created_at])
                .collect();
            print_table(&["NAME", "DISPLAY NAME", "CREATED"], rows);
        }
        Kind::Clusters => {
            let list = all_pages::<ClusterList>(&api, "/v1/clusters")?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let rows = list
                .items
                .into_iter()
                .map(|c| {
                    let admission = if c.admission.enforced {
                        "enforced".to_owned()
                    } else {
                        format!("not enforced: {}", cell(c.admission.reason.as_deref()))
                    };
                    // The admission layout in use and why, e.g. `shared: 212 boundaries`.
                    let layout = c
                        .layout
                        .map_or_else(|| "-".to_owned(), |l| format!("{}: {}", l.name, l.reason));
                    // What palisade last put back there, e.g. `2026-12-05T22:30:00Z binding
                    // trusted.shop.palisade.dev was deleted; restored`.
                    let repair = c
                        .last_repair
                        .map_or_else(|| "-".to_owned(), |r| format!("{} {}", r.at, r.message));
                    vec![
                        c.name,
                        cell(c.kubernetes_version.as_deref()),
                        admission,
                        cell(c.last_error.as_deref()),
                        layout,
                        repair,
                    ]
                })
                .collect();
            print_table(
                &[
                    "NAME",
                    "KUBERNETES",
                    "ADMISSION RULES",
                    "LAST ERROR",
                    "LAYOUT",
                    "LAST REPAIR",
                ],
                rows,
            );
        }
        Kind::Policies { boundary } => {
            let list =
                all_pages::<PolicyList>(&api, &format!("/v1/boundaries/{boundary}/policies"))?;
            let policies = list
                .items
                .into_iter()
                .enumerate()
                .map(|(i, view)| Policy::read(&list.request, &format!("items[{i}]"), view))
                .collect::<Result<Vec<_>, _>>()?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let rows = policies.iter().map(Policy::row).collect();
            print_table(&POLICY_HEADERS, rows);
        }
        Kind::Exceptions { boundary } => {
            let list = all_pages::<ExceptionList>(
                &api,
                &format!("/v1/boundaries/{}/exceptions", encode(boundary)),
            )?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let rows = list.items.iter().map(exception_row).collect();
            print_table(&EXCEPTION_HEADERS, rows);
        }
        Kind::Exception { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let answer = api.get(&format!(
                "/v1/boundaries/{}/exceptions/{}",
                encode(p[0]),
                encode(p[1])
            ))?;
            let view: ExceptionView = answer.decode()?;
            let document = serde_json::json!({
                "apiVersion": API_VERSION,
                "kind": palisade_api_types::exception::KIND,
                "metadata": {"name": view.name, "boundary": view.boundary},
                "spec": view.spec,
            });
            match format {
                Format::Table => print_table(&EXCEPTION_HEADERS, vec![exception_row(&view)]),
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&document).unwrap_or_default()
                ),
                Format::Yaml => print!(
                    "{}",
                    serde_yaml_ng::to_string(&document).unwrap_or_default()
                ),
            }
        }
        Kind::Policy { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let answer = api.get(&format!("/v1/boundaries/{}/policies/{}", p[0], p[1]))?;
            let policy = Policy::read(&answer.request, "", answer.decode()?)?;
            match format {
                Format::Table => print_table(&POLICY_HEADERS, vec![policy.row()]),
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&policy.document()).unwrap_or_default()
                ),
                Format::Yaml => print!(
                    "{}",
                    serde_yaml_ng::to_string(&policy.document()).unwrap_or_default()
                ),
            }
        }
        Kind::Report { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let answer = api.get(&format!(
                "/v1/boundaries/{}/policies/{}/report",
                encode(p[0]),
                encode(p[1])
            ))?;
            let report: PolicyReport = answer.decode()?;
            if format != Format::Table {
                return print_body(format, &answer.body);
            }
            let rows = report
                .clusters
                .iter()
                .map(|c| {
                    let state = match (&c.error, &c.taken_at) {
                        (Some(error), _) => format!("error: {error}"),
                        (None, None) => "not audited yet".to_owned(),
                        (None, Some(_)) if !c.current => {
                            "audit of the new version pending".to_owned()
                        }
                        (None, Some(_)) => "current".to_owned(),
                    };
                    vec![
                        c.cluster.clone(),
                        c.checked.to_string(),
                        c.violations.to_string(),
                        cell(c.taken_at.as_deref()),
                        state,
                    ]
                })
                .collect();
            print_table(
                &["CLUSTER", "CHECKED", "VIOLATIONS", "TAKEN", "STATE"],
                rows,
            );
            for cluster in &report.clusters {
                for f in &cluster.findings {
                    println!(
                        "{} {}/{}/{} ({}/{}, {} replicas): {}",
                        cluster.cluster,
                        f.namespace,
                        f.kind,
                        f.name,
                        f.workload.kind,
                        f.workload.name,
                        f.workload.replicas,
                        f.message
                    );
                }
            }
        }
        Kind::Namespaces { boundary } => {
            let list =
                all_pages::<NamespaceList>(&api, &format!("/v1/boundaries/{boundary}/namespaces"))?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let rows = list
                .items
                .into_iter()
                .map(|n| vec![n.cluster, n.name, n.created_at])
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
            let list = all_pages::<ResourceList>(&api, &path)?;
            let resources = list
                .items
                .iter()
                .enumerate()
                .map(|(i, view)| {
                    decode_at::<Resource>(&list.request, &format!("items[{i}]"), &view.body)
                })
                .collect::<Result<Vec<_>, _>>()?;
            if format != Format::Table {
                return print_body(format, &list.body);
            }
            let mut headers = vec!["TYPE", "NAME", "PLAN", "UPDATED"];
            if *grandfathered {
                headers.push("DISALLOWED BY");
            }
            headers.push("STATUS");
            let rows = list
                .items
                .iter()
                .zip(&resources)
                .map(|(view, resource)| {
                    let mut row = vec![
                        resource.resource_type.clone(),
                        resource.name.clone(),
                        plans_of(resource),
                        view.updated_at.clone(),
                    ];
                    if *grandfathered {
                        row.push(cell(
                            view.denied_by.as_ref().map(|p| p.join(",")).as_deref(),
                        ));
                    }
                    row.push(cell(
                        view.status.as_ref().map(ToString::to_string).as_deref(),
                    ));
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
            let answer = api.get(&format!(
                "/v1/boundaries/{boundary}/plans?type={}",
                encode(resource_type)
            ))?;
            let picker: Picker = answer.decode()?;
            if format != Format::Table {
                return print_body(format, &answer.body);
            }
            let rows = picker
                .plans
                .into_iter()
                .map(|p| {
                    vec![
                        p.name,
                        cpu(p.cpu),
                        p.memory,
                        if p.allowed { "yes" } else { "no" }.to_owned(),
                        p.reason.or(p.audit_warning).unwrap_or_default(),
                    ]
                })
                .collect();
            print_table(&["PLAN", "CPU", "MEMORY", "ALLOWED", "REASON"], rows);
            if !picker.enforced {
                eprintln!("note: the API does not enforce plans of {resource_type}");
            }
        }
    }
    Ok(())
}

/// vCPU as the API writes the number (`0.5`, `2.0`).
fn cpu(vcpu: f64) -> String {
    serde_json::Number::from_f64(vcpu)
        .map(|n| n.to_string())
        .unwrap_or_else(|| vcpu.to_string())
}

/// A policy's per-cluster install status in one cell: `prod-1: enforced; edge-1: pending`.
fn install_status(policy: &PolicyView) -> String {
    if policy.status.clusters.is_empty() {
        return "-".to_owned();
    }
    policy
        .status
        .clusters
        .iter()
        .map(|c| format!("{}: {}", c.cluster, c.status))
        .collect::<Vec<_>>()
        .join("; ")
}

const EXCEPTION_HEADERS: [&str; 7] = [
    "NAME",
    "POLICY",
    "STATUS",
    "EXPIRES",
    "LEFT",
    "REQUESTED BY",
    "APPROVED BY",
];

/// One exception as a table row; `LEFT` counts down to `expiresAt` in days, hours or minutes.
fn exception_row(view: &ExceptionView) -> Vec<String> {
    let left = chrono::DateTime::parse_from_rfc3339(&view.expires_at)
        .ok()
        .map(|end| end.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .map_or_else(
            || "?".to_owned(),
            |left| {
                if left <= chrono::Duration::zero() {
                    "-".to_owned()
                } else if left.num_days() >= 1 {
                    format!("{}d", left.num_days())
                } else if left.num_hours() >= 1 {
                    format!("{}h", left.num_hours())
                } else {
                    format!("{}m", left.num_minutes().max(1))
                }
            },
        );
    vec![
        view.name.clone(),
        view.spec["policy"].as_str().unwrap_or("").to_owned(),
        view.status.clone(),
        view.expires_at.clone(),
        left,
        view.requested_by.clone(),
        view.approved_by.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}
