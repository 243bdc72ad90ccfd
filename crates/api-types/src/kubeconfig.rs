//! The kubeconfigs palisade accepts (SPEC 4.1): one cluster, user and context, an `https`
//! server, inline credentials only, and a context that names the file's cluster and user.
//! Anything that would make a client read a file, run a program, use a proxy or skip TLS
//! verification is refused whatever its value, naming the field.
//!
//! The one set of rules, [`check`], on the kubeconfig as a JSON value. The API runs
//! [`normalise`] at `PUT /v1/clusters/{c}` on the text it is given and stores its result; the
//! Kubernetes adapter runs [`check`] again on what its client library read, before any
//! connection is made.

use serde_json::Value as Json;
use serde_yaml_ng::Value;

/// Why a kubeconfig is refused: the field (a JSON Pointer into the kubeconfig, `""` for the
/// whole document) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct KubeconfigError {
    pub pointer: String,
    pub message: String,
}

pub fn refuse(pointer: impl Into<String>, message: impl Into<String>) -> KubeconfigError {
    KubeconfigError {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// Fields of `cluster` that are refused, with why.
pub const REFUSED_CLUSTER_FIELDS: [(&str, &str); 3] = [
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
pub const REFUSED_USER_FIELDS: [(&str, &str); 7] = [
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
fn single<'v>(config: &'v Json, list: &str) -> Result<&'v Json, KubeconfigError> {
    match config.get(list).and_then(Json::as_array) {
        Some(items) if items.len() == 1 => Ok(&items[0]),
        Some(items) => Err(refuse(
            format!("/{list}"),
            format!("must hold exactly one entry, found {}", items.len()),
        )),
        None => Err(refuse(format!("/{list}"), "is required")),
    }
}

/// The entry's `name`.
fn name_of<'v>(entry: &'v Json, list: &str) -> Result<&'v str, KubeconfigError> {
    entry
        .get("name")
        .and_then(Json::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| refuse(format!("/{list}/0/name"), "is required"))
}

/// The mapping `field` of `entry` (e.g. a cluster's `cluster`).
fn details<'v>(
    entry: &'v Json,
    pointer: &str,
) -> Result<&'v serde_json::Map<String, Json>, KubeconfigError> {
    let field = pointer.rsplit('/').next().unwrap_or_default();
    match entry.get(field) {
        Some(Json::Object(map)) => Ok(map),
        Some(_) => Err(refuse(pointer, "must be a mapping")),
        None => Err(refuse(pointer, "is required")),
    }
}

/// Checks a kubeconfig (as a JSON value) against SPEC 4.1; `Err` names the first offending
/// field. A refused field is refused whatever its value (`insecure-skip-tls-verify: false`
/// included).
pub fn check(config: &Json) -> Result<(), KubeconfigError> {
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
        .and_then(Json::as_str)
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
    if context.get("cluster").and_then(Json::as_str) != Some(cluster_name) {
        return Err(refuse(
            "/contexts/0/context/cluster",
            format!("must name the kubeconfig's cluster '{cluster_name}'"),
        ));
    }
    if context.get("user").and_then(Json::as_str) != Some(user_name) {
        return Err(refuse(
            "/contexts/0/context/user",
            format!("must name the kubeconfig's user '{user_name}'"),
        ));
    }
    match config.get("current-context") {
        None | Some(Json::Null) => {}
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

/// How many rounds of merge-key resolution a kubeconfig may need (a merged mapping may
/// itself merge); more is refused.
const MAX_MERGE_DEPTH: usize = 16;

fn has_merge_key(value: &Value) -> bool {
    match value {
        Value::Mapping(map) => map
            .iter()
            .any(|(k, v)| k.as_str() == Some("<<") || has_merge_key(v)),
        Value::Sequence(items) => items.iter().any(has_merge_key),
        Value::Tagged(tagged) => has_merge_key(&tagged.value),
        _ => false,
    }
}

/// The YAML value as JSON, for the rules; tags and non-string keys are refused (a reader
/// that ignores a tag could see another document than one that honours it).
fn to_json(value: &Value, pointer: &str) -> Result<serde_json::Value, KubeconfigError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(n) => serde_json::to_value(n)
            .map_err(|_| refuse(pointer, "is a number that cannot be read"))?,
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Sequence(items) => serde_json::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &format!("{pointer}/{i}")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Mapping(map) => {
            let mut object = serde_json::Map::new();
            for (key, item) in map {
                let Some(key) = key.as_str() else {
                    return Err(refuse(pointer, "has a key that is not a string"));
                };
                let escaped = crate::pointer::escape(key);
                object.insert(
                    key.to_owned(),
                    to_json(item, &format!("{pointer}/{escaped}"))?,
                );
            }
            serde_json::Value::Object(object)
        }
        Value::Tagged(_) => return Err(refuse(pointer, "YAML tags are not accepted")),
    })
}

/// Reads a kubeconfig's text and checks it against SPEC 4.1: the YAML read once (bounded
/// before it is parsed, see [`crate::yaml::value`]), aliases and merge keys (`<<`) resolved, [`check`]ed, and written out again without anchors, so
/// what was checked is exactly what is stored and later loaded. Errors name the field by its
/// JSON Pointer into the kubeconfig (`""` for the whole document).
pub fn normalise(text: &str) -> Result<String, KubeconfigError> {
    let mut config: Value = crate::yaml::value(text).map_err(|e| match e {
        crate::yaml::ValueError::Refused(refusal) => refuse("", refusal.to_string()),
        crate::yaml::ValueError::Invalid(error) => {
            refuse("", format!("is not valid YAML: {error}"))
        }
    })?;
    let mut rounds = 0;
    while has_merge_key(&config) {
        if rounds == MAX_MERGE_DEPTH {
            return Err(refuse("", "nests merge keys (<<) too deeply"));
        }
        config.apply_merge().map_err(|e| {
            refuse(
                "",
                format!("has a merge key (<<) that cannot be resolved: {e}"),
            )
        })?;
        rounds += 1;
    }
    check(&to_json(&config, "")?)?;
    serde_yaml_ng::to_string(&config).map_err(|e| refuse("", format!("cannot be written out: {e}")))
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
        normalise(text).map(|_| ()).map_err(|e| e.to_string())
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
    fn every_refused_cluster_field_is_refused_whatever_its_value() {
        for (field, why) in REFUSED_CLUSTER_FIELDS {
            for value in ["true", "false", "/some/path", "''"] {
                let text = GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    &format!("certificate-authority-data: Zm9v, {field}: {value}"),
                );
                assert_eq!(
                    checked(&text),
                    Err(format!("/clusters/0/cluster/{field}: {why}")),
                    "{field}: {value}"
                );
            }
        }
    }

    #[test]
    fn every_refused_user_field_is_refused_whatever_its_value() {
        for (field, why) in REFUSED_USER_FIELDS {
            for value in ["x", "/etc/key", "{command: aws}", "''"] {
                let text = GOOD.replace(
                    "client-key-data: YmFy",
                    &format!("client-key-data: YmFy, {field}: {value}"),
                );
                assert_eq!(
                    checked(&text),
                    Err(format!("/users/0/user/{field}: {why}")),
                    "{field}: {value}"
                );
            }
        }
    }

    #[test]
    fn shape_server_credentials_and_context_are_checked() {
        let cases = [
            ("[]".to_owned(), ": must be a kubeconfig mapping"),
            (
                GOOD.replace("https://", "http://"),
                "/clusters/0/cluster/server: must be an https:// URL",
            ),
            (
                GOOD.replace("server: 'https://127.0.0.1:6443', ", ""),
                "/clusters/0/cluster/server: is required",
            ),
            (
                GOOD.replace("clusters:\n- name: c", "clusters: []\nx:\n- name: c"),
                "/clusters: must hold exactly one entry, found 0",
            ),
            (
                GOOD.replace("- name: u\n", "- name: ''\n"),
                "/users/0/name: is required",
            ),
            (
                GOOD.replace("client-certificate-data: Zm9v, ", ""),
                "/users/0/user: client-certificate-data and client-key-data go together",
            ),
            (
                GOOD.replace(
                    "{client-certificate-data: Zm9v, client-key-data: YmFy}",
                    "{}",
                ),
                "/users/0/user: needs inline credentials: client-certificate-data with client-key-data, or token",
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
            (
                GOOD.replace("{cluster: c, user: u}", "!local {cluster: c, user: u}"),
                "/contexts/0/context: YAML tags are not accepted",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(checked(&text), Err(error.to_owned()), "{text}");
        }
    }

    #[test]
    fn deep_nesting_and_dropped_tags_are_refused_before_parsing() {
        let deep = format!("{GOOD}preferences: {{x: {}}}\n", "[".repeat(100_000));
        assert_eq!(
            checked(&deep),
            Err(": line 14 column 80: nesting deeper than 64 levels".to_owned())
        );
        assert_eq!(
            checked(&GOOD.replace("client-key-data: YmFy", "client-key-data: !!binary YmFy")),
            Err(": line 9 column 58: the YAML tag !!binary is not accepted; the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq".to_owned())
        );
    }

    #[test]
    fn merge_keys_are_resolved_before_the_check() {
        let text = GOOD.replace(
            "  cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}",
            "  cluster:\n    <<: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}",
        );
        assert_eq!(
            checked(&text),
            Err("/clusters/0/cluster/insecure-skip-tls-verify: TLS verification cannot be turned off".to_owned())
        );
    }
}
