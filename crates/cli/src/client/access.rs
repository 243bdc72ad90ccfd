//! `palisade cluster kubeconfig`: palisade's access to a managed cluster as a service account
//! with a token, in two offline steps. Without `--from-secret` it prints what to apply in the
//! cluster: the namespace and the service account, the ClusterRole of `palisade cluster rbac`
//! and its binding to the account, and a `kubernetes.io/service-account-token` Secret, which
//! the cluster's token controller fills with the account's token and the cluster's CA. With
//! `--from-secret` it reads that Secret (`kubectl get secret -o json` or `-o yaml`) and prints
//! a kubeconfig with the token that `palisade cluster add` accepts.

use std::path::Path;

use base64::Engine as _;
use serde_json::{json, Value};

use super::{split_target, Failure, Format, Outcome};
use crate::input::read_text;

/// The Secret's type the token controller fills.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation that names the Secret's service account.
pub const ACCOUNT_ANNOTATION: &str = "kubernetes.io/service-account.name";

/// The service account as `--service-account` names it.
struct Account<'a> {
    namespace: &'a str,
    name: &'a str,
}

fn account(text: &str) -> Result<Account<'_>, Failure> {
    let parts = split_target(text, 2, "NAMESPACE/NAME")
        .map_err(|Failure(why)| Failure(format!("--service-account {why}")))?;
    for (what, part) in [("namespace", parts[0]), ("name", parts[1])] {
        palisade_policy::Name::parse(part)
            .map_err(|e| Failure(format!("--service-account: the {what} '{part}': {e}")))?;
    }
    Ok(Account {
        namespace: parts[0],
        name: parts[1],
    })
}

/// The name of the account's token Secret.
pub fn secret_name(account: &str) -> String {
    format!("{account}-token")
}

/// The objects to apply: namespace, service account, role, binding, token Secret.
fn objects(account: &Account<'_>, role: &str) -> Result<Vec<Value>, Failure> {
    use palisade_reconciler::rbac::{cluster_role, cluster_role_binding, Grantee};
    palisade_policy::Name::parse(role).map_err(|e| Failure(format!("--name '{role}': {e}")))?;
    let labels = json!({"app.kubernetes.io/name": "palisade"});
    let encode = |what: &str, value: Result<Value, serde_json::Error>| {
        value.map_err(|e| Failure(format!("cannot encode the {what}: {e}")))
    };
    let grantee = Grantee::ServiceAccount {
        namespace: account.namespace.to_owned(),
        name: account.name.to_owned(),
    };
    Ok(vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": account.namespace}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": account.name, "namespace": account.namespace,
                            "labels": labels}}),
        encode("ClusterRole", serde_json::to_value(cluster_role(role)))?,
        encode(
            "ClusterRoleBinding",
            serde_json::to_value(cluster_role_binding(role, &grantee)),
        )?,
        json!({"apiVersion": "v1", "kind": "Secret", "type": TOKEN_SECRET_TYPE,
               "metadata": {"name": secret_name(account.name), "namespace": account.namespace,
                            "labels": labels,
                            "annotations": {ACCOUNT_ANNOTATION: account.name}}}),
    ])
}

fn yaml(value: &Value) -> Result<String, Failure> {
    serde_yaml_ng::to_string(value).map_err(|e| Failure(format!("cannot encode YAML: {e}")))
}

/// The YAML to apply in the cluster (`-o json`: a `List`).
fn print_objects(output: Format, account: &Account<'_>, role: &str) -> Outcome {
    let objects = objects(account, role)?;
    let text = if output == Format::Json {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        serde_json::to_string_pretty(&list)
            .map(|t| t + "\n")
            .map_err(|e| Failure(format!("cannot encode the list: {e}")))?
    } else {
        let documents: Result<Vec<String>, Failure> = objects.iter().map(yaml).collect();
        documents?.join("---\n")
    };
    print!("{text}");
    Ok(())
}

/// A string field of the Secret's `data`, base64 as Kubernetes stores it: its bytes.
fn data_field(secret: &Value, key: &str, source: &str) -> Result<Vec<u8>, Failure> {
    let encoded = secret["data"][key].as_str().unwrap_or_default();
    if encoded.is_empty() {
        return Err(Failure(format!(
            "{source}: data.{key} is empty: the cluster's token controller (kube-controller-manager) fills it in a moment after the Secret is made; get the Secret again"
        )));
    }
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| Failure(format!("{source}: data.{key} is not base64: {e}")))
}

/// The kubeconfig that signs in with the token of `secret_text` at `server`.
pub fn kubeconfig_from_secret(
    secret_text: &str,
    source: &str,
    server: &str,
) -> Result<Value, Failure> {
    let secret: Value = serde_yaml_ng::from_str(secret_text)
        .map_err(|e| Failure(format!("{source}: not a Secret in JSON or YAML: {e}")))?;
    if secret["kind"] != "Secret" {
        return Err(Failure(format!(
            "{source}: kind is {}, not Secret (kubectl get secret NAME -n NAMESPACE -o json)",
            secret["kind"]
        )));
    }
    if secret["type"] != TOKEN_SECRET_TYPE {
        return Err(Failure(format!(
            "{source}: type is {}, not {TOKEN_SECRET_TYPE}",
            secret["type"]
        )));
    }
    let account = secret["metadata"]["annotations"][ACCOUNT_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    let namespace = secret["metadata"]["namespace"].as_str().unwrap_or_default();
    if account.is_empty() || namespace.is_empty() {
        return Err(Failure(format!(
            "{source}: metadata.annotations.{ACCOUNT_ANNOTATION} and metadata.namespace name the service account; one is missing"
        )));
    }
    let token = String::from_utf8(data_field(&secret, "token", source)?)
        .map_err(|_| Failure(format!("{source}: data.token is not text")))?;
    let ca = data_field(&secret, "ca.crt", source)?;
    if !String::from_utf8_lossy(&ca).contains("-----BEGIN CERTIFICATE-----") {
        return Err(Failure(format!(
            "{source}: data.ca.crt holds no PEM certificate"
        )));
    }
    let url = reqwest::Url::parse(server)
        .map_err(|e| Failure(format!("--api-server '{server}': {e}")))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(Failure(format!(
            "--api-server '{server}': must be the API server's https:// URL"
        )));
    }
    let user = format!("system:serviceaccount:{namespace}:{account}");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": {
            "server": server.trim_end_matches('/'),
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(&ca),
        }}],
        "users": [{"name": user, "user": {"token": token.trim()}}],
        "contexts": [{"name": "palisade", "context": {"cluster": "cluster", "user": user}}],
        "current-context": "palisade",
    });
    palisade_api_types::kubeconfig::check(&config)
        .map_err(|e| Failure(format!("the kubeconfig made from {source}: {e}")))?;
    Ok(config)
}

/// `palisade cluster kubeconfig`.
pub fn kubeconfig(
    output: Format,
    service_account: &str,
    role: &str,
    from_secret: Option<&Path>,
    server: Option<&str>,
) -> Outcome {
    let account = account(service_account)?;
    let (Some(path), Some(server)) = (from_secret, server) else {
        return print_objects(output, &account, role);
    };
    let text = read_text(path).map_err(Failure)?;
    let source = if crate::input::is_stdin(path) {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    };
    let config = kubeconfig_from_secret(&text, &source, server)?;
    let text = if output == Format::Json {
        serde_json::to_string_pretty(&config)
            .map(|t| t + "\n")
            .map_err(|e| Failure(format!("cannot encode the kubeconfig: {e}")))?
    } else {
        yaml(&config)?
    };
    print!("{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn secret(token: &str, ca: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        json!({"apiVersion": "v1", "kind": "Secret", "type": TOKEN_SECRET_TYPE,
               "metadata": {"name": "palisade-token", "namespace": "platform",
                            "annotations": {ACCOUNT_ANNOTATION: "palisade"}},
               "data": {"token": b64(token), "ca.crt": b64(ca), "namespace": b64("platform")}})
        .to_string()
    }

    #[test]
    fn a_filled_secret_makes_a_kubeconfig_the_server_accepts() {
        let Ok(config) =
            kubeconfig_from_secret(&secret("eyJ.x.y", CA), "s.json", "https://10.0.0.1:6443/")
        else {
            panic!("refused");
        };
        assert_eq!(config["users"][0]["user"]["token"], "eyJ.x.y");
        assert_eq!(
            config["users"][0]["name"],
            "system:serviceaccount:platform:palisade"
        );
        assert_eq!(
            config["clusters"][0]["cluster"]["server"],
            "https://10.0.0.1:6443"
        );
    }

    #[test]
    fn each_refusal_names_what_is_wrong() {
        let cases = [
            (secret("", CA), "https://a", "s.json: data.token is empty"),
            (secret("t", "x"), "https://a", "data.ca.crt holds no PEM"),
            (
                secret("t", CA).replace(TOKEN_SECRET_TYPE, "Opaque"),
                "https://a",
                "type is \"Opaque\"",
            ),
            (
                secret("t", CA),
                "http://a",
                "--api-server 'http://a': must be",
            ),
            ("[1]".to_owned(), "https://a", "kind is null, not Secret"),
        ];
        for (text, server, wanted) in cases {
            let Err(Failure(why)) = kubeconfig_from_secret(&text, "s.json", server) else {
                panic!("{wanted}: accepted");
            };
            assert!(why.contains(wanted), "{why}");
        }
    }

    #[test]
    fn the_objects_bind_the_role_to_the_account_and_ask_for_its_token() {
        let Ok(objects) = objects(
            &Account {
                namespace: "platform",
                name: "palisade",
            },
            "palisade",
        ) else {
            panic!("refused");
        };
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Secret"
            ]
        );
        assert_eq!(
            objects[3]["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "palisade", "namespace": "platform"})
        );
        assert_eq!(
            objects[4]["metadata"]["annotations"][ACCOUNT_ANNOTATION],
            "palisade"
        );
        assert!(account("platform").is_err());
        assert!(account("Platform/x").is_err());
    }
}
