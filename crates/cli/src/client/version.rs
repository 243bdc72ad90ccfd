//! `palisade version`: the client's version, and the server's when a server is named.

use clap::{Args, ValueEnum};
use palisade_api_types::view::Health;
use serde_json::{json, Value};

use super::{Api, Connection, Failure, Format, Outcome};
use crate::contexts::{self, Config, Given, Target};

pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
pub enum VersionFormat {
    /// `Client Version: ...` and `Server Version: ...` lines (the default).
    #[default]
    Text,
    /// `{"clientVersion": ..., "serverVersion": ...}`.
    Json,
    /// The same as YAML.
    Yaml,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print the client's version only; do not ask a server.
    #[arg(long)]
    pub client: bool,
    /// The palisade server to ask (`GET /healthz`, no token needed). Without it, without
    /// PALISADE_URL and without a context (the config file's current one, or --context) only
    /// the client's version is printed.
    #[arg(
        long,
        visible_alias = "server",
        env = "PALISADE_URL",
        value_name = "URL"
    )]
    pub url: Option<String>,
    /// A PEM file of CA certificates to trust for an https:// URL, in addition to the
    /// built-in and system ones.
    #[arg(long, env = "PALISADE_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// The context of the config file whose server to ask, instead of its current one.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = VersionFormat::Text)]
    pub output: VersionFormat,
}

/// The server's answer: its version, or why it is not known.
enum ServerVersion {
    Known(String),
    Unknown(String),
}

/// The server to ask, if any: --url or PALISADE_URL, else the context's (--context, else the
/// config file's current one). None when nothing names one or with --client.
fn server_target(args: &VersionArgs) -> Option<Result<Target, Failure>> {
    if args.client {
        return None;
    }
    let given = Given {
        url: args.url.clone(),
        // No token is sent: /healthz needs none.
        token: None,
        ca_file: args.ca_file.clone(),
        context: args.context.clone(),
    };
    if given.url.is_some() && given.ca_file.is_some() && given.context.is_none() {
        return Some(
            given
                .resolve(&Config::default(), std::path::Path::new(""))
                .map_err(failure),
        );
    }
    let loaded = contexts::default_location()
        .and_then(|path| Config::load(&path).map(|config| (config, path)));
    let (config, path) = match loaded {
        Ok(loaded) => loaded,
        Err(error) => return Some(Err(failure(error))),
    };
    if given.url.is_none() && given.context.is_none() && config.current_context.is_none() {
        return None;
    }
    Some(
        given
            .resolve(&config, &path)
            .map(|target| Target {
                token: None,
                ..target
            })
            .map_err(failure),
    )
}

fn failure(error: contexts::ConfigError) -> Failure {
    Failure(error.to_string())
}

fn server_version(target: Target) -> Result<ServerVersion, Failure> {
    let connection = Connection {
        url: None,
        token: None,
        ca_file: None,
        context: None,
        output: Format::Table,
    };
    let api = Api::to(&connection, target)?;
    let health: Health = api.get("/healthz")?.decode()?;
    Ok(match health.version {
        Some(version) => ServerVersion::Known(version),
        None => ServerVersion::Unknown("the server does not report its version".to_owned()),
    })
}

pub fn version(args: &VersionArgs) -> Outcome {
    // Asked before anything is printed, so a server that cannot be reached leaves the
    // client's line on standard output and one error line on standard error.
    let server = server_target(args).map(|target| target.and_then(server_version));
    let mut document = json!({"clientVersion": CLIENT_VERSION});
    if let Some(Ok(answer)) = &server {
        document["serverVersion"] = match answer {
            ServerVersion::Known(v) => json!(v),
            ServerVersion::Unknown(_) => Value::Null,
        };
    }
    match args.output {
        VersionFormat::Text => {
            println!("Client Version: {CLIENT_VERSION}");
            match &server {
                Some(Ok(ServerVersion::Known(v))) => println!("Server Version: {v}"),
                Some(Ok(ServerVersion::Unknown(why))) => {
                    println!("Server Version: unknown ({why})")
                }
                _ => {}
            }
        }
        VersionFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&document).unwrap_or_default()
        ),
        VersionFormat::Yaml => print!(
            "{}",
            serde_yaml_ng::to_string(&document).unwrap_or_default()
        ),
    }
    match server {
        Some(Err(failure)) => Err(failure),
        _ => Ok(()),
    }
}
