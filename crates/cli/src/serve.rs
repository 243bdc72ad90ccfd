//! `palisade serve`: opens the store (SQLite under `--data-dir` unless `--database` names
//! PostgreSQL), makes the admin token on first start, optionally loads the demo, and serves
//! the API on `--listen`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use palisade_app::limits::Rate;
use palisade_policy::Catalog;
use palisade_runtime::{ReconcilerConfig, Runtime, RuntimeConfig, TlsFiles};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// `postgres://...` (or `postgresql://`), `sqlite:PATH` or a file path; any other scheme
    /// is refused. Default: SQLite in `<data-dir>/palisade.db` (mode 0600).
    #[arg(long, env = "PALISADE_DATABASE_URL", value_name = "URL")]
    database: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: SocketAddr,
    /// Where palisade keeps its files (SQLite database, admin.token, encryption.key).
    /// PALISADE_ENCRYPTION_KEY (base64 of 32 bytes) replaces encryption.key; on first start
    /// PALISADE_ADMIN_TOKEN (32 or more printable characters) becomes the admin token instead
    /// of one written to admin.token.
    #[arg(long, default_value = ".palisade", value_name = "DIR")]
    data_dir: PathBuf,
    /// Plan catalog (YAML: type -> [{name, cpu, memory}]). Default: the built-in catalog.
    #[arg(long, value_name = "FILE")]
    catalog: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs --tls-key. Without
    /// it palisade serves plain HTTP: terminate TLS in front of it (an ingress).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Fill an empty store with a demo boundary, policies and resources.
    #[arg(long)]
    demo: bool,
    /// Write rate limit of each API token: writes per second on average (0: no limit).
    /// Beyond it a write is refused with 429 rate_limited and Retry-After; reads never are.
    #[arg(long, default_value_t = 20.0, value_name = "PER_SECOND")]
    token_write_rate: f64,
    /// How many writes a token may make at once before --token-write-rate applies.
    #[arg(long, default_value_t = 100, value_name = "WRITES")]
    token_write_burst: u32,
    /// Write rate limit of each boundary, all its tokens together (0: no limit).
    #[arg(long, default_value_t = 50.0, value_name = "PER_SECOND")]
    boundary_write_rate: f64,
    /// How many writes a boundary may take at once before --boundary-write-rate applies.
    #[arg(long, default_value_t = 250, value_name = "WRITES")]
    boundary_write_burst: u32,
    /// Keep policy and exception history and the change log this many days (older rows are
    /// deleted in small batches every 10 minutes; the newest entry of each policy and
    /// exception always stays); 0 keeps everything. At most 36500.
    #[arg(long, default_value_t = 0, value_name = "DAYS",
        value_parser = clap::value_parser!(u32).range(0..=i64::from(palisade_app::policies::MAX_HISTORY_DAYS)))]
    history_days: u32,
    /// Allow an in-memory SQLite database (`--database sqlite::memory:`), which loses
    /// everything when palisade stops: for trials and tests only.
    #[arg(long)]
    ephemeral: bool,
    /// Make this replica's encryption key the store's from now on (to rotate the key: stop
    /// every replica, start one with the new key and this flag, then the others with the new
    /// key, and give every cluster's kubeconfig again). Without it, a key that is not the
    /// store's is refused at start.
    #[arg(long)]
    replace_encryption_key: bool,
    /// How often the audit re-reads each boundary's objects in each cluster when nothing
    /// changed (it also runs after every policy change): a number with s, m or h, at least
    /// 10s.
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = parse_interval)]
    audit_interval: std::time::Duration,
    /// Builder and file-server images for platform workloads (YAML: appBuilder,
    /// functionBuilder, staticWebAppBuilder, functionUploadBuilder, fileServer, buildRegistry,
    /// staticWebAppCpu, staticWebAppMemoryMib). Default: the built-in configuration.
    #[arg(long, value_name = "FILE")]
    workload_config: Option<PathBuf>,
    /// The URL at which build Jobs in the clusters reach this palisade, to fetch uploaded
    /// code (e.g. https://palisade.example.com). Default: the --listen address
    /// (http://127.0.0.1:8080), unless it is 0.0.0.0 or [::], when uploads are not built.
    #[arg(long, env = "PALISADE_PUBLIC_URL", value_name = "URL", value_parser = parse_public_url)]
    public_url: Option<String>,
    /// Serve the API and portal only; install nothing in clusters (another replica's
    /// reconciler does, or nobody: policy statuses then stay `pending`).
    #[arg(long)]
    no_reconciler: bool,
    /// This replica's name among those reconciling the installation's clusters (on
    /// PostgreSQL they share the clusters out), shown as `reconciled_by` on each cluster it
    /// reconciles. Default: the host's name (a Pod's name in Kubernetes).
    #[arg(long, env = "PALISADE_REPLICA", value_name = "NAME", value_parser = parse_replica)]
    replica: Option<String>,
    /// How policies become admission objects in the clusters: `auto` (the default: per cluster,
    /// `per-boundary` below about 200 boundaries, 500 before Kubernetes 1.36, and `shared` from
    /// there; on Kubernetes before 1.36 also `shared` while policies change often), or one
    /// layout for all: `per-policy` (one ValidatingAdmissionPolicy and binding per policy and
    /// boundary), `per-boundary` (one policy and binding per boundary and mode, at most 5
    /// policies each) or `shared` (one policy and two bindings per installation, each policy's
    /// rules in a BoundaryPolicy object in its boundary's namespaces).
    #[arg(long, default_value = "auto", value_name = "LAYOUT", value_parser = parse_layout)]
    admission_layout: palisade_reconciler::LayoutChoice,
    /// The most a boundary's stored uploads may count, in bytes (a number, or one with Ki, Mi
    /// or Gi); an upload beyond it is refused with 413. Each upload is at most 8 MiB and counts
    /// at least 4 KiB; one that no resource names is deleted 24 hours after it was made or
    /// last named.
    #[arg(long, default_value = "1Gi", value_name = "BYTES",
        value_parser = parse_bytes)]
    max_upload_bytes: u64,
    /// How many days ahead an exception's `expiresAt` may be (SPEC 7); a save beyond it is a
    /// 400 naming `/expiresAt`.
    #[arg(long, default_value_t = palisade_app::exceptions::MAX_EXCEPTION_DAYS, value_name = "DAYS",
        value_parser = clap::value_parser!(u32).range(1..=3650))]
    max_exception_days: u32,
    /// How log lines are written: `json` (one object per line: timestamp, level, target,
    /// fields) or `text` (coloured on a terminal only). Default: `text` when standard output
    /// is a terminal, `json` otherwise (a container, a file, a pipe).
    #[arg(long, env = "PALISADE_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
}

/// `serve --log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    /// The format when none is asked for: text for a person at a terminal, JSON for a
    /// collector.
    fn for_output(terminal: bool) -> LogFormat {
        if terminal {
            LogFormat::Text
        } else {
            LogFormat::Json
        }
    }
}

/// Starts logging to standard output in `format` (colour codes only on a terminal).
fn init_logging(format: Option<LogFormat>) {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match format.unwrap_or(LogFormat::for_output(terminal)) {
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_ansi(false)
            .init(),
        LogFormat::Text => logs.with_ansi(terminal).init(),
    }
}

/// A replica's name: 1 to 63 printable ASCII characters (PostgreSQL keeps it as the lease
/// connection's `application_name`, which allows no more).
fn parse_replica(text: &str) -> Result<String, String> {
    if text.is_empty()
        || text.len() > 63
        || !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
    {
        return Err(format!(
            "'{text}' is not a replica name: 1 to 63 printable ASCII characters"
        ));
    }
    Ok(text.to_owned())
}

/// `1073741824`, `1Gi`, `512Mi`, `64Ki`: a number of bytes.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let usage = || format!("'{text}' is not a number of bytes like 1073741824, 1Gi or 512Mi");
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let number: u64 = number.parse().map_err(|_| usage())?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return Err(usage()),
    };
    number.checked_mul(factor).ok_or_else(usage)
}

fn parse_layout(text: &str) -> Result<palisade_reconciler::LayoutChoice, String> {
    text.parse()
}

/// An `http://` or `https://` URL without query or fragment.
fn parse_public_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| format!("'{text}' must start with https:// or http://"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("'{text}' names no host"));
    }
    if text.contains(['?', '#']) || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "'{text}' must not have a query, a fragment or white space"
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// `90s`, `10m`, `1h`: at least 10 seconds.
fn parse_interval(text: &str) -> Result<std::time::Duration, String> {
    let usage = || format!("'{text}' is not a duration like 30s, 10m or 1h");
    let split = text.len().saturating_sub(1);
    let (number, unit) = (
        text.get(..split).unwrap_or(""),
        text.get(split..).unwrap_or(""),
    );
    let number: u64 = number.parse().map_err(|_| usage())?;
    let seconds = match unit {
        "s" => Some(number),
        "m" => number.checked_mul(60),
        "h" => number.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(usage)?;
    if seconds < 10 {
        return Err(format!("'{text}' is shorter than 10s"));
    }
    Ok(std::time::Duration::from_secs(seconds))
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let served = runtime.block_on(serve(args));
    // Dropping the runtime would wait for every blocking task, however long it runs: a
    // parse cannot be interrupted. The server and the reconcile loop have stopped within
    // their grace periods; what still runs on a blocking thread is abandoned.
    runtime.shutdown_timeout(BLOCKING_WORK_GRACE);
    served
}

/// How long blocking work (reading a request) may still run once serving has stopped.
const BLOCKING_WORK_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

impl ServeArgs {
    /// What the flags mean, with the files they name read and parsed; `admin_token` is
    /// `PALISADE_ADMIN_TOKEN`, as set.
    fn into_config(self, admin_token: Option<String>) -> anyhow::Result<RuntimeConfig> {
        let catalog = match &self.catalog {
            None => Catalog::builtin(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the catalog file {}", path.display()))?;
                palisade_api_types::catalog_file::parse(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            }
        };
        let workload_config = match &self.workload_config {
            None => palisade_workload::WorkloadConfig::builtin(),
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("cannot read the workload configuration {}", path.display())
                })?;
                palisade_workload::WorkloadConfig::from_yaml(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            }
        };
        Ok(RuntimeConfig {
            database: self.database,
            ephemeral: self.ephemeral,
            replace_encryption_key: self.replace_encryption_key,
            listen: self.listen,
            data_dir: self.data_dir,
            admin_token,
            catalog,
            workload_config,
            tls: match (self.tls_cert, self.tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
                _ => None,
            },
            demo: self.demo,
            public_url: self.public_url,
            token_writes: Rate::new(self.token_write_rate, self.token_write_burst),
            boundary_writes: Rate::new(self.boundary_write_rate, self.boundary_write_burst),
            history_days: self.history_days,
            max_upload_bytes: self.max_upload_bytes,
            max_exception_days: self.max_exception_days,
            reconciler: (!self.no_reconciler).then(|| ReconcilerConfig {
                replica: self
                    .replica
                    .unwrap_or_else(palisade_reconciler::default_replica),
                audit_interval: self.audit_interval,
                layout: self.admission_layout,
                ..ReconcilerConfig::default()
            }),
        })
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = args.into_config(std::env::var("PALISADE_ADMIN_TOKEN").ok())?;
    Runtime::start(config).await?.run().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, parse_interval, ServeArgs};
    use clap::Parser;
    use palisade_runtime::RuntimeConfig;
    use std::time::Duration;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// The flags' defaults (written in their help) are the runtime's, which the harnesses of
    /// the tests and benchmarks start from.
    #[test]
    fn serve_without_flags_is_the_runtimes_default_configuration() {
        let mut args = Serve::try_parse_from(["serve"]).unwrap().args;
        // Set in the environment of some test runs; not a default.
        args.database = None;
        args.public_url = None;
        args.replica = None;
        assert_eq!(args.into_config(None).unwrap(), RuntimeConfig::default());
    }

    #[test]
    fn upload_limits_read_as_bytes() {
        assert_eq!(parse_bytes("1073741824"), Ok(1 << 30));
        assert_eq!(parse_bytes("1Gi"), Ok(1 << 30));
        assert_eq!(parse_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_bytes("64Ki"), Ok(64 << 10));
        assert_eq!(parse_bytes("0"), Ok(0));
        for bad in ["", "Gi", "1G", "1.5Gi", "-1", "1 Gi", "99999999999999Ti"] {
            assert_eq!(
                parse_bytes(bad),
                Err(format!(
                    "'{bad}' is not a number of bytes like 1073741824, 1Gi or 512Mi"
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn audit_intervals_read_like_durations() {
        assert_eq!(parse_interval("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_interval("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(
            parse_interval("5s"),
            Err("'5s' is shorter than 10s".to_owned())
        );
        for bad in [
            "",
            "m",
            "10",
            "ten m",
            "10d",
            "-1m",
            "99999999999999999999h",
        ] {
            assert_eq!(
                parse_interval(bad),
                Err(format!("'{bad}' is not a duration like 30s, 10m or 1h")),
                "{bad}"
            );
        }
    }
}
