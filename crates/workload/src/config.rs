//! The builder and file-server images (SPEC 5): `--workload-config FILE` or the built-in default.

use palisade_policy::image_ref::{ImageRef, RegistryPrefix, Tag};

/// The longest `buildRegistry`: with a 63-character boundary, the `static-web-app` slug and a
/// 63-character name, every built image's repository stays within the 255 characters an image
/// reference allows (`<registry>/<boundary>/<slug>-<name>` adds at most 143).
pub const MAX_BUILD_REGISTRY_LEN: usize = 112;

/// Builder and file-server images (SPEC 5), from `--workload-config FILE` (YAML) or the built-in
/// default.
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadConfig {
    /// Builds apps from git, e.g. `ghcr.io/palisade-dev/app-builder:1.0.0` (pinned).
    pub app_builder: String,
    /// Builds functions from git (pinned).
    pub function_builder: String,
    /// Builds static web apps from git or an upload (pinned).
    pub static_web_app_builder: String,
    /// Builds functions from an upload: a repository without tag or digest, e.g.
    /// `ghcr.io/palisade-dev/function-builder`; always run as `<repository>:latest`.
    pub function_upload_builder: String,
    /// Serves a static web app's built files, e.g. `docker.io/library/nginx:1.27.3` (pinned).
    pub file_server: String,
    /// Where builds push, as `<buildRegistry>/<boundary>/<type>-<name>:<build hash>`, e.g.
    /// `registry.palisade.internal/builds`.
    pub build_registry: String,
    /// vCPU of a static web app's file server (static web apps have no plan), e.g. `0.25`.
    pub static_web_app_cpu: f64,
    /// Memory in MiB of a static web app's file server, e.g. `256`.
    pub static_web_app_memory_mib: u64,
}

/// Why a workload configuration is not valid. The text starts with the field it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, not a mapping, a missing or unknown field, or a value of the wrong type; the
    /// text says which field and line.
    #[error("the workload configuration is not valid: {0}")]
    Syntax(String),
    /// A field whose value breaks its rule.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as the file writes it (`appBuilder`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

impl WorkloadConfig {
    /// The built-in configuration, used without `--workload-config`.
    pub fn builtin() -> Self {
        WorkloadConfig {
            app_builder: "ghcr.io/palisade-dev/app-builder:1.0.0".to_owned(),
            function_builder: "ghcr.io/palisade-dev/function-builder:1.0.0".to_owned(),
            static_web_app_builder: "ghcr.io/palisade-dev/static-web-app-builder:1.0.0".to_owned(),
            function_upload_builder: "ghcr.io/palisade-dev/function-builder".to_owned(),
            file_server: "docker.io/library/nginx:1.27.3".to_owned(),
            build_registry: "registry.palisade.internal/builds".to_owned(),
            static_web_app_cpu: 0.25,
            static_web_app_memory_mib: 256,
        }
    }

    /// Parses and validates a YAML configuration: every field is required, unknown fields are
    /// refused, and each error names its field (syntax errors also their line).
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let config: WorkloadConfig =
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every field's rule; the first broken one is the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        pinned("appBuilder", &self.app_builder)?;
        pinned("functionBuilder", &self.function_builder)?;
        pinned("staticWebAppBuilder", &self.static_web_app_builder)?;
        repository("functionUploadBuilder", &self.function_upload_builder)?;
        pinned("fileServer", &self.file_server)?;
        registry("buildRegistry", &self.build_registry)?;
        if !(self.static_web_app_cpu.is_finite() && self.static_web_app_cpu > 0.0) {
            return Err(invalid(
                "staticWebAppCpu",
                format!(
                    "must be a positive number of vCPU, got {}",
                    self.static_web_app_cpu
                ),
            ));
        }
        if self.static_web_app_memory_mib == 0 {
            return Err(invalid(
                "staticWebAppMemoryMib",
                "must be a positive number of MiB, got 0",
            ));
        }
        Ok(())
    }
}

/// Shows an offending value, cut so that a huge one does not flood the message.
fn shown(text: &str) -> String {
    const MAX: usize = 200;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}...")
    }
}

fn parse<'a>(field: &'static str, text: &'a str) -> Result<ImageRef<'a>, ConfigError> {
    ImageRef::parse(text).map_err(|e| invalid(field, e.to_string()))
}

/// An image pinned by a digest or by a tag other than `latest`.
fn pinned(field: &'static str, text: &str) -> Result<(), ConfigError> {
    if parse(field, text)?.is_latest() {
        return Err(invalid(
            field,
            format!(
                "must be pinned by a tag other than latest or by a digest, got '{}'",
                shown(text)
            ),
        ));
    }
    Ok(())
}

/// An image repository: no tag, no digest.
fn repository(field: &'static str, text: &str) -> Result<(), ConfigError> {
    let image = parse(field, text)?;
    if image.has_digest() || image.tag() != Tag::Missing {
        return Err(invalid(
            field,
            format!(
                "must be a repository without tag or digest (it is run as '<repository>:latest'), got '{}'",
                shown(text)
            ),
        ));
    }
    Ok(())
}

/// A registry host, optionally followed by path components: no tag, digest or trailing `/`.
fn registry(field: &'static str, text: &str) -> Result<(), ConfigError> {
    if text.ends_with('/') {
        return Err(invalid(
            field,
            format!("must not end with '/', got '{}'", shown(text)),
        ));
    }
    let length = text.chars().count();
    if length > MAX_BUILD_REGISTRY_LEN {
        return Err(invalid(
            field,
            format!("must be at most {MAX_BUILD_REGISTRY_LEN} characters, got {length}"),
        ));
    }
    RegistryPrefix::parse(text).map_err(|e| {
        // The policy crate's messages speak of a "registry prefix"; here it is the registry
        // builds push to.
        invalid(
            field,
            e.to_string()
                .replacen("registry prefix", "the build registry", 1),
        )
    })?;
    Ok(())
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]
mod tests {
    use super::*;

    const VALID: &str = "\
appBuilder: ghcr.io/palisade-dev/app-builder:1.0.0
functionBuilder: ghcr.io/palisade-dev/function-builder@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
staticWebAppBuilder: ghcr.io/palisade-dev/static-web-app-builder:2.1
functionUploadBuilder: ghcr.io/palisade-dev/function-builder
fileServer: docker.io/library/nginx:1.27.3
buildRegistry: registry.palisade.internal:5000/builds
staticWebAppCpu: 0.5
staticWebAppMemoryMib: 128
";

    fn with(field: &str, value: &str) -> String {
        VALID
            .lines()
            .map(|line| {
                if line.starts_with(&format!("{field}:")) {
                    format!("{field}: {value}\n")
                } else {
                    format!("{line}\n")
                }
            })
            .collect()
    }

    fn error_of(text: &str) -> String {
        WorkloadConfig::from_yaml(text).unwrap_err().to_string()
    }

    #[test]
    fn builtin_passes_its_own_validation_and_round_trips() {
        let builtin = WorkloadConfig::builtin();
        assert_eq!(builtin.validate(), Ok(()));
        let yaml = serde_yaml_ng::to_string(&builtin).unwrap();
        assert_eq!(WorkloadConfig::from_yaml(&yaml), Ok(builtin));
    }

    #[test]
    fn parses_a_valid_file() {
        let config = WorkloadConfig::from_yaml(VALID).unwrap();
        assert_eq!(
            config.build_registry,
            "registry.palisade.internal:5000/builds"
        );
        assert_eq!(config.static_web_app_cpu, 0.5);
        assert_eq!(config.static_web_app_memory_mib, 128);
        // An integer is a valid number of vCPU.
        let whole = WorkloadConfig::from_yaml(&with("staticWebAppCpu", "1")).unwrap();
        assert_eq!(whole.static_web_app_cpu, 1.0);
    }

    #[test]
    fn field_errors_name_the_field() {
        let cases = [
            (
                "appBuilder",
                "ghcr.io/x/b",
                "appBuilder: must be pinned by a tag other than latest or by a digest, got 'ghcr.io/x/b'",
            ),
            (
                "appBuilder",
                "ghcr.io/x/b:latest",
                "appBuilder: must be pinned by a tag other than latest or by a digest, got 'ghcr.io/x/b:latest'",
            ),
            (
                "functionBuilder",
                "ghcr.io/x/B:1",
                "functionBuilder: is not an image reference: the repository must be",
            ),
            (
                "staticWebAppBuilder",
                "ghcr.io/x/b:latest",
                "staticWebAppBuilder: must be pinned",
            ),
            ("fileServer", "nginx", "fileServer: must be pinned"),
            (
                "functionUploadBuilder",
                "ghcr.io/palisade-dev/function-builder:1.0",
                "functionUploadBuilder: must be a repository without tag or digest (it is run as '<repository>:latest'), got 'ghcr.io/palisade-dev/function-builder:1.0'",
            ),
            (
                "functionUploadBuilder",
                "ghcr.io/palisade-dev/function-builder@sha256:0123456789abcdef0123456789abcdef",
                "functionUploadBuilder: must be a repository without tag or digest",
            ),
            (
                "buildRegistry",
                "registry.palisade.internal/builds/",
                "buildRegistry: must not end with '/'",
            ),
            (
                "buildRegistry",
                "registry.palisade.internal/builds:1",
                "buildRegistry: the build registry 'registry.palisade.internal/builds:1' has an invalid repository component",
            ),
            (
                "buildRegistry",
                "builds",
                "buildRegistry: the build registry 'builds' must start with a registry host",
            ),
            (
                "staticWebAppCpu",
                "0",
                "staticWebAppCpu: must be a positive number of vCPU, got 0",
            ),
            (
                "staticWebAppCpu",
                "-0.5",
                "staticWebAppCpu: must be a positive number of vCPU",
            ),
            (
                "staticWebAppCpu",
                ".nan",
                "staticWebAppCpu: must be a positive number of vCPU, got NaN",
            ),
            (
                "staticWebAppMemoryMib",
                "0",
                "staticWebAppMemoryMib: must be a positive number of MiB, got 0",
            ),
        ];
        for (field, value, expected) in cases {
            let error = error_of(&with(field, value));
            assert!(
                error.starts_with(expected),
                "{field}={value}: got {error:?}, expected it to start with {expected:?}"
            );
        }
    }

    #[test]
    fn long_build_registries_are_refused() {
        let long = format!("r.io/{}", "a".repeat(MAX_BUILD_REGISTRY_LEN));
        assert_eq!(
            error_of(&with("buildRegistry", &long)),
            format!(
                "buildRegistry: must be at most 112 characters, got {}",
                long.len()
            )
        );
    }

    #[test]
    fn unknown_missing_and_mistyped_fields_are_named() {
        let unknown = error_of(&format!("{VALID}fileSever: nginx:1\n"));
        assert!(
            unknown.contains("unknown field `fileSever`") && unknown.contains("line 9"),
            "{unknown}"
        );
        let missing: String = VALID
            .lines()
            .filter(|line| !line.starts_with("fileServer:"))
            .map(|line| format!("{line}\n"))
            .collect();
        let missing = error_of(&missing);
        assert!(missing.contains("missing field `fileServer`"), "{missing}");
        let mistyped = error_of(&with("staticWebAppMemoryMib", "lots"));
        assert!(
            mistyped.contains("staticWebAppMemoryMib") && mistyped.contains("line 8"),
            "{mistyped}"
        );
        let syntax = error_of("appBuilder: [unclosed\n");
        assert!(syntax.contains("line"), "{syntax}");
    }
}
