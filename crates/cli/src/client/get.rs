//! `palisade get`: lists and single objects, as tables or the API's bodies.

use std::collections::BTreeMap;

use clap::Subcommand;
use palisade_api_types::document::{ModeDoc, PolicyMetadata, RuleDoc, API_VERSION, KIND};
use palisade_api_types::resource::Resource;
use palisade_api_types::view::{
    BoundaryList, ClusterList, ExceptionList, ExceptionView, NamespaceList, Picker, PolicyList,
    PolicyReport, PolicyView, ResourceList, ResourceView, TokenList,
};
use palisade_api_types::{PolicyDocument, PolicySpec};
use palisade_policy::RuleKind;
use serde::Deserialize;
use serde_json::Value;

use super::{
    all_pages, cell, decode_at, encode, exception_path, plans_of, print_body, print_table,
    split_target, Api, Connection, Failure, Format, Listed, Outcome,
};
use crate::help;
use crate::selector::Selector;

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
        /// Only resources whose labels match: key=value, key!=value, key or !key, separated
        /// by commas, all of which must hold. Filtered by the client (the API has no label
        /// query).
        #[arg(short = 'l', visible_alias = "selector", value_name = "SELECTOR", value_parser = parse_selector)]
        selector: Option<Selector>,
    },
    /// Show one resource: its plan, status and, with -o wide, image, placement, replicas and
    /// labels; -o json|yaml prints the API's body.
    #[command(after_help = help::GET_RESOURCE)]
    Resource {
        /// The boundary, type and name, e.g. shop/app/web.
        #[arg(value_name = "BOUNDARY/TYPE/NAME")]
        target: String,
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

fn parse_selector(text: &str) -> Result<Selector, String> {
    Selector::parse(text).map_err(|e| e.to_string())
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

    /// The policy's row, and the headers above it (`wide`: with its labels and who last
    /// changed it).
    fn row(&self, wide: bool) -> (Vec<&'static str>, Vec<String>) {
        let mut row = vec![
            self.view.name.clone(),
            self.view.version.to_string(),
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
        ];
        if wide {
            row.push(self.view.updated_by.clone());
            row.push(labels_cell(self.metadata.labels.as_ref()));
        }
        (policy_headers(wide), row)
    }
}

fn policy_headers(wide: bool) -> Vec<&'static str> {
    let mut headers = vec![
        "NAME", "VERSION", "MODE", "SCOPE", "RULES", "STATUS", "UPDATED",
    ];
    if wide {
        headers.extend(["UPDATED BY", "LABELS"]);
    }
    headers
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

pub fn get(connection: &Connection, kind: &Kind, watch: bool) -> Outcome {
    let api = Api::listing(connection)?;
    let format = connection.output;
    if watch {
        return watch_list(&api, kind, format);
    }
    if let Some(listing) = listing(&api, kind, format == Format::Wide)? {
        return listing.print(format);
    }
    if format.is_for_lists()
        && !matches!(
            kind,
            Kind::Policy { .. } | Kind::Exception { .. } | Kind::Resource { .. }
        )
    {
        return Err(Failure(
            "-o name and -o wide are for lists (and one policy, exception or resource); use table, json or yaml"
                .to_owned(),
        ));
    }
    match kind {
        Kind::Exception { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let answer = api.get(&exception_path(p[0], p[1]))?;
            let view: ExceptionView = answer.decode()?;
            let document = serde_json::json!({
                "apiVersion": API_VERSION,
                "kind": palisade_api_types::exception::KIND,
                "metadata": {"name": view.name, "boundary": view.boundary},
                "spec": view.spec,
            });
            match format {
                Format::Table | Format::Wide => {
                    let (headers, row) = exception_row(&view, format == Format::Wide);
                    print_table(&headers, vec![row]);
                }
                Format::Name => println!("{}/{}", view.boundary, view.name),
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
        Kind::Resource { target } => {
            let p = split_target(target, 3, "BOUNDARY/TYPE/NAME")?;
            let answer = api.get(&format!(
                "/v1/boundaries/{}/resources/{}/{}",
                encode(p[0]),
                encode(p[1]),
                encode(p[2])
            ))?;
            let view: ResourceView = answer.decode()?;
            let resource: Resource = decode_at(&answer.request, "", &view.body)?;
            match format {
                Format::Table | Format::Wide => {
                    let wide = format == Format::Wide;
                    let (_, _, row) = resource_row(&view, &resource, false, wide);
                    print_table(&resource_headers(false, wide), vec![row]);
                }
                Format::Name => println!("{}/{}/{}", p[0], p[1], p[2]),
                Format::Json | Format::Yaml => return print_body(format, &answer.body),
            }
        }
        Kind::Policy { target } => {
            let p = split_target(target, 2, "BOUNDARY/NAME")?;
            let answer = api.get(&format!("/v1/boundaries/{}/policies/{}", p[0], p[1]))?;
            let policy = Policy::read(&answer.request, "", answer.decode()?)?;
            match format {
                Format::Table | Format::Wide => {
                    let (headers, row) = policy.row(format == Format::Wide);
                    print_table(&headers, vec![row]);
                }
                Format::Name => println!("{}/{}", policy.view.boundary, policy.view.name),
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
            let path = format!(
                "/v1/boundaries/{}/policies/{}/report",
                encode(p[0]),
                encode(p[1])
            );
            let Some(report) = api.get(&path)?.for_table::<PolicyReport>(format)? else {
                return Ok(());
            };
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
        Kind::Plans {
            boundary,
            resource_type,
        } => {
            let path = format!(
                "/v1/boundaries/{boundary}/plans?type={}",
                encode(resource_type)
            );
            let Some(picker) = api.get(&path)?.for_table::<Picker>(format)? else {
                return Ok(());
            };
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
        // Lists, printed above.
        Kind::Boundaries
        | Kind::Clusters
        | Kind::Policies { .. }
        | Kind::Exceptions { .. }
        | Kind::Resources { .. }
        | Kind::Tokens
        | Kind::Namespaces { .. } => {}
    }
    Ok(())
}

/// One object of a list: its key (unique in the list), its name as `-o name` prints it, its
/// row and the item as the API answered it.
pub(super) struct Row {
    pub key: String,
    pub name: String,
    pub cells: Vec<String>,
    pub item: Value,
}

/// A list as read once, ready to print in any format.
pub(super) struct Listing {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Row>,
}

impl Listing {
    fn new<T>(
        headers: Vec<&'static str>,
        listed: Listed<T>,
        row: impl Fn(&T) -> (String, String, Vec<String>),
    ) -> Self {
        let raw = match listed.body {
            Value::Object(mut body) => match body.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let rows = listed
            .items
            .iter()
            .zip(raw)
            .map(|(item, raw)| {
                let (key, name, cells) = row(item);
                Row {
                    key,
                    name,
                    cells,
                    item: raw,
                }
            })
            .collect();
        Listing { headers, rows }
    }

    /// The body `-o json|yaml` prints: `{"items": [...]}`, the items as the API answered them.
    fn body(&self) -> Value {
        serde_json::json!({"items": self.rows.iter().map(|r| r.item.clone()).collect::<Vec<_>>()})
    }

    fn print(self, format: Format) -> Outcome {
        match format {
            Format::Json | Format::Yaml => print_body(format, &self.body()),
            Format::Name => {
                for row in self.rows {
                    println!("{}", row.name);
                }
                Ok(())
            }
            Format::Table | Format::Wide => {
                print_table(
                    &self.headers,
                    self.rows.into_iter().map(|r| r.cells).collect(),
                );
                Ok(())
            }
        }
    }
}

/// How often `--watch` reads the list again.
const WATCH_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// `get ... --watch`: the list once, then every second a line for each object whose printed
/// row (with -o json|yaml|name: whose item) changed or that is new, until interrupted or a
/// read fails. Tables keep the first table's header and column widths; -o json prints one
/// item per line, -o yaml one document per item.
fn watch_list(api: &Api<'_>, kind: &Kind, format: Format) -> Outcome {
    let wide = format == Format::Wide;
    let Some(first) = listing(api, kind, wide)? else {
        return Err(Failure(
            "--watch is for lists (boundaries, clusters, policies, exceptions, resources, \
             namespaces, tokens)"
                .to_owned(),
        ));
    };
    let mut widths: Vec<usize> = first.headers.iter().map(|h| h.len()).collect();
    for row in &first.rows {
        for (width, cell) in widths.iter_mut().zip(&row.cells) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let seen_as = |row: &Row| match format {
        Format::Table | Format::Wide => Value::from(row.cells.clone()),
        Format::Json | Format::Yaml | Format::Name => row.item.clone(),
    };
    let print = |row: &Row| -> Outcome {
        match format {
            Format::Table | Format::Wide => println!("{}", aligned(&row.cells, &widths)),
            Format::Name => println!("{}", row.name),
            Format::Json => println!(
                "{}",
                serde_json::to_string(&row.item)
                    .map_err(|e| Failure(format!("cannot print {}: {e}", row.name)))?
            ),
            Format::Yaml => print!(
                "---\n{}",
                serde_yaml_ng::to_string(&row.item)
                    .map_err(|e| Failure(format!("cannot print {}: {e}", row.name)))?
            ),
        }
        Ok(())
    };
    if matches!(format, Format::Table | Format::Wide) {
        let headers: Vec<String> = first.headers.iter().map(|h| (*h).to_owned()).collect();
        println!("{}", aligned(&headers, &widths));
    }
    let mut seen: BTreeMap<String, Value> = BTreeMap::new();
    for row in &first.rows {
        print(row)?;
        seen.insert(row.key.clone(), seen_as(row));
    }
    loop {
        std::thread::sleep(WATCH_PERIOD);
        let Some(next) = listing(api, kind, wide)? else {
            return Ok(());
        };
        for row in &next.rows {
            let now = seen_as(row);
            if seen.get(&row.key) != Some(&now) {
                print(row)?;
                seen.insert(row.key.clone(), now);
            }
        }
    }
}

/// A table line with the columns padded to `widths` (a longer cell widens only its line).
fn aligned(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    let cells: Vec<String> = cells.iter().map(|c| super::printable(c)).collect();
    for (i, cell) in cells.iter().enumerate() {
        if i + 1 == cells.len() {
            line.push_str(cell);
        } else {
            let width = widths.get(i).copied().unwrap_or(0);
            line.push_str(&format!("{cell:<width$}   "));
        }
    }
    line.trim_end().to_owned()
}

/// The list `kind` names, read whole (every page), with `wide`'s extra columns; None for a
/// kind that is not a list.
pub(super) fn listing(api: &Api<'_>, kind: &Kind, wide: bool) -> Result<Option<Listing>, Failure> {
    let listing = match kind {
        Kind::Boundaries => Listing::new(
            vec!["NAME", "DISPLAY NAME", "CREATED"],
            all_pages::<BoundaryList>(api, "/v1/boundaries")?,
            |b| {
                (
                    b.name.clone(),
                    format!("boundary/{}", b.name),
                    vec![
                        b.name.clone(),
                        cell(b.display_name.as_deref()),
                        b.created_at.clone(),
                    ],
                )
            },
        ),
        Kind::Clusters => Listing::new(
            vec![
                "NAME",
                "KUBERNETES",
                "ADMISSION RULES",
                "LAST ERROR",
                "LAYOUT",
                "LAST REPAIR",
            ],
            all_pages::<ClusterList>(api, "/v1/clusters")?,
            |c| {
                (
                    c.name.clone(),
                    format!("cluster/{}", c.name),
                    cluster_row(c),
                )
            },
        ),
        Kind::Policies { boundary } => {
            let list =
                all_pages::<PolicyList>(api, &format!("/v1/boundaries/{boundary}/policies"))?;
            let policies = list
                .items
                .iter()
                .enumerate()
                .map(|(i, view)| Policy::read(&list.request, &format!("items[{i}]"), view.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            let listed = Listed {
                request: list.request,
                items: policies,
                body: list.body,
            };
            let headers = policy_headers(wide);
            Listing::new(headers, listed, |p| {
                (
                    p.view.name.clone(),
                    format!("{}/{}", p.view.boundary, p.view.name),
                    p.row(wide).1,
                )
            })
        }
        Kind::Exceptions { boundary } => Listing::new(
            exception_headers(wide),
            all_pages::<ExceptionList>(
                api,
                &format!("/v1/boundaries/{}/exceptions", encode(boundary)),
            )?,
            |e| {
                (
                    e.name.clone(),
                    format!("{}/{}", e.boundary, e.name),
                    exception_row(e, wide).1,
                )
            },
        ),
        Kind::Namespaces { boundary } => Listing::new(
            vec!["CLUSTER", "NAMESPACE", "STATUS", "CREATED"],
            all_pages::<NamespaceList>(api, &format!("/v1/boundaries/{boundary}/namespaces"))?,
            |n| {
                (
                    format!("{}/{}", n.cluster, n.name),
                    format!("{}/{}", n.boundary, n.name),
                    vec![
                        n.cluster.clone(),
                        n.name.clone(),
                        n.status.clone(),
                        n.created_at.clone(),
                    ],
                )
            },
        ),
        Kind::Tokens => {
            let mut headers = vec!["ID", "ROLE", "BOUNDARY", "EXPIRES", "CREATED"];
            if wide {
                headers.push("CREATED BY");
            }
            Listing::new(headers, all_pages::<TokenList>(api, "/v1/tokens")?, |t| {
                let mut cells = vec![
                    t.id.clone(),
                    t.role.clone(),
                    cell(t.boundary.as_deref()),
                    cell(t.expires_at.as_deref()),
                    t.created_at.clone(),
                ];
                if wide {
                    cells.push(t.created_by.clone());
                }
                (t.id.clone(), format!("token/{}", t.id), cells)
            })
        }
        Kind::Resources {
            boundary,
            resource_type,
            grandfathered,
            selector,
        } => resources(
            api,
            boundary,
            resource_type.as_deref(),
            *grandfathered,
            selector.as_ref(),
            wide,
        )?,
        Kind::Policy { .. }
        | Kind::Exception { .. }
        | Kind::Resource { .. }
        | Kind::Report { .. }
        | Kind::Plans { .. } => return Ok(None),
    };
    Ok(Some(listing))
}

/// A cluster's row of `get clusters`.
fn cluster_row(c: &palisade_api_types::view::ClusterView) -> Vec<String> {
    let admission = if c.admission.enforced {
        "enforced".to_owned()
    } else {
        format!("not enforced: {}", cell(c.admission.reason.as_deref()))
    };
    // The admission layout in use and why, e.g. `shared: 212 boundaries`.
    let layout = c
        .layout
        .as_ref()
        .map_or_else(|| "-".to_owned(), |l| format!("{}: {}", l.name, l.reason));
    // What palisade last put back there, e.g. `2026-12-05T22:30:00Z binding
    // trusted.shop.palisade.dev was deleted; restored`.
    let repair = c
        .last_repair
        .as_ref()
        .map_or_else(|| "-".to_owned(), |r| format!("{} {}", r.at, r.message));
    vec![
        c.name.clone(),
        cell(c.kubernetes_version.as_deref()),
        admission,
        cell(c.last_error.as_deref()),
        layout,
        repair,
    ]
}

/// A boundary's resources (`get resources`), those `selector` selects (client-side: the API
/// has no label query).
fn resources(
    api: &Api<'_>,
    boundary: &str,
    resource_type: Option<&str>,
    grandfathered: bool,
    selector: Option<&Selector>,
    wide: bool,
) -> Result<Listing, Failure> {
    let mut path = format!("/v1/boundaries/{boundary}/resources");
    let mut query = Vec::new();
    if let Some(ty) = resource_type {
        query.push(format!("type={}", encode(ty)));
    }
    if grandfathered {
        query.push("grandfathered=true".into());
    }
    if !query.is_empty() {
        path = format!("{path}?{}", query.join("&"));
    }
    let list = all_pages::<ResourceList>(api, &path)?;
    let resources = list
        .items
        .iter()
        .enumerate()
        .map(|(i, view)| {
            decode_at::<Resource>(&list.request, &format!("items[{i}]"), &view.body)
                .map(|resource| (view.clone(), resource))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let headers = resource_headers(grandfathered, wide);
    let listed = Listed {
        request: list.request,
        items: resources,
        body: list.body,
    };
    let mut listing = Listing::new(headers, listed, |(view, resource)| {
        resource_row(view, resource, grandfathered, wide)
    });
    if let Some(selector) = selector {
        // The labels as the item came; rows and items were built in the same order.
        listing.rows.retain(|row| {
            let labels: Option<BTreeMap<String, String>> = row
                .item
                .get("labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok());
            selector.matches(labels.as_ref())
        });
    }
    Ok(listing)
}

/// The columns of a resource row.
fn resource_headers(grandfathered: bool, wide: bool) -> Vec<&'static str> {
    let mut headers = vec!["TYPE", "NAME", "PLAN", "UPDATED"];
    if grandfathered {
        headers.push("DISALLOWED BY");
    }
    headers.push("STATUS");
    if wide {
        headers.extend(["IMAGE", "PLACEMENT", "REPLICAS", "LABELS"]);
    }
    headers
}

/// A resource's key in a list, its name as `-o name` prints it, and its row.
fn resource_row(
    view: &ResourceView,
    resource: &Resource,
    grandfathered: bool,
    wide: bool,
) -> (String, String, Vec<String>) {
    let mut row = vec![
        resource.resource_type.clone(),
        resource.name.clone(),
        plans_of(resource),
        view.updated_at.clone(),
    ];
    if grandfathered {
        row.push(cell(
            view.denied_by.as_ref().map(|p| p.join(",")).as_deref(),
        ));
    }
    row.push(cell(
        view.status.as_ref().map(ToString::to_string).as_deref(),
    ));
    if wide {
        row.push(images_of(resource));
        row.push(match (&resource.cluster, &resource.namespace) {
            (Some(cluster), Some(namespace)) => format!("{cluster}/{namespace}"),
            (Some(cluster), None) => cluster.clone(),
            _ => "-".to_owned(),
        });
        row.push(cell(resource.replicas.map(|r| r.to_string()).as_deref()));
        row.push(labels_cell(resource.labels.as_ref()));
    }
    (
        format!("{}/{}", resource.resource_type, resource.name),
        format!(
            "{}/{}/{}",
            view.boundary, resource.resource_type, resource.name
        ),
        row,
    )
}

/// What a resource runs: its image, its source, or its components' images.
fn images_of(resource: &Resource) -> String {
    match (&resource.components, &resource.image, &resource.source) {
        (Some(components), _, _) => components
            .iter()
            .map(|c| format!("{}={}", c.name, c.image))
            .collect::<Vec<_>>()
            .join(","),
        (None, Some(image), _) => image.clone(),
        (None, None, Some(source)) => source.clone(),
        (None, None, None) => "-".to_owned(),
    }
}

/// Labels in one cell: `team=web,tier=front`, `-` for none.
fn labels_cell(labels: Option<&BTreeMap<String, String>>) -> String {
    match labels {
        Some(labels) if !labels.is_empty() => labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".to_owned(),
    }
}

/// vCPU as the API writes the number (`0.5`, `2.0`).
fn cpu(vcpu: f64) -> String {
    serde_json::Number::from_f64(vcpu)
        .map(|n| n.to_string())
        .unwrap_or_else(|| vcpu.to_string())
}

/// A policy's per-cluster install status in one cell: `prod-1: enforced; edge-1: pending`.
/// A running or paused rollout follows: `...; rolling out v4: stage 2/3, 0 denials, next 14:00`.
fn install_status(policy: &PolicyView) -> String {
    let mut parts: Vec<String> = policy
        .status
        .clusters
        .iter()
        .map(|c| match &c.in_force {
            Some(in_force) => format!("{}: {} {in_force}", c.cluster, c.status),
            None => format!("{}: {}", c.cluster, c.status),
        })
        .collect();
    if let Some(rollout) = policy
        .rollout
        .as_ref()
        .filter(|r| r.state == "running" || r.state == "paused")
    {
        parts.push(super::rollout::rollout_line(rollout));
    }
    if parts.is_empty() {
        return "-".to_owned();
    }
    parts.join("; ")
}

fn exception_headers(wide: bool) -> Vec<&'static str> {
    let mut headers = vec![
        "NAME",
        "POLICY",
        "STATUS",
        "EXPIRES",
        "LEFT",
        "REQUESTED BY",
        "APPROVED BY",
    ];
    if wide {
        headers.push("REASON");
    }
    headers
}

/// One exception as a table row, and the headers above it (`wide`: with its reason); `LEFT`
/// counts down to `expiresAt` in days, hours or minutes.
fn exception_row(view: &ExceptionView, wide: bool) -> (Vec<&'static str>, Vec<String>) {
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
    let mut row = vec![
        view.name.clone(),
        view.spec["policy"].as_str().unwrap_or("").to_owned(),
        view.status.clone(),
        view.expires_at.clone(),
        left,
        view.requested_by.clone(),
        view.approved_by.clone().unwrap_or_else(|| "-".to_owned()),
    ];
    if wide {
        row.push(view.spec["reason"].as_str().unwrap_or("-").to_owned());
    }
    (exception_headers(wide), row)
}
