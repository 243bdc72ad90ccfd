//! `palisade delete`.

use clap::Subcommand;
use reqwest::Method;

use super::{resource_target, split_target, Api, Connection, Outcome};
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
            let p = resource_target(name)?;
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
