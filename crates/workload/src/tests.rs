//! Rendering tests: exact objects for each kind, the build Job, the hashes and the names.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::collections::BTreeMap;

use palisade_policy::image_ref::ImageRef;
use palisade_policy::Catalog;
use serde_json::{json, Value};

use crate::deployment::cpu_quantity;
use crate::*;

const INSTALLATION: &str = "inst-1";

fn config() -> WorkloadConfig {
    WorkloadConfig::builtin()
}

fn catalog() -> Catalog {
    Catalog::builtin()
}

/// An app from an image, with a user label that palisade's own label overrides.
fn app() -> Workload {
    Workload {
        boundary: "shop".into(),
        installation: INSTALLATION.into(),
        kind: Kind::App,
        name: "web".into(),
        namespace: "shop-prod".into(),
        labels: BTreeMap::from([
            ("team".to_owned(), "storefront".to_owned()),
            (
                "palisade.dev/boundary".to_owned(),
                "someone-else".to_owned(),
            ),
            ("app.kubernetes.io/managed-by".to_owned(), "helm".to_owned()),
        ]),
        replicas: 3,
        plan: Some("small".into()),
        image: Some("ghcr.io/acme/web:1.4".into()),
        source: None,
        components: vec![],
    }
}

fn git_app() -> Workload {
    Workload {
        image: None,
        source: Some(Source::Git("https://git.example.com/acme/web.git".into())),
        ..app()
    }
}

fn git_function() -> Workload {
    Workload {
        kind: Kind::Function,
        name: "resize".into(),
        plan: Some("medium".into()),
        ..git_app()
    }
}

fn upload() -> Source {
    Source::Upload {
        id: "up-7f3a".into(),
        sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
    }
}

fn upload_function() -> Workload {
    Workload {
        source: Some(upload()),
        ..git_function()
    }
}

fn static_web_app() -> Workload {
    Workload {
        kind: Kind::StaticWebApp,
        name: "docs".into(),
        plan: None,
        labels: BTreeMap::new(),
        replicas: 2,
        ..git_app()
    }
}

fn container_instance() -> Workload {
    Workload {
        kind: Kind::ContainerInstance,
        name: "batch".into(),
        plan: None,
        image: None,
        source: None,
        labels: BTreeMap::new(),
        replicas: 1,
        components: vec![
            Container {
                name: "worker".into(),
                image: "ghcr.io/acme/worker:2.0".into(),
                plan: "large".into(),
            },
            Container {
                name: "sidecar".into(),
                image: "ghcr.io/acme/sidecar@sha256:0123456789abcdef0123456789abcdef".into(),
                plan: "small".into(),
            },
        ],
        ..app()
    }
}

fn fetch() -> Fetch {
    Fetch {
        url: "https://palisade.example.com/v1/uploads/up-7f3a/archive".into(),
        token: "upl_secret".into(),
    }
}

/// The five palisade labels of `w`, without user labels.
fn palisade_labels(w: &Workload) -> Value {
    json!({
        "palisade.dev/boundary": w.boundary,
        "palisade.dev/resource": w.name,
        "palisade.dev/resource-type": w.kind.as_str(),
        "app.kubernetes.io/managed-by": "palisade",
        "palisade.dev/installation": w.installation,
    })
}

fn deployment(w: &Workload) -> Value {
    render_deployment(w, &catalog(), &config()).unwrap()
}

fn hash_of(w: &Workload) -> String {
    rendering_of(&deployment(w)).unwrap().to_owned()
}

fn container(deployment: &Value, index: usize) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][index]
}

#[test]
fn app_deployment_is_exact() {
    let w = app();
    let labels = json!({
        "team": "storefront",
        "palisade.dev/boundary": "shop",
        "palisade.dev/resource": "web",
        "palisade.dev/resource-type": "app",
        "app.kubernetes.io/managed-by": "palisade",
        "palisade.dev/installation": "inst-1",
    });
    let resources = json!({"cpu": "500m", "memory": "1024Mi"});
    let expected = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "app-web",
            "namespace": "shop-prod",
            "labels": labels,
            // Pinned (checked independently: SHA-256 of the object's JSON with sorted keys and
            // no spaces, without replicas and this annotation). A change here means every
            // Deployment rolls on upgrade: change it only on purpose.
            "annotations": {"palisade.dev/rendering": "09e034f892809f2d"},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {
                "palisade.dev/resource-type": "app",
                "palisade.dev/resource": "web",
            }},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "app",
                        "image": "ghcr.io/acme/web:1.4",
                        "resources": {"requests": resources, "limits": resources},
                    }],
                },
            },
        },
    });
    assert_eq!(deployment(&w), expected);
    assert_eq!(deployment_name(&w), "app-web");
}

#[test]
fn function_from_git_runs_its_built_image_with_its_plan() {
    let w = git_function();
    let rendered = deployment(&w);
    let hash = build_hash(&w, &config()).unwrap();
    assert_eq!(rendered["metadata"]["name"], "function-resize");
    assert_eq!(
        *container(&rendered, 0),
        json!({
            "name": "function",
            "image": format!("registry.palisade.internal/builds/shop/function-resize:{hash}"),
            "resources": {
                "requests": {"cpu": "1", "memory": "2048Mi"},
                "limits": {"cpu": "1", "memory": "2048Mi"},
            },
        })
    );
    assert_eq!(
        rendered["spec"]["selector"],
        json!({"matchLabels": {
            "palisade.dev/resource-type": "function",
            "palisade.dev/resource": "resize",
        }})
    );
}

#[test]
fn container_instance_runs_every_component_in_order() {
    let w = container_instance();
    let rendered = deployment(&w);
    assert_eq!(rendered["metadata"]["name"], "container-instance-batch");
    assert_eq!(rendered["metadata"]["labels"], palisade_labels(&w));
    assert_eq!(
        rendered["metadata"]["labels"]["palisade.dev/resource-type"],
        "container_instance"
    );
    assert_eq!(rendered["spec"]["replicas"], 1);
    assert_eq!(
        rendered["spec"]["template"]["spec"],
        json!({
            "automountServiceAccountToken": false,
            "containers": [
                {
                    "name": "worker",
                    "image": "ghcr.io/acme/worker:2.0",
                    "resources": {
                        "requests": {"cpu": "2", "memory": "4096Mi"},
                        "limits": {"cpu": "2", "memory": "4096Mi"},
                    },
                },
                {
                    "name": "sidecar",
                    "image": "ghcr.io/acme/sidecar@sha256:0123456789abcdef0123456789abcdef",
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "1024Mi"},
                        "limits": {"cpu": "500m", "memory": "1024Mi"},
                    },
                },
            ],
        })
    );
    assert_eq!(render_build(&w, &config(), None), Ok(None));
    assert_eq!(build_hash(&w, &config()), None);
}

#[test]
fn static_web_app_copies_its_site_for_the_file_server() {
    let w = static_web_app();
    let rendered = deployment(&w);
    let image = built_image(&w, &config()).unwrap();
    let hash = build_hash(&w, &config()).unwrap();
    assert_eq!(
        image,
        format!("registry.palisade.internal/builds/shop/static-web-app-docs:{hash}")
    );
    let resources = json!({"cpu": "250m", "memory": "256Mi"});
    let resources = json!({"requests": resources, "limits": resources});
    assert_eq!(rendered["metadata"]["name"], "static-web-app-docs");
    assert_eq!(rendered["spec"]["replicas"], 2);
    assert_eq!(
        rendered["spec"]["template"]["spec"],
        json!({
            "automountServiceAccountToken": false,
            "initContainers": [{
                "name": "site",
                "image": image,
                "env": [{"name": "TARGET", "value": "/srv"}],
                "resources": resources,
                "volumeMounts": [{"name": "site", "mountPath": "/srv"}],
            }],
            "containers": [{
                "name": "file-server",
                "image": "docker.io/library/nginx:1.27.3",
                "resources": resources,
                "volumeMounts": [{
                    "name": "site",
                    "mountPath": "/usr/share/nginx/html",
                    "readOnly": true,
                }],
            }],
            "volumes": [{"name": "site", "emptyDir": {}}],
        })
    );
    assert_eq!(
        rendered["spec"]["template"]["metadata"]["labels"]["palisade.dev/resource-type"],
        "static_web_app"
    );
}

#[test]
fn git_app_build_job_is_exact() {
    let w = git_app();
    let hash = build_hash(&w, &config()).unwrap();
    let image = format!("registry.palisade.internal/builds/shop/app-web:{hash}");
    let labels = json!({
        "team": "storefront",
        "palisade.dev/boundary": "shop",
        "palisade.dev/resource": "web",
        "palisade.dev/resource-type": "app",
        "app.kubernetes.io/managed-by": "palisade",
        "palisade.dev/installation": "inst-1",
        "palisade.dev/build": hash,
    });
    let resources = json!({"cpu": "1", "memory": "2Gi"});
    let expected = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": format!("app-web-{hash}"),
            "namespace": "shop-prod",
            "labels": labels,
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "build",
                        "image": "ghcr.io/palisade-dev/app-builder:1.0.0",
                        "env": [
                            {"name": "SOURCE_URL", "value": "https://git.example.com/acme/web.git"},
                            {"name": "SOURCE_KIND", "value": "git"},
                            {"name": "IMAGE", "value": image},
                        ],
                        "resources": {"requests": resources, "limits": resources},
                    }],
                },
            },
        },
    });
    // A fetch given for a git source is ignored.
    assert_eq!(
        render_build(&w, &config(), None),
        Ok(Some(expected.clone()))
    );
    assert_eq!(
        render_build(&w, &config(), Some(&fetch())),
        Ok(Some(expected))
    );
    assert!(render_build(&w, &config(), None)
        .unwrap()
        .unwrap()
        .get("ttlSecondsAfterFinished")
        .is_none());
    assert_eq!(built_image(&w, &config()), Some(image.clone()));
    // The Deployment runs what the Job pushes.
    assert_eq!(container(&deployment(&w), 0)["image"], image);
}

#[test]
fn build_hash_is_pinned() {
    // Pinned (checked independently: SHA-256 of the compact JSON array `["palisade-build/1",
    // "app", "shop", "web", "git", <url>, "", <builder>, <build registry>]`). A change here
    // rebuilds every built resource on upgrade: change it only on purpose.
    assert_eq!(
        build_hash(&git_app(), &config()).as_deref(),
        Some("63add5e83f")
    );
}

#[test]
fn function_upload_job_uses_the_latest_upload_builder_and_a_token() {
    let w = upload_function();
    let job = render_build(&w, &config(), Some(&fetch()))
        .unwrap()
        .unwrap();
    let hash = build_hash(&w, &config()).unwrap();
    let build = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        build["image"],
        "ghcr.io/palisade-dev/function-builder:latest"
    );
    assert_eq!(
        builder_image(&w, &config()).as_deref(),
        Some("ghcr.io/palisade-dev/function-builder:latest")
    );
    assert_eq!(
        build["env"],
        json!([
            {"name": "SOURCE_URL", "value": "https://palisade.example.com/v1/uploads/up-7f3a/archive"},
            {"name": "SOURCE_KIND", "value": "upload"},
            {"name": "IMAGE", "value": format!("registry.palisade.internal/builds/shop/function-resize:{hash}")},
            {"name": "SOURCE_TOKEN", "value": "upl_secret"},
        ])
    );
    assert_eq!(job["metadata"]["name"], format!("fn-resize-{hash}"));
    assert_eq!(
        job["metadata"]["labels"]["palisade.dev/build"],
        hash.as_str()
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["palisade.dev/build"],
        hash.as_str()
    );
    assert_eq!(
        render_build(&w, &config(), None),
        Err(RenderError::MissingFetch {
            what: "function 'resize'".into(),
            id: "up-7f3a".into(),
        })
    );
    // The token is never printed by Debug.
    assert!(!format!("{:?}", fetch()).contains("upl_secret"));
}

#[test]
fn static_web_app_upload_job() {
    let w = Workload {
        source: Some(upload()),
        ..static_web_app()
    };
    let job = render_build(&w, &config(), Some(&fetch()))
        .unwrap()
        .unwrap();
    let hash = build_hash(&w, &config()).unwrap();
    assert_eq!(job["metadata"]["name"], format!("swa-docs-{hash}"));
    let build = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        build["image"],
        "ghcr.io/palisade-dev/static-web-app-builder:1.0.0"
    );
    assert_eq!(
        build["env"][1],
        json!({"name": "SOURCE_KIND", "value": "upload"})
    );
    assert_eq!(build["env"][3]["name"], "SOURCE_TOKEN");
}

#[test]
fn builder_images_by_kind_and_source() {
    let swa_upload = Workload {
        source: Some(upload()),
        ..static_web_app()
    };
    let cases = [
        (git_app(), Some("ghcr.io/palisade-dev/app-builder:1.0.0")),
        (
            git_function(),
            Some("ghcr.io/palisade-dev/function-builder:1.0.0"),
        ),
        (
            upload_function(),
            Some("ghcr.io/palisade-dev/function-builder:latest"),
        ),
        (
            static_web_app(),
            Some("ghcr.io/palisade-dev/static-web-app-builder:1.0.0"),
        ),
        (
            swa_upload,
            Some("ghcr.io/palisade-dev/static-web-app-builder:1.0.0"),
        ),
        (app(), None),
        (container_instance(), None),
    ];
    for (w, expected) in cases {
        assert_eq!(
            builder_image(&w, &config()).as_deref(),
            expected,
            "{}",
            w.describe()
        );
        assert_eq!(
            build_hash(&w, &config()).is_some(),
            expected.is_some(),
            "{}",
            w.describe()
        );
        assert_eq!(
            build_job_name(&w, &config()).is_some(),
            expected.is_some(),
            "{}",
            w.describe()
        );
        assert_eq!(
            render_build(&w, &config(), Some(&fetch()))
                .unwrap()
                .is_some(),
            expected.is_some(),
            "{}",
            w.describe()
        );
    }
    assert_eq!(render_build(&app(), &config(), None), Ok(None));
}

#[test]
fn build_hash_follows_what_is_built_from_what() {
    let base = build_hash(&git_app(), &config()).unwrap();
    assert_eq!(base.len(), 10);
    assert!(base
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_eq!(build_hash(&git_app(), &config()).unwrap(), base);
    // Labels, replicas, plan and namespace do not change what is built.
    let same = Workload {
        labels: BTreeMap::new(),
        replicas: 9,
        plan: Some("large".into()),
        namespace: "elsewhere".into(),
        installation: "other".into(),
        ..git_app()
    };
    assert_eq!(build_hash(&same, &config()).unwrap(), base);
    let newer_builder = WorkloadConfig {
        app_builder: "ghcr.io/palisade-dev/app-builder:1.0.1".into(),
        ..config()
    };
    let other_registry = WorkloadConfig {
        build_registry: "registry.example.com".into(),
        ..config()
    };
    let other_url = Workload {
        source: Some(Source::Git("https://git.example.com/acme/web2.git".into())),
        ..git_app()
    };
    let other_name = Workload {
        name: "web2".into(),
        ..git_app()
    };
    let other_boundary = Workload {
        boundary: "shop2".into(),
        ..git_app()
    };
    let as_function = Workload {
        kind: Kind::Function,
        ..git_app()
    };
    let changed = [
        build_hash(&git_app(), &newer_builder),
        build_hash(&git_app(), &other_registry),
        build_hash(&other_url, &config()),
        build_hash(&other_name, &config()),
        build_hash(&other_boundary, &config()),
        build_hash(&as_function, &config()),
    ];
    for (index, hash) in changed.iter().enumerate() {
        assert_ne!(hash.as_deref(), Some(base.as_str()), "case {index}");
    }
    let first = build_hash(&upload_function(), &config());
    let reuploaded = Workload {
        source: Some(Source::Upload {
            id: "up-7f3a".into(),
            sha256: "0".repeat(64),
        }),
        ..upload_function()
    };
    assert_ne!(build_hash(&reuploaded, &config()), first);
}

#[test]
fn rendering_hash_ignores_replicas_only() {
    let base = app();
    let hash = hash_of(&base);
    assert_eq!(hash.len(), 16);
    assert!(hash
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    let rendered = deployment(&base);
    assert_eq!(
        rendering_hash(&rendered),
        hash,
        "the annotation is left out"
    );
    let scaled = Workload {
        replicas: 7,
        ..app()
    };
    assert_eq!(hash_of(&scaled), hash);
    assert_ne!(deployment(&scaled), rendered);
    let mut relabelled = app();
    relabelled.labels.insert("cost-centre".into(), "42".into());
    let changes = [
        Workload {
            image: Some("ghcr.io/acme/web:1.5".into()),
            ..app()
        },
        relabelled,
        Workload {
            plan: Some("medium".into()),
            ..app()
        },
        Workload {
            namespace: "shop-staging".into(),
            ..app()
        },
        Workload {
            name: "web2".into(),
            ..app()
        },
    ];
    for changed in changes {
        assert_ne!(hash_of(&changed), hash, "{changed:?}");
    }
    // A new build of a built app changes its image, so its rendering.
    let built = hash_of(&git_app());
    let rebuilt = Workload {
        source: Some(Source::Git("https://git.example.com/acme/other.git".into())),
        ..git_app()
    };
    assert_ne!(hash_of(&rebuilt), built);
    // A new file server changes a static web app's rendering.
    let served = render_deployment(
        &static_web_app(),
        &catalog(),
        &WorkloadConfig {
            file_server: "docker.io/library/nginx:1.27.4".into(),
            ..config()
        },
    )
    .unwrap();
    assert_ne!(
        rendering_of(&served),
        Some(hash_of(&static_web_app()).as_str())
    );
}

#[test]
fn rendering_hash_does_not_depend_on_key_order() {
    let rendered = deployment(&app());
    let reversed = reverse_keys(&rendered);
    assert_ne!(
        serde_json::to_string(&reversed).unwrap(),
        serde_json::to_string(&rendered).unwrap()
    );
    assert_eq!(rendering_hash(&reversed), rendering_hash(&rendered));
}

fn reverse_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .rev()
                .map(|(key, item)| (key.clone(), reverse_keys(item)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(reverse_keys).collect()),
        scalar => scalar.clone(),
    }
}

#[test]
fn rendering_of_reads_the_annotation_back() {
    let rendered = deployment(&app());
    assert_eq!(
        rendering_of(&rendered),
        rendered["metadata"]["annotations"]["palisade.dev/rendering"].as_str()
    );
    assert_eq!(rendering_of(&json!({"metadata": {"name": "x"}})), None);
    assert_eq!(
        rendering_of(&json!({"metadata": {"annotations": {"palisade.dev/rendering": 1}}})),
        None
    );
}

#[test]
fn job_names_fit_63_characters() {
    let long = "a".repeat(63);
    // A cut that would end on '-' drops it.
    let dashed = format!("{}-{}", "b".repeat(47), "c".repeat(15));
    for kind in [Kind::App, Kind::Function, Kind::StaticWebApp] {
        for name in [&long, &dashed] {
            let w = Workload {
                kind,
                name: name.clone(),
                boundary: "b".repeat(63),
                ..git_app()
            };
            let job = build_job_name(&w, &config()).unwrap();
            let hash = build_hash(&w, &config()).unwrap();
            assert!(job.len() <= 63, "{job}");
            assert!(job.starts_with(&format!("{}-", kind.short())), "{job}");
            assert!(job.ends_with(&format!("-{hash}")), "{job}");
            assert!(!job.contains("--"), "{job}");
            assert_eq!(
                render_build(&w, &config(), None).unwrap().unwrap()["metadata"]["name"],
                job.as_str()
            );
            // The longest built image is still a valid image reference.
            let image = built_image(&w, &config()).unwrap();
            assert!(ImageRef::parse(&image).is_ok(), "{image}");
        }
    }
    let w = Workload {
        name: long.clone(),
        ..git_app()
    };
    let hash = build_hash(&w, &config()).unwrap();
    assert_eq!(
        build_job_name(&w, &config()).unwrap(),
        format!("app-{}-{hash}", "a".repeat(48))
    );
    let w = Workload {
        name: dashed,
        ..git_app()
    };
    let hash = build_hash(&w, &config()).unwrap();
    assert_eq!(
        build_job_name(&w, &config()).unwrap(),
        format!("app-{}-{hash}", "b".repeat(47))
    );
}

#[test]
fn user_labels_never_override_palisade_labels() {
    let mut w = git_app();
    for (key, _) in palisade_labels(&w).as_object().unwrap() {
        w.labels.insert(key.clone(), "user".into());
    }
    w.labels.insert("palisade.dev/build".into(), "user".into());
    let rendered = deployment(&w);
    let job = render_build(&w, &config(), None).unwrap().unwrap();
    let hash = build_hash(&w, &config()).unwrap();
    for object in [&rendered, &job] {
        for labels in [
            &object["metadata"]["labels"],
            &object["spec"]["template"]["metadata"]["labels"],
        ] {
            for (key, value) in palisade_labels(&w).as_object().unwrap() {
                assert_eq!(&labels[key], value, "{key}");
            }
            assert_eq!(labels["team"], "storefront");
        }
    }
    assert_eq!(
        job["metadata"]["labels"]["palisade.dev/build"],
        hash.as_str()
    );
    // The Deployment carries no build label of its own: the user's stays.
    assert_eq!(rendered["metadata"]["labels"]["palisade.dev/build"], "user");
    assert_eq!(
        rendered["spec"]["selector"]["matchLabels"],
        json!({"palisade.dev/resource-type": "app", "palisade.dev/resource": "web"})
    );
    // The same selector as a string, for the reads that find its ReplicaSets and pods.
    assert_eq!(
        crate::workload_selector(&w),
        "palisade.dev/resource-type=app,palisade.dev/resource=web"
    );
}

#[test]
fn inconsistent_workloads_are_refused_with_clear_errors() {
    let cases: Vec<(Workload, &str)> = vec![
        (
            Workload {
                plan: Some("huge".into()),
                ..app()
            },
            "app 'web' has plan 'huge', which the catalog does not list for app; it lists small, medium, large, xlarge",
        ),
        (
            Workload {
                plan: Some("Not A Plan".into()),
                ..app()
            },
            "app 'web' has plan 'Not A Plan', which the catalog does not list for app",
        ),
        (Workload { plan: None, ..app() }, "app 'web' has no plan"),
        (
            Workload {
                source: git_app().source,
                ..app()
            },
            "app 'web' has both an image and a source; it runs from one of them",
        ),
        (
            Workload { image: None, ..app() },
            "app 'web' has nothing to run: it needs an image or a source",
        ),
        (
            Workload {
                source: Some(upload()),
                ..git_app()
            },
            "app 'web' cannot be built from an upload, only from git",
        ),
        (
            Workload {
                plan: Some("small".into()),
                ..static_web_app()
            },
            "static_web_app 'docs' takes no plan",
        ),
        (
            Workload {
                source: None,
                ..static_web_app()
            },
            "static_web_app 'docs' has nothing to run: it needs a source",
        ),
        (
            Workload {
                image: Some("nginx:1".into()),
                ..static_web_app()
            },
            "static_web_app 'docs' takes no image",
        ),
        (
            Workload {
                components: vec![],
                ..container_instance()
            },
            "container_instance 'batch' has no components",
        ),
        (
            Workload {
                image: Some("nginx:1".into()),
                ..container_instance()
            },
            "container_instance 'batch' takes no image",
        ),
        (
            Workload {
                plan: Some("small".into()),
                ..container_instance()
            },
            "container_instance 'batch' takes no plan",
        ),
        (
            Workload {
                components: container_instance().components,
                ..app()
            },
            "app 'web' takes no components",
        ),
    ];
    for (w, expected) in cases {
        let error = render_deployment(&w, &catalog(), &config())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(expected),
            "got {error:?}, expected {expected:?}"
        );
    }
    let mut bad_component = container_instance();
    bad_component.components[1].plan = "tiny".into();
    assert_eq!(
        render_deployment(&bad_component, &catalog(), &config())
            .unwrap_err()
            .to_string(),
        "component 'sidecar' of container_instance 'batch' has plan 'tiny', which the catalog does not list for container_instance; it lists small, medium, large, xlarge"
    );
}

#[test]
fn cpu_and_memory_quantities() {
    let cases = [
        (0.25, "250m"),
        (0.5, "500m"),
        (1.0, "1"),
        (1.5, "1500m"),
        (2.0, "2"),
        (4.0, "4"),
        (0.0001, "1m"),
    ];
    for (cpu, expected) in cases {
        assert_eq!(cpu_quantity(cpu), expected, "{cpu}");
    }
    assert_eq!(crate::deployment::memory_quantity(1024), "1024Mi");
}

#[test]
fn owned_selector_finds_every_object() {
    assert_eq!(
        owned_selector("inst-1"),
        "app.kubernetes.io/managed-by=palisade,palisade.dev/installation=inst-1"
    );
    let job = render_build(&git_app(), &config(), None).unwrap().unwrap();
    for object in [deployment(&app()), deployment(&container_instance()), job] {
        let labels = &object["metadata"]["labels"];
        for term in owned_selector(INSTALLATION).split(',') {
            let (key, value) = term.split_once('=').unwrap();
            assert_eq!(labels[key], value, "{term}");
        }
    }
}

#[test]
fn kind_names() {
    let table: Vec<_> = Kind::ALL
        .iter()
        .map(|kind| (kind.as_str(), kind.slug(), kind.short()))
        .collect();
    assert_eq!(
        table,
        [
            ("app", "app", "app"),
            ("function", "function", "fn"),
            ("static_web_app", "static-web-app", "swa"),
            ("container_instance", "container-instance", "ci"),
        ]
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    const DNS_LABEL: &str = "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?";

    fn is_dns_label(text: &str) -> bool {
        palisade_policy::Name::parse(text).is_ok()
    }

    fn kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::App),
            Just(Kind::Function),
            Just(Kind::StaticWebApp)
        ]
    }

    proptest! {
        #[test]
        fn job_names_are_dns_labels_and_hashes_deterministic(
            name in DNS_LABEL,
            boundary in DNS_LABEL,
            kind in kind(),
            upload in any::<bool>(),
        ) {
            let source = if upload && kind != Kind::App {
                super::upload()
            } else {
                Source::Git(format!("https://git.example.com/{boundary}/{name}.git"))
            };
            let w = Workload {
                kind,
                name: name.clone(),
                boundary,
                source: Some(source),
                plan: (kind != Kind::StaticWebApp).then(|| "small".to_owned()),
                ..git_app()
            };
            let job = build_job_name(&w, &config()).unwrap();
            prop_assert!(job.len() <= 63, "{}", job);
            prop_assert!(is_dns_label(&job), "{}", job);
            let hash = build_hash(&w, &config()).unwrap();
            prop_assert_eq!(build_hash(&w.clone(), &config()), Some(hash.clone()));
            prop_assert_eq!(build_job_name(&w, &config()), Some(job.clone()));
            prop_assert!(job.ends_with(&hash));
            let image = built_image(&w, &config()).unwrap();
            prop_assert!(ImageRef::parse(&image).is_ok(), "{}", image);
            let rendered = render_deployment(&w, &catalog(), &config()).unwrap();
            prop_assert_eq!(rendering_of(&rendered).map(str::len), Some(16));
        }
    }
}
