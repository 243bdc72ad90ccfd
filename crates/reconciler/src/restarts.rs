//! Noticing that a cluster's API server restarted, which makes it compile every admission
//! policy again (SPEC 3.4 reports it). Two signals, read by the cluster client:
//!
//! - Each kube-apiserver keeps an identity Lease in `kube-system`; from 1.31 or so it makes the
//!   Lease's `holderIdentity` anew (a new UUID) each time it starts. Listing those Leases costs
//!   about 1.7 KB a read for one API server, so it is read at every look (at most once a
//!   minute), and it sees every instance behind a load balancer.
//! - The start time on the API server's `/metrics` (`process_start_time_seconds`, about 2 MB a
//!   read) is read only when there is a reason: a watch of the cluster or a pass failed since
//!   the last look (an API server that stops breaks both), or the Leases show a new identity.
//!   On 1.30 a restarted API server keeps its Lease's holder, so there this is what counts it.
//!
//! A restart seen by both counts once (the larger of the two counts of one look). Pure: the
//! reading is the cluster client's, the memory the controller's.

use std::collections::BTreeSet;

/// Where the API servers keep their identity Leases.
pub const IDENTITY_NAMESPACE: &str = "kube-system";
/// The label of the API servers' identity Leases.
pub const IDENTITY_SELECTOR: &str = "apiserver.kubernetes.io/identity=kube-apiserver";

/// What palisade has seen of one cluster's API servers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApiServers {
    /// The identities at the last look that found any; `None` before the first.
    identities: Option<BTreeSet<String>>,
    /// The start times read (milliseconds since the epoch).
    starts: BTreeSet<u64>,
    /// Wall-clock time of the first look (seconds since the epoch); `None` before it.
    first_look: Option<f64>,
}

impl ApiServers {
    /// Whether this look should read the start time too: after a failure (`suspect`), or when
    /// `identities` holds one not seen before (so that a restart both signals show is
    /// recorded in both at once, and counted once). Never on the first look, which only
    /// records what is there.
    pub fn wants_start_time(&self, suspect: bool, identities: &BTreeSet<String>) -> bool {
        match &self.identities {
            None if self.first_look.is_none() => false,
            _ => suspect || self.new_identities(identities) > 0,
        }
    }

    fn new_identities(&self, now: &BTreeSet<String>) -> usize {
        match &self.identities {
            Some(before) => now.difference(before).count(),
            None => 0,
        }
    }

    /// Takes one look at `now` (seconds since the epoch): the identities read (empty: none
    /// found, which tells nothing) and the start time, when it was read. Returns how many API
    /// servers started since the last look: new identities, or a start time not seen before
    /// and later than the first look, whichever is more. Those that started before the first
    /// look are never counted; one that went away counts nothing.
    pub fn look(&mut self, identities: BTreeSet<String>, started: Option<f64>, now: f64) -> usize {
        let first_look = *self.first_look.get_or_insert(now);
        let by_identity = self.new_identities(&identities);
        let by_start = started.map_or(0, |started| {
            // Milliseconds: the text's own precision is finer than a restart's spacing.
            let key = (started * 1000.0).round() as u64;
            usize::from(self.starts.insert(key) && started > first_look)
        });
        if !identities.is_empty() {
            self.identities = Some(identities);
        }
        by_identity.max(by_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    const A1: &str = "apiserver-a_11111111";
    const A2: &str = "apiserver-a_22222222";
    const B1: &str = "apiserver-b_33333333";

    /// After a first look at `ids` (start time `first_start`, read at 100 s).
    fn seen(ids: &[&str], first_start: Option<f64>) -> ApiServers {
        let mut servers = ApiServers::default();
        assert_eq!(servers.look(set(ids), first_start, 100.0), 0);
        servers
    }

    #[test]
    fn the_first_look_counts_nothing() {
        for (ids, started) in [
            (&[A1][..], None),
            (&[A1, B1][..], Some(50.0)),
            (&[][..], Some(99.0)),
        ] {
            let mut servers = ApiServers::default();
            assert!(!servers.wants_start_time(true, &set(ids)));
            assert_eq!(servers.look(set(ids), started, 100.0), 0, "{ids:?}");
        }
    }

    #[test]
    fn starts_are_counted_once_whichever_signal_shows_them() {
        // (identities now, start time read, started since the last look)
        for (now, started, count) in [
            // Nothing new.
            (&[A1][..], None, 0),
            (&[A1][..], Some(90.0), 0),
            // A restarted on 1.37: its Lease has a new holder; the start time agrees.
            (&[A2][..], None, 1),
            (&[A2][..], Some(150.0), 1),
            // A restarted on 1.30: the holder stays; the start time tells.
            (&[A1][..], Some(150.0), 1),
            // B added.
            (&[A1, B1][..], None, 1),
            // A restarted and B added in one interval.
            (&[A2, B1][..], Some(150.0), 2),
            // B went away: nothing started.
            (&[][..], None, 0),
            // Nothing read but the start time.
            (&[][..], Some(150.0), 1),
            // A start time from before the first look (another instance behind a balancer).
            (&[A1][..], Some(60.0), 0),
        ] {
            let mut servers = seen(&[A1], Some(90.0));
            assert_eq!(
                servers.look(set(now), started, 200.0),
                count,
                "{now:?} {started:?}"
            );
        }
    }

    #[test]
    fn the_start_time_is_read_after_a_failure_or_a_new_identity() {
        let servers = seen(&[A1], Some(90.0));
        assert!(!servers.wants_start_time(false, &set(&[A1])));
        assert!(servers.wants_start_time(true, &set(&[A1])));
        assert!(servers.wants_start_time(false, &set(&[A2])));
        assert!(servers.wants_start_time(false, &set(&[A1, B1])));
        assert!(!servers.wants_start_time(false, &set(&[])));
    }

    #[test]
    fn a_restart_seen_by_both_signals_in_turn_counts_once() {
        let mut servers = seen(&[A1], Some(90.0));
        // The Leases show it first; the start time is read with them.
        assert!(servers.wants_start_time(false, &set(&[A2])));
        assert_eq!(servers.look(set(&[A2]), Some(150.0), 200.0), 1);
        // A failed pass later reads the same start time again: nothing new.
        assert_eq!(servers.look(set(&[A2]), Some(150.0), 260.0), 0);
        // An empty read keeps what was seen: the next restart is still new.
        assert_eq!(servers.look(set(&[]), None, 300.0), 0);
        assert_eq!(servers.look(set(&[A1]), None, 360.0), 1);
    }
}
