//! Fair turns at what this process's writes share: SQLite's one writer (one turn at a time)
//! and PostgreSQL's connections for writes (a few at a time).
//!
//! Each write waits in the queue of its class: the boundary it writes to, or `None` for the
//! installation's own writes (tokens, clusters, sessions, settings, the sweeper's). Classes
//! take turns round-robin and each class's writes come first come first served, so a write
//! waits for the turns under way and then for at most one turn of each class that was waiting
//! before its own, however many writes those classes have queued: one boundary's upload loops
//! cost another boundary's create one chunk, not a queue of them.
//!
//! A turn is one write, with one exception: grouped writes (SQLite's resource writes, which
//! share a commit: `group_commit`) of the class whose turn it is that are next in its queue
//! continue its turn, up to `max_run` of them. So each waiting class gets one commit per
//! round, and a boundary's creates queued together still share theirs.
//!
//! With room for several turns at once (`capacity`), a class holds at most `per_class` of
//! them, so that writes of one boundary that wait for that boundary's lock (a policy change
//! under way, another replica's transaction) cannot hold every connection.
//!
//! A write dropped while it waits (its request gone, its deadline passed) leaves the queue; one
//! dropped just as its turn came passes the turn on.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// A write's class: the boundary it writes to, `None` for the installation's own writes.
pub(crate) type Class = Option<String>;

/// The class of a write to `boundary` (`None`: the installation's own).
pub(crate) fn class_of(boundary: Option<&str>) -> Class {
    boundary.map(str::to_owned)
}

/// The turns, and the writes waiting for one.
#[derive(Debug)]
pub(crate) struct FairTurns<K> {
    capacity: usize,
    per_class: usize,
    max_run: usize,
    state: Mutex<State<K>>,
}

#[derive(Debug)]
struct State<K> {
    /// Turns under way, per class (classes holding none are absent).
    held: HashMap<K, usize>,
    held_total: usize,
    /// The classes with writes waiting, in the order their next turns come.
    ready: VecDeque<K>,
    /// Each class's waiting writes, first come first.
    waiting: HashMap<K, VecDeque<Waiter>>,
    next_id: u64,
    /// Turns granted so far, in order (tests only).
    #[cfg(test)]
    granted: Vec<K>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    grouped: bool,
    /// Receives the length of the run its turn is part of.
    grant: oneshot::Sender<usize>,
}

/// A turn: held until dropped.
#[derive(Debug)]
pub(crate) struct Ticket<'a, K: Hash + Eq + Clone> {
    turns: &'a FairTurns<K>,
    class: K,
    grouped: bool,
    /// How many writes of the class this turn has had so far, this one included.
    run: usize,
}

impl<K: Hash + Eq + Clone> FairTurns<K> {
    /// Room for `capacity` turns at once, at most `per_class` of them held by one class, and
    /// at most `max_run` grouped writes in one turn (each at least 1).
    pub(crate) fn new(capacity: usize, per_class: usize, max_run: usize) -> Self {
        FairTurns {
            capacity: capacity.max(1),
            per_class: per_class.max(1),
            max_run: max_run.max(1),
            state: Mutex::new(State {
                held: HashMap::new(),
                held_total: 0,
                ready: VecDeque::new(),
                waiting: HashMap::new(),
                next_id: 0,
                #[cfg(test)]
                granted: Vec::new(),
            }),
        }
    }

    /// The state: nothing panics while holding it, so a poisoned lock holds a consistent one.
    fn state(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a turn of `class`. `grouped`: the write may continue a turn of its class
    /// (see the module's comment).
    pub(crate) async fn turn(&self, class: K, grouped: bool) -> Ticket<'_, K> {
        let (id, receiver) = {
            let mut state = self.state();
            let free = state.held_total < self.capacity
                && state.held_of(&class) < self.per_class
                && !state.waiting.contains_key(&class);
            if free {
                state.take(&class);
                return Ticket {
                    turns: self,
                    class,
                    grouped,
                    run: 1,
                };
            }
            let id = state.next_id;
            state.next_id += 1;
            let (grant, receiver) = oneshot::channel();
            match state.waiting.get_mut(&class) {
                Some(queue) => queue.push_back(Waiter { id, grouped, grant }),
                None => {
                    state.waiting.insert(
                        class.clone(),
                        VecDeque::from([Waiter { id, grouped, grant }]),
                    );
                    state.ready.push_back(class.clone());
                }
            }
            (id, receiver)
        };
        let mut waiting = Waiting {
            turns: self,
            class,
            grouped,
            id,
            receiver,
            done: false,
        };
        // The sender is only ever consumed by a grant (see `Waiting::drop`), so an error here
        // would be a grant that never came: waiting forever is the honest outcome.
        let run = match (&mut waiting.receiver).await {
            Ok(run) => run,
            Err(_) => std::future::pending::<usize>().await,
        };
        waiting.done = true;
        Ticket {
            turns: self,
            class: waiting.class.clone(),
            grouped,
            run,
        }
    }

    /// Ends a turn of `class` and grants the turns that have room now.
    fn release(&self, class: &K, grouped: bool, run: usize) {
        let mut state = self.state();
        state.give_back(class);
        // The class's next write continues the turn when both are grouped.
        if grouped && run < self.max_run && state.held_of(class) < self.per_class {
            let next = state
                .waiting
                .get_mut(class)
                .filter(|queue| queue.front().is_some_and(|w| w.grouped))
                .and_then(VecDeque::pop_front);
            if let Some(waiter) = next {
                state.forget_if_empty(class);
                if state.grant(class, waiter, run + 1) {
                    // The state's lock is held, so no turn can have been granted meanwhile:
                    // the other classes' waiting writes have no room still.
                    return;
                }
            }
        }
        self.fill(&mut state);
    }

    /// Grants turns, round-robin over the classes waiting, while there is room.
    fn fill(&self, state: &mut State<K>) {
        while state.held_total < self.capacity {
            let Some(position) = state
                .ready
                .iter()
                .position(|class| state.held_of(class) < self.per_class)
            else {
                return;
            };
            let Some(class) = state.ready.remove(position) else {
                return;
            };
            let Some(queue) = state.waiting.get_mut(&class) else {
                continue;
            };
            let Some(waiter) = queue.pop_front() else {
                state.waiting.remove(&class);
                continue;
            };
            if queue.is_empty() {
                state.waiting.remove(&class);
            } else {
                state.ready.push_back(class.clone());
            }
            state.grant(&class, waiter, 1);
        }
    }

    /// How many writes wait (tests only).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.state().waiting.values().map(VecDeque::len).sum()
    }

    /// The classes of the turns granted so far, in order (tests only).
    #[cfg(test)]
    pub(crate) fn granted(&self) -> Vec<K> {
        self.state().granted.clone()
    }
}

impl<K: Hash + Eq + Clone> State<K> {
    fn held_of(&self, class: &K) -> usize {
        self.held.get(class).copied().unwrap_or(0)
    }

    fn take(&mut self, class: &K) {
        *self.held.entry(class.clone()).or_insert(0) += 1;
        self.held_total += 1;
        #[cfg(test)]
        self.granted.push(class.clone());
    }

    fn give_back(&mut self, class: &K) {
        if let Some(held) = self.held.get_mut(class) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                self.held.remove(class);
            }
        }
        self.held_total = self.held_total.saturating_sub(1);
    }

    /// Drops `class` from the queues once it has nothing waiting.
    fn forget_if_empty(&mut self, class: &K) {
        if self.waiting.get(class).is_some_and(VecDeque::is_empty) {
            self.waiting.remove(class);
            self.ready.retain(|c| c != class);
        }
    }

    /// Hands `waiter` its turn; `false` (and nothing taken) when it is gone.
    fn grant(&mut self, class: &K, waiter: Waiter, run: usize) -> bool {
        self.take(class);
        if waiter.grant.send(run).is_ok() {
            return true;
        }
        self.give_back(class);
        #[cfg(test)]
        self.granted.pop();
        false
    }
}

impl<K: Hash + Eq + Clone> Drop for Ticket<'_, K> {
    fn drop(&mut self) {
        self.turns.release(&self.class, self.grouped, self.run);
    }
}

/// A write in a queue: leaves it when dropped, or passes on the turn it was just granted.
struct Waiting<'a, K: Hash + Eq + Clone> {
    turns: &'a FairTurns<K>,
    class: K,
    grouped: bool,
    id: u64,
    receiver: oneshot::Receiver<usize>,
    /// Its turn came and is a `Ticket` now.
    done: bool,
}

impl<K: Hash + Eq + Clone> Drop for Waiting<'_, K> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let class = &self.class;
        let granted = {
            let mut state = self.turns.state();
            let queued = state
                .waiting
                .get_mut(class)
                .and_then(|queue| {
                    let position = queue.iter().position(|w| w.id == self.id)?;
                    queue.remove(position)
                })
                .is_some();
            if queued {
                state.forget_if_empty(class);
                None
            } else {
                // Not in the queue: it was granted (grants happen under the state's lock).
                self.receiver.try_recv().ok()
            }
        };
        if let Some(run) = granted {
            self.turns.release(class, self.grouped, run);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, reason = "a test fails loudly")]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Queues writes behind a held turn, in the order given (each queued before the next),
    /// then releases the turn and lets every write take its turn in order; the classes in the
    /// order their turns came, the held one first.
    async fn order_of_turns(
        turns: Arc<FairTurns<&'static str>>,
        held: &'static str,
        writes: &[(&'static str, bool)],
    ) -> Vec<&'static str> {
        let ticket = turns.turn(held, false).await;
        let mut tasks = Vec::new();
        for (n, (class, grouped)) in writes.iter().copied().enumerate() {
            let shared = Arc::clone(&turns);
            tasks.push(tokio::spawn(async move {
                let _ticket = shared.turn(class, grouped).await;
            }));
            while turns.waiting() < n + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(ticket);
        for task in tasks {
            task.await.unwrap();
        }
        turns.granted()
    }

    /// With one turn at a time, classes take turns round-robin: a boundary with many writes
    /// queued gets one turn while each other waiting class gets one, `None` (the installation's
    /// own writes) a class like the others.
    #[tokio::test]
    async fn classes_take_turns_round_robin() {
        let turns = Arc::new(FairTurns::new(1, 1, 64));
        let queued = [
            ("shop", false),
            ("shop", false),
            ("shop", false),
            ("shop", false),
            ("web", false),
            ("none", false),
            ("shop", false),
            ("web", false),
            ("api", false),
        ];
        let order = order_of_turns(turns, "shop", &queued).await;
        assert_eq!(
            order,
            ["shop", "shop", "web", "none", "api", "shop", "web", "shop", "shop", "shop"]
        );
    }

    /// Grouped writes next in their class's queue continue its turn, up to `max_run`; a write
    /// that is not grouped ends it.
    #[tokio::test]
    async fn grouped_writes_continue_their_class_s_turn() {
        let turns = Arc::new(FairTurns::new(1, 1, 3));
        let queued = [
            ("web", true),
            ("web", true),
            ("shop", false),
            ("web", true),
            ("web", true),
            ("web", false),
            ("web", true),
            ("shop", false),
            ("api", true),
        ];
        let order = order_of_turns(turns, "shop", &queued).await;
        // web: a run of 3 (its 4th grouped write waits for the next round); shop; api; web: the
        // 4th grouped write alone (the write after it is not grouped); shop; web's last two.
        assert_eq!(
            order,
            ["shop", "web", "web", "web", "shop", "api", "web", "shop", "web", "web"]
        );
    }

    /// With room for several, a class holds at most `per_class` turns: another class's write
    /// is granted at once while the first class's writes wait.
    #[tokio::test]
    async fn one_class_holds_at_most_its_share() {
        let turns = FairTurns::new(3, 2, 1);
        let a1 = turns.turn("a", false).await;
        let a2 = turns.turn("a", false).await;
        let mut a3 = Box::pin(turns.turn("a", false));
        assert!(futures::poll!(a3.as_mut()).is_pending());
        // `b` finds room although `a` waits.
        let b1 = turns.turn("b", false).await;
        let mut c1 = Box::pin(turns.turn("c", false));
        assert!(futures::poll!(c1.as_mut()).is_pending());
        // Room comes back to `c` before `a`'s third: `a` still holds its share.
        drop(b1);
        let c1 = c1.await;
        assert!(futures::poll!(a3.as_mut()).is_pending());
        drop(a1);
        let a3 = a3.await;
        assert_eq!(turns.granted(), ["a", "a", "b", "c", "a"]);
        drop((a2, a3, c1));
        assert_eq!(turns.waiting(), 0);
    }

    /// A write dropped while it waits leaves the queue; one dropped just after its turn came
    /// passes the turn on. Nothing waits forever.
    #[tokio::test]
    async fn dropped_waiters_lose_no_turn() {
        let turns = Arc::new(FairTurns::new(1, 1, 64));
        let held = turns.turn("a", false).await;
        let mut gone = Box::pin(turns.turn("b", false));
        assert!(futures::poll!(gone.as_mut()).is_pending());
        let mut granted_then_gone = Box::pin(turns.turn("c", false));
        assert!(futures::poll!(granted_then_gone.as_mut()).is_pending());
        let last = tokio::spawn({
            let turns = Arc::clone(&turns);
            async move {
                let _ticket = turns.turn("d", false).await;
            }
        });
        while turns.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        drop(gone);
        assert_eq!(turns.waiting(), 2);
        // `c` is granted the turn as `a` ends, and dropped before it sees it.
        drop(held);
        drop(granted_then_gone);
        tokio::time::timeout(Duration::from_secs(10), last)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(turns.granted(), ["a", "c", "d"]);
    }
}
