//! Which namespaces a boundary may hold (SPEC 3.4, v3.2): the ones palisade made or was handed,
//! never the cluster's own. A boundary's policies must never reach the cluster's system
//! workloads, so `default`, every `kube-*` name and the names an admin reserves for a cluster
//! are never created, adopted or labelled for a boundary.

use crate::name::Name;

/// Most names an admin may reserve in one cluster (besides `default` and `kube-*`).
pub const MAX_RESERVED: usize = 256;

/// The namespaces every cluster reserves: `default` and every name starting with `kube-`.
pub fn always_reserved(namespace: &str) -> bool {
    namespace == "default" || namespace.starts_with("kube-")
}

/// Whether `namespace` is reserved in a cluster that reserves `extra` besides the names every
/// cluster reserves.
pub fn is_reserved<S: AsRef<str>>(namespace: &str, extra: &[S]) -> bool {
    always_reserved(namespace) || extra.iter().any(|r| r.as_ref() == namespace)
}

/// The 409 answer for a reserved namespace: `namespace 'kube-system' is reserved in cluster
/// 'c1': it cannot belong to a boundary`.
pub fn reserved_message(namespace: &str, cluster: &str) -> String {
    format!("namespace '{namespace}' is reserved in cluster '{cluster}': it cannot belong to a boundary")
}

/// The 403 answer when someone but an admin adopts an existing namespace.
pub const ADOPT_NEEDS_ADMIN: &str = "adopting an existing namespace needs an admin";

/// What a recorded namespace reads once the one palisade labelled was deleted in the cluster:
/// `gone: namespace 'web' was deleted in c1; a namespace of that name made since is not the
/// boundary's (adopt it to take it)`.
pub fn gone_status(namespace: &str, cluster: &str) -> String {
    format!(
        "gone: namespace '{namespace}' was deleted in {cluster}; a namespace of that name made \
         since is not the boundary's (adopt it to take it)"
    )
}

/// What a namespace recorded before names were reserved reads when its name is reserved now
/// (an upgraded store): it is reported, not dropped; an admin releases it.
pub fn reserved_status(namespace: &str, cluster: &str) -> String {
    format!(
        "reserved: {}; release it from the boundary",
        reserved_message(namespace, cluster)
    )
}

/// The status of a namespace the boundary holds.
pub const ACTIVE: &str = "active";

/// A reserved-names list as an admin sends it: each a namespace name (a DNS label), none
/// twice, at most [`MAX_RESERVED`]. The error names the entry (`/reserved_namespaces/1: ...`).
pub fn parse_reserved(names: &[String]) -> Result<Vec<String>, String> {
    if names.len() > MAX_RESERVED {
        return Err(format!(
            "/reserved_namespaces: at most {MAX_RESERVED} entries, found {}",
            names.len()
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        let parsed = Name::parse(name)
            .map_err(|e| format!("/reserved_namespaces/{index}: {e}"))?
            .to_string();
        if out.contains(&parsed) {
            return Err(format!(
                "/reserved_namespaces/{index}: '{parsed}' is listed twice"
            ));
        }
        out.push(parsed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names() {
        let extra = ["monitoring".to_owned()];
        let cases = [
            ("default", true),
            ("kube-system", true),
            ("kube-public", true),
            ("kube-node-lease", true),
            ("kube-", true),
            ("monitoring", true),
            ("kubernetes", false),
            ("web", false),
            ("defaults", false),
            ("my-kube-system", false),
        ];
        for (name, reserved) in cases {
            assert_eq!(is_reserved(name, &extra), reserved, "{name}");
        }
        assert!(!is_reserved::<String>("monitoring", &[]));
    }

    #[test]
    fn messages_are_the_spec_s() {
        assert_eq!(
            reserved_message("kube-system", "c1"),
            "namespace 'kube-system' is reserved in cluster 'c1': it cannot belong to a boundary"
        );
        assert_eq!(
            gone_status("web", "c1"),
            "gone: namespace 'web' was deleted in c1; a namespace of that name made since is not the boundary's (adopt it to take it)"
        );
    }

    #[test]
    fn reserved_lists_are_checked_entry_by_entry() {
        let list = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_reserved(&list(&["monitoring", "ingress"])),
            Ok(list(&["monitoring", "ingress"]))
        );
        let error = parse_reserved(&list(&["ok", "Bad_Name"])).unwrap_err();
        assert!(error.starts_with("/reserved_namespaces/1: "), "{error}");
        assert_eq!(
            parse_reserved(&list(&["a", "a"])).unwrap_err(),
            "/reserved_namespaces/1: 'a' is listed twice"
        );
        let many: Vec<String> = (0..=MAX_RESERVED).map(|i| format!("n{i}")).collect();
        assert_eq!(
            parse_reserved(&many).unwrap_err(),
            "/reserved_namespaces: at most 256 entries, found 257"
        );
    }
}
