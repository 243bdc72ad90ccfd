//! `palisade boundary`, `palisade cluster` and `palisade namespace`.

use std::path::PathBuf;

use clap::Subcommand;
use palisade_api_types::view::{
    Boundary, ClusterCredentials, ClusterView, NamespaceRequest, NamespaceView, NewBoundary,
};
use reqwest::Method;

use super::{print_body, split_target, Api, Connection, Failure, Format, Outcome};
use crate::help;
use crate::input::read_text;

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Create a namespace in a cluster of the boundary, labelled palisade.dev/boundary=B.
    #[command(after_help = help::NAMESPACE_CREATE)]
    Create {
        /// The boundary and the namespace, e.g. shop/web.
        #[arg(value_name = "BOUNDARY/NAMESPACE")]
        target: String,
        /// A cluster attached to the boundary.
        #[arg(long, value_name = "CLUSTER")]
        cluster: String,
    },
    /// Label an existing namespace for the boundary (refused if another boundary has it).
    #[command(after_help = help::NAMESPACE_ADOPT)]
    Adopt {
        /// The boundary and the namespace, e.g. shop/legacy.
        #[arg(value_name = "BOUNDARY/NAMESPACE")]
        target: String,
        /// A cluster attached to the boundary.
        #[arg(long, value_name = "CLUSTER")]
        cluster: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BoundaryCommand {
    /// Create a boundary (admin).
    #[command(after_help = help::BOUNDARY)]
    Create {
        /// The boundary's name (a DNS-1123 label: lowercase, at most 63 characters).
        name: String,
        /// A name for people, shown in the portal.
        #[arg(long, value_name = "TEXT")]
        display_name: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Register a cluster or replace its credentials (admin).
    #[command(after_help = help::CLUSTER_ADD)]
    Add {
        /// The cluster's name in palisade.
        name: String,
        /// A kubeconfig file with one cluster, user and context and inline credentials, or
        /// `-` for standard input.
        #[arg(long, value_name = "FILE|-")]
        kubeconfig: PathBuf,
    },
    /// Attach a cluster to a boundary: its policies are then installed there (admin).
    #[command(after_help = help::CLUSTER_ATTACH)]
    Attach {
        /// The boundary.
        boundary: String,
        /// A registered cluster.
        cluster: String,
    },
}

pub fn boundary(connection: &Connection, command: &BoundaryCommand) -> Outcome {
    let api = Api::new(connection)?;
    let BoundaryCommand::Create { name, display_name } = command;
    let body = NewBoundary {
        name: name.clone(),
        display_name: display_name.clone(),
    };
    let answer = api.send(api.request(Method::POST, "/v1/boundaries").json(&body))?;
    let _: Boundary = answer.decode()?;
    if connection.output != Format::Table {
        return print_body(connection.output, &answer.body);
    }
    println!("boundary {name} created");
    Ok(())
}

pub fn cluster(connection: &Connection, command: &ClusterCommand) -> Outcome {
    let api = Api::new(connection)?;
    match command {
        ClusterCommand::Add { name, kubeconfig } => {
            let text = read_text(kubeconfig).map_err(Failure)?;
            let answer = api.send(
                api.request(Method::PUT, &format!("/v1/clusters/{name}"))
                    .json(&ClusterCredentials { kubeconfig: text }),
            )?;
            let _: ClusterView = answer.decode()?;
            if connection.output != Format::Table {
                return print_body(connection.output, &answer.body);
            }
            println!("cluster {name} saved");
        }
        ClusterCommand::Attach { boundary, cluster } => {
            let answer = api.send(api.request(
                Method::PUT,
                &format!("/v1/boundaries/{boundary}/clusters/{cluster}"),
            ))?;
            let _: ClusterView = answer.decode()?;
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
    let answer = api.send(
        api.request(
            Method::PUT,
            &format!(
                "/v1/boundaries/{}/clusters/{cluster}/namespaces/{}",
                p[0], p[1]
            ),
        )
        .json(&NamespaceRequest { adopt: Some(adopt) }),
    )?;
    let saved: NamespaceView = answer.decode()?;
    if connection.output != Format::Table {
        return print_body(connection.output, &answer.body);
    }
    // `action` is in every answer to a PUT; "saved" says as much without it.
    println!(
        "namespace {target} {} in cluster {cluster}",
        saved.action.as_deref().unwrap_or("saved")
    );
    Ok(())
}
