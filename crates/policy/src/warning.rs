//! The warnings palisade gives with an answer that goes through (never a refusal): what each
//! is made of, and (`Display`) its English text as the API sends it, in `Warning` headers and
//! `warnings` fields. The portal says the same in the page's language from the parts.

use std::fmt;

/// What palisade itself runs for a workload, besides the images its user names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformObject {
    /// The build Job (the builder image).
    BuildJob,
    /// The Deployment (the image a build pushes, the file server).
    Deployment,
}

/// A warning of a resource write or form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// A policy in audit mode would refuse the plan: `Policy 'watch' (audit) would deny:
    /// <the 422 message it would give>`.
    AuditWouldDeny { policy: String, message: String },
    /// An exception lets the plan past (SPEC 7).
    PlanAllowedByException {
        plan: String,
        exception: String,
        /// When it ends, as stored (`.000Z` is shown as `Z`).
        until: String,
    },
    /// A function's plan the policies disallow: never refused (SPEC 2.2).
    FunctionPlanNotEnforced { plan: String, policies: Vec<String> },
    /// A function written while the policies could not be read (SPEC 2.2).
    FunctionPlanUnchecked,
    /// The builder of functions from uploaded code is tagged `latest`, which `policy`
    /// (DisallowLatestTag) denies (SPEC 5).
    LatestBuilderDenied { policy: String },
    /// An image palisade runs for `resource` (`<type>/<name>`) will be denied, with the
    /// message the cluster will give.
    PlatformImageDenied {
        object: PlatformObject,
        resource: String,
        denial: String,
    },
    /// Uploaded code is not built: the server has no `--public-url` for build Jobs.
    UploadsNotBuilt,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::AuditWouldDeny { policy, message } => {
                write!(f, "Policy '{policy}' (audit) would deny: {message}")
            }
            Warning::PlanAllowedByException {
                plan,
                exception,
                until,
            } => write!(
                f,
                "Compute plan '{plan}' is allowed by exception '{exception}' until {}",
                until.replace(".000Z", "Z")
            ),
            Warning::FunctionPlanNotEnforced { plan, policies } => {
                let list = policies
                    .iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let noun = if policies.len() == 1 {
                    "policy"
                } else {
                    "policies"
                };
                write!(
                    f,
                    "Compute plan '{plan}' is disallowed by boundary {noun} {list}; plans of functions are not enforced"
                )
            }
            Warning::FunctionPlanUnchecked => f.write_str(
                "The boundary's policies could not be read; the plan was not compared with them",
            ),
            Warning::LatestBuilderDenied { policy } => write!(
                f,
                "Policy '{policy}' (DisallowLatestTag) denies builds of uploaded code: the function \
                 builder is referenced by the tag latest"
            ),
            Warning::PlatformImageDenied {
                object,
                resource,
                denial,
            } => {
                let object = match object {
                    PlatformObject::BuildJob => "build Job",
                    PlatformObject::Deployment => "Deployment",
                };
                write!(
                    f,
                    "the {object} palisade runs for {resource} will be denied: {denial}"
                )
            }
            Warning::UploadsNotBuilt => f.write_str(
                "uploaded code is not built: palisade serve has no --public-url for build Jobs to fetch it from",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warning_reads_as_the_api_sends_it() {
        let cases = [
            (
                Warning::AuditWouldDeny {
                    policy: "watch".into(),
                    message: "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.".into(),
                },
                "Policy 'watch' (audit) would deny: Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.",
            ),
            (
                Warning::PlanAllowedByException {
                    plan: "large".into(),
                    exception: "big".into(),
                    until: "2027-03-01T00:00:00.000Z".into(),
                },
                "Compute plan 'large' is allowed by exception 'big' until 2027-03-01T00:00:00Z",
            ),
            (
                Warning::FunctionPlanNotEnforced {
                    plan: "xlarge".into(),
                    policies: vec!["size-limits".into()],
                },
                "Compute plan 'xlarge' is disallowed by boundary policy 'size-limits'; plans of functions are not enforced",
            ),
            (
                Warning::FunctionPlanNotEnforced {
                    plan: "xlarge".into(),
                    policies: vec!["a".into(), "b".into()],
                },
                "Compute plan 'xlarge' is disallowed by boundary policies 'a', 'b'; plans of functions are not enforced",
            ),
            (
                Warning::FunctionPlanUnchecked,
                "The boundary's policies could not be read; the plan was not compared with them",
            ),
            (
                Warning::LatestBuilderDenied { policy: "no-latest".into() },
                "Policy 'no-latest' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest",
            ),
            (
                Warning::PlatformImageDenied {
                    object: PlatformObject::BuildJob,
                    resource: "app/web".into(),
                    denial: "Policy 'trusted' (AllowedRegistries) denied image x: it is not under y.".into(),
                },
                "the build Job palisade runs for app/web will be denied: Policy 'trusted' (AllowedRegistries) denied image x: it is not under y.",
            ),
            (
                Warning::UploadsNotBuilt,
                "uploaded code is not built: palisade serve has no --public-url for build Jobs to fetch it from",
            ),
        ];
        for (warning, text) in cases {
            assert_eq!(warning.to_string(), text);
        }
    }
}
