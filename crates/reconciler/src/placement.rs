//! Which replica reconciles which cluster: a pure function of the members and the clusters,
//! so every replica that sees the same two lists computes the same answer without talking to
//! the others. The cluster locks (see `palisade_store::Lease`) make it safe when two replicas
//! briefly see different lists: a cluster is only ever reconciled by the one holding its lock.
//!
//! Rendezvous hashing with bounded load: each cluster goes to the member ranked highest for
//! it (a hash of the member and the cluster) among those with room left, the clusters taken
//! in name order; each member has room for `clusters / members` clusters, some for one more.
//! Counts differ by at most one between members, and a member joining or leaving moves about `clusters / members` clusters,
//! not all of them.

use std::collections::{BTreeMap, BTreeSet};

/// The member each cluster goes to. Empty when there are no members.
pub fn assign<'m>(members: &'m [String], clusters: &BTreeSet<String>) -> BTreeMap<String, &'m str> {
    let mut owners = BTreeMap::new();
    if members.is_empty() {
        return owners;
    }
    // Each member gets `floor` clusters, and `extra` of them one more: counts differ by at
    // most one, and the capacities add up to the number of clusters, so the walk below
    // always finds a member with room.
    let floor = clusters.len() / members.len();
    let mut extra = clusters.len() % members.len();
    let mut load = vec![0usize; members.len()];
    for cluster in clusters {
        let mut ranked: Vec<(u64, usize)> = members
            .iter()
            .enumerate()
            .map(|(i, member)| (score(member, cluster), i))
            .collect();
        // Highest score first; ties (never in practice) by position, so the order is total.
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let room = |i: usize| load[i] < floor || (load[i] == floor && extra > 0);
        if let Some(&(_, chosen)) = ranked.iter().find(|(_, i)| room(*i)) {
            if load[chosen] == floor {
                extra -= 1;
            }
            load[chosen] += 1;
            owners.insert(cluster.clone(), members[chosen].as_str());
        }
    }
    owners
}

/// A stable 64-bit score of (member, cluster): FNV-1a over both, mixed by SplitMix64's
/// finalizer. Stable across builds and platforms (replicas of different builds agree).
fn score(member: &str, cluster: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in member.bytes().chain([0xff]).chain(cluster.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn counts<'m>(owners: &BTreeMap<String, &'m str>) -> BTreeMap<&'m str, usize> {
        let mut counts = BTreeMap::new();
        for owner in owners.values() {
            *counts.entry(*owner).or_default() += 1;
        }
        counts
    }

    #[test]
    fn table() {
        let clusters: BTreeSet<String> = names("c", 3).into_iter().collect();
        // No member: nobody reconciles.
        assert!(assign(&[], &clusters).is_empty());
        // One member: every cluster.
        let one = vec!["a#1".to_owned()];
        assert_eq!(assign(&one, &clusters).len(), 3);
        // No cluster: nothing to give out.
        assert!(assign(&one, &BTreeSet::new()).is_empty());
        // Three members, three clusters: one each.
        let three = names("r", 3);
        let owners = assign(&three, &clusters);
        assert_eq!(
            counts(&owners).values().copied().collect::<Vec<_>>(),
            [1, 1, 1]
        );
        // More members than clusters: some members hold nothing.
        let five = names("r", 5);
        assert_eq!(counts(&assign(&five, &clusters)).len(), 3);
    }

    #[test]
    fn the_order_of_the_members_does_not_matter() {
        let clusters: BTreeSet<String> = names("cluster-", 20).into_iter().collect();
        let members = names("palisade-", 3);
        let mut reversed = members.clone();
        reversed.reverse();
        assert_eq!(assign(&members, &clusters), assign(&reversed, &clusters));
    }

    proptest! {
        /// Every cluster has exactly one owner, a member; counts differ by at most one.
        #[test]
        fn even_and_complete(members in 1usize..8, clusters in 0usize..200) {
            let members = names("replica-", members);
            let clusters: BTreeSet<String> = names("c", clusters).into_iter().collect();
            let owners = assign(&members, &clusters);
            prop_assert_eq!(owners.len(), clusters.len());
            prop_assert!(owners.values().all(|o| members.iter().any(|m| m == o)));
            let counts = counts(&owners);
            let loads: Vec<usize> = members
                .iter()
                .map(|m| counts.get(m.as_str()).copied().unwrap_or(0))
                .collect();
            let (min, max) = (loads.iter().min(), loads.iter().max());
            prop_assert!(max.zip(min).is_some_and(|(max, min)| max - min <= 1), "{:?}", loads);
        }

        /// A member joining moves at most about a fair share plus the rebalancing it needs,
        /// not everything: at most 2 × ceil(clusters / members) clusters change owner.
        #[test]
        fn a_join_moves_few(members in 1usize..6, clusters in 1usize..200) {
            let before_members = names("replica-", members);
            let mut after_members = before_members.clone();
            after_members.push("replica-new".to_owned());
            let clusters: BTreeSet<String> = names("c", clusters).into_iter().collect();
            let before = assign(&before_members, &clusters);
            let after = assign(&after_members, &clusters);
            let moved = clusters.iter().filter(|c| before.get(*c) != after.get(*c)).count();
            let fair = clusters.len().div_ceil(after_members.len());
            prop_assert!(moved <= 2 * fair + 1, "moved {} of {} (fair share {})", moved, clusters.len(), fair);
        }
    }
}
