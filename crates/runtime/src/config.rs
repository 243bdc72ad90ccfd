//! What an installation runs with: `palisade serve`'s flags as values, with their defaults.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use palisade_app::limits::Rate;
use palisade_policy::Catalog;
use palisade_reconciler::LayoutChoice;
use palisade_workload::WorkloadConfig;

/// Everything [`crate::Runtime::start`] needs. [`RuntimeConfig::default`] is `palisade serve`
/// without flags.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeConfig {
    /// The store: `postgres://...` (or `postgresql://`), `sqlite:PATH` or a file path
    /// (`--database`). `None`: SQLite in `<data_dir>/palisade.db`.
    pub database: Option<String>,
    /// Whether an in-memory SQLite database is allowed (`--ephemeral`).
    pub ephemeral: bool,
    /// Make the encryption key the store's even when the store records another
    /// (`--replace-encryption-key`); otherwise such a key is refused at start.
    pub replace_encryption_key: bool,
    /// The address the API and portal listen on (`--listen`).
    pub listen: SocketAddr,
    /// Where palisade keeps its files: the SQLite database, `admin.token`, `encryption.key`
    /// (`--data-dir`).
    pub data_dir: PathBuf,
    /// The admin token to make on first start instead of one written to `admin.token`
    /// (`PALISADE_ADMIN_TOKEN`), as given: it is checked when the runtime starts.
    pub admin_token: Option<String>,
    /// The plan catalog (`--catalog`).
    pub catalog: Catalog,
    /// Builder and file-server images of platform workloads (`--workload-config`).
    pub workload_config: WorkloadConfig,
    /// HTTPS with this certificate and key (`--tls-cert`, `--tls-key`); plain HTTP without.
    pub tls: Option<TlsFiles>,
    /// Fill an empty store with the demo boundary (`--demo`).
    pub demo: bool,
    /// Where build Jobs fetch uploaded code (`--public-url`). `None`: the address listened
    /// on, unless it is unspecified (`0.0.0.0`, `[::]`), when uploads are not built.
    pub public_url: Option<String>,
    /// Each API token's write rate limit (`--token-write-rate`, `--token-write-burst`);
    /// `None`: no limit.
    pub token_writes: Option<Rate>,
    /// Each boundary's write rate limit, all its tokens together (`--boundary-write-rate`,
    /// `--boundary-write-burst`); `None`: no limit.
    pub boundary_writes: Option<Rate>,
    /// Days of policy history and change log kept (`--history-days`); 0 keeps everything.
    pub history_days: u32,
    /// The most a boundary's stored uploads may count, in bytes (`--max-upload-bytes`).
    pub max_upload_bytes: u64,
    /// How many days ahead an exception may end (`--max-exception-days`).
    pub max_exception_days: u32,
    /// The reconcile loop; `None` serves the API and portal only (`--no-reconciler`).
    pub reconciler: Option<ReconcilerConfig>,
}

/// The certificate chain (PEM, leaf first) and its private key (PEM) to serve HTTPS with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The reconcile loop's part of the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcilerConfig {
    /// This replica's name among those reconciling the installation's clusters (`--replica`).
    pub replica: String,
    /// How often the audit re-reads each boundary's objects when nothing changed
    /// (`--audit-interval`).
    pub audit_interval: Duration,
    /// How policies become admission objects in the clusters (`--admission-layout`).
    pub layout: LayoutChoice,
    /// How many changes of one object within a minute are repaired at once (no flag; tests
    /// that change one object many times raise it).
    pub free_repairs: usize,
}

/// `--listen`'s default.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// `--data-dir`'s default.
pub const DEFAULT_DATA_DIR: &str = ".palisade";

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            database: None,
            ephemeral: false,
            replace_encryption_key: false,
            listen: DEFAULT_LISTEN,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            admin_token: None,
            catalog: Catalog::builtin(),
            workload_config: WorkloadConfig::builtin(),
            tls: None,
            demo: false,
            public_url: None,
            token_writes: Rate::new(20.0, 100),
            boundary_writes: Rate::new(50.0, 250),
            history_days: 0,
            max_upload_bytes: palisade_app::uploads::DEFAULT_MAX_STORED_BYTES,
            max_exception_days: palisade_app::exceptions::MAX_EXCEPTION_DAYS,
            reconciler: Some(ReconcilerConfig::default()),
        }
    }
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        let settings = palisade_reconciler::Settings::default();
        ReconcilerConfig {
            replica: settings.replica,
            audit_interval: settings.audit_interval,
            layout: settings.layout,
            free_repairs: settings.free_repairs,
        }
    }
}
