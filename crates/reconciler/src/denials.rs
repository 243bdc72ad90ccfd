//! What a version being rolled out denied (SPEC 8), as the API server counts it: its
//! `apiserver_validating_admission_policy_check_total` with `enforcement_action="deny"`, by
//! the binding (`policy_binding`). Each version has a binding of its own for the namespaces its
//! stage reached (`palisade_vap::per_policy::version_object_name`), in every layout, so its
//! counter is the version's denials there and nothing else's. A counter starts from 0 when the
//! API server starts; a stage counts from the value read when it started.

/// The counter's name on the API server's `/metrics`.
pub const CHECKS: &str = "apiserver_validating_admission_policy_check_total";

/// The denials `binding` has on `metrics` (the text of an API server's `/metrics`): the sum of
/// its `deny` series (one per error type and state).
pub fn denials(metrics: &str, binding: &str) -> u64 {
    let wanted_binding = format!("policy_binding=\"{binding}\"");
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix(CHECKS)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once("} "))
        .filter(|(labels, _)| {
            labels.split(',').any(|l| l == wanted_binding)
                && labels
                    .split(',')
                    .any(|l| l == "enforcement_action=\"deny\"")
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .map(|value| value.max(0.0).round() as u64)
        .sum()
}

/// The stage's denials in one cluster: from `baseline` (read when the stage started) to `now`;
/// a counter below its baseline means the API server restarted since, and counts from 0.
pub fn since(baseline: Option<u64>, now: u64) -> u64 {
    match baseline {
        Some(base) if base <= now => now - base,
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = r#"# HELP apiserver_validating_admission_policy_check_total [BETA] Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.
# TYPE apiserver_validating_admission_policy_check_total counter
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="tags.shop.v2.palisade.dev",policy_binding="tags.shop.v2.palisade.dev",state="active"} 3
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="tags.shop.v2.palisade.dev",policy_binding="tags.shop.v2.palisade.dev.x",state="active"} 40
apiserver_validating_admission_policy_check_total{enforcement_action="warn",error_type="no_error",policy="tags.shop.v2.palisade.dev",policy_binding="tags.shop.v2.audit.palisade.dev",state="active"} 7
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="validation_error",policy="tags.shop.v2.palisade.dev",policy_binding="tags.shop.v2.palisade.dev",state="active"} 2
apiserver_validating_admission_policy_check_total_other{enforcement_action="deny",policy_binding="tags.shop.v2.palisade.dev"} 100
"#;

    #[test]
    fn only_the_binding_s_denials_count() {
        assert_eq!(denials(METRICS, "tags.shop.v2.palisade.dev"), 5);
        assert_eq!(denials(METRICS, "tags.shop.v2.audit.palisade.dev"), 0);
        assert_eq!(denials(METRICS, "tags.shop.v3.palisade.dev"), 0);
        assert_eq!(denials("", "tags.shop.v2.palisade.dev"), 0);
    }

    #[test]
    fn a_stage_counts_from_its_start_and_after_a_restart_from_zero() {
        assert_eq!(since(Some(3), 5), 2);
        assert_eq!(since(Some(3), 3), 0);
        assert_eq!(since(Some(9), 2), 2);
        assert_eq!(since(None, 4), 4);
    }
}
