//! `palisade boundary`, `palisade cluster` and `palisade namespace`.

use std::path::PathBuf;

use clap::Subcommand;
use palisade_api_types::view::{
    Boundary, ClusterCredentials, ClusterView, NamespaceRequest, NamespaceView, NewBoundary,
};
use reqwest::Method;

use super::{split_target, Api, Connection, Failure, Format, Outcome};
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
    /// Label an existing namespace for the boundary (admin only; refused if another boundary
    /// has it, or its name is reserved in the cluster: `default`, `kube-*`, the cluster's list).
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
        /// A namespace no boundary may hold in this cluster, besides `default` and `kube-*`
        /// (repeatable). Replaces the cluster's list; without it the list stays as it is.
        #[arg(long = "reserve", value_name = "NAMESPACE")]
        reserve: Vec<String>,
        /// Clear the cluster's reserved namespaces (`default` and `kube-*` stay reserved).
        #[arg(long, conflicts_with = "reserve")]
        no_reserved: bool,
    },
    /// Attach a cluster to a boundary: its policies are then installed there (admin).
    #[command(after_help = help::CLUSTER_ATTACH)]
    Attach {
        /// The boundary.
        boundary: String,
        /// A registered cluster.
        cluster: String,
    },
    /// Print the ClusterRole and binding palisade needs in each managed cluster (offline).
    ///
    /// Print, as YAML to apply with kubectl, the ClusterRole palisade needs in a cluster it
    /// manages (exactly the verbs on exactly the resources it uses; nothing on Secrets) and a
    /// ClusterRoleBinding granting it to the identity of the kubeconfig you give to
    /// `palisade cluster add`. Needs no server.
    #[command(after_help = help::CLUSTER_RBAC)]
    Rbac {
        /// Grant the role to this user (a client certificate's CN). The default when no
        /// --service-account is given: palisade.
        #[arg(long, value_name = "NAME", conflicts_with = "service_account")]
        user: Option<String>,
        /// Grant the role to this service account (for a token kubeconfig).
        #[arg(long, value_name = "NAMESPACE/NAME")]
        service_account: Option<String>,
        /// The name of the ClusterRole and of its binding.
        #[arg(long, value_name = "NAME", default_value = palisade_reconciler::rbac::DEFAULT_NAME)]
        name: String,
    },
    /// Print what gives palisade a token in a managed cluster, then make its kubeconfig
    /// (offline).
    ///
    /// Without --from-secret: print, as YAML to apply with kubectl, a namespace and a service
    /// account in it, the ClusterRole of `palisade cluster rbac` bound to that account, and a
    /// kubernetes.io/service-account-token Secret, which the cluster fills with the account's
    /// token and its CA. With --from-secret and --api-server: read that Secret and print a
    /// kubeconfig with the token, for `palisade cluster add`. Needs no palisade server.
    #[command(after_help = help::CLUSTER_KUBECONFIG)]
    Kubeconfig {
        /// The service account palisade signs in as, in a namespace of your choice (the YAML
        /// makes both).
        #[arg(
            long,
            value_name = "NAMESPACE/NAME",
            default_value = "palisade/palisade"
        )]
        service_account: String,
        /// The name of the ClusterRole and of its binding.
        #[arg(long, value_name = "NAME", default_value = palisade_reconciler::rbac::DEFAULT_NAME)]
        name: String,
        /// The account's token Secret as `kubectl get secret -o json` (or -o yaml) prints it,
        /// or `-` for standard input: print the kubeconfig instead of the YAML.
        #[arg(long, value_name = "FILE|-", requires = "api_server")]
        from_secret: Option<PathBuf>,
        /// The cluster's API server as palisade reaches it (https://HOST:PORT), written into
        /// the kubeconfig.
        #[arg(long, value_name = "URL", requires = "from_secret")]
        api_server: Option<String>,
    },
}

/// `palisade cluster rbac`: the role and binding as YAML documents (`-o json`: a `List`).
fn rbac(output: Format, name: &str, user: Option<&str>, service_account: Option<&str>) -> Outcome {
    use palisade_reconciler::rbac::{cluster_role, cluster_role_binding, Grantee};
    palisade_policy::Name::parse(name).map_err(|e| Failure(format!("--name '{name}': {e}")))?;
    let grantee = match (user, service_account) {
        (_, Some(account)) => {
            let parts = split_target(account, 2, "NAMESPACE/NAME")
                .map_err(|Failure(why)| Failure(format!("--service-account {why}")))?;
            Grantee::ServiceAccount {
                namespace: parts[0].to_owned(),
                name: parts[1].to_owned(),
            }
        }
        (Some(user), None) if user.trim().is_empty() => {
            return Err(Failure("--user: must not be empty".to_owned()))
        }
        (user, None) => Grantee::User(
            user.unwrap_or(palisade_reconciler::rbac::DEFAULT_NAME)
                .to_owned(),
        ),
    };
    let role = serde_json::to_value(cluster_role(name))
        .map_err(|e| Failure(format!("cannot encode the ClusterRole: {e}")))?;
    let binding = serde_json::to_value(cluster_role_binding(name, &grantee))
        .map_err(|e| Failure(format!("cannot encode the ClusterRoleBinding: {e}")))?;
    let text = if output == Format::Json {
        let list =
            serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [role, binding]});
        serde_json::to_string_pretty(&list)
            .map(|t| t + "\n")
            .map_err(|e| Failure(format!("cannot encode the list: {e}")))?
    } else {
        let yaml = |value: &serde_json::Value| {
            serde_yaml_ng::to_string(value).map_err(|e| Failure(format!("cannot encode YAML: {e}")))
        };
        format!("{}---\n{}", yaml(&role)?, yaml(&binding)?)
    };
    print!("{text}");
    Ok(())
}

pub fn boundary(connection: &Connection, command: &BoundaryCommand) -> Outcome {
    let api = Api::new(connection)?;
    let BoundaryCommand::Create { name, display_name } = command;
    let body = NewBoundary {
        name: name.clone(),
        display_name: display_name.clone(),
    };
    let answer = api.send(api.request(Method::POST, "/v1/boundaries").json(&body))?;
    let Some(_) = answer.for_table::<Boundary>(connection.output)? else {
        return Ok(());
    };
    println!("boundary {name} created");
    Ok(())
}

pub fn cluster(connection: &Connection, command: &ClusterCommand) -> Outcome {
    match command {
        // Offline: no server, no token.
        ClusterCommand::Rbac {
            user,
            service_account,
            name,
        } => {
            return rbac(
                connection.output,
                name,
                user.as_deref(),
                service_account.as_deref(),
            )
        }
        ClusterCommand::Kubeconfig {
            service_account,
            name,
            from_secret,
            api_server,
        } => {
            return super::access::kubeconfig(
                connection.output,
                service_account,
                name,
                from_secret.as_deref(),
                api_server.as_deref(),
            )
        }
        ClusterCommand::Add {
            name,
            kubeconfig,
            reserve,
            no_reserved,
        } => {
            let api = Api::new(connection)?;
            let text = read_text(kubeconfig).map_err(Failure)?;
            let reserved_namespaces = match (reserve.is_empty(), no_reserved) {
                (true, false) => None,
                _ => Some(reserve.clone()),
            };
            let answer = api.send(
                api.request(Method::PUT, &format!("/v1/clusters/{name}"))
                    .json(&ClusterCredentials {
                        kubeconfig: text,
                        reserved_namespaces,
                    }),
            )?;
            let Some(_) = answer.for_table::<ClusterView>(connection.output)? else {
                return Ok(());
            };
            println!("cluster {name} saved");
        }
        ClusterCommand::Attach { boundary, cluster } => {
            let api = Api::new(connection)?;
            let answer = api.send(api.request(
                Method::PUT,
                &format!("/v1/boundaries/{boundary}/clusters/{cluster}"),
            ))?;
            let Some(_) = answer.for_table::<ClusterView>(connection.output)? else {
                return Ok(());
            };
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
    let Some(saved) = answer.for_table::<NamespaceView>(connection.output)? else {
        return Ok(());
    };
    // `action` is in every answer to a PUT; "saved" says as much without it.
    println!(
        "namespace {target} {} in cluster {cluster}",
        saved.action.as_deref().unwrap_or("saved")
    );
    Ok(())
}
