//! `palisade version`: the client's version, and the server's when a server is named.

use clap::{Args, ValueEnum};
use palisade_api_types::view::Health;
use serde_json::{json, Value};

use super::{Api, Connection, Failure, Format, Outcome};

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
    /// The palisade server to ask (`GET /healthz`, no token needed). Without it and without
    /// PALISADE_URL only the client's version is printed.
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
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = VersionFormat::Text)]
    pub output: VersionFormat,
}

/// The server's answer: its version, or why it is not known.
enum ServerVersion {
    Known(String),
    Unknown(String),
}

fn server_version(url: &str, ca_file: Option<&std::path::Path>) -> Result<ServerVersion, Failure> {
    let connection = Connection {
        url: url.to_owned(),
        token: None,
        ca_file: ca_file.map(std::path::Path::to_path_buf),
        output: Format::Table,
    };
    let api = Api::new(&connection)?;
    let health: Health = api.get("/healthz")?.decode()?;
    Ok(match health.version {
        Some(version) => ServerVersion::Known(version),
        None => ServerVersion::Unknown("the server does not report its version".to_owned()),
    })
}

pub fn version(args: &VersionArgs) -> Outcome {
    let url = if args.client {
        None
    } else {
        args.url.as_deref()
    };
    // Asked before anything is printed, so a server that cannot be reached leaves the
    // client's line on standard output and one error line on standard error.
    let server = url.map(|url| server_version(url, args.ca_file.as_deref()));
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
