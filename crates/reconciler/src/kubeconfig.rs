//! The kubeconfigs palisade accepts (SPEC 4.1): one cluster, user and context, an `https`
//! server, inline credentials only. Anything that would make the process read a file, run a
//! program or skip TLS verification is refused, naming the field.

use kube::config::Kubeconfig;

/// Checks `kubeconfig`; `Err` names the first offending field.
pub fn check_inline(kubeconfig: &Kubeconfig) -> Result<(), String> {
    let [cluster] = kubeconfig.clusters.as_slice() else {
        return Err(format!(
            "clusters: exactly one cluster is required, found {}",
            kubeconfig.clusters.len()
        ));
    };
    let [user] = kubeconfig.auth_infos.as_slice() else {
        return Err(format!(
            "users: exactly one user is required, found {}",
            kubeconfig.auth_infos.len()
        ));
    };
    let [context] = kubeconfig.contexts.as_slice() else {
        return Err(format!(
            "contexts: exactly one context is required, found {}",
            kubeconfig.contexts.len()
        ));
    };
    let Some(cluster_details) = &cluster.cluster else {
        return Err("clusters[0].cluster: missing".to_owned());
    };
    match cluster_details.server.as_deref() {
        Some(server) if server.starts_with("https://") => {}
        Some(_) => return Err("clusters[0].cluster.server: must be an https URL".to_owned()),
        None => return Err("clusters[0].cluster.server: missing".to_owned()),
    }
    let refused_cluster_fields = [
        (
            cluster_details.certificate_authority.is_some(),
            "certificate-authority",
        ),
        (cluster_details.proxy_url.is_some(), "proxy-url"),
        (
            cluster_details.insecure_skip_tls_verify == Some(true),
            "insecure-skip-tls-verify",
        ),
    ];
    if let Some((_, field)) = refused_cluster_fields.iter().find(|(set, _)| *set) {
        return Err(format!("clusters[0].cluster.{field}: not allowed"));
    }
    let Some(auth) = &user.auth_info else {
        return Err("users[0].user: missing".to_owned());
    };
    let refused_user_fields = [
        (auth.client_certificate.is_some(), "client-certificate"),
        (auth.client_key.is_some(), "client-key"),
        (auth.token_file.is_some(), "tokenFile"),
        (auth.exec.is_some(), "exec"),
        (auth.auth_provider.is_some(), "auth-provider"),
        (auth.username.is_some(), "username"),
        (auth.password.is_some(), "password"),
    ];
    if let Some((_, field)) = refused_user_fields.iter().find(|(set, _)| *set) {
        return Err(format!("users[0].user.{field}: not allowed"));
    }
    let certificate = auth.client_certificate_data.is_some();
    let key = auth.client_key_data.is_some();
    if certificate != key {
        return Err(
            "users[0].user: client-certificate-data and client-key-data go together".to_owned(),
        );
    }
    if !certificate && auth.token.is_none() {
        return Err(
            "users[0].user: inline credentials are required (client-certificate-data and client-key-data, or token)"
                .to_owned(),
        );
    }
    let Some(context_details) = &context.context else {
        return Err("contexts[0].context: missing".to_owned());
    };
    if context_details.cluster != cluster.name {
        return Err("contexts[0].context.cluster: names no cluster of this kubeconfig".to_owned());
    }
    if context_details.user.as_deref() != Some(user.name.as_str()) {
        return Err("contexts[0].context.user: names no user of this kubeconfig".to_owned());
    }
    Ok(())
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

    fn check(text: &str) -> Result<(), String> {
        check_inline(&Kubeconfig::from_yaml(text).unwrap())
    }

    #[test]
    fn inline_credentials_pass() {
        assert_eq!(check(GOOD), Ok(()));
        let token = GOOD.replace(
            "{client-certificate-data: Zm9v, client-key-data: YmFy}",
            "{token: abc}",
        );
        assert_eq!(check(&token), Ok(()));
    }

    #[test]
    fn files_programs_and_plain_http_are_refused() {
        let cases = [
            (
                GOOD.replace("client-key-data: YmFy", "client-key: /etc/key"),
                "users[0].user.client-key: not allowed",
            ),
            (
                GOOD.replace(
                    "{client-certificate-data: Zm9v, client-key-data: YmFy}",
                    "{exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}}",
                ),
                "users[0].user.exec: not allowed",
            ),
            (
                GOOD.replace("https://", "http://"),
                "clusters[0].cluster.server: must be an https URL",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "insecure-skip-tls-verify: true",
                ),
                "clusters[0].cluster.insecure-skip-tls-verify: not allowed",
            ),
            (
                GOOD.replace(
                    "certificate-authority-data: Zm9v",
                    "certificate-authority: /ca.crt",
                ),
                "clusters[0].cluster.certificate-authority: not allowed",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(check(&text), Err(error.to_owned()), "{text}");
        }
    }
}
