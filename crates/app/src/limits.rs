//! Write rate limits: a token bucket per API token and one per boundary, taken by every
//! use case that writes (policies, resources, uploads, namespaces, clusters, tokens,
//! boundaries). Reads take nothing, and a write's own work is not slowed: a bucket is a few
//! arithmetic operations under a lock, with no store access. Past a limit, a write is refused
//! with [`AppError::RateLimited`] (429 `rate_limited`, `Retry-After`) before anything is read
//! or written.
//!
//! Buckets live in memory, per process: with several replicas each keeps its own, so a
//! client spread over `n` replicas may write up to `n` times the rate (the chart's replicas
//! share a Service; the limit is about runaway loops, not about exact fairness).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// How many buckets are kept before idle (full) ones are dropped.
const MAX_BUCKETS: usize = 10_000;

/// A rate: `per_second` writes on average, up to `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    per_second: f64,
    burst: f64,
}

impl Rate {
    /// `None` when `per_second` is 0 (no limit). A burst below one write is one write.
    pub fn new(per_second: f64, burst: u32) -> Option<Rate> {
        (per_second > 0.0 && per_second.is_finite()).then(|| Rate {
            per_second,
            burst: f64::from(burst.max(1)),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Token(String),
    Boundary(String),
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Writes available at `at`.
    available: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Bucket {
            available: rate.burst,
            at: now,
        }
    }

    fn refilled(self, rate: Rate, now: Instant) -> Self {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Bucket {
            available: (self.available + elapsed * rate.per_second).min(rate.burst),
            at: now,
        }
    }

    /// How long until `cost` writes are available (zero when they are).
    fn wait(self, rate: Rate, cost: f64) -> Duration {
        if self.available >= cost {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((cost - self.available) / rate.per_second)
        }
    }
}

/// The limits of one process (see the module documentation).
#[derive(Debug)]
pub struct WriteLimits {
    per_token: Option<Rate>,
    per_boundary: Option<Rate>,
    buckets: Mutex<HashMap<Key, Bucket>>,
}

impl Default for WriteLimits {
    fn default() -> Self {
        WriteLimits::new(None, None)
    }
}

/// A write refused by a limit: which, and how long until a write is free.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub message: String,
    pub retry_after: Duration,
}

impl WriteLimits {
    pub fn new(per_token: Option<Rate>, per_boundary: Option<Rate>) -> Self {
        WriteLimits {
            per_token,
            per_boundary,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one write for `token` (and for `boundary`, when the write is in one) at `now`,
    /// from both buckets or from neither.
    pub fn take_at(
        &self,
        token: &str,
        boundary: Option<&str>,
        now: Instant,
    ) -> Result<(), Refusal> {
        match boundary {
            Some(boundary) => self.take_many_at(token, &[(boundary, 1)], now),
            None => self.take_many_at(token, &[], now),
        }
    }

    /// Takes writes for `token` and for each `(boundary, writes)` at `now`, all or nothing:
    /// the token's bucket gives the sum (at least one), each boundary's its count. A count
    /// above a bucket's burst takes the whole burst (a large apply waits for a full bucket
    /// instead of never passing).
    pub fn take_many_at(
        &self,
        token: &str,
        boundaries: &[(&str, u32)],
        now: Instant,
    ) -> Result<(), Refusal> {
        if self.per_token.is_none() && self.per_boundary.is_none() {
            return Ok(());
        }
        let total: u32 = boundaries.iter().map(|(_, n)| *n).sum::<u32>().max(1);
        let mut wanted: Vec<(Key, Rate, f64)> = Vec::with_capacity(1 + boundaries.len());
        if let Some(rate) = self.per_token {
            wanted.push((
                Key::Token(token.to_owned()),
                rate,
                f64::from(total).min(rate.burst),
            ));
        }
        if let Some(rate) = self.per_boundary {
            for (boundary, writes) in boundaries {
                wanted.push((
                    Key::Boundary((*boundary).to_owned()),
                    rate,
                    f64::from(*writes).min(rate.burst),
                ));
            }
        }
        let Ok(mut buckets) = self.buckets.lock() else {
            // A panic elsewhere poisoned the map: limit nothing rather than refuse everything.
            return Ok(());
        };
        if buckets.len() > MAX_BUCKETS {
            let (token_rate, boundary_rate) = (self.per_token, self.per_boundary);
            buckets.retain(|key, bucket| {
                let rate = match key {
                    Key::Token(_) => token_rate,
                    Key::Boundary(_) => boundary_rate,
                };
                rate.is_some_and(|rate| bucket.refilled(rate, now).available < rate.burst)
            });
        }
        let current: Vec<Bucket> = wanted
            .iter()
            .map(|(key, rate, _)| {
                buckets
                    .get(key)
                    .map_or_else(|| Bucket::full(*rate, now), |b| b.refilled(*rate, now))
            })
            .collect();
        let refused = wanted
            .iter()
            .zip(&current)
            .filter(|((_, rate, cost), bucket)| bucket.wait(*rate, *cost) > Duration::ZERO)
            .max_by(|((_, a, m), x), ((_, b, n), y)| x.wait(*a, *m).cmp(&y.wait(*b, *n)));
        if let Some(((key, rate, cost), bucket)) = refused {
            let retry_after = bucket.wait(*rate, *cost);
            let whose = match key {
                Key::Token(id) => format!("token {id}"),
                Key::Boundary(name) => format!("boundary '{name}'"),
            };
            return Err(Refusal {
                message: format!(
                    "too many writes: {whose} may make {} per second (bursts of {}); retry in {:.1} s",
                    rate.per_second,
                    rate.burst,
                    // Rounded up to the tenth: never "retry in 0.0 s".
                    (retry_after.as_secs_f64() * 10.0).ceil() / 10.0
                ),
                retry_after,
            });
        }
        for ((key, _, cost), mut bucket) in wanted.into_iter().zip(current) {
            bucket.available -= cost;
            buckets.insert(key, bucket);
        }
        Ok(())
    }
}

fn refused(refusal: Refusal) -> AppError {
    AppError::RateLimited {
        message: refusal.message,
        retry_after: refusal.retry_after,
    }
}

impl crate::App {
    /// Takes one write of `caller` (in `boundary`) from the write limits; 429 past them.
    pub(crate) fn admit_write(&self, caller: &Caller, boundary: Option<&str>) -> AppResult<()> {
        self.write_limits
            .take_at(&caller.token_id, boundary, Instant::now())
            .map_err(refused)
    }

    /// Takes the writes of an apply (one per document, in its boundary); 429 past them.
    pub(crate) fn admit_writes(
        &self,
        caller: &Caller,
        boundaries: &[(&str, u32)],
    ) -> AppResult<()> {
        self.write_limits
            .take_many_at(&caller.token_id, boundaries, Instant::now())
            .map_err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let limits = WriteLimits::new(Rate::new(2.0, 3), None);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limits.take_at("t1", Some("b"), start), Ok(()));
        }
        let refused = limits.take_at("t1", Some("b"), start).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_millis(500));
        assert_eq!(
            refused.message,
            "too many writes: token t1 may make 2 per second (bursts of 3); retry in 0.5 s"
        );
        // Another token has a bucket of its own.
        assert_eq!(limits.take_at("t2", Some("b"), start), Ok(()));
        // Half a second later, one write is free again.
        let later = start + Duration::from_millis(500);
        assert_eq!(limits.take_at("t1", Some("b"), later), Ok(()));
        assert!(limits.take_at("t1", Some("b"), later).is_err());
    }

    #[test]
    fn the_boundary_bucket_is_shared_and_a_refusal_takes_nothing() {
        let limits = WriteLimits::new(Rate::new(10.0, 2), Rate::new(1.0, 2));
        let now = Instant::now();
        assert_eq!(limits.take_at("t1", Some("shop"), now), Ok(()));
        assert_eq!(limits.take_at("t2", Some("shop"), now), Ok(()));
        let refused = limits.take_at("t3", Some("shop"), now).unwrap_err();
        assert!(
            refused
                .message
                .starts_with("too many writes: boundary 'shop' may make 1 per second"),
            "{}",
            refused.message
        );
        // t3's own bucket was not taken from: it still writes twice elsewhere.
        assert_eq!(limits.take_at("t3", Some("other"), now), Ok(()));
        assert_eq!(limits.take_at("t3", None, now), Ok(()));
        assert!(limits.take_at("t3", None, now).is_err());
    }

    #[test]
    fn no_rate_limits_nothing() {
        let limits = WriteLimits::default();
        let now = Instant::now();
        for _ in 0..10_000 {
            assert_eq!(limits.take_at("t", Some("b"), now), Ok(()));
        }
        assert_eq!(Rate::new(0.0, 10), None);
    }

    #[test]
    fn idle_buckets_are_dropped_when_there_are_many() {
        let limits = WriteLimits::new(Rate::new(100.0, 1), None);
        let start = Instant::now();
        for i in 0..=MAX_BUCKETS {
            limits.take_at(&format!("t{i}"), None, start).unwrap();
        }
        let later = start + Duration::from_secs(1);
        limits.take_at("new", None, later).unwrap();
        assert_eq!(limits.buckets.lock().unwrap().len(), 1);
    }

    #[test]
    fn an_apply_takes_one_write_per_document() {
        let limits = WriteLimits::new(Rate::new(1.0, 10), Rate::new(1.0, 4));
        let now = Instant::now();
        assert_eq!(limits.take_many_at("t", &[("a", 3), ("b", 2)], now), Ok(()));
        // 5 of the token's 10 are gone, 3 of a's 4.
        let refused = limits.take_many_at("t", &[("a", 2)], now).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(1));
        assert_eq!(limits.take_many_at("t", &[("a", 1), ("c", 4)], now), Ok(()));
        // The token's bucket is empty now; more than a burst waits for a whole bucket (the
        // token's 10 s, longer than d's), then passes.
        let refused = limits.take_many_at("t", &[("d", 40)], now).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(10));
        assert_eq!(
            limits.take_many_at("t", &[("d", 40)], now + Duration::from_secs(10)),
            Ok(())
        );
    }
}
