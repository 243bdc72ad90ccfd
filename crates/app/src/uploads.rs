//! Code uploaded for builds (SPEC 5; v3.1 "Uploads are bounded"): received as a stream and
//! stored in chunks, within bounds on what is received at once (per process and per
//! boundary) and on what each boundary stores (`serve --max-upload-bytes`); read back chunk
//! by chunk by the build Job holding a fetch token (see `workloads::fetch_token`); deleted by
//! the sweeper once no resource has named it for 24 hours.
//!
//! An upload's content is never held whole in memory: the body is read as it arrives, hashed
//! and written a chunk ([`CHUNK_BYTES`]) at a time, each chunk in a short transaction of its
//! own (on SQLite, no upload holds the one writer for longer than a chunk takes), and the
//! upload is stored — made visible, counted against its boundary's limit — in one last short
//! transaction. An upload that fails on the way leaves only chunks nobody can read, which it
//! deletes itself (or, if the process stops first, the sweeper does).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use palisade_api_types::view::UploadView;
use palisade_store::{NewUpload, SharedStore, StoreError};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::caller::Access;
use crate::error::{boundary_not_found, AppError, AppResult};
use crate::App;

const MIB: u64 = 1024 * 1024;

/// The largest upload accepted (an archive or a single file).
pub const MAX_UPLOAD_BYTES: usize = 8 * 1024 * 1024;

/// How much of an upload is written at once: one chunk, one short transaction.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// The default of `serve --max-upload-bytes`: what one boundary's stored uploads may count.
pub const DEFAULT_MAX_STORED_BYTES: u64 = 1024 * MIB;

/// How many bytes of uploads one process receives at once (16 uploads of 8 MiB); beyond it,
/// 503 with `Retry-After`.
pub const MAX_IN_FLIGHT_BYTES: u64 = 128 * MIB;

/// How many bytes of uploads one boundary sends at once (4 uploads of 8 MiB); beyond it, 429
/// with `Retry-After`.
pub const MAX_IN_FLIGHT_BYTES_PER_BOUNDARY: u64 = 32 * MIB;

/// What `Retry-After` says to an upload refused for what is in flight.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// An upload that no resource names is deleted this long after it was made or last named.
pub const UNNAMED_UPLOAD_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// Chunks of an upload that was never stored are deleted once they are this old (an upload
/// is received within a request's 30 s, so older ones belong to no upload under way).
pub const ORPHAN_CHUNK_AGE: Duration = Duration::from_secs(60 * 60);

/// How often `palisade serve` sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10 * 60);

/// Uploads deleted per transaction by the sweeper (rows only: a few bytes each).
const UPLOADS_PER_SWEEP_BATCH: usize = 100;

/// Chunks deleted per transaction (2 MiB), by the sweeper and by a failed upload.
const CHUNKS_PER_DELETE: usize = 8;

/// The refusal of an upload over [`MAX_UPLOAD_BYTES`] (the API's 413 and the portal's).
pub fn upload_too_large() -> AppError {
    AppError::LimitExceeded(format!(
        "an upload may be at most {MAX_UPLOAD_BYTES} bytes (8 MiB)"
    ))
}

/// The refusal of an upload with no content.
pub fn upload_empty() -> AppError {
    AppError::InvalidRequest("the upload is empty".into())
}

/// The refusal of an upload that would take its boundary's stored uploads past `limit`
/// (`stored` is what they count now).
pub fn upload_over_quota(boundary: &str, stored: u64, limit: u64, size: u64) -> AppError {
    let counted = palisade_store::counted_upload_bytes(size);
    let this = if counted == size {
        format!("this upload of {size} bytes")
    } else {
        format!("this upload of {size} bytes, counted as {counted},")
    };
    AppError::LimitExceeded(format!(
        "boundary '{boundary}' stores {stored} of {limit} bytes of uploads \
         (serve --max-upload-bytes); {this} would exceed it"
    ))
}

/// The bounds on uploads; [`UploadLimits::default`] has the documented values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadLimits {
    /// What one boundary's stored uploads may count (`serve --max-upload-bytes`).
    pub stored_per_boundary: u64,
    /// See [`MAX_IN_FLIGHT_BYTES`].
    pub in_flight: u64,
    /// See [`MAX_IN_FLIGHT_BYTES_PER_BOUNDARY`].
    pub in_flight_per_boundary: u64,
}

impl Default for UploadLimits {
    fn default() -> Self {
        UploadLimits {
            stored_per_boundary: DEFAULT_MAX_STORED_BYTES,
            in_flight: MAX_IN_FLIGHT_BYTES,
            in_flight_per_boundary: MAX_IN_FLIGHT_BYTES_PER_BOUNDARY,
        }
    }
}

/// The bytes of uploads being received, in all and per boundary, within [`UploadLimits`].
#[derive(Debug)]
pub(crate) struct InFlight {
    limits: UploadLimits,
    taken: Mutex<Taken>,
}

#[derive(Debug, Default)]
struct Taken {
    total: u64,
    by_boundary: HashMap<String, u64>,
}

/// Bytes taken from [`InFlight`] by one upload, given back when it ends (however it ends).
#[derive(Debug)]
pub(crate) struct Reservation {
    in_flight: Arc<InFlight>,
    boundary: String,
    bytes: u64,
}

impl InFlight {
    pub(crate) fn new(limits: UploadLimits) -> Arc<Self> {
        Arc::new(InFlight {
            limits,
            taken: Mutex::new(Taken::default()),
        })
    }

    pub(crate) fn limits(&self) -> UploadLimits {
        self.limits
    }

    fn taken(&self) -> std::sync::MutexGuard<'_, Taken> {
        self.taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes `bytes` for an upload to `boundary`, or refuses it at once: 429 when the
    /// boundary's uploads under way would pass their bound, 503 when the process's would. A
    /// bound is never refused to an upload that finds nothing under way (a bound smaller than
    /// one upload does not stop them all).
    fn reserve(self: &Arc<Self>, boundary: &str, bytes: u64) -> AppResult<Reservation> {
        let limits = self.limits;
        let mut taken = self.taken();
        let here = taken.by_boundary.get(boundary).copied().unwrap_or(0);
        if here > 0 && here.saturating_add(bytes) > limits.in_flight_per_boundary {
            return Err(AppError::TooManyRequests(format!(
                "boundary '{boundary}' has {here} bytes of uploads under way, and at most {} \
                 may be at once; this upload would add {bytes} (its Content-Length, or 8 MiB \
                 without one); retry after {RETRY_AFTER_SECONDS} s",
                limits.in_flight_per_boundary
            )));
        }
        if taken.total > 0 && taken.total.saturating_add(bytes) > limits.in_flight {
            return Err(AppError::Busy(format!(
                "palisade is receiving {} bytes of uploads, and at most {} at once; this \
                 upload would add {bytes}; retry after {RETRY_AFTER_SECONDS} s",
                taken.total, limits.in_flight
            )));
        }
        taken.total += bytes;
        *taken.by_boundary.entry(boundary.to_owned()).or_default() += bytes;
        Ok(Reservation {
            in_flight: Arc::clone(self),
            boundary: boundary.to_owned(),
            bytes,
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut taken = self.in_flight.taken();
        taken.total = taken.total.saturating_sub(self.bytes);
        if let Some(here) = taken.by_boundary.get_mut(&self.boundary) {
            *here = here.saturating_sub(self.bytes);
            if *here == 0 {
                taken.by_boundary.remove(&self.boundary);
            }
        }
    }
}

/// The chunks of an upload under way: deleted if it does not end stored, also when its
/// request is dropped half-way (a task of its own then deletes them).
struct Unstored {
    store: SharedStore,
    boundary: String,
    id: String,
    armed: bool,
}

impl Unstored {
    /// Deletes what was written, if anything was.
    async fn discard(mut self) {
        if std::mem::replace(&mut self.armed, false) {
            discard_chunks(&self.store, &self.boundary, &self.id).await;
        }
    }
}

impl Drop for Unstored {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, boundary, id) = (
            self.store.clone(),
            std::mem::take(&mut self.boundary),
            std::mem::take(&mut self.id),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { discard_chunks(&store, &boundary, &id).await });
        }
    }
}

/// Deletes the chunks of an upload that was not stored, a few per transaction. A failure is
/// logged: the sweeper deletes what is left.
async fn discard_chunks(store: &SharedStore, boundary: &str, id: &str) {
    loop {
        match store.discard_upload(boundary, id, CHUNKS_PER_DELETE).await {
            Ok(n) if n >= CHUNKS_PER_DELETE as u64 => {}
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%error, boundary, upload = id,
                    "could not delete a failed upload's chunks; the sweeper will");
                return;
            }
        }
    }
}

/// An upload's content, chunk by chunk, as a build Job fetches it.
pub struct UploadContent {
    /// Hex SHA-256 of the content.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// The content, one chunk at a time; an error ends it (the upload was deleted meanwhile).
    pub chunks: Pin<Box<dyn Stream<Item = AppResult<Vec<u8>>> + Send>>,
}

impl std::fmt::Debug for UploadContent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadContent")
            .field("sha256", &self.sha256)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl UploadContent {
    /// The whole content (for tests and small uploads).
    pub async fn collect(self) -> AppResult<Vec<u8>> {
        let mut content = Vec::new();
        let mut chunks = self.chunks;
        while let Some(chunk) = chunks.next().await {
            content.extend_from_slice(&chunk?);
        }
        Ok(content)
    }
}

/// What a sweep deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Uploads no resource had named for [`UNNAMED_UPLOAD_LIFETIME`].
    pub uploads: u64,
    /// Chunks that belonged to no stored upload (of those uploads, of failed ones, of deleted
    /// boundaries).
    pub chunks: u64,
}

/// A new upload id: `u-` and 20 hex digits of randomness.
fn new_id() -> String {
    let mut id = [0u8; 10];
    rand::thread_rng().fill_bytes(&mut id);
    format!("u-{}", hex::encode(id))
}

impl App {
    /// Stores code uploaded for a build (an archive or a single file) as it is read from
    /// `content`, and answers its id. `declared` is its length when the client said it
    /// (`Content-Length`): an upload over [`MAX_UPLOAD_BYTES`] or over the boundary's limit
    /// is then refused before anything is read. Refused at once (nothing read) while the
    /// boundary (429) or the process (503) receives as much as it may.
    pub async fn create_upload<S, B, E>(
        &self,
        access: &Access,
        declared: Option<u64>,
        content: S,
    ) -> AppResult<UploadView>
    where
        S: Stream<Item = Result<B, E>> + Send,
        B: AsRef<[u8]> + Send,
        E: std::fmt::Display + Send,
    {
        let boundary = access.boundary();
        self.admit_write(access.caller(), Some(boundary))?;
        let limits = self.uploads.limits();
        match declared {
            Some(0) => return Err(upload_empty()),
            Some(size) if size > MAX_UPLOAD_BYTES as u64 => return Err(upload_too_large()),
            Some(size) => {
                let stored = self
                    .store
                    .upload_usage(boundary)
                    .await
                    .map_err(|e| AppError::from_store(e, "upload"))?;
                let counted = palisade_store::counted_upload_bytes(size);
                if stored.saturating_add(counted) > limits.stored_per_boundary {
                    return Err(upload_over_quota(
                        boundary,
                        stored,
                        limits.stored_per_boundary,
                        size,
                    ));
                }
            }
            None => {}
        }
        let _reservation = self
            .uploads
            .reserve(boundary, declared.unwrap_or(MAX_UPLOAD_BYTES as u64))?;

        let id = new_id();
        let unstored = Unstored {
            store: self.store.clone(),
            boundary: boundary.to_owned(),
            id: id.clone(),
            armed: false,
        };
        match self.receive(unstored, &id, content).await {
            Ok((sha256, size, chunks, unstored)) => {
                let upload = NewUpload {
                    boundary: boundary.to_owned(),
                    id: id.clone(),
                    sha256: sha256.clone(),
                    size,
                    chunks,
                    created_at: palisade_store::now(),
                };
                match self
                    .store
                    .store_upload(upload, limits.stored_per_boundary)
                    .await
                {
                    Ok(()) => {
                        let mut kept = unstored;
                        kept.armed = false;
                        Ok(UploadView { id, sha256, size })
                    }
                    Err(error) => {
                        unstored.discard().await;
                        Err(match error {
                            StoreError::NotFound => boundary_not_found(boundary),
                            StoreError::UploadQuota { stored } => upload_over_quota(
                                boundary,
                                stored,
                                limits.stored_per_boundary,
                                size,
                            ),
                            other => AppError::from_store(other, "upload"),
                        })
                    }
                }
            }
            Err((error, unstored)) => {
                unstored.discard().await;
                Err(error)
            }
        }
    }

    /// Reads `content` and writes it in chunks; answers its hash, size and chunk count.
    #[allow(clippy::type_complexity, reason = "private, one caller")]
    async fn receive<S, B, E>(
        &self,
        mut unstored: Unstored,
        id: &str,
        content: S,
    ) -> Result<(String, u64, i64, Unstored), (AppError, Unstored)>
    where
        S: Stream<Item = Result<B, E>> + Send,
        B: AsRef<[u8]> + Send,
        E: std::fmt::Display + Send,
    {
        let mut content = std::pin::pin!(content);
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES);
        let mut seq: i64 = 0;
        while let Some(piece) = content.next().await {
            let piece = match piece {
                Ok(piece) => piece,
                Err(error) => {
                    tracing::debug!(%error, "an upload's body could not be read");
                    let error = AppError::InvalidRequest(
                        "the upload could not be read whole: the client stopped sending it".into(),
                    );
                    return Err((error, unstored));
                }
            };
            let mut bytes = piece.as_ref();
            size += bytes.len() as u64;
            if size > MAX_UPLOAD_BYTES as u64 {
                return Err((upload_too_large(), unstored));
            }
            while !bytes.is_empty() {
                let take = (CHUNK_BYTES - chunk.len()).min(bytes.len());
                chunk.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if chunk.len() == CHUNK_BYTES {
                    let written =
                        self.write_chunk(&mut unstored, id, &mut seq, &mut hasher, &mut chunk);
                    if let Err(error) = written.await {
                        return Err((error, unstored));
                    }
                }
            }
        }
        if size == 0 {
            return Err((upload_empty(), unstored));
        }
        if !chunk.is_empty() {
            let written = self.write_chunk(&mut unstored, id, &mut seq, &mut hasher, &mut chunk);
            if let Err(error) = written.await {
                return Err((error, unstored));
            }
        }
        Ok((hex::encode(hasher.finalize()), size, seq, unstored))
    }

    /// Writes `chunk` as chunk `seq` of the upload (the upload is then to be discarded if it
    /// fails), adds it to the hash, and empties it for the next; `seq` moves on once written.
    async fn write_chunk(
        &self,
        unstored: &mut Unstored,
        id: &str,
        seq: &mut i64,
        hasher: &mut Sha256,
        chunk: &mut Vec<u8>,
    ) -> AppResult<()> {
        unstored.armed = true;
        hasher.update(&chunk);
        let boundary = &unstored.boundary;
        self.store
            .put_upload_chunk(boundary, id, *seq, chunk)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => boundary_not_found(boundary),
                other => AppError::from_store(other, "upload"),
            })?;
        *seq += 1;
        chunk.clear();
        Ok(())
    }

    /// 400 unless `upload` names an upload of the boundary.
    pub(crate) async fn check_upload(&self, boundary: &str, upload: &str) -> AppResult<()> {
        match self.store.get_upload(boundary, upload).await {
            Ok(_) => Ok(()),
            Err(StoreError::NotFound) => Err(upload_missing(boundary, upload)),
            Err(other) => Err(AppError::from_store(other, "upload")),
        }
    }

    /// The content of an upload, for a build Job holding a fetch token of that upload. Any
    /// other token, an expired one, or one of another upload is 401 (the same answer for
    /// each, so a token reveals nothing about other uploads).
    pub async fn fetch_upload(
        &self,
        boundary: &str,
        id: &str,
        token: Option<&str>,
    ) -> AppResult<UploadContent> {
        let refused =
            || AppError::Unauthorized("a valid fetch token of this upload is required".into());
        let token = token.ok_or_else(refused)?;
        if !crate::workloads::fetch_token_opens(&self.sealing, token, boundary, id) {
            return Err(refused());
        }
        let record = self
            .store
            .get_upload(boundary, id)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => refused(),
                other => AppError::from_store(other, "upload"),
            })?;
        let state = (self.store.clone(), record.boundary, record.id, 0i64, 0u64);
        let size = record.size;
        let chunks = futures::stream::unfold(Some(state), move |state| async move {
            let (store, boundary, id, seq, sent) = state?;
            match store.upload_chunk(&boundary, &id, seq).await {
                Ok(Some(chunk)) => {
                    let sent = sent + chunk.len() as u64;
                    Some((Ok(chunk), Some((store, boundary, id, seq + 1, sent))))
                }
                Ok(None) if sent == size => None,
                Ok(None) => Some((
                    Err(AppError::Internal(format!(
                        "upload {id} ended after {sent} of its {size} bytes"
                    ))),
                    None,
                )),
                Err(error) => Some((Err(AppError::from_store(error, "upload")), None)),
            }
        });
        Ok(UploadContent {
            sha256: record.sha256,
            size,
            chunks: Box::pin(chunks),
        })
    }

    /// Deletes the uploads that no resource has named for [`UNNAMED_UPLOAD_LIFETIME`] before
    /// `now` (made or last named before), then the chunks that belong to no stored upload and
    /// were written [`ORPHAN_CHUNK_AGE`] before `now`, in small batches, each a transaction
    /// of its own. `palisade serve` calls it every [`SWEEP_EVERY`] with the clock's time;
    /// tests call it with a time of their choosing.
    pub async fn sweep_uploads(&self, now: SystemTime) -> AppResult<Swept> {
        let before = |age: Duration| {
            palisade_store::timestamp(now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH))
        };
        let (named_before, written_before) =
            (before(UNNAMED_UPLOAD_LIFETIME), before(ORPHAN_CHUNK_AGE));
        let uploads = in_batches(UPLOADS_PER_SWEEP_BATCH, |batch| {
            self.store.delete_unnamed_uploads(&named_before, batch)
        })
        .await?;
        let chunks = in_batches(CHUNKS_PER_DELETE, |batch| {
            self.store
                .delete_orphan_upload_chunks(&written_before, batch)
        })
        .await?;
        Ok(Swept { uploads, chunks })
    }
}

/// Runs `delete` of at most `batch` rows until one deletes fewer; how many it deleted in all.
async fn in_batches<F>(batch: usize, mut delete: impl FnMut(usize) -> F) -> AppResult<u64>
where
    F: std::future::Future<Output = palisade_store::Result<u64>>,
{
    let mut deleted = 0;
    loop {
        let n = delete(batch)
            .await
            .map_err(|e| AppError::from_store(e, "upload"))?;
        deleted += n;
        if n < batch as u64 {
            return Ok(deleted);
        }
    }
}

/// The 400 of a resource naming an upload that its boundary does not store.
pub fn upload_missing(boundary: &str, upload: &str) -> AppError {
    AppError::invalid(
        "/upload",
        format!("no upload '{upload}' in boundary '{boundary}'"),
    )
}

/// Sweeps every `every` (the first time at once), until the task is dropped. A failed sweep
/// is logged and tried again next time. With several replicas each sweeps; a delete is
/// decided in its own transaction, so two never delete one upload twice.
pub async fn sweep_every(app: App, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match app.sweep_uploads(SystemTime::now()).await {
            Ok(swept) if swept == Swept::default() => {}
            Ok(swept) => tracing::info!(
                uploads = swept.uploads,
                chunks = swept.chunks,
                "uploads no resource names deleted"
            ),
            Err(error) => tracing::warn!(%error, "the upload sweep failed; it runs again later"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn limits(per_boundary: u64, total: u64) -> Arc<InFlight> {
        InFlight::new(UploadLimits {
            stored_per_boundary: 0,
            in_flight: total,
            in_flight_per_boundary: per_boundary,
        })
    }

    #[test]
    fn uploads_under_way_are_bounded_per_boundary_and_in_all() {
        let in_flight = limits(10, 25);
        let a1 = in_flight.reserve("a", 6).unwrap();
        let a2 = in_flight.reserve("a", 4).unwrap();
        let refused = in_flight.reserve("a", 1).unwrap_err();
        assert_eq!(refused.code().http_status(), 429);
        assert_eq!(
            refused.to_string(),
            "boundary 'a' has 10 bytes of uploads under way, and at most 10 may be at once; \
             this upload would add 1 (its Content-Length, or 8 MiB without one); retry after 1 s"
        );
        let b1 = in_flight.reserve("b", 10).unwrap();
        let c1 = in_flight.reserve("c", 5).unwrap();
        let busy = in_flight.reserve("d", 1).unwrap_err();
        assert_eq!(busy.code().http_status(), 503);
        assert_eq!(
            busy.body().error.message,
            "palisade is receiving 25 bytes of uploads, and at most 25 at once; this upload \
             would add 1; retry after 1 s"
        );
        // Given back when an upload ends, however it ends.
        drop((a1, b1));
        let a3 = in_flight.reserve("a", 6).unwrap();
        drop((a2, a3, c1));
        assert_eq!(in_flight.taken().total, 0);
        assert!(in_flight.taken().by_boundary.is_empty());
        // A bound smaller than one upload lets one through at a time.
        let big = in_flight.reserve("a", 100).unwrap();
        assert!(in_flight.reserve("b", 1).is_err());
        drop(big);
    }

    #[test]
    fn the_quota_message_names_the_limit_and_the_use() {
        assert_eq!(
            upload_over_quota("shop", 1_073_741_000, 1_073_741_824, 8_388_608).to_string(),
            "boundary 'shop' stores 1073741000 of 1073741824 bytes of uploads \
             (serve --max-upload-bytes); this upload of 8388608 bytes would exceed it"
        );
        assert_eq!(
            upload_over_quota("shop", 1_073_740_000, 1_073_741_824, 100).to_string(),
            "boundary 'shop' stores 1073740000 of 1073741824 bytes of uploads \
             (serve --max-upload-bytes); this upload of 100 bytes, counted as 4096, would \
             exceed it"
        );
    }
}
