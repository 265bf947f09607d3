//! Who holds what, and who waits on whom: the locks a frame holds ([`Held`], found among its
//! locals), who holds the lock a leaf waits for ([`Holder`]), and the edges of the wait graph
//! between tasks ([`WaitEdge`]: a `JoinHandle` awaited, a lock held), whose cycles are a dump's
//! deadlocks ([`cycles`]), told by their edges and grouped where alike ([`CycleEdges`]).

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{FastMap, Loc};

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
    /// The holding frame's name, and the await it is suspended at. Shared: a holder is copied to
    /// each of its waiters and into an edge for each.
    pub frame: Arc<str>,
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
    pub waits_in: Option<Arc<str>>,
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

/// The edge between each two tasks of the wait graph, a lock's or a channel's before a
/// `JoinHandle`'s: what a cycle is told with.
pub struct CycleEdges<'w>(FastMap<(u64, u64), &'w WaitEdge>);

impl<'w> CycleEdges<'w> {
    pub fn new(waits: &'w [WaitEdge]) -> Self {
        let mut between: FastMap<(u64, u64), &WaitEdge> = FastMap::default();
        for e in waits {
            let kept = between.entry((e.from, e.to)).or_insert(e);
            if matches!(kept.on, WaitsFor::Join) {
                *kept = e;
            }
        }
        CycleEdges(between)
    }

    /// The edges of `cycle` (as [`cycles`] lists it), in its order, the last back to its first.
    pub fn of(&self, cycle: &[u64]) -> Vec<Option<&'w WaitEdge>> {
        let pairs = cycle.iter().zip(cycle.iter().cycle().skip(1));
        pairs.map(|(&a, &b)| self.0.get(&(a, b)).copied()).collect()
    }

    /// The cycles as groups of cycles alike: the same waits at the same places, for the same kind
    /// of lock or channel end, held by the same local in the same function where the same await
    /// took it (every word of them the same but their tasks and addresses). Each group in the
    /// order of `cycles`, the groups in the order of their first. A cycle's shape is its edges'
    /// from the rotation that compares least, so that two alike whose lowest tasks stand at
    /// different places of them still match.
    pub fn alike<'c>(&self, cycles: &'c [Vec<u64>]) -> Vec<Vec<&'c [u64]>> {
        grouped(cycles.iter().map(Vec::as_slice), |c| {
            let shape = self.of(c).into_iter().map(|e| e.map(EdgeShape::of));
            least_rotation(shape.collect::<Vec<_>>())
        })
    }
}

/// The waits alike among `edges`: each group's edges go to the same task for the same lock or
/// channel end, from the same place, every word of them the same but the waiting task. Each group
/// in the order of `edges`, the groups in the order of their first.
pub fn waits_alike<'w>(edges: impl IntoIterator<Item = &'w WaitEdge>) -> Vec<Vec<&'w WaitEdge>> {
    grouped(edges, |e| {
        let addr = match &e.on {
            WaitsFor::Lock { holder } | WaitsFor::Channel { holder } => Some(holder.held.addr),
            WaitsFor::Join | WaitsFor::Oneshot => None,
        };
        (EdgeShape::of(e), e.to, addr)
    })
}

/// `items` in groups of the same `key`: each group in the order of `items`, the groups in the
/// order of their first.
fn grouped<T: Copy, K: std::hash::Hash + Eq>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(T) -> K,
) -> Vec<Vec<T>> {
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut by_key: FastMap<K, usize> = FastMap::default();
    for item in items {
        let i = *by_key.entry(key(item)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(item);
    }
    groups
}

/// `v` turned round to start where it compares least.
fn least_rotation<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    let n = v.len();
    let least = (0..n)
        .min_by(|&a, &b| {
            let at = |k: usize| (0..n).map(move |i| (k + i) % n);
            at(a).map(|i| &v[i]).cmp(at(b).map(|i| &v[i]))
        })
        .unwrap_or(0);
    v.rotate_left(least);
    v
}

/// What two cycles alike share, edge by edge: all an edge's words but its tasks and addresses.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
struct EdgeShape<'a> {
    kind: u8,
    waits_in: Option<&'a str>,
    waits_at: Option<&'a Loc>,
    held: Option<HeldShape<'a>>,
}

/// A lock or a channel's end held, but for where it lies.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
struct HeldShape<'a> {
    lock: &'a str,
    write: bool,
    local: &'a str,
    frame: &'a str,
    acquired_at: Option<&'a Loc>,
    polled: bool,
    stopped_at: Option<&'a Loc>,
}

impl<'a> EdgeShape<'a> {
    fn of(e: &'a WaitEdge) -> Self {
        let (kind, holder) = match &e.on {
            WaitsFor::Join => (0, None),
            WaitsFor::Oneshot => (1, None),
            WaitsFor::Lock { holder } => (2, Some(holder)),
            WaitsFor::Channel { holder } => (3, Some(holder)),
        };
        EdgeShape {
            kind,
            waits_in: e.waits_in.as_deref(),
            waits_at: e.waits_at.as_ref(),
            held: holder.map(|h| HeldShape {
                lock: &h.held.lock,
                write: h.held.write,
                local: &h.held.local,
                frame: &h.frame,
                acquired_at: h.held.acquired_at.as_ref(),
                polled: h.held.polled,
                stopped_at: h.held.stopped_at.as_ref(),
            }),
        }
    }
}

/// The cycles of the graph of `edges` (`from` → `to`), one per strongly connected part that has
/// one (a task waiting on itself is one too): the shortest through its lowest task, listed in
/// "waits for" order from it. Sorted.
pub fn cycles(edges: impl IntoIterator<Item = (u64, u64)>) -> Vec<Vec<u64>> {
    let g = Graph::new(edges);
    let mut came_from = vec![NONE; g.ids.len()];
    let mut cycles: Vec<Vec<u64>> = (g.components().iter())
        .filter_map(|part| g.shortest_cycle(part, &mut came_from))
        .map(|cycle| cycle.into_iter().map(|v| g.ids[v as usize]).collect())
        .collect();
    cycles.sort();
    cycles
}

/// No node.
const NONE: u32 = u32::MAX;

/// A graph over tasks numbered in the order of their ids, so that the lowest id is the lowest
/// number and successors go in the order of theirs: a dump of many tasks in many cycles builds it
/// in arrays, not maps.
struct Graph {
    ids: Vec<u64>,
    /// `next[starts[v]..starts[v + 1]]`: `v`'s successors, ascending, once each.
    starts: Vec<usize>,
    next: Vec<u32>,
}

impl Graph {
    fn new(edges: impl IntoIterator<Item = (u64, u64)>) -> Graph {
        let edges: Vec<(u64, u64)> = edges.into_iter().collect();
        let mut ids: Vec<u64> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
        ids.sort_unstable();
        ids.dedup();
        let number = |id: u64| ids.binary_search(&id).map_or(NONE, |i| i as u32);
        let mut pairs: Vec<(u32, u32)> = (edges.iter())
            .map(|&(a, b)| (number(a), number(b)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut starts = vec![0; ids.len() + 1];
        for &(from, _) in &pairs {
            starts[from as usize + 1] += 1;
        }
        for v in 0..ids.len() {
            starts[v + 1] += starts[v];
        }
        let next = pairs.into_iter().map(|(_, to)| to).collect();
        Graph { ids, starts, next }
    }

    fn successors(&self, v: u32) -> &[u32] {
        &self.next[self.starts[v as usize]..self.starts[v as usize + 1]]
    }

    /// The strongly connected parts (Tarjan's, without recursion: chains of waits may be long),
    /// each sorted.
    fn components(&self) -> Vec<Vec<u32>> {
        let n = self.ids.len();
        let mut t = Tarjan {
            index: vec![NONE; n],
            low: vec![NONE; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            work: Vec::new(),
            parts: Vec::new(),
            visited: 0,
        };
        for start in 0..n as u32 {
            if t.index[start as usize] == NONE {
                t.from(self, start);
            }
        }
        t.parts
    }

    /// The shortest cycle through `part`'s lowest node, within `part`; `None` for a single node
    /// that does not wait on itself. `came_from` is `NONE` for every node of `part` on entry, and
    /// only `part`'s are changed.
    fn shortest_cycle(&self, part: &[u32], came_from: &mut [u32]) -> Option<Vec<u32>> {
        let &start = part.first()?;
        let within = |w: u32| part.binary_search(&w).is_ok();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &w in self.successors(v).iter().filter(|&&w| within(w)) {
                if w == start {
                    let mut cycle = vec![v];
                    while let Some(&p) =
                        (came_from.get(*cycle.last()? as usize)).filter(|&&p| p != NONE)
                    {
                        cycle.push(p);
                    }
                    cycle.reverse();
                    return Some(cycle);
                }
                if came_from[w as usize] == NONE {
                    came_from[w as usize] = v;
                    queue.push_back(w);
                }
            }
        }
        None
    }
}

struct Tarjan {
    /// Each node's visit number, and the lowest one it reaches (`NONE`: not visited).
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// The depth-first path: each node with where among its successors it is.
    work: Vec<(u32, usize)>,
    parts: Vec<Vec<u32>>,
    visited: u32,
}

impl Tarjan {
    fn visit(&mut self, v: u32) {
        (self.index[v as usize], self.low[v as usize]) = (self.visited, self.visited);
        self.visited += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.work.push((v, 0));
    }

    fn from(&mut self, g: &Graph, start: u32) {
        self.visit(start);
        while let Some(&mut (v, ref mut at)) = self.work.last_mut() {
            if let Some(&w) = g.successors(v).get(*at) {
                *at += 1;
                if self.index[w as usize] == NONE {
                    self.visit(w);
                } else if self.on_stack[w as usize] {
                    self.low[v as usize] = self.low[v as usize].min(self.index[w as usize]);
                }
                continue;
            }
            self.work.pop();
            let (vi, vlow) = (self.index[v as usize], self.low[v as usize]);
            if let Some(&(parent, _)) = self.work.last() {
                self.low[parent as usize] = self.low[parent as usize].min(vlow);
            }
            if vi == vlow {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w as usize] = false;
                    part.push(w);
                    if w == v {
                        break;
                    }
                }
                part.sort_unstable();
                self.parts.push(part);
            }
        }
    }
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
    fn ids_of_any_size_repeated_edges_and_any_order_give_the_same_cycles() {
        let edges = [
            (u64::MAX, 10),
            (10, u64::MAX),
            (10, u64::MAX),
            (7, 7),
            (7, 7),
        ];
        assert_eq!(cycles(edges), vec![vec![7], vec![10, u64::MAX]]);
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
