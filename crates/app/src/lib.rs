//! palisade's use cases, with no HTTP in them: who the caller is and what it may do, the
//! plan guard, resources, policies, boundaries, tokens, clusters and namespaces, the boundary
//! overview the portal shows, sealing and demo data.
//!
//! Every use case is a method of [`App`] (or a function taking it) that checks the caller's
//! role itself and answers a wire type of `palisade-api-types` or a typed [`AppError`]. The
//! HTTP adapter (`palisade-server`) and the portal call the same methods, so neither can allow
//! what the other refuses. Clusters are reached through the [`ports::Clusters`] port, which
//! the Kubernetes adapter implements and the binary injects.

pub mod boundaries;
pub mod caller;
pub mod clusters;
pub mod demo;
pub mod documents;
pub mod error;
pub mod exceptions;
pub mod limits;
pub mod live;
pub mod namespaces;
pub mod overview;
pub mod paging;
pub mod plans;
pub mod policies;
pub mod ports;
pub mod preview;
pub mod reading;
pub mod reconcile;
pub mod resources;
pub mod rollout;
pub mod sealing;
pub mod tokens;
pub mod uploads;
pub mod workloads;

use std::sync::Arc;
use std::time::Duration;

use palisade_policy::Catalog;
use tokio::time::Instant;

pub use caller::{caller_from_token, Caller, Role};
pub use error::{boundary_not_found, AppError, AppResult};
pub use paging::PageRequest;
pub use palisade_store::SharedStore;
pub use sealing::SealingKey;

/// How long a plan path waits for the store before answering `PolicyUnavailable` (SPEC 2.4).
pub const POLICY_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The application: what every use case needs, cheap to clone (shared parts are `Arc`s).
#[derive(Clone, Debug)]
pub struct App {
    /// The storage port: reached only through the use cases (the adapters and the binary
    /// hand it over in [`App::new`] and never touch it again).
    store: SharedStore,
    pub catalog: Arc<Catalog>,
    pub sealing: SealingKey,
    /// The bound of a plan path's store work (SPEC 2.4).
    pub policy_timeout: Duration,
    policies: Arc<plans::PolicyCache>,
    clusters: Arc<dyn ports::Clusters>,
    /// The builder and file-server images (`--workload-config`), for the warnings about
    /// images palisade runs for a resource.
    workload_config: Arc<palisade_workload::WorkloadConfig>,
    /// Whether uploaded code is built (`palisade serve` knows a URL build Jobs fetch it from);
    /// when not, a write that names an upload says so.
    builds_uploads: bool,
    /// The write rate limits (`serve --token-write-rate`, `--boundary-write-rate`); none by
    /// default.
    write_limits: Arc<limits::WriteLimits>,
    /// Memory (and, for large readings, core turns) for reading untrusted text off the async
    /// workers, so that a burst of large requests queues instead of taking every worker
    /// thread and more memory than the process has (`reading`).
    reading: Arc<reading::Pools>,
    /// The uploads being received, within their bounds (`uploads::UploadLimits`).
    uploads: Arc<uploads::InFlight>,
    /// How far ahead an exception may end (`serve --max-exception-days`, SPEC 7).
    pub(crate) max_exception_days: u32,
    /// This installation's id once read: it never changes, and reading it is a write
    /// transaction (made on first use).
    installation: Arc<tokio::sync::OnceCell<String>>,
    /// Wakes the reads that wait for a workload's status to move (`live`).
    live: Arc<live::WorkloadChanges>,
}

impl App {
    /// An application without a cluster adapter: cluster operations answer
    /// `ClusterUnavailable` until [`App::with_clusters`] gives it one.
    pub fn new(store: SharedStore, catalog: Catalog, sealing: SealingKey) -> Self {
        App {
            store,
            catalog: Arc::new(catalog),
            sealing,
            policy_timeout: POLICY_READ_TIMEOUT,
            policies: Arc::new(plans::PolicyCache::default()),
            clusters: Arc::new(ports::NoClusters),
            workload_config: Arc::new(palisade_workload::WorkloadConfig::builtin()),
            builds_uploads: true,
            installation: Arc::new(tokio::sync::OnceCell::new()),
            write_limits: Arc::new(limits::WriteLimits::default()),
            reading: Arc::new(reading::Pools::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            )),
            uploads: uploads::InFlight::new(uploads::UploadLimits::default()),
            max_exception_days: exceptions::MAX_EXCEPTION_DAYS,
            live: Arc::new(live::WorkloadChanges::default()),
        }
    }

    /// The same application letting exceptions end at most `days` ahead.
    pub fn with_max_exception_days(mut self, days: u32) -> Self {
        self.max_exception_days = days;
        self
    }

    /// The same application with other bounds on uploads (`serve --max-upload-bytes`).
    pub fn with_upload_limits(mut self, limits: uploads::UploadLimits) -> Self {
        self.uploads = uploads::InFlight::new(limits);
        self
    }

    /// The bounds on uploads.
    pub fn upload_limits(&self) -> uploads::UploadLimits {
        self.uploads.limits()
    }

    /// The same application reaching clusters through `clusters`.
    pub fn with_clusters(mut self, clusters: Arc<dyn ports::Clusters>) -> Self {
        self.clusters = clusters;
        self
    }

    /// The same application waking the same waiting reads as others sharing `changes` (the
    /// reconciler's application records the statuses the API's waits for).
    pub fn with_workload_changes(mut self, changes: Arc<live::WorkloadChanges>) -> Self {
        self.live = changes;
        self
    }

    /// The same application with the builder and file-server images of `config`.
    pub fn with_workload_config(mut self, config: palisade_workload::WorkloadConfig) -> Self {
        self.workload_config = Arc::new(config);
        self
    }

    /// The same application with these write rate limits.
    pub fn with_write_limits(mut self, limits: limits::WriteLimits) -> Self {
        self.write_limits = Arc::new(limits);
        self
    }

    /// The same application in a process whose uploads are not built (no public URL).
    pub fn without_upload_builds(mut self) -> Self {
        self.builds_uploads = false;
        self
    }

    /// The deadline of a request that arrives now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.policy_timeout
    }

    /// The continue tokens of this installation's lists (see [`paging`]).
    pub fn continue_tokens(&self) -> paging::ContinueTokens {
        paging::ContinueTokens::new(&self.sealing)
    }

    /// The decoded-policy cache.
    pub fn policy_cache(&self) -> &plans::PolicyCache {
        &self.policies
    }

    /// Runs CPU-bound reading of a request (parsing and validating a body) on the blocking
    /// pool, so that the async workers keep answering other requests (`/healthz` included),
    /// once `memory` bytes (what the reading may hold at most,
    /// `palisade_api_types::yaml::peak_bound`) are free in the reading pools (`reading`):
    /// however many requests arrive, readings hold at most the pools at once. `work` is
    /// handed a flag that is set when this future is dropped (the request's total time
    /// passed, or it was cancelled); work of several steps checks it between them. The
    /// memory is held until the work ends, dropped request or not. One parse cannot be
    /// interrupted: what bounds it is that bodies are bounded before they are parsed
    /// (`palisade_api_types::nesting`).
    pub async fn off_workers<T, F>(&self, memory: usize, work: F) -> AppResult<T>
    where
        F: FnOnce(&std::sync::atomic::AtomicBool) -> T + Send + 'static,
        T: Send + 'static,
    {
        let cancel = CancelOnDrop::default();
        let stop = cancel.flag();
        let admitted = self.reading.admit(memory).await?;
        let done = tokio::task::spawn_blocking(move || {
            let _admitted = admitted;
            work(&stop)
        })
        .await
        .map_err(|e| AppError::Internal(format!("reading the request stopped: {e}")));
        drop(cancel);
        done
    }

    fn clusters(&self) -> &dyn ports::Clusters {
        self.clusters.as_ref()
    }

    fn policies_arc(&self) -> Arc<plans::PolicyCache> {
        self.policies.clone()
    }

    /// Whether the store answers within the plan-path bound (readiness).
    pub async fn ready(&self) -> AppResult<()> {
        match tokio::time::timeout(self.policy_timeout, self.store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(AppError::Unavailable(e.to_string())),
            Err(_) => Err(AppError::Unavailable("store ping timed out".into())),
        }
    }

    /// 404 unless the caller sees the boundary and it exists.
    pub async fn visible_boundary(&self, caller: &Caller, boundary: &str) -> AppResult<()> {
        caller.require_visible(boundary)?;
        match self.store.get_boundary(boundary).await {
            Ok(_) => Ok(()),
            Err(palisade_store::StoreError::NotFound) => Err(boundary_not_found(boundary)),
            Err(other) => Err(AppError::from_store(other, "boundary")),
        }
    }

    /// This installation's id (made on first use; the reconciler reads the same).
    pub async fn installation(&self) -> AppResult<String> {
        self.installation
            .get_or_try_init(|| async {
                self.store
                    .installation_id(&new_installation_id())
                    .await
                    .map_err(|e| AppError::from_store(e, "installation"))
            })
            .await
            .cloned()
    }
}

/// A fresh installation id: `p` and 16 hex digits of randomness (a Kubernetes label value).
pub fn new_installation_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("p{}", hex::encode(bytes))
}

/// Parses a name given in a path (a DNS label); `InvalidRequest` naming the path parameter.
pub fn path_name(parameter: &str, text: &str) -> AppResult<palisade_policy::Name> {
    palisade_policy::Name::parse(text)
        .map_err(|e| AppError::invalid(&format!("/path/{parameter}"), e))
}

/// Sets its flag when dropped: the blocking work it was handed stops at its next check.
#[derive(Debug, Default)]
struct CancelOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl CancelOnDrop {
    fn flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::CancelOnDrop;

    #[test]
    fn dropping_the_request_sets_the_stop_flag() {
        let cancel = CancelOnDrop::default();
        let flag = cancel.flag();
        assert!(!flag.load(std::sync::atomic::Ordering::Relaxed));
        drop(cancel);
        assert!(flag.load(std::sync::atomic::Ordering::Relaxed));
    }
}
