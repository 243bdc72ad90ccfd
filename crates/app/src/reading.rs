//! Memory for reading untrusted text off the async workers (issue 42, item 8).
//!
//! Reading an apply, a kubeconfig or the portal editor's YAML holds at most what
//! `palisade_api_types::yaml::peak_bound` says for its text (and what the use case keeps of
//! it); each reading reserves that much before it starts, from one of two pools, and gives it
//! back when it ends. So however many requests arrive, the readings under way hold at most
//! [`SMALL_POOL`] + [`LARGE_POOL`] at once: 192 MiB, well below the chart's memory limit of
//! 512 MiB. Before, up to one reading per core ran, each up to 400 MB.
//!
//! - **Small readings** (a reservation of at most [`SMALL_RESERVATION`]: texts up to about
//!   40 KiB, every ordinary apply) take their memory from a pool of their own and no core
//!   turn: they take milliseconds, and never wait behind a large one.
//! - **Large readings** take a core turn (one per core) and then their memory from the other
//!   pool, so that they are few at once both in memory and in CPU. A reservation is refused
//!   nothing: the pools are larger than the largest reservation, so a reading waits its turn
//!   (within its request's 30 s bound) rather than failing.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{AppError, AppResult};

/// What the small readings may hold at once.
pub const SMALL_POOL: usize = 64 << 20;

/// What the large readings may hold at once: four of the largest reservation (a 1 MiB apply).
pub const LARGE_POOL: usize = 128 << 20;

/// A reading that reserves at most this much is small: four of the largest fit in
/// [`SMALL_POOL`].
pub const SMALL_RESERVATION: usize = SMALL_POOL / 4;

/// The pools are counted in KiB (a semaphore's permits are `u32`).
const UNIT: usize = 1 << 10;

/// The two pools, and the core turns of large readings.
#[derive(Debug)]
pub(crate) struct Pools {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    turns: Arc<Semaphore>,
}

/// What a reading holds while it runs, given back when it is dropped.
#[derive(Debug)]
pub(crate) struct Admitted {
    _memory: OwnedSemaphorePermit,
    _turn: Option<OwnedSemaphorePermit>,
}

impl Pools {
    pub(crate) fn new(cores: usize) -> Self {
        Pools {
            small: Arc::new(Semaphore::new(SMALL_POOL / UNIT)),
            large: Arc::new(Semaphore::new(LARGE_POOL / UNIT)),
            turns: Arc::new(Semaphore::new(cores.max(1))),
        }
    }

    /// Waits until a reading that may hold `memory` bytes can start.
    pub(crate) async fn admit(&self, memory: usize) -> AppResult<Admitted> {
        let closed = |_| AppError::Internal("the work queue is closed".into());
        let units = |pool: usize| {
            let units = memory.div_ceil(UNIT).clamp(1, pool / UNIT);
            u32::try_from(units).unwrap_or(u32::MAX)
        };
        if memory <= SMALL_RESERVATION {
            let memory = self
                .small
                .clone()
                .acquire_many_owned(units(SMALL_POOL))
                .await
                .map_err(closed)?;
            return Ok(Admitted {
                _memory: memory,
                _turn: None,
            });
        }
        let turn = self.turns.clone().acquire_owned().await.map_err(closed)?;
        let memory = self
            .large
            .clone()
            .acquire_many_owned(units(LARGE_POOL))
            .await
            .map_err(closed)?;
        Ok(Admitted {
            _memory: memory,
            _turn: Some(turn),
        })
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    const MIB: usize = 1 << 20;

    /// Whether `admit` is granted without waiting.
    fn at_once(pools: &Pools, memory: usize) -> Option<Admitted> {
        pools.admit(memory).now_or_never().and_then(Result::ok)
    }

    #[test]
    fn large_readings_wait_until_their_memory_is_free() {
        let pools = Pools::new(64);
        let held: Vec<Admitted> = (0..4)
            .map(|_| at_once(&pools, 32 * MIB).expect("the pool holds four"))
            .collect();
        let mut fifth = Box::pin(pools.admit(32 * MIB));
        assert!((&mut fifth).now_or_never().is_none());
        drop(held);
        assert!(at_once(&pools, 32 * MIB).is_some());
    }

    #[test]
    fn a_small_reading_never_waits_behind_large_ones() {
        let pools = Pools::new(64);
        let _held: Vec<Admitted> = (0..4)
            .map(|_| at_once(&pools, 32 * MIB).expect("the pool holds four"))
            .collect();
        let mut waiting = Box::pin(pools.admit(32 * MIB));
        assert!((&mut waiting).now_or_never().is_none());
        let small: Vec<Admitted> = (0..64)
            .map(|_| at_once(&pools, MIB).expect("small readings have a pool of their own"))
            .collect();
        // Their own pool is bounded too.
        assert!(at_once(&pools, MIB).is_none());
        drop(small);
        assert!(at_once(&pools, SMALL_RESERVATION).is_some());
    }

    #[test]
    fn large_readings_take_a_core_each() {
        let pools = Pools::new(2);
        let _one = at_once(&pools, 20 * MIB).expect("a core is free");
        let _two = at_once(&pools, 20 * MIB).expect("a core is free");
        assert!(
            at_once(&pools, 20 * MIB).is_none(),
            "memory is free, cores are not"
        );
        assert!(
            at_once(&pools, MIB).is_some(),
            "small readings take no core"
        );
    }

    #[test]
    fn a_reservation_beyond_the_pool_waits_for_the_whole_pool_not_for_ever() {
        let pools = Pools::new(2);
        let whole = at_once(&pools, 10 * LARGE_POOL).expect("the pool was empty");
        let mut next = Box::pin(pools.admit(20 * MIB));
        assert!((&mut next).now_or_never().is_none());
        drop(whole);
        assert!(at_once(&pools, 20 * MIB).is_some());
    }
}
