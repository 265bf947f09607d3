//! `--stats`: the overview before the detail. What is stuck for good (the dump's wait cycles, how
//! many kinds of them, and its futurelocks), then how the suspended tasks of a dump divide by what
//! they wait on (the leaf that matters, see [`super::summary`], and its decoded wait where the
//! leaf's type is shared by several kinds of wait), by their root future, by the await in the
//! program's own code where they wait, and by how long they have been suspended.

use serde::{Deserialize, Serialize};

use super::values::WaitKind;
use super::waits::CycleEdges;
use super::{Dump, TaskView, summary};
use crate::names::{base_name, display_name};

/// The counts of one dump (see the module docs). Each list is biggest first, then by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// What is stuck for good (see [`Stuck`]). Absent from a document written before it was
    /// counted: read as nothing stuck.
    #[serde(default)]
    pub stuck: Stuck,
    /// Tasks counted: the suspended ones (idle or scheduled).
    pub suspended: usize,
    /// By the type of the leaf that matters, without generic arguments, and what it waits for
    /// where its type does not say (`tokio::sync::batch_semaphore::Acquire (Mutex)`).
    pub by_leaf: Vec<Count>,
    /// By root future, as the source names it.
    pub by_root: Vec<Count>,
    /// By the await in the program's own code the task waits at (`file:line`).
    pub by_await: Vec<Count>,
    /// By the HTTP request served, its method and path without the query (`POST /order`), of the
    /// tasks whose frames hold one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_route: Vec<Count>,
    /// How long each has been suspended.
    pub ages: Vec<AgeBucket>,
    /// The threads' own futures (their `block_on`'s), not counted above: each by the leaf that
    /// matters, as tasks are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads_by_leaf: Vec<Count>,
}

/// What no task of the dump can end: its wait cycles, and the waits for a lock held in a future
/// nobody polls. Of the whole process, whatever tasks the dump shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stuck {
    /// Wait cycles (deadlocks).
    pub deadlocks: usize,
    /// How many kinds of them: cycles alike (see [`CycleEdges::alike`]) are one kind.
    pub deadlock_kinds: usize,
    /// Tasks in a wait cycle.
    pub tasks_in_deadlocks: usize,
    /// Waits for a lock held in a future nobody polls, in a cycle or not.
    pub futurelocks: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub key: String,
    pub tasks: usize,
}

/// Tasks suspended for at least `from_ns` and less than `to_ns` (`None`: no bound).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgeBucket {
    pub from_ns: u64,
    pub to_ns: Option<u64>,
    pub tasks: usize,
    /// Of them, those whose age is a lower bound (not timed by the agent): they may be older.
    pub at_least: usize,
}

/// What a task without a decoded or annotated chain counts as.
pub const NO_CHAIN: &str = "(no chain)";
/// What a task whose chain has no frame of the program's own code counts as, by await.
pub const NO_OWN_AWAIT: &str = "(no await in the program's own code)";
/// What a task with no age counts as (neither timed nor seen before).
pub const NO_AGE: &str = "(age unknown)";

/// Bucket bounds: under 1 ms, 10 ms, 100 ms, 1 s, 10 s, 1 min, 10 min, and over.
const BOUNDS_NS: [u64; 7] = [
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
    60_000_000_000,
    600_000_000_000,
];

/// The stats of `dump` (see the module docs): its tasks', and what is stuck in its process.
pub fn of_dump(dump: &Dump) -> Stats {
    Stats {
        stuck: stuck(dump),
        ..stats(&dump.tasks)
    }
}

fn stuck(dump: &Dump) -> Stuck {
    let mut tasks: Vec<u64> = dump.deadlocks.iter().flatten().copied().collect();
    tasks.sort_unstable();
    tasks.dedup();
    Stuck {
        deadlocks: dump.deadlocks.len(),
        deadlock_kinds: CycleEdges::new(&dump.waits).alike(&dump.deadlocks).len(),
        tasks_in_deadlocks: tasks.len(),
        futurelocks: dump.waits.iter().filter(|e| e.is_futurelock()).count(),
    }
}

/// The stats of `tasks` (see the module docs), but for what is stuck, which their edges say.
pub fn stats(tasks: &[TaskView]) -> Stats {
    let mut leaf = Tally::default();
    let mut root = Tally::default();
    let mut await_at = Tally::default();
    let mut route = Tally::default();
    let mut ages: Vec<AgeBucket> = (0..=BOUNDS_NS.len())
        .map(|i| AgeBucket {
            from_ns: if i == 0 { 0 } else { BOUNDS_NS[i - 1] },
            to_ns: BOUNDS_NS.get(i).copied(),
            tasks: 0,
            at_least: 0,
        })
        .collect();
    let mut unknown_age = 0;
    let mut suspended = 0;
    let mut threads = Tally::default();
    for t in tasks.iter().filter(|t| t.state.suspended()) {
        let s = summary(&t.frames);
        let tally = |leaf: &mut Tally| match s {
            Some(s) => match s.leaf.waits_on.as_ref().and_then(|w| what_for(&w.kind)) {
                Some(what) => leaf.add(&format!("{} ({what})", base_name(&s.leaf.meta.name))),
                None => leaf.add(base_name(&s.leaf.meta.name)),
            },
            None => leaf.add(NO_CHAIN),
        };
        if t.block_on.is_some() {
            tally(&mut threads);
            continue;
        }
        suspended += 1;
        root.add(base_name(&display_name(&t.root_type)));
        tally(&mut leaf);
        let own = s
            .and_then(|s| s.own)
            .and_then(|f| f.meta.suspended_at.as_ref());
        match own {
            Some(at) => await_at.add(&format!("{}:{}", at.file, at.line)),
            None => await_at.add(NO_OWN_AWAIT),
        }
        if let Some(r) = &t.request {
            route.add(&route_of(r));
        }
        match t.waiting_ns() {
            Some((ns, lower)) => {
                let b = &mut ages[BOUNDS_NS.partition_point(|&b| b <= ns)];
                b.tasks += 1;
                b.at_least += usize::from(lower);
            }
            None => unknown_age += 1,
        }
    }
    let mut ages: Vec<AgeBucket> = ages.into_iter().filter(|b| b.tasks > 0).collect();
    if unknown_age > 0 {
        // No bound at either end: said as unknown.
        ages.push(AgeBucket {
            from_ns: u64::MAX,
            to_ns: None,
            tasks: unknown_age,
            at_least: 0,
        });
    }
    Stats {
        stuck: Stuck::default(),
        suspended,
        by_leaf: leaf.sorted(),
        by_root: root.sorted(),
        by_await: await_at.sorted(),
        by_route: route.sorted(),
        ages,
        threads_by_leaf: threads.sorted(),
    }
}

/// A request's route: its method and its target's path, without the query (ids and keys vary
/// from one request to the next; the route does not).
fn route_of(r: &super::values::Request) -> String {
    let path = r.target.as_deref().unwrap_or("?");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    match &r.method {
        Some(m) => format!("{m} {path}"),
        None => path.to_owned(),
    }
}

/// What a leaf waits for where its type alone does not say: tokio's one semaphore `Acquire` is
/// under every lock and bounded send, one `Notified` under `Notify`, `watch` and `Barrier`, one
/// `Readiness` under every accept.
fn what_for(kind: &WaitKind) -> Option<&str> {
    Some(match kind {
        WaitKind::Permits { lock } if &**lock == "channel" => "channel send",
        WaitKind::Permits { lock } => lock,
        WaitKind::Notify => "Notify",
        WaitKind::Watch => "watch change",
        WaitKind::Barrier => "Barrier",
        WaitKind::Accept => "accept",
        WaitKind::Sleep | WaitKind::Io { .. } | WaitKind::Receive | WaitKind::Broadcast => {
            return None;
        }
    })
}

#[derive(Default)]
struct Tally(std::collections::HashMap<String, usize>);

impl Tally {
    fn add(&mut self, key: &str) {
        match self.0.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                self.0.insert(key.to_owned(), 1);
            }
        }
    }

    fn sorted(self) -> Vec<Count> {
        let mut out: Vec<Count> = (self.0.into_iter())
            .map(|(key, tasks)| Count { key, tasks })
            .collect();
        out.sort_by(|a, b| b.tasks.cmp(&a.tasks).then_with(|| a.key.cmp(&b.key)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Dump;
    use crate::testing::{handshake, sample};

    #[test]
    fn suspended_tasks_are_counted_by_leaf_root_await_and_age() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let st = stats(&dump.tasks);
        let suspended = dump.tasks.iter().filter(|t| t.state.suspended()).count();
        assert!(suspended > 0);
        assert_eq!(st.suspended, suspended);
        for list in [&st.by_leaf, &st.by_root, &st.by_await] {
            assert_eq!(list.iter().map(|c| c.tasks).sum::<usize>(), suspended);
            assert!(
                list.windows(2).all(|w| w[0].tasks >= w[1].tasks),
                "{list:?}"
            );
        }
        assert_eq!(st.ages.iter().map(|b| b.tasks).sum::<usize>(), suspended);
        assert!(
            st.by_root.iter().all(|c| !c.key.ends_with('>')),
            "no generics: {:?}",
            st.by_root
        );
    }

    #[test]
    fn what_is_stuck_counts_cycles_their_kinds_their_tasks_and_futurelocks() {
        use crate::testing::lock_edge as lock;
        let mut dump = Dump::build(&handshake(), &sample(), 0);
        assert_eq!(of_dump(&dump).stuck, Stuck::default());
        let mut unpolled = lock(7, 8, 30, 29);
        if let crate::model::waits::WaitsFor::Lock { holder } = &mut unpolled.on {
            holder.held.polled = false;
        }
        // Two pairs alike, one whose second lock was taken elsewhere, and a futurelock no cycle has.
        let pairs = [lock(1, 2, 15, 13), lock(2, 1, 15, 13), lock(3, 4, 15, 13)];
        let more = [lock(4, 3, 15, 13), lock(5, 6, 15, 13), lock(6, 5, 15, 40)];
        dump.waits = [&pairs[..], &more[..], &[unpolled]].concat();
        dump.deadlocks = vec![vec![1, 2], vec![3, 4], vec![5, 6]];
        let stuck = Stuck {
            deadlocks: 3,
            deadlock_kinds: 2,
            tasks_in_deadlocks: 6,
            futurelocks: 1,
        };
        assert_eq!(of_dump(&dump).stuck, stuck);
    }

    #[test]
    fn ages_fall_in_decade_buckets_and_a_lower_bound_is_counted_as_one() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let mut t = dump
            .tasks
            .iter()
            .find(|t| t.state.suspended())
            .unwrap()
            .clone();
        let aged = |state: Option<u64>, unchanged: Option<u64>| {
            let mut t = t.clone();
            (t.state_age_ns, t.unchanged_ns) = (state, unchanged);
            t
        };
        let tasks = [
            aged(Some(500_000), None),
            aged(Some(2_000_000_000), None),
            aged(None, Some(3_000_000_000)),
            aged(None, None),
        ];
        let ages = stats(&tasks).ages;
        let got: Vec<(u64, Option<u64>, usize, usize)> = ages
            .iter()
            .map(|b| (b.from_ns, b.to_ns, b.tasks, b.at_least))
            .collect();
        assert_eq!(
            got,
            [
                (0, Some(1_000_000), 1, 0),
                (1_000_000_000, Some(10_000_000_000), 2, 1),
                (u64::MAX, None, 1, 0),
            ]
        );
        t.frames = std::sync::Arc::new(Vec::new());
        let bare = stats(std::slice::from_ref(&t));
        assert_eq!(bare.by_leaf[0].key, NO_CHAIN);
        assert_eq!(bare.by_await[0].key, NO_OWN_AWAIT);
    }

    #[test]
    fn a_shared_leaf_type_is_told_apart_by_what_it_waits_for() {
        let lock = |l: &str| WaitKind::Permits { lock: l.into() };
        for (kind, want) in [
            (lock("Mutex"), Some("Mutex")),
            (lock("Semaphore"), Some("Semaphore")),
            (lock("channel"), Some("channel send")),
            (WaitKind::Notify, Some("Notify")),
            (WaitKind::Watch, Some("watch change")),
            (WaitKind::Barrier, Some("Barrier")),
            (WaitKind::Accept, Some("accept")),
            // Their own types say it already.
            (WaitKind::Sleep, None),
            (WaitKind::Io { write: true }, None),
            (WaitKind::Receive, None),
            (WaitKind::Broadcast, None),
        ] {
            assert_eq!(what_for(&kind), want, "{kind:?}");
        }
    }
}
