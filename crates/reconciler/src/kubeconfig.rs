//! The kubeconfigs palisade accepts (SPEC 4.1): one cluster, user and context, an `https`
//! server, inline credentials only. Anything that would make the process read a file, run a
//! program, use a proxy or skip TLS verification is refused, naming the field.
//!
//! One set of rules, [`check`], on the kubeconfig as a JSON value: the API runs it at
//! `PUT /v1/clusters/{c}` on the document it stores (merge keys resolved), and
//! [`check_inline`] runs it again on what kube-rs read, before any connection is made.

use kube::config::Kubeconfig;
use serde_json::Value;

/// Why a kubeconfig is refused: the field (a JSON Pointer into the kubeconfig, `""` for the
/// whole document) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct KubeconfigError {
    pub pointer: String,
    pub message: String,
}

fn refuse(pointer: impl Into<String>, message: impl Into<String>) -> KubeconfigError {
    KubeconfigError {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// Fields of `cluster` that are refused, with why.
const REFUSED_CLUSTER_FIELDS: [(&str, &str); 3] = [
    (
        "certificate-authority",
        "file paths are not accepted; use certificate-authority-data",
    ),
    ("proxy-url", "proxies are not supported"),
    (
        "insecure-skip-tls-verify",
        "TLS verification cannot be turned off",
    ),
];

/// Fields of `user` that are refused, with why.
const REFUSED_USER_FIELDS: [(&str, &str); 7] = [
    (
        "exec",
        "credential plugins are not accepted; use inline credentials",
    ),
    (
        "auth-provider",
        "credential plugins are not accepted; use inline credentials",
    ),
    (
        "client-certificate",
        "file paths are not accepted; use inline credentials",
    ),
    (
        "client-key",
        "file paths are not accepted; use inline credentials",
    ),
    (
        "tokenFile",
        "file paths are not accepted; use inline credentials",
    ),
    ("username", "basic authentication is not accepted"),
    ("password", "basic authentication is not accepted"),
];

/// The one entry of the list `list`.
fn single<'v>(config: &'v Value, list: &str) -> Result<&'v Value, KubeconfigError> {
    match config.get(list).and_then(Value::as_array) {
        Some(items) if items.len() == 1 => Ok(&items[0]),
        Some(items) => Err(refuse(
            format!("/{list}"),
            format!("must hold exactly one entry, found {}", items.len()),
        )),
        None => Err(refuse(format!("/{list}"), "is required")),
    }
}

/// The entry's `name`.
fn name_of<'v>(entry: &'v Value, list: &str) -> Result<&'v str, KubeconfigError> {
    entry
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| refuse(format!("/{list}/0/name"), "is required"))
}

/// The mapping `field` of `entry` (e.g. a cluster's `cluster`).
fn details<'v>(
    entry: &'v Value,
    pointer: &str,
) -> Result<&'v serde_json::Map<String, Value>, KubeconfigError> {
    let field = pointer.rsplit('/').next().unwrap_or_default();
    match entry.get(field) {
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(refuse(pointer, "must be a mapping")),
        None => Err(refuse(pointer, "is required")),
    }
}

/// Checks a kubeconfig (as a JSON value) against SPEC 4.1; `Err` names the first offending
/// field. A refused field is refused whatever its value (`insecure-skip-tls-verify: false`
/// included).
pub fn check(config: &Value) -> Result<(), KubeconfigError> {
    if !config.is_object() {
        return Err(refuse("", "must be a kubeconfig mapping"));
    }
    let cluster = single(config, "clusters")?;
    let user = single(config, "users")?;
    let context = single(config, "contexts")?;
    let cluster_name = name_of(cluster, "clusters")?;
    let user_name = name_of(user, "users")?;
    let context_name = name_of(context, "contexts")?;

    let cluster = details(cluster, "/clusters/0/cluster")?;
    let server = cluster
        .get("server")
        .and_then(Value::as_str)
        .ok_or_else(|| refuse("/clusters/0/cluster/server", "is required"))?;
    if !server.starts_with("https://") {
        return Err(refuse(
            "/clusters/0/cluster/server",
            "must be an https:// URL",
        ));
    }
    if let Some((field, why)) = REFUSED_CLUSTER_FIELDS
        .iter()
        .find(|(field, _)| cluster.contains_key(*field))
    {
        return Err(refuse(format!("/clusters/0/cluster/{field}"), *why));
    }

    let user = details(user, "/users/0/user")?;
    if let Some((field, why)) = REFUSED_USER_FIELDS
        .iter()
        .find(|(field, _)| user.contains_key(*field))
    {
        return Err(refuse(format!("/users/0/user/{field}"), *why));
    }
    let has_cert = user.contains_key("client-certificate-data");
    let has_key = user.contains_key("client-key-data");
    if has_cert != has_key {
        return Err(refuse(
            "/users/0/user",
            "client-certificate-data and client-key-data go together",
        ));
    }
    if !has_cert && !user.contains_key("token") {
        return Err(refuse(
            "/users/0/user",
            "needs inline credentials: client-certificate-data with client-key-data, or token",
        ));
    }

    let context = details(context, "/contexts/0/context")?;
    if context.get("cluster").and_then(Value::as_str) != Some(cluster_name) {
        return Err(refuse(
            "/contexts/0/context/cluster",
            format!("must name the kubeconfig's cluster '{cluster_name}'"),
        ));
    }
    if context.get("user").and_then(Value::as_str) != Some(user_name) {
        return Err(refuse(
            "/contexts/0/context/user",
            format!("must name the kubeconfig's user '{user_name}'"),
        ));
    }
    match config.get("current-context") {
        None | Some(Value::Null) => {}
        Some(current) if current.as_str() == Some(context_name) => {}
        Some(_) => {
            return Err(refuse(
                "/current-context",
                format!("must name the kubeconfig's context '{context_name}'"),
            ))
        }
    }
    Ok(())
}

/// Drops keys whose value is `null` (what an absent optional field serialises to).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// [`check`] on the kubeconfig as kube-rs read it (what a client would use).
pub fn check_inline(kubeconfig: &Kubeconfig) -> Result<(), KubeconfigError> {
    let value =
        serde_json::to_value(kubeconfig).map_err(|e| refuse("", format!("cannot be read: {e}")))?;
    check(&without_nulls(value))
}

/// Reads `text` the way [`crate::ClusterClient::from_kubeconfig`] does, and checks it.
pub fn read(text: &str) -> Result<Kubeconfig, KubeconfigError> {
    let kubeconfig = Kubeconfig::from_yaml(text)
        .map_err(|e| refuse("", format!("is not a valid kubeconfig: {e}")))?;
    check_inline(&kubeconfig)?;
    Ok(kubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}
users:
- name: u
  user: {client-certificate-data: Zm9v, client-key-data: YmFy}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
";

    fn checked(text: &str) -> Result<(), String> {
        read(text).map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn inline_credentials_pass() {
        assert_eq!(checked(GOOD), Ok(()));
        let token = GOOD.replace(
            "{client-certificate-data: Zm9v, client-key-data: YmFy}",
            "{token: abc}",
        );
        assert_eq!(checked(&token), Ok(()));
        assert_eq!(checked(&GOOD.replace("current-context: x", "")), Ok(()));
    }

    #[test]
    fn files_programs_proxies_and_plain_http_are_refused() {
        let cases = [
            (
                GOOD.replace("client-key-data: YmFy", "client-key: /etc/key"),
                "/users/0/user/client-key: file paths are not accepted; use inline credentials",
            ),
            (
                GOOD.replace(
                    "{client-certificate-data: Zm9v, client-key-data: YmFy}",
                    "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}",
                ),
                "/users/0/user/exec: credential plugins are not accepted; use inline credentials",
            ),
            (
                GOOD.replace("https://", "http://"),
                "/clusters/0/cluster/server: must be an https:// URL",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "insecure-skip-tls-verify: true",
                ),
                "/clusters/0/cluster/insecure-skip-tls-verify: TLS verification cannot be turned off",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "insecure-skip-tls-verify: false",
                ),
                "/clusters/0/cluster/insecure-skip-tls-verify: TLS verification cannot be turned off",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "proxy-url: 'http://proxy:3128'",
                ),
                "/clusters/0/cluster/proxy-url: proxies are not supported",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "certificate-authority: /ca.crt",
                ),
                "/clusters/0/cluster/certificate-authority: file paths are not accepted; use certificate-authority-data",
            ),
            (
                GOOD.replace("{cluster: c, user: u}", "{cluster: other, user: u}"),
                "/contexts/0/context/cluster: must name the kubeconfig's cluster 'c'",
            ),
            (
                GOOD.replace("{cluster: c, user: u}", "{cluster: c, user: other}"),
                "/contexts/0/context/user: must name the kubeconfig's user 'u'",
            ),
            (
                GOOD.replace("current-context: x", "current-context: y"),
                "/current-context: must name the kubeconfig's context 'x'",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(checked(&text), Err(error.to_owned()), "{text}");
        }
    }
}
