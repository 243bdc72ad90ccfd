//! Platform workloads (SPEC 5), the application's part: where a workload resource runs
//! (`cluster` and `namespace`, checked against the boundary's attachments and namespaces),
//! the short-lived token a build Job fetches uploaded code with (the uploads themselves are
//! `uploads`), and the warning given before a build of uploaded function code is denied.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use palisade_api_types::resource::Resource;
use palisade_policy::policy::{Mode, Rule};
use palisade_policy::{Name, Policy, ResourceType, Warning};
use palisade_store::{NamespaceRecord, ResourceRecord};
use palisade_workload::{Container, Kind, Source, Workload, WorkloadConfig};

use crate::caller::Access;
use crate::error::{AppError, AppResult};
use crate::sealing::SealingKey;
use crate::App;

/// How long a build Job's fetch token is good for.
pub const FETCH_TOKEN_TTL: Duration = Duration::from_secs(15 * 60);

/// The renderer's kind of a workload type; `None` for the other types.
pub fn kind_of(ty: ResourceType) -> Option<Kind> {
    match ty {
        ResourceType::App => Some(Kind::App),
        ResourceType::Function => Some(Kind::Function),
        ResourceType::StaticWebApp => Some(Kind::StaticWebApp),
        ResourceType::ContainerInstance => Some(Kind::ContainerInstance),
        _ => None,
    }
}

/// The renderer's input for a stored resource, or why it cannot run.
pub fn workload_of(
    record: &ResourceRecord,
    installation: &str,
) -> Result<(Workload, String), String> {
    let resource: Resource = serde_json::from_str(&record.body_json)
        .map_err(|e| format!("the stored resource cannot be read: {e}"))?;
    let kind = ResourceType::parse(&record.resource_type)
        .ok()
        .and_then(kind_of)
        .ok_or_else(|| format!("{} is not a workload type", record.resource_type))?;
    let namespace = resource
        .namespace
        .clone()
        .ok_or_else(|| "it has no namespace".to_owned())?;
    let source = match (&resource.source, &resource.upload) {
        (Some(url), _) => Some(Source::Git(url.clone())),
        // An upload never changes: its id stands for its content.
        (None, Some(id)) => Some(Source::Upload {
            id: id.clone(),
            sha256: id.clone(),
        }),
        (None, None) => None,
    };
    if kind == Kind::StaticWebApp && source.is_none() {
        return Err("a static web app needs a source or an upload to serve".to_owned());
    }
    let workload = Workload {
        boundary: record.boundary.clone(),
        installation: installation.to_owned(),
        kind,
        name: record.name.clone(),
        namespace: namespace.clone(),
        labels: resource.labels.clone().unwrap_or_default(),
        replicas: i32::try_from(resource.replicas.unwrap_or(1)).unwrap_or(i32::MAX),
        plan: resource.plan.clone(),
        image: resource.image.clone(),
        source,
        components: resource
            .components
            .iter()
            .flatten()
            .map(|c| Container {
                name: c.name.clone(),
                image: c.image.clone(),
                plan: c.plan.clone(),
            })
            .collect(),
    };
    Ok((workload, namespace))
}

pub use palisade_policy::PlatformObject;

/// The images palisade runs for `w` that its user did not name, with the object that runs
/// each: the builder (build Job), the image a build pushes, and a static web app's file
/// server (Deployment). An app or function run from its own image, and a container
/// instance, have none.
pub fn platform_images(w: &Workload, config: &WorkloadConfig) -> Vec<(PlatformObject, String)> {
    let mut images = Vec::new();
    if let Some(builder) = palisade_workload::builder_image(w, config) {
        images.push((PlatformObject::BuildJob, builder));
    }
    if let Some(built) = palisade_workload::built_image(w, config) {
        images.push((PlatformObject::Deployment, built));
    }
    if w.kind == Kind::StaticWebApp {
        images.push((PlatformObject::Deployment, config.file_server.clone()));
    }
    images
}

/// Where a boundary's workloads can run: its attached clusters and its namespaces.
#[derive(Clone, Debug, Default)]
pub struct Placements {
    pub clusters: Vec<String>,
    pub namespaces: Vec<NamespaceRecord>,
}

fn listing(names: &[&str]) -> String {
    names.join(", ")
}

/// Places a workload: a given `cluster` must be attached to the boundary and a given
/// `namespace` must be one of the boundary's namespaces in that cluster (400 naming the field
/// otherwise). Left out, the cluster is the boundary's only attached one, or the only one in
/// which the boundary has the given namespace; the namespace is the boundary's only one in
/// that cluster. A workload that cannot be placed that way (no attached cluster, several to
/// choose from, no namespace or several) is kept unplaced: it runs nowhere, and its status
/// says why, until a `PATCH` places it. Only a placement that was asked for and cannot be made
/// is refused. Other types are left alone. Answers the cluster it is placed in.
pub fn place(
    resource: &mut Resource,
    ty: ResourceType,
    boundary: &str,
    placements: &Placements,
) -> AppResult<Option<String>> {
    if !ty.is_workload() {
        return Ok(None);
    }
    let attached: Vec<&str> = placements.clusters.iter().map(String::as_str).collect();
    let namespaces_in = |cluster: &str| -> Vec<&str> {
        let mut names: Vec<&str> = placements
            .namespaces
            .iter()
            .filter(|ns| ns.cluster == cluster)
            .map(|ns| ns.name.as_str())
            .collect();
        names.sort_unstable();
        names
    };
    let unplaced = |resource: &mut Resource| {
        resource.cluster = None;
        resource.namespace = None;
        Ok(None)
    };
    let (cluster, chosen) = match (resource.cluster.as_deref(), resource.namespace.as_deref()) {
        (Some(cluster), _) if attached.contains(&cluster) => (cluster.to_owned(), true),
        (Some(cluster), _) => {
            return Err(AppError::invalid(
                "/cluster",
                if attached.is_empty() {
                    format!("cluster '{cluster}' is not attached to boundary '{boundary}', which has no attached cluster")
                } else {
                    format!(
                        "cluster '{cluster}' is not attached to boundary '{boundary}'; its clusters are {}",
                        listing(&attached)
                    )
                },
            ))
        }
        // A namespace without a cluster: the attached cluster(s) where the boundary has it.
        (None, Some(namespace)) => {
            let holding: Vec<&str> = attached
                .iter()
                .copied()
                .filter(|c| namespaces_in(c).contains(&namespace))
                .collect();
            match (holding.as_slice(), attached.as_slice()) {
                ([only], _) => ((*only).to_owned(), true),
                // One cluster: the error below names its namespaces.
                ([], [only]) => ((*only).to_owned(), true),
                ([], _) => {
                    return Err(AppError::invalid(
                        "/namespace",
                        format!(
                            "boundary '{boundary}' has no namespace '{namespace}' in an attached cluster"
                        ),
                    ))
                }
                (many, _) => {
                    return Err(AppError::invalid(
                        "/cluster",
                        format!(
                            "is required: boundary '{boundary}' has namespace '{namespace}' in {} clusters ({})",
                            many.len(),
                            listing(many)
                        ),
                    ))
                }
            }
        }
        (None, None) => match attached.as_slice() {
            [only] => ((*only).to_owned(), false),
            _ => return unplaced(resource),
        },
    };
    let in_cluster = namespaces_in(&cluster);
    let namespace = match resource.namespace.as_deref() {
        Some(namespace) if in_cluster.contains(&namespace) => namespace.to_owned(),
        Some(namespace) => {
            return Err(AppError::invalid(
                "/namespace",
                if in_cluster.is_empty() {
                    format!("namespace '{namespace}' in cluster '{cluster}' does not belong to boundary '{boundary}', which has no namespace there")
                } else {
                    format!(
                        "namespace '{namespace}' in cluster '{cluster}' does not belong to boundary '{boundary}'; its namespaces there are {}",
                        listing(&in_cluster)
                    )
                },
            ))
        }
        None => match in_cluster.as_slice() {
            [only] => (*only).to_owned(),
            _ if !chosen => return unplaced(resource),
            [] => {
                return Err(AppError::invalid(
                    "/namespace",
                    format!(
                        "is required: boundary '{boundary}' has no namespace in cluster '{cluster}'; create one first"
                    ),
                ))
            }
            many => {
                return Err(AppError::invalid(
                    "/namespace",
                    format!(
                        "is required: boundary '{boundary}' has {} namespaces in cluster '{cluster}' ({})",
                        many.len(),
                        listing(many)
                    ),
                ))
            }
        },
    };
    resource.cluster = Some(cluster.clone());
    resource.namespace = Some(namespace);
    Ok(Some(cluster))
}

/// What a fetch token says, before its expiry: the upload it opens.
fn token_prefix(boundary: &str, id: &str) -> String {
    format!("palisade-fetch/v1/{boundary}/{id}/")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A token that opens the upload `id` of `boundary`, and nothing else, for
/// [`FETCH_TOKEN_TTL`]: the text `palisade-fetch/v1/<boundary>/<id>/<expiry>` sealed with the
/// installation's key, so that only this installation can make or read one.
pub fn fetch_token(key: &SealingKey, boundary: &str, id: &str) -> AppResult<String> {
    let expires = unix_now() + FETCH_TOKEN_TTL.as_secs();
    let sealed = key
        .seal(format!("{}{expires}", token_prefix(boundary, id)).as_bytes())
        .map_err(|e| AppError::Internal(e.to_string()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed))
}

/// Whether `token` is a fetch token of the upload `id` of `boundary`, made by this
/// installation (`key`) and not expired.
pub fn fetch_token_opens(key: &SealingKey, token: &str, boundary: &str, id: &str) -> bool {
    let Ok(sealed) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token) else {
        return false;
    };
    let Some(text) = key
        .open(&sealed)
        .ok()
        .and_then(|t| String::from_utf8(t).ok())
    else {
        return false;
    };
    text.strip_prefix(&token_prefix(boundary, id))
        .and_then(|rest| rest.parse::<u64>().ok())
        .is_some_and(|expires| expires >= unix_now())
}

/// Where a build Job fetches the upload `id` of `boundary`, palisade being reachable from the
/// cluster at `public_url`.
pub fn fetch_url(public_url: &str, boundary: &str, id: &str) -> String {
    format!(
        "{}/v1/boundaries/{boundary}/uploads/{id}/content",
        public_url.trim_end_matches('/')
    )
}

impl App {
    /// Where the boundary's workloads can run (one read).
    pub async fn placements(&self, boundary: &str) -> AppResult<Placements> {
        let rows = self
            .store
            .placements(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let mut placements = Placements::default();
        for (cluster, namespace) in rows {
            if placements.clusters.last() != Some(&cluster) {
                placements.clusters.push(cluster.clone());
            }
            if let Some(name) = namespace {
                placements.namespaces.push(NamespaceRecord {
                    cluster,
                    name,
                    boundary: boundary.to_owned(),
                    created_at: String::new(),
                    uid: None,
                    gone_at: None,
                });
            }
        }
        Ok(placements)
    }

    /// The enforce-mode DisallowLatestTag policies that apply to `cluster`: a build of
    /// uploaded function code there is denied, and these warnings say so before it happens.
    /// Policies that cannot be read give no warning (the create itself does not depend on
    /// them).
    pub async fn latest_builder_warnings(&self, boundary: &str, cluster: &str) -> Vec<Warning> {
        let Ok(cluster) = Name::parse(cluster) else {
            return Vec::new();
        };
        let Ok(policies) = self.read_policies(boundary).await else {
            return Vec::new();
        };
        latest_builder_policies(&policies, &cluster)
            .into_iter()
            .map(|policy| Warning::LatestBuilderDenied { policy })
            .collect()
    }

    /// Warnings for every enforce-mode policy in scope of `record`'s cluster that will deny an
    /// image palisade itself runs for it (builder, built image, file server), each with the
    /// message the cluster will give. A function's upload builder tagged `latest` is left to
    /// [`Warning::LatestBuilderDenied`]. Policies that cannot be read give no warning (the write does
    /// not depend on them).
    pub async fn platform_image_warnings(&self, record: &ResourceRecord) -> Vec<Warning> {
        let Some(cluster) = record.cluster.as_deref().and_then(|c| Name::parse(c).ok()) else {
            return Vec::new();
        };
        let Ok((workload, _)) = workload_of(record, "") else {
            return Vec::new();
        };
        if matches!(workload.source, Some(Source::Upload { .. })) && !self.builds_uploads {
            return vec![Warning::UploadsNotBuilt];
        }
        let images = platform_images(&workload, &self.workload_config);
        if images.is_empty() {
            return Vec::new();
        }
        let Ok(policies) = self.read_policies(&record.boundary).await else {
            return Vec::new();
        };
        let from_upload = matches!(workload.source, Some(Source::Upload { .. }));
        let resource = format!("{}/{}", record.resource_type, record.name);
        let mut warnings = Vec::new();
        for policy in policies
            .iter()
            .filter(|p| p.mode() == Mode::Enforce && p.scope().includes(&cluster))
        {
            for (object, image) in &images {
                let Some(denial) = palisade_policy::admission::image_denial(policy, image) else {
                    continue;
                };
                let said_already = workload.kind == Kind::Function
                    && from_upload
                    && *object == PlatformObject::BuildJob
                    && denial.rule == palisade_policy::RuleKind::DisallowLatestTag;
                let warning = Warning::PlatformImageDenied {
                    object: *object,
                    resource: resource.clone(),
                    denial: denial.message,
                };
                if !said_already && !warnings.contains(&warning) {
                    warnings.push(warning);
                }
            }
        }
        warnings
    }

    /// The warnings an upload form for a function shows before anything is built: the
    /// enforce-mode DisallowLatestTag policies that apply to any cluster the boundary's
    /// functions can be placed in (each named once).
    pub async fn upload_form_warnings(&self, access: &Access) -> AppResult<Vec<Warning>> {
        let boundary = access.boundary();
        let placements = self.placements(boundary).await?;
        let policies = self.read_policies(boundary).await?;
        let mut names: Vec<String> = Vec::new();
        for cluster in &placements.clusters {
            let Ok(cluster) = Name::parse(cluster) else {
                continue;
            };
            for name in latest_builder_policies(&policies, &cluster) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        Ok(names
            .into_iter()
            .map(|policy| Warning::LatestBuilderDenied { policy })
            .collect())
    }

    /// A token that opens one upload, and nothing else, for [`FETCH_TOKEN_TTL`].
    pub fn fetch_token(&self, boundary: &str, id: &str) -> AppResult<String> {
        fetch_token(&self.sealing, boundary, id)
    }
}

/// The names of the enforce-mode policies with a DisallowLatestTag rule whose scope
/// includes `cluster`.
pub fn latest_builder_policies(policies: &[Policy], cluster: &Name) -> Vec<String> {
    policies
        .iter()
        .filter(|p| p.mode() == Mode::Enforce && p.scope().includes(cluster))
        .filter(|p| {
            p.rules()
                .iter()
                .any(|r| matches!(r, Rule::DisallowLatestTag))
        })
        .map(|p| p.name().to_string())
        .collect()
}

impl App {
    /// What the cluster holds for a workload resource, read live (SPEC 4.2 v3 `describe
    /// resource`, the portal's resource page): 404 for a type that runs no workload or a
    /// resource not placed, 503 naming the cluster when it cannot be read.
    pub async fn resource_workload(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
    ) -> AppResult<palisade_api_types::view::WorkloadDetail> {
        let record = self.resource_record(access, resource_type, name).await?;
        if ResourceType::parse(resource_type)
            .ok()
            .and_then(kind_of)
            .is_none()
        {
            return Err(AppError::NotFound(format!(
                "{resource_type} '{name}' runs no workload in a cluster (databases, caches and vector stores are managed services)"
            )));
        }
        let (Some(cluster), Ok((workload, namespace))) =
            (record.cluster.clone(), workload_of(&record, ""))
        else {
            return Err(AppError::NotFound(format!(
                "{resource_type} '{name}' is not placed in a cluster and namespace yet"
            )));
        };
        let cluster_record = self.find_cluster(&cluster).await?;
        let kubeconfig = self.kubeconfig_of(&cluster_record)?;
        let target = crate::ports::WorkloadTarget {
            namespace: namespace.clone(),
            deployment: palisade_workload::deployment_name(&workload),
            build_job: palisade_workload::build_job_name(&workload, &self.workload_config),
            selector: palisade_workload::workload_selector(&workload),
        };
        let unavailable =
            |why: String| AppError::ClusterUnavailable(format!("cluster '{cluster}': {why}"));
        let read = tokio::time::timeout(
            crate::preview::CLUSTER_READ_TIMEOUT,
            self.clusters.workload_detail(&kubeconfig, &target),
        )
        .await
        .map_err(|_| {
            unavailable(format!(
                "no answer within {} s",
                crate::preview::CLUSTER_READ_TIMEOUT.as_secs()
            ))
        })?;
        let mut detail = read.map_err(|e| unavailable(e.to_string()))?;
        detail.cluster = cluster.clone();
        detail.namespace = namespace;
        Ok(detail)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn ns(cluster: &str, name: &str) -> NamespaceRecord {
        NamespaceRecord {
            cluster: cluster.into(),
            name: name.into(),
            boundary: "shop".into(),
            created_at: String::new(),
            uid: None,
            gone_at: None,
        }
    }

    fn app(cluster: Option<&str>, namespace: Option<&str>) -> Resource {
        Resource {
            resource_type: "app".into(),
            name: "web".into(),
            plan: Some("small".into()),
            components: None,
            image: Some("ghcr.io/acme/web:1".into()),
            source: None,
            labels: None,
            cluster: cluster.map(Into::into),
            namespace: namespace.map(Into::into),
            upload: None,
            replicas: None,
        }
    }

    fn placements(clusters: &[&str], namespaces: &[(&str, &str)]) -> Placements {
        Placements {
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
            namespaces: namespaces.iter().map(|(c, n)| ns(c, n)).collect(),
        }
    }

    fn placed(
        cluster: Option<&str>,
        namespace: Option<&str>,
        where_: &Placements,
    ) -> Result<(Option<String>, Option<String>), String> {
        let mut resource = app(cluster, namespace);
        place(&mut resource, ResourceType::App, "shop", where_)
            .map(|_| (resource.cluster, resource.namespace))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn placement_table() {
        let one = placements(&["k1"], &[("k1", "web")]);
        let two = placements(&["k1", "k2"], &[("k1", "web"), ("k1", "api"), ("k2", "x")]);
        let bare = placements(&["k1"], &[]);
        let none = placements(&[], &[]);
        let crowded = placements(&["k1"], &[("k1", "a"), ("k1", "b")]);
        let some = |c: &str, n: &str| Ok((Some(c.to_owned()), Some(n.to_owned())));
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            &'a Placements,
            Result<(Option<String>, Option<String>), String>,
        );
        let cases: Vec<Case> = vec![
            ("defaults to the only ones", None, None, &one, some("k1", "web")),
            ("given and valid", Some("k1"), Some("api"), &two, some("k1", "api")),
            ("only namespace of the given cluster", Some("k2"), None, &two, some("k2", "x")),
            ("nowhere to run: unplaced", None, None, &none, Ok((None, None))),
            ("no namespace in the only cluster: unplaced", None, None, &bare, Ok((None, None))),
            (
                "cluster not attached",
                Some("k9"),
                None,
                &two,
                Err("/cluster: cluster 'k9' is not attached to boundary 'shop'; its clusters are k1, k2".into()),
            ),
            ("several clusters: unplaced", None, None, &two, Ok((None, None))),
            ("the cluster of a given namespace", None, Some("x"), &two, some("k2", "x")),
            (
                "a namespace in no attached cluster",
                None,
                Some("nope"),
                &two,
                Err("/namespace: boundary 'shop' has no namespace 'nope' in an attached cluster".into()),
            ),
            (
                "several namespaces",
                Some("k1"),
                None,
                &two,
                Err("/namespace: is required: boundary 'shop' has 2 namespaces in cluster 'k1' (api, web)".into()),
            ),
            (
                "namespace of another cluster",
                Some("k2"),
                Some("web"),
                &two,
                Err("/namespace: namespace 'web' in cluster 'k2' does not belong to boundary 'shop'; its namespaces there are x".into()),
            ),
            (
                "given cluster without namespaces",
                Some("k1"),
                None,
                &bare,
                Err("/namespace: is required: boundary 'shop' has no namespace in cluster 'k1'; create one first".into()),
            ),
            (
                "namespace without any cluster",
                None,
                Some("web"),
                &none,
                Err("/namespace: boundary 'shop' has no namespace 'web' in an attached cluster".into()),
            ),
            (
                "several namespaces in the only cluster: unplaced",
                None,
                None,
                &crowded,
                Ok((None, None)),
            ),
        ];
        for (what, cluster, namespace, where_, expected) in cases {
            assert_eq!(placed(cluster, namespace, where_), expected, "{what}");
        }
    }

    #[test]
    fn databases_are_never_placed() {
        let mut db = app(None, None);
        db.resource_type = "postgresql".into();
        let where_ = placements(&["k1"], &[("k1", "web")]);
        assert_eq!(
            place(&mut db, ResourceType::Postgresql, "shop", &where_).unwrap(),
            None
        );
        assert_eq!(db.cluster, None);
    }
}
