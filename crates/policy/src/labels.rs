//! The label and annotation keys palisade puts on what it writes to a cluster, defined once:
//! the admission objects (`palisade-vap`), the workloads (`palisade-workload`), the reconciler
//! that finds them again, and the tests that look for them all name these constants. A test
//! (`tests/label_keys.rs`) fails on a key spelled out anywhere else in the sources.

/// On a namespace: the boundary it belongs to. On an object palisade makes for a resource or
/// a boundary: that boundary.
pub const BOUNDARY_LABEL: &str = "palisade.dev/boundary";
/// The installation that made the object.
pub const INSTALLATION_LABEL: &str = "palisade.dev/installation";
/// The policy an admission object enforces.
pub const POLICY_LABEL: &str = "palisade.dev/policy";
/// On the objects of a version being rolled out (SPEC 8): that version. They stand beside the
/// layout's own objects in every layout, and go when the rollout is done or aborted.
pub const VERSION_LABEL: &str = "palisade.dev/version";
/// Marks a switch binding (a change of admission layout in progress).
pub const SWITCH_LABEL: &str = "palisade.dev/switch";
/// The shared layout's parameters: `enforce` or `audit`, which picks the binding.
pub const MODE_LABEL: &str = "palisade.dev/mode";
/// The per-boundary layout: the policies an object holds, comma-separated and in order.
pub const POLICIES_ANNOTATION: &str = "palisade.dev/policies";
/// The resource's name, on its workload and pod template.
pub const RESOURCE_LABEL: &str = "palisade.dev/resource";
/// The resource's type as the API writes it (`app`, `static_web_app`...).
pub const RESOURCE_TYPE_LABEL: &str = "palisade.dev/resource-type";
/// The build hash, on a build Job and its pod.
pub const BUILD_LABEL: &str = "palisade.dev/build";
/// The Deployment annotation holding its rendering hash.
pub const RENDERING_ANNOTATION: &str = "palisade.dev/rendering";
/// `palisade` ([`MANAGER`]) on every object palisade makes.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGER: &str = "palisade";
