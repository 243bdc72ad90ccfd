//! `palisade describe exception|policy B/NAME`, `describe resource B/TYPE/NAME` and `palisade
//! describe cluster NAME` (SPEC 4.2 v3): one object in words, as
//! `kubectl describe` shows it: what it says, its status in each cluster, and who changed it
//! when. `-o json|yaml` prints the API's body instead.

use clap::Subcommand;
use palisade_api_types::view::{
    ClusterView, ExceptionList, ExceptionView, History, PolicyView, ResourceView, WorkloadDetail,
};
use serde_json::Value;

use super::{
    all_pages, encode, exception_path, print_body, printable_lines, split_target, table, Api,
    Connection, Failure, Format, Outcome,
};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum DescribeKind {
    /// An exception: what it lets past, until when and why, who asked and who approved, its
    /// status in each cluster and its history.
    #[command(after_help = help::DESCRIBE_EXCEPTION)]
    Exception {
        /// The boundary and the exception, e.g. shop/legacy-nginx.
        #[arg(value_name = "BOUNDARY/NAME")]
        target: String,
    },
    /// A policy: its mode, scope and rules, its status in each cluster, the exceptions to it
    /// and its history.
    #[command(after_help = help::DESCRIBE_POLICY)]
    Policy {
        /// The boundary and the policy, e.g. shop/trusted.
        #[arg(value_name = "BOUNDARY/NAME")]
        target: String,
    },
    /// A resource: its plan, image or source, placement, status, and what its cluster holds
    /// for a workload (replicas, pods, build Job, latest events and denials), read live.
    #[command(after_help = help::DESCRIBE_RESOURCE)]
    Resource {
        /// The boundary, type and name, e.g. shop/app/web.
        #[arg(value_name = "BOUNDARY/TYPE/NAME")]
        target: String,
    },
    /// A cluster (admin): its Kubernetes version, whether it enforces admission rules, the
    /// layout of palisade's objects there, which replica reconciles it, restarts and repairs
    /// seen, and the last error.
    #[command(after_help = help::DESCRIBE_CLUSTER)]
    Cluster {
        /// The cluster, e.g. prod-1.
        #[arg(value_name = "NAME")]
        name: String,
    },
}

pub fn describe(connection: &Connection, kind: &DescribeKind) -> Outcome {
    let api = Api::new(connection)?;
    match kind {
        DescribeKind::Exception { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let path = exception_path(p[0], p[1]);
            let answer = api.get(&path)?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
            let view: ExceptionView = answer.decode()?;
            let history = all_pages::<History>(&api, &format!("{path}/history"))?;
            print!(
                "{}",
                printable_lines(&exception_text(&view, &history.items, chrono::Utc::now()))
            );
        }
        DescribeKind::Policy { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let path = format!("/v1/boundaries/{}/policies/{}", encode(p[0]), encode(p[1]));
            let answer = api.get(&path)?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
            let view: PolicyView = answer.decode()?;
            let exceptions = all_pages::<ExceptionList>(
                &api,
                &format!("/v1/boundaries/{}/exceptions", encode(p[0])),
            )?;
            let history = all_pages::<History>(&api, &format!("{path}/history"))?;
            let mine: Vec<&ExceptionView> = exceptions
                .items
                .iter()
                .filter(|x| x.spec["policy"].as_str() == Some(view.name.as_str()))
                .collect();
            print!(
                "{}",
                printable_lines(&policy_text(
                    &view,
                    &mine,
                    &history.items,
                    chrono::Utc::now()
                ))
            );
        }
        DescribeKind::Resource { target } => {
            let p = split_target(target, 3, "BOUNDARY/TYPE/NAME")?;
            let path = format!(
                "/v1/boundaries/{}/resources/{}/{}",
                encode(p[0]),
                encode(p[1]),
                encode(p[2])
            );
            let answer = api.get(&path)?;
            let view: ResourceView = answer.decode()?;
            let workload = if !WORKLOAD_TYPES.contains(&p[1]) || view.body["cluster"].is_null() {
                None
            } else {
                Some(
                    api.get(&format!("{path}/workload"))
                        .and_then(|a| a.decode::<WorkloadDetail>()),
                )
            };
            if connection.output != Format::Table {
                let mut body = answer.body.clone();
                if let (Some(Ok(detail)), Some(map)) = (&workload, body.as_object_mut()) {
                    map.insert(
                        "workload".into(),
                        serde_json::to_value(detail).unwrap_or_default(),
                    );
                }
                return print_body(connection.output, &body);
            }
            print!(
                "{}",
                printable_lines(&resource_text(&view, workload.as_ref()))
            );
        }
        DescribeKind::Cluster { name } => {
            let answer = api.get(&format!("/v1/clusters/{}", encode(name)))?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
            let view: ClusterView = answer.decode()?;
            print!("{}", printable_lines(&cluster_text(&view)));
        }
    }
    Ok(())
}

/// The types palisade runs a workload for (SPEC 5).
const WORKLOAD_TYPES: [&str; 4] = ["app", "function", "static_web_app", "container_instance"];

/// A resource in words: what it is, where it runs, and what its cluster holds for it.
pub(crate) fn resource_text(
    view: &ResourceView,
    workload: Option<&Result<WorkloadDetail, Failure>>,
) -> String {
    let body = &view.body;
    let text = |key: &str| body[key].as_str().map(str::to_owned);
    let mut lines = Lines(Vec::new());
    lines.add("Name", text("name").unwrap_or_default());
    lines.add("Type", text("type").unwrap_or_default());
    lines.add("Boundary", view.boundary.clone());
    if let Some(plan) = text("plan") {
        lines.add("Plan", plan);
    }
    for component in body["components"].as_array().into_iter().flatten() {
        lines.add(
            "Component",
            format!(
                "{}: plan {}, image {}",
                component["name"].as_str().unwrap_or_default(),
                component["plan"].as_str().unwrap_or_default(),
                component["image"].as_str().unwrap_or_default()
            ),
        );
    }
    for key in ["image", "source", "upload"] {
        if let Some(value) = text(key) {
            let mut label = key.to_owned();
            label[..1].make_ascii_uppercase();
            lines.add(&label, value);
        }
    }
    if let Some(replicas) = body["replicas"].as_u64() {
        lines.add("Replicas wanted", replicas.to_string());
    }
    if let Some(labels) = list(&body["labels"]) {
        lines.add("Labels", labels);
    }
    let workload_type = WORKLOAD_TYPES.contains(&body["type"].as_str().unwrap_or_default());
    if workload_type {
        lines.add(
            "Placement",
            match (text("cluster"), text("namespace")) {
                (Some(cluster), Some(namespace)) => {
                    format!("cluster {cluster}, namespace {namespace}")
                }
                _ => "not placed yet".to_owned(),
            },
        );
        lines.add(
            "Status",
            view.status
                .as_ref()
                .map_or_else(|| "not deployed yet".to_owned(), ToString::to_string),
        );
    }
    let mut after = String::new();
    match workload {
        Some(Ok(detail)) => {
            lines.add(
                "Deployment",
                match &detail.deployment {
                    Some(d) => format!(
                        "{}: {}/{} ready ({} available, {} up to date)",
                        d.name, d.ready, d.desired, d.available, d.updated
                    ),
                    None => "none in the cluster".to_owned(),
                },
            );
            if let Some(build) = &detail.build {
                lines.add(
                    "Build",
                    match &build.message {
                        Some(message) => format!("{}: {} ({message})", build.name, build.state),
                        None => format!("{}: {}", build.name, build.state),
                    },
                );
            }
            after.push_str("\nPods:\n");
            if detail.pods.is_empty() {
                after.push_str("  none\n");
            } else {
                let rows = detail
                    .pods
                    .iter()
                    .map(|p| {
                        vec![
                            p.name.clone(),
                            p.phase.clone(),
                            if p.ready { "yes" } else { "no" }.to_owned(),
                            p.restarts.to_string(),
                            p.node.clone().unwrap_or_else(|| "-".into()),
                        ]
                    })
                    .collect();
                after.push_str(&table(
                    &["NAME", "PHASE", "READY", "RESTARTS", "NODE"],
                    rows,
                    "  ",
                ));
            }
            after.push_str("\nEvents (latest first):\n");
            if detail.events.is_empty() {
                after.push_str("  none\n");
            } else {
                let rows = detail
                    .events
                    .iter()
                    .map(|e| {
                        vec![
                            e.time.clone().unwrap_or_else(|| "-".into()),
                            e.event_type.clone(),
                            e.reason.clone(),
                            e.object.clone(),
                            e.message.clone(),
                        ]
                    })
                    .collect();
                after.push_str(&table(
                    &["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                    rows,
                    "  ",
                ));
            }
        }
        Some(Err(Failure(why))) => lines.add("Cluster", format!("could not be read: {why}")),
        None => {}
    }
    lines.add("Created", view.created_at.clone());
    lines.add("Updated", view.updated_at.clone());
    format!("{}{after}", lines.text())
}

/// A cluster in words.
pub(crate) fn cluster_text(view: &ClusterView) -> String {
    let mut lines = Lines(Vec::new());
    lines.add("Name", view.name.clone());
    lines.add(
        "Kubernetes version",
        view.kubernetes_version
            .clone()
            .unwrap_or_else(|| "unknown (palisade has not reached it yet)".into()),
    );
    let admission = match (&view.admission.enforced, &view.admission.reason) {
        (true, _) => "enforced".to_owned(),
        (false, Some(reason)) => format!("not enforced: {reason}"),
        (false, None) => "not enforced".to_owned(),
    };
    lines.add("Admission rules", admission);
    lines.add(
        "Layout",
        view.layout.as_ref().map_or_else(
            || "not chosen yet".to_owned(),
            |l| format!("{} ({})", l.name, l.reason),
        ),
    );
    lines.add(
        "Reconciled by",
        view.reconciled_by
            .clone()
            .unwrap_or_else(|| "no replica now".into()),
    );
    let mut reserved = vec!["default".to_owned(), "kube-*".to_owned()];
    reserved.extend(view.reserved_namespaces.iter().cloned());
    lines.add("Reserved namespaces", reserved.join(", "));
    lines.add(
        "Last error",
        view.last_error.clone().unwrap_or_else(|| "none".into()),
    );
    lines.add(
        "API server restarts",
        match &view.api_server_restarted_at {
            Some(at) => format!("{} (last at {at})", view.api_server_restarts),
            None => view.api_server_restarts.to_string(),
        },
    );
    lines.add(
        "Repairs",
        match &view.last_repair {
            Some(repair) => format!(
                "{} (last at {}: {})",
                view.repairs, repair.at, repair.message
            ),
            None => view.repairs.to_string(),
        },
    );
    lines.add("Created", view.created_at.clone());
    lines.add("Updated", view.updated_at.clone());
    lines.text()
}

/// `Label:` lines aligned at one column.
struct Lines(Vec<(String, String)>);

impl Lines {
    fn add(&mut self, label: &str, value: impl Into<String>) {
        self.0.push((label.to_owned(), value.into()));
    }

    fn text(&self) -> String {
        let width = self.0.iter().map(|(l, _)| l.len() + 1).max().unwrap_or(0);
        self.0
            .iter()
            .map(|(label, value)| {
                let label = format!("{label}:");
                if value.is_empty() {
                    format!("{label}\n")
                } else {
                    format!("{label:<width$}  {value}\n")
                }
            })
            .collect()
    }
}

/// The strings of a list field of `value`, joined with `, `; `None` when absent or empty.
fn list(value: &Value) -> Option<String> {
    let items: Vec<String> = match value {
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect(),
        _ => return None,
    };
    (!items.is_empty()).then(|| items.join(", "))
}

/// How long until `end`: `56d 3h`, `5h 12m`, `12m`, or `ended`.
fn time_left(end: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let Ok(end) = chrono::DateTime::parse_from_rfc3339(end) else {
        return "?".to_owned();
    };
    let left = end.with_timezone(&chrono::Utc) - now;
    if left <= chrono::Duration::zero() {
        "ended".to_owned()
    } else if left.num_days() >= 1 {
        format!("{}d {}h left", left.num_days(), left.num_hours() % 24)
    } else if left.num_hours() >= 1 {
        format!("{}h {}m left", left.num_hours(), left.num_minutes() % 60)
    } else {
        format!("{}m left", left.num_minutes().max(1))
    }
}

/// The history as a table; `versioned` (a policy's) puts the version each change saved first.
fn history_table(history: &[palisade_api_types::view::HistoryEntry], versioned: bool) -> String {
    let rows = history
        .iter()
        .map(|h| {
            let action = h.action.clone().unwrap_or_else(|| {
                match (&h.before, &h.after) {
                    (None, Some(_)) => "created",
                    (Some(_), None) => "deleted",
                    _ => "changed",
                }
                .to_owned()
            });
            let mut row = vec![h.at.clone(), h.actor.clone(), action];
            if versioned {
                row.insert(
                    0,
                    h.version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                );
            }
            row
        })
        .collect();
    if versioned {
        table(&["VERSION", "AT", "BY", "ACTION"], rows, "  ")
    } else {
        table(&["AT", "BY", "ACTION"], rows, "  ")
    }
}

/// `describe exception` in words.
pub(crate) fn exception_text(
    view: &ExceptionView,
    history: &[palisade_api_types::view::HistoryEntry],
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let spec = &view.spec;
    let mut lines = Lines(Vec::new());
    lines.add("Name", view.name.clone());
    lines.add("Boundary", view.boundary.clone());
    lines.add("Policy", spec["policy"].as_str().unwrap_or("-"));
    lines.add(
        "Rules",
        list(&spec["rules"]).unwrap_or_else(|| "every rule of the policy".to_owned()),
    );
    lines.add("Status", view.status.clone());
    lines.add(
        "Expires",
        format!("{} ({})", view.expires_at, time_left(&view.expires_at, now)),
    );
    lines.add("Reason", spec["reason"].as_str().unwrap_or("-"));
    lines.add("Requested by", view.requested_by.clone());
    lines.add(
        "Approved by",
        match (&view.approved_by, &view.approved_at) {
            (Some(by), Some(at)) => format!("{by} at {at}"),
            (Some(by), None) => by.clone(),
            _ => "- (a request: it lets nothing past until approved)".to_owned(),
        },
    );
    if let (Some(resources), Some(plans)) = (list(&spec["resources"]), list(&spec["plans"])) {
        lines.add("Resources", resources);
        lines.add("Plans", plans);
    }
    let mut text = lines.text();
    let object_match = &spec["match"];
    if object_match.is_object() {
        let mut lines = Lines(Vec::new());
        for (label, field, every) in [
            (
                "Clusters",
                "clusters",
                "every cluster of the policy's scope",
            ),
            (
                "Namespaces",
                "namespaces",
                "every namespace of the boundary",
            ),
            ("Labels", "labels", "any"),
            ("Images", "images", "every image of a matched object"),
        ] {
            lines.add(
                &format!("  {label}"),
                list(&object_match[field]).unwrap_or_else(|| every.to_owned()),
            );
        }
        text.push_str("Match:\n");
        text.push_str(&lines.text());
    }
    if !view.clusters.is_empty() {
        text.push_str("Clusters:\n");
        let rows = view
            .clusters
            .iter()
            .map(|c| vec![c.cluster.clone(), c.status.clone()])
            .collect();
        text.push_str(&table(&["CLUSTER", "STATUS"], rows, "  "));
    }
    text.push_str("History:\n");
    text.push_str(&history_table(history, false));
    text
}

/// `describe policy` in words.
pub(crate) fn policy_text(
    view: &PolicyView,
    exceptions: &[&ExceptionView],
    history: &[palisade_api_types::view::HistoryEntry],
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let spec = &view.spec;
    let mut lines = Lines(Vec::new());
    lines.add("Name", view.name.clone());
    lines.add("Boundary", view.boundary.clone());
    lines.add("Version", view.version.to_string());
    lines.add("Mode", spec["mode"].as_str().unwrap_or("enforce"));
    lines.add(
        "Scope",
        list(&spec["scope"]["clusters"]).unwrap_or_else(|| "every cluster of the boundary".into()),
    );
    if let Some(description) = spec["description"].as_str() {
        lines.add("Description", description);
    }
    lines.add(
        "Updated",
        format!("{} by {}", view.updated_at, view.updated_by),
    );
    let mut text = lines.text();
    text.push_str("Rules:\n");
    for rule in spec["rules"].as_array().into_iter().flatten() {
        if let Some((kind, body)) = rule.as_object().and_then(|o| o.iter().next()) {
            let detail = match body {
                Value::Object(fields) if !fields.is_empty() => fields
                    .iter()
                    .map(|(k, v)| {
                        let v = list(v).unwrap_or_else(|| v.to_string());
                        format!("{k}: {v}")
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                _ => String::new(),
            };
            text.push_str(format!("  {kind}  {detail}").trim_end());
            text.push('\n');
        }
    }
    text.push_str("Clusters:\n");
    if view.status.clusters.is_empty() {
        text.push_str("  none: nothing of it is installed in clusters\n");
    } else {
        let rows = view
            .status
            .clusters
            .iter()
            .map(|c| {
                vec![
                    c.cluster.clone(),
                    c.status.to_string(),
                    c.updated_at.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            })
            .collect();
        text.push_str(&table(&["CLUSTER", "STATUS", "SINCE"], rows, "  "));
    }
    text.push_str("Exceptions:\n");
    if exceptions.is_empty() {
        text.push_str("  none\n");
    } else {
        let rows = exceptions
            .iter()
            .map(|x| {
                vec![
                    x.name.clone(),
                    x.status.clone(),
                    x.expires_at.clone(),
                    time_left(&x.expires_at, now),
                ]
            })
            .collect();
        text.push_str(&table(&["NAME", "STATUS", "EXPIRES", "LEFT"], rows, "  "));
    }
    text.push_str("History:\n");
    text.push_str(&history_table(history, true));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_api_types::view::{ExceptionClusterStatus, HistoryEntry};
    use serde_json::json;

    #[test]
    fn a_cluster_is_described_in_words() {
        let mut view = ClusterView {
            name: "prod-1".into(),
            kubernetes_version: Some("v1.37.2".into()),
            admission: palisade_api_types::view::Admission {
                enforced: true,
                reason: None,
            },
            last_error: None,
            api_server_restarts: 2,
            api_server_restarted_at: Some("2026-12-06T08:00:00Z".into()),
            repairs: 1,
            last_repair: Some(palisade_api_types::view::Repair {
                message: "namespace web lost its boundary label; restored".into(),
                at: "2026-12-06T08:30:00Z".into(),
            }),
            layout: Some(palisade_api_types::view::ClusterLayout {
                name: "per-boundary".into(),
                reason: "3 boundaries".into(),
            }),
            reserved_namespaces: vec!["monitoring".into()],
            reconciled_by: Some("palisade-7d9f".into()),
            created_at: "2026-12-01T00:00:00Z".into(),
            updated_at: "2026-12-06T08:00:00Z".into(),
        };
        assert_eq!(
            cluster_text(&view),
            "\
Name:                 prod-1
Kubernetes version:   v1.37.2
Admission rules:      enforced
Layout:               per-boundary (3 boundaries)
Reconciled by:        palisade-7d9f
Reserved namespaces:  default, kube-*, monitoring
Last error:           none
API server restarts:  2 (last at 2026-12-06T08:00:00Z)
Repairs:              1 (last at 2026-12-06T08:30:00Z: namespace web lost its boundary label; restored)
Created:              2026-12-01T00:00:00Z
Updated:              2026-12-06T08:00:00Z
"
        );
        view.kubernetes_version = None;
        view.admission = palisade_api_types::view::Admission {
            enforced: false,
            reason: Some("not checked yet: palisade has not reached this cluster".into()),
        };
        view.layout = None;
        view.reconciled_by = None;
        view.last_error = Some("no answer within 60 s".into());
        let text = cluster_text(&view);
        for line in [
            "Kubernetes version:   unknown (palisade has not reached it yet)\n",
            "Admission rules:      not enforced: not checked yet: palisade has not reached this cluster\n",
            "Layout:               not chosen yet\n",
            "Reconciled by:        no replica now\n",
            "Last error:           no answer within 60 s\n",
        ] {
            assert!(text.contains(line), "{text}");
        }
    }

    #[test]
    fn an_exception_is_described_in_words() {
        let view = ExceptionView {
            boundary: "shop".into(),
            name: "legacy-nginx".into(),
            spec: json!({"policy": "trusted", "rules": ["AllowedRegistries"],
                "match": {"namespaces": ["web"], "labels": {"app": "legacy"},
                    "images": ["docker.io/library/nginx:1.27"]},
                "expiresAt": "2027-01-31T00:00:00Z", "reason": "moving to ghcr.io/acme, OPS-1234"}),
            status: "active".into(),
            expires_at: "2027-01-31T00:00:00Z".into(),
            requested_by: "token:9a1b7e (developer)".into(),
            approved_by: Some("token:5f0c2d (boundary-admin)".into()),
            approved_at: Some("2026-12-06T09:00:00Z".into()),
            etag: "\"1\"".into(),
            created_at: "2026-12-06T08:00:00Z".into(),
            updated_at: "2026-12-06T09:00:00Z".into(),
            updated_by: "token:5f0c2d (boundary-admin)".into(),
            warnings: None,
            clusters: vec![
                ExceptionClusterStatus {
                    cluster: "prod-1".into(),
                    status: "enforced".into(),
                },
                ExceptionClusterStatus {
                    cluster: "prod-2".into(),
                    status: "pending".into(),
                },
            ],
        };
        let history = [
            HistoryEntry {
                actor: "token:9a1b7e (developer)".into(),
                at: "2026-12-06T08:00:00Z".into(),
                action: Some("put".into()),
                version: None,
                before: None,
                after: Some(json!({})),
            },
            HistoryEntry {
                actor: "token:5f0c2d (boundary-admin)".into(),
                at: "2026-12-06T09:00:00Z".into(),
                action: Some("approve".into()),
                version: None,
                before: Some(json!({})),
                after: Some(json!({})),
            },
        ];
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-06T10:30:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            exception_text(&view, &history, now),
            "\
Name:          legacy-nginx
Boundary:      shop
Policy:        trusted
Rules:         AllowedRegistries
Status:        active
Expires:       2027-01-31T00:00:00Z (55d 13h left)
Reason:        moving to ghcr.io/acme, OPS-1234
Requested by:  token:9a1b7e (developer)
Approved by:   token:5f0c2d (boundary-admin) at 2026-12-06T09:00:00Z
Match:
  Clusters:    every cluster of the policy's scope
  Namespaces:  web
  Labels:      app=legacy
  Images:      docker.io/library/nginx:1.27
Clusters:
  CLUSTER   STATUS
  prod-1    enforced
  prod-2    pending
History:
  AT                     BY                              ACTION
  2026-12-06T08:00:00Z   token:9a1b7e (developer)        put
  2026-12-06T09:00:00Z   token:5f0c2d (boundary-admin)   approve
"
        );
    }
}
