//! Named contexts: the client's config file (where it is, its YAML shape, reading and atomic
//! writing) and which server, token and CA file a client command uses.
//!
//! ```yaml
//! current-context: prod
//! contexts:
//!   prod:
//!     url: https://palisade.example.internal
//!     token: pal_...
//!     ca-file: /etc/palisade/platform-ca.pem
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The server client commands use when nothing names one.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// What a token is shown as by `config view` and `config get-contexts`.
pub const REDACTED: &str = "REDACTED";

/// The config file: the contexts by name and the one in use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

/// One context: a server, and optionally a token and a CA file for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find the config file: set PALISADE_CONFIG, XDG_CONFIG_HOME or HOME")]
    NoLocation,
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a palisade config file: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error("{}: cannot write it: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: current-context '{name}' names no context in it", path.display())]
    CurrentMissing { path: PathBuf, name: String },
    #[error("no context '{name}' in {}{}", path.display(), listed(.known))]
    Unknown {
        path: PathBuf,
        name: String,
        known: Vec<String>,
    },
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        " (it has none; make one with palisade config set-context)".to_owned()
    } else {
        format!(" (contexts: {})", names.join(", "))
    }
}

/// Where the config file is: `$PALISADE_CONFIG`, else `$XDG_CONFIG_HOME/palisade/config.yaml`,
/// else `~/.config/palisade/config.yaml` (empty variables count as unset, and a relative
/// `XDG_CONFIG_HOME` is ignored, as the XDG specification says).
pub fn location(variable: impl Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    let set = |name: &str| variable(name).filter(|v| !v.is_empty());
    if let Some(path) = set("PALISADE_CONFIG") {
        return Ok(PathBuf::from(path));
    }
    if let Some(dir) = set("XDG_CONFIG_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Ok(Path::new(&dir).join("palisade").join("config.yaml"));
    }
    match set("HOME") {
        Some(home) => Ok(Path::new(&home)
            .join(".config")
            .join("palisade")
            .join("config.yaml")),
        None => Err(ConfigError::NoLocation),
    }
}

/// The config file of this process's environment.
pub fn default_location() -> Result<PathBuf, ConfigError> {
    location(|name| std::env::var(name).ok())
}

impl Config {
    /// Reads the config file at `path`; a file that does not exist is an empty config.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        Self::parse(path, &text)
    }

    /// Reads the text of the config file at `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let malformed = |message: String| ConfigError::Malformed {
            path: path.to_owned(),
            message,
        };
        let config: Config = serde_yaml_ng::from_str(text).map_err(|e| malformed(e.to_string()))?;
        if let Some(name) = &config.current_context {
            if !config.contexts.contains_key(name) {
                return Err(ConfigError::CurrentMissing {
                    path: path.to_owned(),
                    name: name.clone(),
                });
            }
        }
        Ok(config)
    }

    /// Writes the config to `path` atomically (a temporary file in the same directory, then
    /// renamed over it), readable by its owner only (0600); the directory is made (0700) if
    /// needed.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let failed = |source: std::io::Error| ConfigError::Write {
            path: path.to_owned(),
            source,
        };
        let text = serde_yaml_ng::to_string(self)
            .map_err(|e| failed(std::io::Error::other(e.to_string())))?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(failed)?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "config.yaml".to_owned());
        let temporary = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = (|| {
            let mut file = options.open(&temporary)?;
            // A file left by an earlier run keeps its mode when opened: set it again.
            #[cfg(unix)]
            std::fs::set_permissions(
                &temporary,
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temporary, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written.map_err(failed)
    }

    /// The context `name`, or the error naming the file and the contexts there are.
    pub fn context(&self, path: &Path, name: &str) -> Result<&Context, ConfigError> {
        self.contexts.get(name).ok_or_else(|| ConfigError::Unknown {
            path: path.to_owned(),
            name: name.to_owned(),
            known: self.contexts.keys().cloned().collect(),
        })
    }

    /// The config with every token replaced by [`REDACTED`].
    pub fn redacted(&self) -> Config {
        let mut config = self.clone();
        for context in config.contexts.values_mut() {
            if context.token.is_some() {
                context.token = Some(REDACTED.to_owned());
            }
        }
        config
    }
}

/// What the command line and the environment gave (clap reads the flag, then the variable).
#[derive(Debug, Default, Clone)]
pub struct Given {
    pub url: Option<String>,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// `--context NAME`.
    pub context: Option<String>,
}

/// The server, token and CA file a command uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
}

impl Given {
    /// True when the config file cannot change the answer (so it is not read).
    pub fn is_complete(&self) -> bool {
        self.context.is_none()
            && self.url.is_some()
            && self.token.is_some()
            && self.ca_file.is_some()
    }

    /// Each of url, token and CA file: as given (flag, then variable), else from the context
    /// (`--context`, else the config's current one), else the default URL, no token, no CA
    /// file. A context's token is sent only to that context's URL: when the URL is given and
    /// differs from the context's, the context's token is not used.
    pub fn resolve(&self, config: &Config, path: &Path) -> Result<Target, ConfigError> {
        let context = match self
            .context
            .as_deref()
            .or(config.current_context.as_deref())
        {
            Some(name) => Some(config.context(path, name)?),
            None => None,
        };
        let from_context = context.cloned().unwrap_or_default();
        let same_server = match (&self.url, &from_context.url) {
            (Some(given), Some(theirs)) => same_url(given, theirs),
            (Some(_), None) => false,
            (None, _) => true,
        };
        Ok(Target {
            url: self
                .url
                .clone()
                .or(from_context.url)
                .unwrap_or_else(|| DEFAULT_URL.to_owned()),
            token: self
                .token
                .clone()
                .or(from_context.token.filter(|_| same_server)),
            ca_file: self.ca_file.clone().or(from_context.ca_file),
        })
    }
}

/// Two spellings of one server URL (a trailing `/` aside).
fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_config_file_is_found_as_documented() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        for (vars, expected) in [
            (
                &[
                    ("PALISADE_CONFIG", "/etc/p.yaml"),
                    ("XDG_CONFIG_HOME", "/x"),
                    ("HOME", "/h"),
                ][..],
                Some("/etc/p.yaml"),
            ),
            (
                &[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")][..],
                Some("/x/palisade/config.yaml"),
            ),
            (
                &[
                    ("PALISADE_CONFIG", ""),
                    ("XDG_CONFIG_HOME", "relative"),
                    ("HOME", "/h"),
                ][..],
                Some("/h/.config/palisade/config.yaml"),
            ),
            (&[][..], None),
        ] {
            let found = location(env(vars)).ok();
            assert_eq!(found.as_deref(), expected.map(Path::new), "{vars:?}");
        }
    }

    fn config() -> Config {
        Config::parse(
            Path::new("c.yaml"),
            "current-context: prod\ncontexts:\n  prod: {url: https://prod.example, token: p, ca-file: /ca.pem}\n  dev: {url: http://dev.example}\n",
        )
        .unwrap()
    }

    #[test]
    fn each_setting_comes_from_the_flag_or_variable_then_the_context_then_the_default() {
        let target = |url: Option<&str>, token: Option<&str>, context: Option<&str>| {
            let given = Given {
                url: url.map(str::to_owned),
                token: token.map(str::to_owned),
                ca_file: None,
                context: context.map(str::to_owned),
            };
            let t = given.resolve(&config(), Path::new("c.yaml")).unwrap();
            (t.url, t.token, t.ca_file.map(|p| p.display().to_string()))
        };
        let owned = |url: &str, token: Option<&str>, ca: Option<&str>| {
            (
                url.to_owned(),
                token.map(str::to_owned),
                ca.map(str::to_owned),
            )
        };
        // The current context.
        assert_eq!(
            target(None, None, None),
            owned("https://prod.example", Some("p"), Some("/ca.pem"))
        );
        // A token given wins; the context's URL stays.
        assert_eq!(
            target(None, Some("t"), None),
            owned("https://prod.example", Some("t"), Some("/ca.pem"))
        );
        // Another URL given: the context's token is not sent there.
        assert_eq!(
            target(Some("http://other"), None, None),
            owned("http://other", None, Some("/ca.pem"))
        );
        // The context's own URL, spelled with a trailing /: its token goes with it.
        assert_eq!(
            target(Some("https://prod.example/"), None, None),
            owned("https://prod.example/", Some("p"), Some("/ca.pem"))
        );
        // --context picks another one.
        assert_eq!(
            target(None, None, Some("dev")),
            owned("http://dev.example", None, None)
        );
        // Nothing anywhere: the default URL.
        let empty = Given::default()
            .resolve(&Config::default(), Path::new("c.yaml"))
            .unwrap();
        assert_eq!(
            (empty.url.as_str(), empty.token, empty.ca_file),
            (DEFAULT_URL, None, None)
        );
    }

    #[test]
    fn a_bad_file_or_name_is_an_error_naming_the_file() {
        let path = Path::new("c.yaml");
        let error = |text: &str| Config::parse(path, text).unwrap_err().to_string();
        assert_eq!(
            error("contexts:\n  prod: {uri: x}\n"),
            "c.yaml: not a palisade config file: contexts.prod: unknown field `uri`, expected one of `url`, `token`, `ca-file` at line 2 column 10"
        );
        assert_eq!(
            error("current-context: prod\n"),
            "c.yaml: current-context 'prod' names no context in it"
        );
        assert_eq!(
            error("- a\n"),
            "c.yaml: not a palisade config file: invalid type: sequence, expected struct Config"
        );
        let given = Given {
            context: Some("stage".into()),
            ..Given::default()
        };
        assert_eq!(
            given.resolve(&config(), path).unwrap_err().to_string(),
            "no context 'stage' in c.yaml (contexts: dev, prod)"
        );
        assert_eq!(
            given
                .resolve(&Config::default(), path)
                .unwrap_err()
                .to_string(),
            "no context 'stage' in c.yaml (it has none; make one with palisade config set-context)"
        );
    }
}
