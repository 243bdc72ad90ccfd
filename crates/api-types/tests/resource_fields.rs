//! A resource's `image` and `source` are checked before anything builds from them: an image
//! follows the image-reference grammar, a source is an `https://` git URL (SPEC 1, 5).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_api_types::resource::Resource;
use palisade_policy::Catalog;
use serde_json::{json, Value};

fn check(body: &Value) -> Result<(), String> {
    Resource::from_value(body, &Catalog::builtin(), None)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn app_image(image: &str) -> Value {
    json!({"type": "app", "name": "web", "plan": "small", "image": image})
}

fn app_source(source: &str) -> Value {
    json!({"type": "app", "name": "web", "plan": "small", "source": source})
}

fn instance_image(image: &str) -> Value {
    json!({"type": "container_instance", "name": "web", "components": [
        {"name": "app", "plan": "small", "image": "ghcr.io/acme/web:1.4"},
        {"name": "sidecar", "plan": "small", "image": image},
    ]})
}

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// `body` is refused with a message that names its field (starts with `prefix`), stays short
/// and echoes no control characters; `shown` is the start of the value refused.
fn assert_refused_briefly(body: &Value, prefix: &str, shown: &str) {
    let message = check(body).expect_err(&format!("refused {shown:?}"));
    assert!(message.starts_with(prefix), "{shown:?}: {message}");
    assert!(
        message.len() < 400,
        "{shown:?}: the message stays short: {}",
        message.len()
    );
    assert!(
        !message.chars().any(char::is_control),
        "{shown:?}: no control characters echoed: {message:?}"
    );
}

#[test]
fn accepted_images() {
    let with_digest = format!("nginx@{DIGEST}");
    let tagged_digest = format!("ghcr.io/acme/web:1.4@{DIGEST}");
    for image in [
        "ghcr.io/acme/web:1.4",
        "nginx",
        "nginx:1.27",
        with_digest.as_str(),
        tagged_digest.as_str(),
        "registry:5000/a/b:tag",
        "localhost/team/app",
        "docker.io/library/nginx:1.27-alpine",
        "a__b/c.d/e-f--g:V_1.2-rc",
    ] {
        assert_eq!(check(&app_image(image)), Ok(()), "app image {image}");
        assert_eq!(
            check(&instance_image(image)),
            Ok(()),
            "component image {image}"
        );
    }
}

#[test]
fn refused_images_name_the_field() {
    let long_name = format!("ghcr.io/{}", "a".repeat(300));
    let huge = "a".repeat(500 * 1024);
    let long_tag = format!("nginx:{}", "t".repeat(129));
    for image in [
        "",
        " ",
        "nginx latest",
        " nginx",
        "nginx\0",
        "nginx\u{1b}[31m",
        "nginx\n",
        "\"nginx\"",
        "'nginx'",
        "nginx`id`",
        "Nginx",
        "ghcr.io/Acme/web",
        "ghcr.io//web",
        "ghcr.io/acme/",
        "/nginx",
        "nginx:",
        "nginx:-1",
        "nginx:.1",
        "nginx:a/b",
        "nginx@",
        "nginx@sha256:abc",
        "nginx@sha256:zz23456789abcdef0123456789abcdef",
        "nginx@@sha256:0123456789abcdef0123456789abcdef",
        "ext::sh -c touch% /tmp/x",
        "file:///etc/passwd",
        "https://ghcr.io/acme/web",
        "-oProxyCommand=x",
        "a..b",
        "a--",
        long_name.as_str(),
        huge.as_str(),
        long_tag.as_str(),
    ] {
        let shown: String = image.chars().take(40).collect();
        assert_refused_briefly(&app_image(image), "/image: ", &shown);
        let component =
            check(&instance_image(image)).expect_err(&format!("component image {shown:?}"));
        assert!(
            component.starts_with("/components/1/image: "),
            "{shown:?}: {component}"
        );
    }
}

#[test]
fn accepted_sources() {
    for source in [
        "https://github.com/acme/web.git",
        "https://git.example.com/a/b",
        "https://git.example.com:8443/team/repo.git",
        "https://github.com/acme/web%20site.git",
        "https://203.0.113.7/a/b.git",
        "https://gitlab.example.com/group/sub-group/repo_name.git",
        "https://git1.example.com/a/b.git",
    ] {
        assert_eq!(check(&app_source(source)), Ok(()), "{source}");
        let site = json!({"type": "static_web_app", "name": "site", "source": source});
        assert_eq!(check(&site), Ok(()), "{source}");
    }
}

#[test]
fn refused_sources_name_the_field() {
    let huge = format!("https://github.com/{}", "a".repeat(500 * 1024));
    let long = format!("https://github.com/{}", "a".repeat(2048));
    for source in [
        "",
        "   ",
        "ext::sh -c touch% /tmp/pwned",
        "file:///etc/passwd",
        "http://github.com/acme/web.git",
        "git://github.com/acme/web.git",
        "ssh://git@github.com/acme/web.git",
        "git@github.com:acme/web.git",
        "HTTPS://github.com/acme/web.git",
        "https://",
        "https:///acme/web.git",
        "https://user:secret@github.com/acme/web.git",
        "https://token@github.com/acme/web.git",
        "https://github.com/acme/web .git",
        " https://github.com/acme/web.git",
        "https://github.com/acme/web.git\n",
        "https://github.com/acme/\0web.git",
        "https://github.com/acme/\u{1b}[31mweb.git",
        "https://github.com/acme/\"web\".git",
        "https://github.com/acme/'web'.git",
        "https://github.com/acme/`id`.git",
        "https://github.com/acme/$(id).git",
        "https://github.com/acme/web.git;id",
        "https://github.com/acme/web.git|id",
        "https://github.com/acme/web.git?ref=main",
        "https://github.com/acme/web.git#main",
        "https://github.com\\acme/web.git",
        "https://-oProxyCommand=x/a",
        "https://github..com/a",
        "https://github.com:0/a",
        "https://github.com:99999/a",
        "https://github.com:/a",
        "https://github.com/acme/w%zzeb.git",
        "https://gïthub.com/acme/web.git",
        long.as_str(),
        huge.as_str(),
    ] {
        let shown: String = source.chars().take(50).collect();
        assert_refused_briefly(&app_source(source), "/source: ", &shown);
        let site = json!({"type": "static_web_app", "name": "site", "source": source});
        let site = check(&site).expect_err(&format!("site source {shown:?}"));
        assert!(site.starts_with("/source: "), "{shown:?}: {site}");
    }
}

/// SPEC 5 (v3.1): a source on a loopback, link-local (the cloud metadata service), private or
/// unspecified address is refused, so that build Jobs are not pointed inside the cluster's
/// network; so are `localhost` and numeric names that resolvers read as addresses.
#[test]
fn internal_addresses_are_refused_as_sources() {
    for (source, kind) in [
        ("https://127.0.0.1/a.git", "loopback"),
        ("https://127.8.9.10:8443/a.git", "loopback"),
        ("https://localhost/a.git", "loopback"),
        ("https://git.LOCALHOST/a.git", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://10.0.0.5/a.git", "private"),
        ("https://172.16.3.4/a.git", "private"),
        ("https://172.31.255.255/a.git", "private"),
        ("https://192.168.1.1/a.git", "private"),
        ("https://100.64.0.1/a.git", "private"),
        ("https://0.0.0.0/a.git", "unspecified"),
    ] {
        assert_eq!(
            check(&app_source(source)),
            Err(format!(
                "/source: must not name a loopback, link-local, private or unspecified address (here {kind}): build Jobs fetch it from inside the cluster"
            )),
            "{source}"
        );
    }
    for source in [
        "https://[::1]/a.git",
        "https://2130706433/a.git",
        "https://127.1/a.git",
        "https://0x7f.1/a.git",
        "https://git.example.123/a.git",
    ] {
        assert_eq!(
            check(&app_source(source)),
            Err("/source: must name a host: a DNS name or an IPv4 address, optionally with a port 1-65535".to_owned()),
            "{source}"
        );
    }
    // Next to the private ranges, public addresses pass.
    for source in ["https://172.32.0.1/a.git", "https://100.128.0.1/a.git"] {
        assert_eq!(check(&app_source(source)), Ok(()), "{source}");
    }
}
