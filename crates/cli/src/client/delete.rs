//! `palisade delete`.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

use super::{print_body, resource_target, split_target, Answer, Api, Connection, Format, Outcome};
use crate::help;

#[derive(Debug, Subcommand)]
pub enum DeleteKind {
    /// Delete a boundary (admin); refused while it has resources, policies or namespaces.
    #[command(after_help = help::DELETE_BOUNDARY)]
    Boundary {
        /// The boundary.
        name: String,
    },
    /// Delete a policy; palisade removes what it installed for it from the clusters.
    #[command(after_help = help::DELETE_POLICY)]
    Policy {
        /// The boundary and the policy, e.g. shop/size-limits.
        #[arg(value_name = "BOUNDARY/NAME")]
        name: String,
    },
    /// Delete a resource.
    #[command(after_help = help::DELETE_RESOURCE)]
    Resource {
        /// The boundary, type and name, e.g. shop/app/web. TYPE is one of app, container_instance,
        /// postgresql, sqlserver, qdrant, valkey, function, static_web_app.
        #[arg(value_name = "BOUNDARY/TYPE/NAME")]
        name: String,
    },
    /// Revoke an API token (the same as `palisade token revoke`).
    #[command(after_help = help::DELETE_TOKEN)]
    Token {
        /// The token's id (the ID column of `palisade get tokens`).
        id: String,
    },
    /// Remove palisade's objects from a cluster, then forget it (admin).
    #[command(after_help = help::DELETE_CLUSTER)]
    Cluster {
        /// The cluster.
        name: String,
        /// Forget the cluster even when it cannot be reached (its objects stay there).
        #[arg(long)]
        force: bool,
    },
    /// Release a namespace: palisade removes its boundary label; the namespace stays.
    #[command(after_help = help::DELETE_NAMESPACE)]
    Namespace {
        /// The boundary and the namespace, e.g. shop/web.
        #[arg(value_name = "BOUNDARY/NAMESPACE")]
        name: String,
        /// The cluster the namespace is in.
        #[arg(long)]
        cluster: String,
    },
}

pub fn delete(connection: &Connection, kind: &DeleteKind) -> Outcome {
    let api = Api::new(connection)?;
    let (path, what, deleted) = match kind {
        DeleteKind::Boundary { name } => (
            format!("/v1/boundaries/{name}"),
            format!("boundary {name}"),
            json!({"kind": "boundary", "name": name}),
        ),
        DeleteKind::Policy { name } => {
            let p = split_target(name, 2, "BOUNDARY/NAME")?;
            (
                format!("/v1/boundaries/{}/policies/{}", p[0], p[1]),
                format!("boundarypolicy {name}"),
                json!({"kind": "policy", "boundary": p[0], "name": p[1]}),
            )
        }
        DeleteKind::Resource { name } => {
            let p = resource_target(name)?;
            (
                format!("/v1/boundaries/{}/resources/{}/{}", p[0], p[1], p[2]),
                format!("resource {name}"),
                json!({"kind": "resource", "boundary": p[0], "type": p[1], "name": p[2]}),
            )
        }
        DeleteKind::Token { id } => return delete_token(&api, id, "deleted"),
        DeleteKind::Cluster { name, force } => (
            if *force {
                format!("/v1/clusters/{name}?force=true")
            } else {
                format!("/v1/clusters/{name}")
            },
            format!("cluster {name}"),
            json!({"kind": "cluster", "name": name}),
        ),
        DeleteKind::Namespace { name, cluster } => {
            let p = split_target(name, 2, "BOUNDARY/NAMESPACE")?;
            (
                format!(
                    "/v1/boundaries/{}/clusters/{cluster}/namespaces/{}",
                    p[0], p[1]
                ),
                // Deleting a namespace releases it: palisade removes its label, the namespace
                // and its objects stay.
                format!(
                    "namespace {name} released in cluster {cluster} (its boundary label removed; the namespace and its objects stay)"
                ),
                json!({"kind": "namespace", "boundary": p[0], "cluster": cluster, "name": p[1]}),
            )
        }
    };
    let answer = api.send(api.request(Method::DELETE, &path))?;
    print_deleted(connection.output, &answer, deleted, || {
        if matches!(kind, DeleteKind::Namespace { .. }) {
            println!("{what}")
        } else {
            println!("{what} deleted")
        }
    })
}

/// `DELETE /v1/tokens/{id}`, for `delete token` and `token revoke` (`verb`: the word of the
/// table form's line; `-o json|yaml` prints the same object for both).
pub(super) fn delete_token(api: &Api, id: &str, verb: &str) -> Outcome {
    let answer = api.send(api.request(Method::DELETE, &format!("/v1/tokens/{id}")))?;
    print_deleted(
        api.connection.output,
        &answer,
        json!({"kind": "token", "id": id}),
        || println!("token {id} {verb}"),
    )
}

/// What a delete prints: the line of the table form, or with `-o json|yaml` the API's body;
/// for a 204 (no body), `deleted` (the kind and the names that say what) with
/// `"action": "deleted"`.
fn print_deleted(format: Format, answer: &Answer, deleted: Value, line: impl FnOnce()) -> Outcome {
    if format == Format::Table {
        line();
        return Ok(());
    }
    if !answer.body.is_null() {
        return print_body(format, &answer.body);
    }
    let mut deleted = deleted;
    if let Value::Object(fields) = &mut deleted {
        fields.insert("action".into(), json!("deleted"));
    }
    print_body(format, &deleted)
}
