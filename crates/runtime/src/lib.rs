//! palisade's composition root: a [`RuntimeConfig`] becomes a running installation (the store
//! opened and migrated, the application with its clusters port, the API and portal on one
//! router, the reconcile loop), stopped cleanly through the [`Runtime`] handle. `palisade
//! serve`, the end-to-end tests and the benchmarks all start here; nothing else composes
//! these crates.

mod config;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use palisade_app::App;
use palisade_reconciler::Controller;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{ReconcilerConfig, RuntimeConfig, TlsFiles, DEFAULT_DATA_DIR, DEFAULT_LISTEN};

/// The log target of what the runtime says: `palisade serve`'s, as it was before the
/// composition moved here, so that log filters and lines stay the same.
const TARGET: &str = "palisade::serve";

/// Why an installation did not start, or did not serve. The texts name `palisade serve`'s
/// flags, which is what the configuration's fields are.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Tls(#[from] palisade_server::TlsError),
    #[error("PALISADE_ADMIN_TOKEN: {0}")]
    AdminToken(String),
    #[error("--database: {0}")]
    DatabaseUrl(palisade_store::StoreError),
    #[error("--database: {url} is an in-memory database: everything stored is lost when palisade stops; add --ephemeral to run on it anyway")]
    InMemory { url: String },
    #[error("cannot create the data directory {path}")]
    DataDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the store {url}")]
    Store {
        url: String,
        #[source]
        source: palisade_store::StoreError,
    },
    #[error("cannot load the encryption key")]
    EncryptionKey(#[source] palisade_app::sealing::SealingError),
    #[error("the encryption key ({source_of_key}) is not the key of the store {url}: {why}; what this replica sealed the others could not open, nor it theirs. Start every replica with the same key: PALISADE_ENCRYPTION_KEY, or the file encryption.key in --data-dir (to change the key, see --replace-encryption-key)")]
    WrongEncryptionKey {
        source_of_key: String,
        url: String,
        why: String,
    },
    #[error("cannot check the encryption key against the store {url}")]
    EncryptionKeyCheck {
        url: String,
        #[source]
        source: palisade_store::StoreError,
    },
    #[error(transparent)]
    Bootstrap(#[from] palisade_app::caller::BootstrapError),
    #[error(transparent)]
    Demo(#[from] palisade_app::demo::DemoError),
    #[error("cannot read this installation's id")]
    Installation(#[source] palisade_store::StoreError),
    #[error("cannot serve on {address}")]
    Serve {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the HTTP server stopped unexpectedly")]
    ServerTask(#[source] tokio::task::JoinError),
}

/// A running installation: the API and portal serving, the reconcile loop (unless turned
/// off) and the background sweeps running. [`Runtime::run_until`] and [`Runtime::stop`] stop
/// it cleanly; dropping it aborts every task at once, as a crash would.
#[derive(Debug)]
pub struct Runtime {
    app: App,
    /// The store the application was composed on (the composition root keeps it; the
    /// adapters reach it only through `app`).
    store: palisade_store::SharedStore,
    address: SocketAddr,
    controller: Option<Arc<Controller>>,
    /// `true` asks the server and the reconcile loop to stop; dropped, it stops the loop.
    stop: watch::Sender<bool>,
    tasks: Tasks,
}

/// The runtime's tasks; those still held when it is dropped are aborted.
#[derive(Debug, Default)]
struct Tasks {
    server: Option<JoinHandle<std::io::Result<()>>>,
    controller: Option<JoinHandle<()>>,
    sweeper: Option<JoinHandle<()>>,
    history: Option<JoinHandle<()>>,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        let tasks = [
            self.server.as_ref().map(JoinHandle::abort_handle),
            self.controller.as_ref().map(JoinHandle::abort_handle),
            self.sweeper.as_ref().map(JoinHandle::abort_handle),
            self.history.as_ref().map(JoinHandle::abort_handle),
        ];
        for task in tasks.into_iter().flatten() {
            task.abort();
        }
    }
}

/// Where the runtime listens: an address bound once everything else has started (what
/// `palisade serve` does), or a listener bound already (a harness on port 0).
enum Listen {
    Address(SocketAddr),
    Bound(TcpListener),
}

impl Runtime {
    /// Starts `config`: checks it, opens and migrates the store, makes the admin token on
    /// first start, composes the application, starts the reconcile loop and the sweeps, and
    /// binds `config.listen` last.
    pub async fn start(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let listen = Listen::Address(config.listen);
        Runtime::compose(config, listen).await
    }

    /// [`Runtime::start`] on a listener bound already (`config.listen` is not used); the
    /// default public URL is the listener's address.
    pub async fn start_on(
        listener: TcpListener,
        config: RuntimeConfig,
    ) -> Result<Runtime, RuntimeError> {
        Runtime::compose(config, Listen::Bound(listener)).await
    }

    /// The address the API and portal answer on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The application the API and portal serve.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The store under the application, for tests that look at what it recorded.
    pub fn store(&self) -> &palisade_store::SharedStore {
        &self.store
    }

    /// The reconcile loop, unless it is turned off.
    pub fn controller(&self) -> Option<&Arc<Controller>> {
        self.controller.as_ref()
    }

    /// Serves until `shutdown` completes, then stops: requests in flight finish within the
    /// server's grace, the pass in progress within the reconciler's, and the loop releases
    /// its lease.
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RuntimeError> {
        let served = match self.tasks.server.take() {
            Some(mut server) => tokio::select! {
                () = shutdown => {
                    self.stop.send_replace(true);
                    (&mut server).await
                }
                served = &mut server => served,
            },
            None => Ok(Ok(())),
        };
        self.stop.send_replace(true);
        if let Some(sweeper) = self.tasks.sweeper.take() {
            sweeper.abort();
        }
        if let Some(controller) = self.tasks.controller.take() {
            if let Err(error) = controller.await {
                tracing::warn!(target: TARGET, %error, "the reconcile loop did not stop cleanly");
            }
        }
        if let Some(history) = self.tasks.history.take() {
            history.abort();
        }
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(RuntimeError::Serve {
                address: self.address,
                source,
            }),
            Err(error) => Err(RuntimeError::ServerTask(error)),
        }
    }

    /// Serves until Ctrl-C or SIGTERM, then stops as [`Runtime::run_until`] does.
    pub async fn run(self) -> Result<(), RuntimeError> {
        self.run_until(palisade_server::shutdown_signal()).await
    }

    /// Stops now, cleanly (see [`Runtime::run_until`]).
    pub async fn stop(self) -> Result<(), RuntimeError> {
        self.run_until(std::future::ready(())).await
    }

    async fn compose(config: RuntimeConfig, listen: Listen) -> Result<Runtime, RuntimeError> {
        // Checked before anything is created, like the database URL below.
        let tls = match &config.tls {
            Some(files) => Some(palisade_server::tls_config(&files.cert, &files.key)?),
            None => None,
        };
        let given_admin = match &config.admin_token {
            Some(text) => {
                Some(palisade_app::caller::given_token(text).map_err(RuntimeError::AdminToken)?)
            }
            None => None,
        };
        // Refused before anything is created: a mistyped scheme must not become a SQLite file
        // whose path holds the password.
        if let Some(url) = &config.database {
            let backend = palisade_store::backend_of(url).map_err(RuntimeError::DatabaseUrl)?;
            let in_memory = backend == palisade_store::Backend::Sqlite
                && palisade_store::sqlite::is_in_memory_url(url);
            if in_memory && !config.ephemeral {
                return Err(RuntimeError::InMemory { url: redact(url) });
            }
            if in_memory {
                tracing::warn!(
                    target: TARGET,
                    "--ephemeral: the store is in memory; everything is lost when palisade stops"
                );
            }
        }
        let data_dir = &config.data_dir;
        std::fs::create_dir_all(data_dir).map_err(|source| RuntimeError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
        let url = match &config.database {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", data_dir.join("palisade.db").display()),
        };
        let store = palisade_store::connect(&url)
            .await
            .map_err(|source| RuntimeError::Store {
                url: redact(&url),
                source,
            })?;
        tracing::info!(target: TARGET, backend = store.backend(), "store ready");
        let sealing = palisade_app::SealingKey::load_or_create(data_dir)
            .map_err(RuntimeError::EncryptionKey)?;
        // Before anything is sealed with it: one key for every replica of the store.
        let confirmed = if config.replace_encryption_key {
            tracing::warn!(
                target: TARGET,
                "--replace-encryption-key: this replica's key is the store's from now on; start the others with it"
            );
            palisade_app::sealing::replace_key(store.as_ref(), &sealing).await
        } else {
            palisade_app::sealing::confirm_key(store.as_ref(), &sealing).await
        };
        match confirmed {
            Ok(unopened) if unopened.is_empty() => {}
            Ok(unopened) => tracing::warn!(
                target: TARGET,
                clusters = unopened.join(", "),
                "the credentials of these clusters do not open with the encryption key; give their kubeconfigs again (palisade cluster add)"
            ),
            Err(palisade_app::sealing::KeyCheckError::Store(source)) => {
                return Err(RuntimeError::EncryptionKeyCheck {
                    url: redact(&url),
                    source,
                })
            }
            Err(why) => {
                let source_of_key = if std::env::var_os("PALISADE_ENCRYPTION_KEY").is_some() {
                    "PALISADE_ENCRYPTION_KEY".to_owned()
                } else {
                    data_dir.join("encryption.key").display().to_string()
                };
                return Err(RuntimeError::WrongEncryptionKey {
                    source_of_key,
                    url: redact(&url),
                    why: why.to_string(),
                });
            }
        }
        match given_admin {
            Some((id, token)) => {
                if palisade_app::caller::bootstrap_given_admin(store.as_ref(), id, &token).await? {
                    tracing::info!(
                        target: TARGET,
                        "first start: PALISADE_ADMIN_TOKEN is the admin token"
                    );
                }
            }
            None => {
                if let Some(path) =
                    palisade_app::caller::bootstrap_admin(store.as_ref(), data_dir).await?
                {
                    tracing::info!(
                        target: TARGET,
                        path = %path.display(),
                        "first start: admin token written (mode 0600)"
                    );
                }
            }
        }
        if config.demo {
            if palisade_app::demo::load(store.as_ref(), &config.catalog).await? {
                tracing::info!(target: TARGET, "demo data loaded: boundary 'shop'");
            } else {
                tracing::info!(
                    target: TARGET,
                    "demo data not loaded: the store already holds boundaries"
                );
            }
        }
        let listen_address = match &listen {
            Listen::Address(address) => *address,
            Listen::Bound(listener) => {
                listener
                    .local_addr()
                    .map_err(|source| RuntimeError::Serve {
                        address: config.listen,
                        source,
                    })?
            }
        };
        let public_url = config
            .public_url
            .clone()
            .or_else(|| default_public_url(listen_address, tls.is_some()));
        match &public_url {
            Some(url) => tracing::info!(
                target: TARGET,
                url,
                "build Jobs fetch uploaded code from here (--public-url)"
            ),
            None => tracing::warn!(
                target: TARGET,
                "uploaded code is not built: --listen {} is no address build Jobs can reach; set --public-url",
                listen_address
            ),
        }
        let mut tasks = Tasks::default();
        // The reconcile loop stops when asked (with the HTTP server), or when the runtime's
        // stop sender is dropped.
        let (stop, stopping) = watch::channel(false);
        // Statuses the reconciler records wake the API's reads that wait for them.
        let workload_changes = Arc::new(palisade_app::live::WorkloadChanges::default());
        let controller = match &config.reconciler {
            None => {
                tracing::info!(
                    target: TARGET,
                    "reconciler off (--no-reconciler): nothing is installed in clusters"
                );
                None
            }
            Some(reconciler) => {
                let installation = store
                    .installation_id(&palisade_app::new_installation_id())
                    .await
                    .map_err(RuntimeError::Installation)?;
                // The recorder behind `/metrics` first, so that the first pass is counted too.
                palisade_server::metrics::Metrics::global();
                // The reconciler's only door to the store is an application of its own (its
                // own caches), over the same store and key as the API's.
                let controller = Controller::new(
                    App::new(store.clone(), config.catalog.clone(), sealing.clone())
                        .with_workload_changes(Arc::clone(&workload_changes)),
                    installation,
                    palisade_reconciler::Settings {
                        audit_interval: reconciler.audit_interval,
                        workloads: palisade_reconciler::workloads::Workloads {
                            config: config.workload_config.clone(),
                            fetch: public_url.as_deref().map(|url| fetch_minter(&sealing, url)),
                        },
                        layout: reconciler.layout,
                        replica: reconciler.replica.clone(),
                        free_repairs: reconciler.free_repairs,
                        ..palisade_reconciler::Settings::default()
                    },
                );
                tasks.controller = Some(tokio::spawn(
                    Arc::clone(&controller).run(stopped(stopping.clone())),
                ));
                Some(controller)
            }
        };
        // The application, reaching clusters through the Kubernetes adapter.
        let mut app = App::new(store.clone(), config.catalog, sealing)
            .with_workload_changes(workload_changes)
            .with_clusters(Arc::new(palisade_reconciler::KubeClusters))
            .with_workload_config(config.workload_config)
            .with_upload_limits(palisade_app::uploads::UploadLimits {
                stored_per_boundary: config.max_upload_bytes,
                ..palisade_app::uploads::UploadLimits::default()
            })
            .with_max_exception_days(config.max_exception_days);
        if public_url.is_none() {
            app = app.without_upload_builds();
        }
        app = app.with_write_limits(palisade_app::limits::WriteLimits::new(
            config.token_writes,
            config.boundary_writes,
        ));
        if config.history_days > 0 {
            tasks.history = Some(tokio::spawn(
                app.clone().retain_history(config.history_days),
            ));
        }
        tracing::info!(
            target: TARGET,
            max_upload_bytes = config.max_upload_bytes,
            "uploads no resource names are deleted 24 hours after they were made or last named"
        );
        // Every replica sweeps; each deletion is decided in a transaction of its own.
        tasks.sweeper = Some(tokio::spawn(palisade_app::uploads::sweep_every(
            app.clone(),
            palisade_app::uploads::SWEEP_EVERY,
        )));
        let portal = palisade_portal::Options {
            secure_cookies: secure_cookies(tls.is_some(), public_url.as_deref()),
        };
        let router = palisade_server::app_with(
            palisade_server::AppState::of(app.clone()),
            palisade_portal::router_with(portal),
        );
        let mut runtime = Runtime {
            app,
            store,
            address: listen_address,
            controller,
            stop,
            tasks,
        };
        let listener = match listen {
            Listen::Bound(listener) => listener,
            Listen::Address(address) => match TcpListener::bind(address).await {
                Ok(listener) => listener,
                Err(source) => {
                    // What started stops again, as when serving ends.
                    runtime.stop().await?;
                    return Err(RuntimeError::Serve { address, source });
                }
            },
        };
        runtime.address = listener.local_addr().unwrap_or(listen_address);
        runtime.tasks.server = Some(tokio::spawn(palisade_server::serve_listener(
            listener,
            router,
            stopped(stopping),
            tls,
        )));
        Ok(runtime)
    }
}

/// Completes when `true` is sent, or when the sender is dropped.
async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// How build Jobs are told where to fetch an upload from, and with which token.
fn fetch_minter(
    sealing: &palisade_app::SealingKey,
    public_url: &str,
) -> palisade_reconciler::workloads::FetchMinter {
    let (key, public_url) = (sealing.clone(), public_url.to_owned());
    Arc::new(move |boundary: &str, id: &str| {
        let token =
            palisade_app::workloads::fetch_token(&key, boundary, id).map_err(|e| e.to_string())?;
        Ok(palisade_workload::Fetch {
            url: palisade_app::workloads::fetch_url(&public_url, boundary, id),
            token,
        })
    })
}

/// Without a public URL, the address palisade listens on, when it is one a build Job could
/// be pointed at (`http://127.0.0.1:8080` for the default listen address; `https` with TLS);
/// `None` for an unspecified address (`0.0.0.0`, `[::]`), which names no host.
fn default_public_url(listen: SocketAddr, tls: bool) -> Option<String> {
    if listen.ip().is_unspecified() {
        return None;
    }
    let scheme = if tls { "https" } else { "http" };
    Some(format!("{scheme}://{listen}"))
}

/// Whether every portal cookie is `Secure`: palisade serves HTTPS itself, or its public URL
/// (`--public-url`) is `https://`, so TLS is terminated in front of it. Plain HTTP otherwise
/// (cookies are then `Secure` only for requests a proxy says came through HTTPS).
fn secure_cookies(tls: bool, public_url: Option<&str>) -> bool {
    tls || public_url
        .and_then(|url| url.get(..8))
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &credentials[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{default_public_url, redact, secure_cookies};

    #[test]
    fn cookies_are_secure_with_tls_here_or_in_front() {
        assert!(secure_cookies(true, Some("https://127.0.0.1:8443")));
        assert!(secure_cookies(true, Some("http://palisade.example.com")));
        assert!(secure_cookies(false, Some("https://palisade.example.com")));
        assert!(secure_cookies(false, Some("HTTPS://palisade.example.com")));
        assert!(!secure_cookies(false, Some("http://127.0.0.1:8080")));
        assert!(!secure_cookies(false, None));
    }

    #[test]
    fn passwords_are_redacted_from_database_urls() {
        assert_eq!(
            redact("postgres://palisade:secret@db:5432/palisade"),
            "postgres://palisade:***@db:5432/palisade"
        );
        assert_eq!(
            redact("postgres://palisade@db/palisade"),
            "postgres://palisade@db/palisade"
        );
        assert_eq!(redact("sqlite:/data/p.db"), "sqlite:/data/p.db");
    }

    #[test]
    fn the_default_public_url_is_the_listen_address_when_it_names_a_host() {
        let at = |text: &str| text.parse().unwrap();
        assert_eq!(
            default_public_url(at("127.0.0.1:8080"), false).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            default_public_url(at("[::1]:8443"), true).as_deref(),
            Some("https://[::1]:8443")
        );
        assert_eq!(default_public_url(at("0.0.0.0:8080"), false), None);
        assert_eq!(default_public_url(at("[::]:8080"), false), None);
    }
}
