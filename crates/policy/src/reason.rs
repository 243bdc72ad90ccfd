//! The reasons palisade gives after a status's words (`not enforced: <reason>`, `error:
//! <reason>`, `not deployed: <reason>`), as the API shows them. Defined once here, so that the
//! reconciler writes them and the portal can say them in the page's language; a reason that
//! quotes an error or Kubernetes' own message has a fixed start ([`UNCONFIRMED`],
//! [`PROBE_REFUSED`]) and the quoted rest.

/// A cluster that does not serve the v1 API.
pub const NOT_SERVED: &str =
    "the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy";

/// A failed enforcement probe.
pub const ADMITTED_VIOLATING: &str = "the API server admitted a violating object";

/// A failed enforcement probe of an audit-mode policy.
pub const NOT_WARNED: &str = "the API server admitted a violating object without a warning";

/// An exception's probe: an object it matches was denied with the message the exception
/// lifts (SPEC 7).
pub const DENIED_EXCEPTED: &str = "the API server denied an object the exception matches";

/// An exception to an audit-mode policy: an object it matches was still warned about.
pub const WARNED_EXCEPTED: &str = "the API server warned about an object the exception matches";

/// How an inconclusive probe's reason starts (another policy, or an older version of this one
/// that the API server has not replaced yet, refused it); the API server's answer follows.
pub const PROBE_REFUSED: &str = "the API server refused the probe for another reason";

/// How a cluster's admission reason starts while its pass fails; the error follows.
pub const UNCONFIRMED: &str = "palisade cannot confirm it";

/// A cluster too old to enforce anything: `Kubernetes 1.29 is older than 1.30`.
pub fn too_old(version: &str, oldest: &str) -> String {
    format!("Kubernetes {version} is older than {oldest}")
}

/// The parts of a [`too_old`] reason: the version and the oldest that enforces.
pub fn parse_too_old(reason: &str) -> Option<(&str, &str)> {
    reason
        .strip_prefix("Kubernetes ")?
        .split_once(" is older than ")
}

/// A workload with nowhere to run.
pub fn no_placement(boundary: &str) -> String {
    format!(
        "no cluster given, and boundary '{boundary}' has no single attached cluster and namespace to run it in"
    )
}

/// The boundary of a [`no_placement`] reason.
pub fn parse_no_placement(reason: &str) -> Option<&str> {
    reason
        .strip_prefix("no cluster given, and boundary '")?
        .strip_suffix("' has no single attached cluster and namespace to run it in")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterned_reasons_read_back() {
        assert_eq!(
            too_old("1.29", "1.30"),
            "Kubernetes 1.29 is older than 1.30"
        );
        assert_eq!(
            parse_too_old(&too_old("1.29", "1.30")),
            Some(("1.29", "1.30"))
        );
        assert_eq!(parse_too_old(NOT_SERVED), None);
        assert_eq!(parse_no_placement(&no_placement("shop")), Some("shop"));
        assert_eq!(parse_no_placement("no cluster given"), None);
    }
}
