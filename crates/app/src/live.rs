//! Waiting for a workload's status to move, for pages that follow it: a read that answers as
//! soon as the stored status differs from the one the caller saw, or after a short wait.
//! Statuses this process records wake the waiters at once; statuses another replica records
//! are seen by a read every [`RECHECK`]. The number of waiters is bounded: beyond it, a read
//! answers at once, as a plain read would.

use std::time::Duration;

use palisade_api_types::view::{ResourceView, WorkloadStatus};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

use crate::caller::Access;
use crate::error::AppResult;
use crate::App;

/// The longest a read waits for a change.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// How often a waiting read looks at the store again (a status another replica wrote).
pub const RECHECK: Duration = Duration::from_millis(250);
/// How many reads may wait at once, in this process.
pub const MAX_WAITERS: usize = 512;

/// What a waiting read waits on.
#[derive(Debug)]
pub struct WorkloadChanges {
    /// Moves whenever this process records a workload status that changed.
    moved: watch::Sender<u64>,
    waiters: Semaphore,
}

impl Default for WorkloadChanges {
    fn default() -> Self {
        WorkloadChanges {
            moved: watch::Sender::new(0),
            waiters: Semaphore::new(MAX_WAITERS),
        }
    }
}

impl WorkloadChanges {
    /// A status was recorded: wake every waiting read.
    pub(crate) fn moved(&self) {
        self.moved.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl App {
    /// The resource once its status (as its text, `""` for none) differs from `seen`, or after
    /// `wait` (at most [`MAX_WAIT`]), whichever comes first; at once when `seen` already
    /// differs or too many reads wait.
    pub async fn resource_after_change(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
        seen: &str,
        wait: Duration,
    ) -> AppResult<ResourceView> {
        let deadline = Instant::now() + wait.min(MAX_WAIT);
        let mut moved = self.live.moved.subscribe();
        let turn = self.live.waiters.try_acquire();
        loop {
            let view = self.get_resource(access, resource_type, name).await?;
            let now = Instant::now();
            if status_text(view.status.as_ref()) != seen || turn.is_err() || now >= deadline {
                return Ok(view);
            }
            let pause = (deadline - now).min(RECHECK);
            // The sender lives as long as the application; were it gone, wait out the pause.
            if let Ok(Err(_)) = tokio::time::timeout(pause, moved.changed()).await {
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// A status as a page names the one it shows, to be compared here (`""`: none recorded).
pub fn status_text(status: Option<&WorkloadStatus>) -> String {
    status.map(ToString::to_string).unwrap_or_default()
}
