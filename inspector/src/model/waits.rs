//! Who holds what, and who waits on whom: the locks a frame holds ([`Held`], found among its
//! locals), who holds the lock a leaf waits for ([`Holder`]), and the edges of the wait graph
//! between tasks ([`WaitEdge`]: a `JoinHandle` awaited, a lock held), whose cycles are a dump's
//! deadlocks ([`cycles`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Loc;

/// A tokio lock (or semaphore permits), or an end of a channel, a frame holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Held {
    /// `Mutex`, `RwLock` or `Semaphore`; or `channel sender`, `channel receiver` for an end of a
    /// tokio `mpsc` channel.
    pub lock: Arc<str>,
    /// An `RwLock` held to write.
    #[serde(default, skip_serializing_if = "is_false")]
    pub write: bool,
    /// The lock's semaphore (what a waiter's acquire names too), or the channel.
    pub addr: u64,
    /// The local that holds it (the guard, or the future a guard lies in).
    pub local: Arc<str>,
    /// The await that took it, where the state machine says (see `LocalPlan::acquired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquired_at: Option<Loc>,
    /// `false`: it lies in a future the frame keeps but does not poll (a `select!` branch that
    /// lost, a future stored for later), stopped at `stopped_at`. Whoever waits for the lock then
    /// waits for a future nobody polls: a futurelock.
    pub polled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<Loc>,
}

/// Who holds a lock a leaf waits for: a task's frame, and what it holds there.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub task: u64,
    /// The holding frame's name, and the await it is suspended at.
    pub frame: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Loc>,
    #[serde(flatten)]
    pub held: Held,
}

/// A holder that is no task: a `static` of the program keeps the guard or the channel's end (in an
/// `Option`, behind a `std` lock, ...). No edge leads to it: nothing the dump shows can let it go.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StaticHolder {
    /// The static's path (`app::PARKED`).
    #[serde(rename = "static")]
    pub name: Arc<str>,
    #[serde(flatten)]
    pub held: Held,
}

/// A holder that is no task: a thread of the program keeps the guard or the channel's end in a
/// local of a function on its stack (a `spawn_blocking` closure, a thread the program started).
/// No edge leads to it: no task can make the thread let go.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ThreadHolder {
    pub tid: u32,
    /// The thread's name, as the kernel keeps it (`comm`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// The function whose local holds it.
    pub function: String,
    /// Where that local is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<Loc>,
    #[serde(flatten)]
    pub held: Held,
}

/// One edge of the wait graph: task `from` cannot go on until task `to` does something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitEdge {
    pub from: u64,
    pub to: u64,
    /// The waiting task's own frame that waits (the program's code nearest the leaf), and its await.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_in: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_at: Option<Loc>,
    /// Any one of several `to`s can end the wait (a receive, with more than one sender alive):
    /// not counted in cycles.
    #[serde(default, skip_serializing_if = "is_false")]
    pub any_of: bool,
    #[serde(flatten)]
    pub on: WaitsFor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum WaitsFor {
    /// `from` awaits `to`'s `JoinHandle`.
    Join,
    /// `from` waits to acquire a lock `to` holds.
    Lock { holder: Holder },
    /// `from` waits on a channel whose other end `to` holds: the receiver of a full channel it
    /// sends into, a sender of one it receives from.
    Channel { holder: Holder },
    /// `from` receives from a `oneshot` whose sender `to` holds across an await (found by the walks,
    /// see the decoded delegate's `sender_held_by`).
    Oneshot,
}

impl WaitEdge {
    /// A lock edge whose holder is a future nobody polls.
    pub fn is_futurelock(&self) -> bool {
        matches!(&self.on, WaitsFor::Lock { holder } if !holder.held.polled)
    }
}

fn is_false(b: &bool) -> bool {
    !b
}

/// The cycles of the graph of `edges` (`from` → `to`), one per strongly connected part that has
/// one (a task waiting on itself is one too): the shortest through its lowest task, listed in
/// "waits for" order from it. Sorted.
pub fn cycles(edges: impl IntoIterator<Item = (u64, u64)>) -> Vec<Vec<u64>> {
    let mut next: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().insert(to);
        next.entry(to).or_default();
    }
    let mut cycles: Vec<Vec<u64>> = components(&next)
        .into_iter()
        .filter_map(|part| shortest_cycle(&next, &part))
        .collect();
    cycles.sort();
    cycles
}

/// The strongly connected parts of `next` (Tarjan's, without recursion: chains of waits may be long).
fn components(next: &BTreeMap<u64, BTreeSet<u64>>) -> Vec<BTreeSet<u64>> {
    let mut t = Tarjan {
        next,
        index: BTreeMap::new(),
        on_stack: BTreeSet::new(),
        stack: Vec::new(),
        work: Vec::new(),
        parts: Vec::new(),
    };
    for &start in next.keys() {
        if !t.index.contains_key(&start) {
            t.from(start);
        }
    }
    t.parts
}

struct Tarjan<'a> {
    next: &'a BTreeMap<u64, BTreeSet<u64>>,
    /// Each visited node's (index, lowest index reachable).
    index: BTreeMap<u64, (usize, usize)>,
    on_stack: BTreeSet<u64>,
    stack: Vec<u64>,
    /// The depth-first path: each node with the successors still to look at.
    work: Vec<(u64, Vec<u64>)>,
    parts: Vec<BTreeSet<u64>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: u64) {
        let i = self.index.len();
        self.index.insert(v, (i, i));
        self.stack.push(v);
        self.on_stack.insert(v);
        let todo = self.next[&v].iter().rev().copied().collect();
        self.work.push((v, todo));
    }

    fn lower(&mut self, v: u64, to: usize) {
        if let Some((_, low)) = self.index.get_mut(&v) {
            *low = (*low).min(to);
        }
    }

    fn from(&mut self, start: u64) {
        self.visit(start);
        while let Some((v, todo)) = self.work.last_mut() {
            let v = *v;
            if let Some(w) = todo.pop() {
                match self.index.get(&w) {
                    None => self.visit(w),
                    Some(&(wi, _)) if self.on_stack.contains(&w) => self.lower(v, wi),
                    Some(_) => {}
                }
                continue;
            }
            self.work.pop();
            let (vi, vlow) = self.index[&v];
            if let Some(&(parent, _)) = self.work.last() {
                self.lower(parent, vlow);
            }
            if vi == vlow {
                let mut part = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    part.insert(w);
                    if w == v {
                        break;
                    }
                }
                self.parts.push(part);
            }
        }
    }
}

/// The shortest cycle through `part`'s lowest node, within `part`; `None` for a single node that
/// does not wait on itself.
fn shortest_cycle(next: &BTreeMap<u64, BTreeSet<u64>>, part: &BTreeSet<u64>) -> Option<Vec<u64>> {
    let &start = part.first()?;
    let mut came_from: BTreeMap<u64, u64> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in next[&v].iter().filter(|w| part.contains(w)) {
            if w == start {
                let mut cycle = vec![v];
                while let Some(&p) = came_from.get(cycle.last().expect("not empty")) {
                    cycle.push(p);
                }
                cycle.reverse();
                return Some(cycle);
            }
            if w != start && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_of_waits_is_one_cycle_from_its_lowest_task() {
        assert_eq!(cycles([(9, 7), (7, 8), (8, 9)]), vec![vec![7, 8, 9]]);
    }

    #[test]
    fn a_task_waiting_for_a_lock_it_holds_is_a_cycle_of_one() {
        assert_eq!(cycles([(4, 4), (5, 4)]), vec![vec![4]]);
    }

    #[test]
    fn waits_that_end_are_no_cycle() {
        assert!(cycles([(1, 2), (2, 3), (1, 3)]).is_empty());
    }

    #[test]
    fn two_separate_deadlocks_are_two_cycles_and_the_shortest_of_a_tangle_is_given() {
        // 1 ⇄ 2, and 3 → 4 → 5 → 3 with a shortcut 3 → 5.
        let edges = [(1, 2), (2, 1), (3, 4), (4, 5), (5, 3), (3, 5), (6, 1)];
        assert_eq!(cycles(edges), vec![vec![1, 2], vec![3, 5]]);
    }

    #[test]
    fn a_long_chain_into_a_cycle_does_not_recurse() {
        let mut edges: Vec<(u64, u64)> = (0..100_000).map(|i| (i + 1, i)).collect();
        edges.push((0, 100_000));
        let found = cycles(edges);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].len(), 100_001);
    }
}
