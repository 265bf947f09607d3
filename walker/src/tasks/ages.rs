//! How long each listed task has looked as it does now, measured at listing time only.
//!
//! A task's *look* is what a listing sees of it: whether it is running, scheduled, idle or complete,
//! and its walk (each node's type, address, discriminant and status: its chain, down to where each
//! branch waits). [`Ages`] keeps, per task of the last listing, a fingerprint of its look and when a
//! listing first saw it so; a task whose look is the same at the next listing keeps that time, any
//! other starts again. That time ([`crate::RuntimeTask::unchanged_since_ns`]) gives an age that is a
//! lower bound, and sampled: a task that changed and changed back between two listings looks unchanged. Nothing is
//! added to any poll path. One entry per task of the last listing: the others are dropped, so the
//! memory is bounded by what a listing may hold.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use crate::plan::{RuntimeTask, StateBits, Walk};

/// What [`Ages`] remembers of one task.
#[derive(Debug, Clone, Copy)]
struct Seen {
    look: u64,
    since_ns: u64,
}

/// When each task of the last listing was first seen looking as it does (see the module docs).
#[derive(Debug, Default)]
pub struct Ages {
    /// By (header address, tokio task id): an address reused by a later task is another task.
    seen: FxHashMap<(u64, u64), Seen>,
}

impl Ages {
    /// Sets each task's `unchanged_since_ns` from what earlier listings saw: when a listing first saw
    /// it looking as it does, on the clock of `now_ns` (any monotonic clock, the same at every call;
    /// `now_ns` itself when this is the first listing to see it so). Forgets the tasks not in `tasks`.
    pub fn observe<'a>(
        &mut self,
        now_ns: u64,
        bits: &StateBits,
        tasks: impl IntoIterator<Item = &'a mut RuntimeTask>,
    ) {
        let tasks = tasks.into_iter();
        let mut next = FxHashMap::default();
        next.reserve(tasks.size_hint().0);
        for t in tasks {
            let key = (t.header, t.id);
            let look = look(t, bits);
            let since_ns = match self.seen.get(&key) {
                Some(s) if s.look == look && s.since_ns <= now_ns => s.since_ns,
                _ => now_ns,
            };
            t.unchanged_since_ns = Some(since_ns);
            next.insert(key, Seen { look, since_ns });
        }
        self.seen = next;
    }

    /// How many tasks it remembers.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The fingerprint of a task's look: its scheduling state and its walk.
fn look(t: &RuntimeTask, bits: &StateBits) -> u64 {
    let mut h = FxHasher::default();
    (t.state & (bits.running | bits.notified | bits.complete)).hash(&mut h);
    t.poll_fn.hash(&mut h);
    match &t.walk {
        None => 0u8.hash(&mut h),
        Some(Walk::Nodes { nodes, truncated }) => {
            1u8.hash(&mut h);
            truncated.hash(&mut h);
            for n in nodes {
                (n.parent, n.ty, n.addr, n.discr).hash(&mut h);
                std::mem::discriminant(&n.status).hash(&mut h);
            }
        }
        Some(other) => {
            2u8.hash(&mut h);
            std::mem::discriminant(other).hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::Ages;
    use crate::plan::{NodeStatus, RuntimeTask, StateBits, Walk, WalkNode};

    const BITS: StateBits = StateBits {
        running: 1,
        complete: 2,
        notified: 4,
        join_waker: 8,
    };

    fn task(id: u64, state: u64, discr: u64) -> RuntimeTask {
        let node = WalkNode {
            parent: u32::MAX,
            ty: 3,
            addr: 0x5000,
            discr: Some(discr),
            status: NodeStatus::Read,
        };
        RuntimeTask {
            id,
            header: 0x1000 * id,
            state,
            poll_fn: 0x77,
            join_waker: None,
            set_waker: None,
            walk: Some(Walk::Nodes {
                nodes: vec![node],
                truncated: false,
            }),
            unchanged_since_ns: None,
        }
    }

    fn since(t: RuntimeTask) -> Option<u64> {
        t.unchanged_since_ns
    }

    #[test]
    fn a_task_looking_the_same_ages_and_one_that_changed_starts_again() {
        let mut ages = Ages::default();
        let mut first = [task(1, 0, 3), task(2, 0, 3)];
        ages.observe(100, &BITS, &mut first);
        assert_eq!(first.map(since), [Some(100); 2], "first seen now");
        // Task 1 as it was; task 2 at another await.
        let mut second = [task(1, 0, 3), task(2, 0, 4)];
        ages.observe(350, &BITS, &mut second);
        assert_eq!(second.map(since), [Some(100), Some(350)]);
        let mut third = [task(1, 0, 3), task(2, 0, 4)];
        ages.observe(1000, &BITS, &mut third);
        assert_eq!(third.map(since), [Some(100), Some(350)]);
    }

    #[test]
    fn running_or_scheduled_is_another_look_and_the_other_bits_are_not() {
        let mut ages = Ages::default();
        ages.observe(0, &BITS, &mut [task(1, 0, 3), task(2, 0, 3)]);
        let mut later = [task(1, BITS.running, 3), task(2, BITS.join_waker, 3)];
        ages.observe(10, &BITS, &mut later);
        assert_eq!(later.map(since), [Some(10), Some(0)]);
    }

    #[test]
    fn tasks_not_listed_again_are_forgotten_and_a_reused_address_is_a_new_task() {
        let mut ages = Ages::default();
        ages.observe(0, &BITS, &mut [task(1, 0, 3), task(2, 0, 3)]);
        ages.observe(10, &BITS, &mut [task(1, 0, 3)]);
        assert_eq!(ages.len(), 1);
        let mut reused = task(9, 0, 3);
        reused.header = 0x1000;
        let mut again = [task(1, 0, 3), reused];
        ages.observe(20, &BITS, &mut again);
        assert_eq!(again.map(since), [Some(0), Some(20)]);
        assert_eq!(ages.len(), 2);
    }
}
