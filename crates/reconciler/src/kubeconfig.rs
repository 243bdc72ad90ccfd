//! The kubeconfig as the client library reads it: the rules themselves are
//! `palisade_api_types::kubeconfig::check`, run again here on what kube-rs read, before any
//! connection is made.

use kube::config::Kubeconfig;
use palisade_api_types::kubeconfig::refuse;
pub use palisade_api_types::kubeconfig::{check, KubeconfigError};
use serde_json::Value;

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

    #[test]
    fn what_the_client_library_reads_is_checked_by_the_same_rules() {
        let text = "
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
";
        assert_eq!(
            read(text).map(|_| ()).map_err(|e| e.to_string()),
            Err("/clusters/0/cluster/insecure-skip-tls-verify: TLS verification cannot be turned off".to_owned())
        );
        let good = text.replace(
            "insecure-skip-tls-verify: true",
            "certificate-authority-data: Zm9v",
        );
        assert!(read(&good).is_ok());
    }
}
