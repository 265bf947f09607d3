//! Merging one task's walk with its annotated frames (see [`Plan::merge`]).
//!
//! The walk lists each node after its parent, so one pass places every node: under the shown line of
//! its nearest shown ancestor, as a line of its own, folded into its parent's line (an annotated frame's
//! inner future, an async fn awaiting its own block), or not at all (a finished or disabled branch,
//! data read for the delegate). What shows is decided by the node's [`Kind`] and what was read.

use std::sync::Arc;

use asyncdump_protocol::{NO_PARENT, NodeStatus, WalkNode};

use super::arena::Arena;
use super::{AnnotatedFrame, TaskRefs};
use crate::model::values::{Check, Local, Reading, Value, WaitKind, WaitOn};
use crate::model::{FastMap, FrameInfo, FrameNode, MAX_CHAIN_DEPTH, Source};
use crate::names::base_name;
use crate::plan::values::{LocalPlan, TargetKind, TargetPlan};
use crate::plan::{Kind, Plan, StateView};

/// Where the merge put one walk node.
#[derive(Default)]
struct Placed {
    /// The shown node its children hang under (`None`: the task root).
    attach: Option<usize>,
    /// Its subtree is not shown (a finished or disabled branch, or data read for the delegate).
    skipped: bool,
    /// The shown annotated frame it is (a `Framed`): its inner future is folded into that line.
    wraps: Option<usize>,
    /// The shown line of the `JoinHandle` it is: its child names the joined task.
    join: Option<usize>,
    /// It shows something itself: a line, or what it adds to its parent's line.
    shows: bool,
}

/// One merge in progress.
pub(super) struct Merge<'a> {
    plan: &'a Plan,
    walk: &'a [WalkNode],
    annotated: &'a [AnnotatedFrame],
    refs: &'a TaskRefs,
    /// Which locals of decoded frames, and whether leaves' wait targets, to give (unread, for the
    /// values stage).
    reading: &'a Reading,
    /// Annotated frames by id.
    by_id: FastMap<u64, usize>,
    arena: Arena,
    placed: Vec<Placed>,
    /// Annotated frames already shown, by id: their line.
    matched: FastMap<u64, usize>,
    /// A select's `disabled` mask (set on the select's node), and per tuple the next branch number.
    mask: Vec<Option<u64>>,
    next_branch: Vec<u32>,
    /// The walk's `Inner` nodes of the oneshot receivers that are part of the chain.
    pub(super) receivers: Vec<usize>,
    /// Wait targets planned from a frame's locals (see `StateView::target`), by the frame's line:
    /// given to its leaf once every line is placed.
    frame_waits: Vec<(usize, WaitOn)>,
}

/// Where a node goes: the line it hangs under, and the line its parent folds into (if any).
#[derive(Clone, Copy)]
struct Slot {
    parent: Option<usize>,
    under: Option<usize>,
    folded_into: Option<usize>,
}

impl<'a> Merge<'a> {
    pub(super) fn new(
        plan: &'a Plan,
        walk: &'a [WalkNode],
        annotated: &'a [AnnotatedFrame],
        refs: &'a TaskRefs,
        reading: &'a Reading,
    ) -> Merge<'a> {
        Merge {
            plan,
            walk,
            annotated,
            refs,
            reading,
            by_id: (annotated.iter().enumerate())
                .map(|(i, f)| (f.id, i))
                .collect(),
            arena: Arena::default(),
            placed: Vec::with_capacity(walk.len()),
            matched: FastMap::default(),
            mask: vec![None; walk.len()],
            next_branch: vec![0; walk.len()],
            receivers: Vec::new(),
            frame_waits: Vec::new(),
        }
    }

    /// Places every node, names dead ends, hangs the annotated frames the walk did not reach, and
    /// gives the trees. Tasks awaited through a decoded `JoinHandle` move from `root_awaits` to it.
    pub(super) fn run(mut self, root_awaits: &mut Vec<u64>) -> (Vec<FrameNode>, Vec<usize>) {
        for i in 0..self.walk.len() {
            self.place(i, root_awaits);
        }
        self.name_dead_ends();
        self.hang_unreached();
        self.lower_frame_waits();
        (self.arena.into_trees(), self.receivers)
    }

    /// Gives each frame's wait target to the leaf it awaits through a line of single children (a
    /// `Barrier`'s wait through the `watch` it waits on): the innermost first, so an outer frame,
    /// which says more, has the last word. Where the chain forks below, it stays on the frame.
    fn lower_frame_waits(&mut self) {
        self.frame_waits
            .sort_unstable_by_key(|(line, _)| std::cmp::Reverse(*line));
        for (line, wait) in std::mem::take(&mut self.frame_waits) {
            let mut leaf = line;
            for _ in 0..MAX_CHAIN_DEPTH {
                match self.arena.nodes[leaf].children.as_slice() {
                    [only] => leaf = *only,
                    _ => break,
                }
            }
            self.arena.nodes[leaf].waits_on = Some(Box::new(wait));
        }
    }

    fn kind(&self, i: usize) -> Option<&'a Kind> {
        let plan: &'a Plan = self.plan;
        plan.kinds.get(self.walk[i].ty as usize)
    }

    fn place(&mut self, i: usize, root_awaits: &mut Vec<u64>) {
        let n = &self.walk[i];
        let parent = (n.parent != NO_PARENT)
            .then_some(n.parent as usize)
            .filter(|&p| p < self.placed.len());
        let slot = Slot {
            parent,
            under: parent.and_then(|p| self.placed[p].attach),
            folded_into: parent.and_then(|p| self.placed[p].wraps),
        };
        let mut here = Placed {
            attach: slot.under,
            ..Placed::default()
        };
        let kind = self.kind(i);
        let disabled = self.is_disabled_branch(parent);
        let internal = matches!(
            kind,
            Some(
                Kind::OneshotInner
                    | Kind::WakerVtable
                    | Kind::WakerData
                    | Kind::SelectMask
                    | Kind::OneshotSender
                    | Kind::H2Stream
                    | Kind::H2Connection
            )
        );
        let parent_skipped = parent.is_some_and(|p| self.placed[p].skipped);
        if !parent_skipped {
            self.note_internal(i, parent, kind);
        }
        if parent_skipped || internal || disabled {
            // A disabled select branch is not pending; internal nodes are read for the delegate
            // or the mask, never shown as part of the chain.
            here.skipped = true;
        } else {
            self.show(n, kind, slot, &mut here, root_awaits);
        }
        here.shows = !here.skipped
            && n.status != NodeStatus::Null
            && !matches!(
                kind,
                Some(Kind::Transparent | Kind::Tuple | Kind::AgentRoot { .. } | Kind::SelectMask)
            );
        self.placed.push(here);
    }

    /// Whether the node is a branch of a `select!` whose mask says it is disabled (counting the
    /// branches of its tuple parent in order).
    fn is_disabled_branch(&mut self, parent: Option<usize>) -> bool {
        let Some(p) = parent.filter(|&p| matches!(self.kind(p), Some(Kind::Tuple))) else {
            return false;
        };
        let branch = self.next_branch[p];
        self.next_branch[p] += 1;
        self.select_of(p)
            .and_then(|s| self.mask[s])
            .is_some_and(|m| branch < 64 && m & (1 << branch) != 0)
    }

    /// Notes what internal nodes say: a select's mask, a receiver for the delegate.
    fn note_internal(&mut self, i: usize, parent: Option<usize>, kind: Option<&Kind>) {
        match kind {
            Some(Kind::SelectMask) if self.walk[i].status == NodeStatus::Read => {
                if let Some(p) = parent {
                    self.mask[p] = self.walk[i].discr;
                }
            }
            Some(Kind::OneshotInner) => {
                self.receivers.push(i);
                // The task holding the sender is the one this receive waits for: an edge on the
                // receiver's line, like a `JoinHandle`'s.
                let line = parent.and_then(|p| self.placed[p].attach);
                let holder = self.refs.senders.get(&self.walk[i].addr);
                if let (Some(d), Some(&task)) = (line, holder) {
                    let awaits = &mut self.arena.nodes[d].awaits;
                    if !awaits.contains(&task) {
                        awaits.push(task);
                    }
                }
            }
            _ => {}
        }
    }

    /// A line of its own, under `under`.
    fn line(&mut self, under: Option<usize>, info: Arc<FrameInfo>) -> Option<usize> {
        Some(self.arena.push(under, info))
    }

    fn show(
        &mut self,
        n: &WalkNode,
        kind: Option<&Kind>,
        at: Slot,
        here: &mut Placed,
        root_awaits: &mut Vec<u64>,
    ) {
        let awaitee = |name: String| Arc::new(FrameInfo::awaitee(name));
        match (n.status, kind) {
            (NodeStatus::Null, _) => {}
            (NodeStatus::Fault, _) => {
                let info = awaitee(format!("unreadable future at {:#x}", n.addr));
                here.attach = self.line(at.under, info);
            }
            (NodeStatus::UnknownVtable { vtable }, _) => {
                let why = format!("dyn Future (vtable {vtable:#x} not in the binary's DWARF)");
                here.attach = self.line(at.under, awaitee(why));
            }
            (_, None) => {
                let why = "a future of a type the plan does not know".into();
                here.attach = self.line(at.under, awaitee(why));
            }
            (_, Some(kind)) => self.show_kind(n, kind, at, here, root_awaits),
        }
    }

    fn show_kind(
        &mut self,
        n: &WalkNode,
        kind: &Kind,
        at: Slot,
        here: &mut Placed,
        root_awaits: &mut Vec<u64>,
    ) {
        match kind {
            Kind::Coroutine(states) => self.state_machine(n, states, at, here),
            Kind::Framed { node_offset } => {
                let id = n.addr.wrapping_add(*node_offset);
                if let Some(&a) = self.by_id.get(&id) {
                    let d = self.annotated_line(at.under, a);
                    (here.attach, here.wraps) = (Some(d), Some(d));
                }
            }
            Kind::Combinator(info) | Kind::Select(info) => {
                here.attach = self.line(at.under, info.clone())
            }
            Kind::Leaf(info) | Kind::Oneshot(info) => {
                let line = match at.folded_into {
                    Some(d) if self.arena.nodes[d].info.source != Source::Decoded => {
                        let merged = self.arena.nodes[d].info.with_awaits_type(&info.name);
                        self.arena.nodes[d].info = Arc::new(merged);
                        Some(d)
                    }
                    _ => {
                        here.attach = self.line(at.under, info.clone());
                        here.attach
                    }
                };
                if let Some(line) = line.filter(|_| self.reading.targets) {
                    self.arena.nodes[line].waits_on = self.wait_target(n, at.under).map(Box::new);
                }
            }
            Kind::JoinHandle(info) => {
                here.attach = self.line(at.under, info.clone());
                here.join = here.attach;
            }
            Kind::CellRef { .. } | Kind::HeaderRef if n.status == NodeStatus::Read => {
                self.joined_task(n, kind, at, root_awaits)
            }
            Kind::Transparent
            | Kind::Tuple
            | Kind::SelectMask
            | Kind::OneshotInner
            | Kind::WakerVtable
            | Kind::WakerData
            | Kind::OneshotSender
            | Kind::H2Stream
            | Kind::H2Connection
            | Kind::CellRef { .. }
            | Kind::HeaderRef
            | Kind::AgentRoot { .. } => {}
        }
    }

    /// A state machine's line, by its state: none for a finished branch, its await folded into an
    /// annotated frame it is the inner future of, or into the async fn whose own block it is.
    fn state_machine(
        &mut self,
        n: &WalkNode,
        states: &FastMap<u64, StateView>,
        at: Slot,
        here: &mut Placed,
    ) {
        let Some(s) = n.discr.and_then(|d| states.get(&d)) else {
            let why = format!("a state machine in unknown state {:?}", n.discr);
            here.attach = self.line(at.under, Arc::new(FrameInfo::awaitee(why)));
            return;
        };
        if s.done {
            here.skipped = true;
            return;
        }
        let own_block = at.under.filter(|&d| {
            self.arena.nodes[d].children.is_empty()
                && is_own_block(&self.arena.nodes[d].info, &s.info)
        });
        let line = match at.folded_into.or(own_block) {
            Some(d) => {
                let merged = self.arena.nodes[d]
                    .info
                    .with_suspended_at(s.info.suspended_at.clone());
                self.arena.nodes[d].info = Arc::new(merged);
                // An async fn that only awaits its own block (`#[instrument]`, tokio's
                // `Mutex::lock`): one line, at the block's real await.
                if at.folded_into.is_none() {
                    here.attach = Some(d);
                }
                d
            }
            None => {
                here.attach = self.line(at.under, s.info.clone());
                match here.attach {
                    Some(l) => l,
                    None => return,
                }
            }
        };
        if (self.reading.locals.any() || self.reading.targets) && !s.locals.is_empty() {
            let locals = self.locals(n, s);
            let into = &mut self.arena.nodes[line].locals;
            // Most lines get one frame's locals: kept as collected, not copied.
            match into.is_empty() {
                true => *into = locals,
                false => into.extend(locals),
            }
            if self.reading.targets {
                let walked = self.walked_within(n, s);
                self.arena.nodes[line].walked_within.extend(walked);
            }
        }
        if let Some(target) = s.target.as_ref().filter(|_| self.reading.targets) {
            let check = self.state_check(n);
            let wait = self.wait_on(target, n.addr, check, None);
            self.frame_waits.push((line, wait));
        }
    }

    /// What leaf `n` waits for, unread, if the plan knows its type. A semaphore's is named by the
    /// frame that awaits it, `under` (`Mutex::acquire`: a `Mutex`).
    fn wait_target(&self, n: &WalkNode, under: Option<usize>) -> Option<WaitOn> {
        let target = self.plan.targets.get(&n.ty)?;
        Some(self.wait_on(target, n.addr, Check::default(), under))
    }

    /// Target `target` of the future at `base`, unread, its parts checked by `check`.
    fn wait_on(
        &self,
        target: &TargetPlan,
        base: u64,
        check: Check,
        under: Option<usize>,
    ) -> WaitOn {
        let kind = match target.kind {
            TargetKind::Sleep => WaitKind::Sleep,
            TargetKind::Io { write } => WaitKind::Io { write },
            TargetKind::Receive => WaitKind::Receive,
            TargetKind::Notify => WaitKind::Notify,
            TargetKind::Watch => WaitKind::Watch,
            TargetKind::Broadcast => WaitKind::Broadcast,
            TargetKind::Barrier => WaitKind::Barrier,
            TargetKind::Accept => WaitKind::Accept,
            TargetKind::Permits => {
                let above = under.map(|u| self.arena.nodes[u].info.name.as_str());
                WaitKind::Permits {
                    lock: lock_named(above.unwrap_or("")),
                }
            }
        };
        // The channel around a semaphore is read for a channel's send only: a lock's memory
        // around its semaphore is something else.
        let channel = matches!(&kind, WaitKind::Permits { lock } if &**lock == "channel");
        let parts = (target.parts.iter())
            .filter(|p| channel || &*p.name != "channel" || kind == WaitKind::Receive)
            .map(|p| self.unread(p, base, check))
            .collect();
        WaitOn {
            kind,
            parts,
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        }
    }

    /// The wanted locals of a state machine in state `s`, unread, and with wait targets on every
    /// one that may hold a lock or a channel's end (read for the wait graph, then dropped if not
    /// wanted): each with where it is, and the state to find again after reading it.
    fn locals(&self, n: &WalkNode, s: &StateView) -> Vec<Local> {
        let check = self.state_check(n);
        // With `-v`, room for all at once; otherwise few or none are kept.
        let all = self.reading.locals == crate::model::values::Wanted::All;
        let mut locals = Vec::with_capacity(if all { s.locals.len() } else { 0 });
        locals.extend(
            (s.locals.iter())
                .filter(|l| {
                    self.reading.locals.wants(&l.name) || self.may_hold(l) || self.names_request(l)
                })
                .map(|l| self.unread(l, n.addr, check)),
        );
        locals
    }

    /// How to find a state machine's state again after reading what it kept there.
    fn state_check(&self, n: &WalkNode) -> Check {
        let discr = self
            .plan
            .walk
            .types
            .get(n.ty as usize)
            .and_then(|t| t.discr);
        match (discr, n.discr) {
            (Some(d), Some(expected)) => Check {
                addr: n.addr.wrapping_add(u64::from(d.offset)),
                size: d.size,
                expected,
            },
            _ => Check::default(),
        }
    }

    fn may_hold(&self, l: &LocalPlan) -> bool {
        self.reading.targets && self.plan.values.may_hold(l.ty)
    }

    /// Whether `l` may say which HTTP request the task serves: read with the wait targets.
    fn names_request(&self, l: &LocalPlan) -> bool {
        self.reading.targets && self.plan.values.may_name_request(l.ty)
    }

    /// The futures the walk went into below `n` that lie inside its locals (in state `s`) that may
    /// hold a lock or a channel's end: a `select!` branch pinned in the frame is polled through the
    /// select.
    fn walked_within(&self, n: &WalkNode, s: &StateView) -> Vec<u64> {
        let spans: Vec<(u64, u64)> = (s.locals.iter())
            .filter(|l| self.may_hold(l))
            .filter_map(|l| {
                let start = n.addr.wrapping_add(u64::from(l.offset));
                let size = self.plan.values.get(l.ty)?.size;
                Some((start, start.saturating_add(u64::from(size))))
            })
            .collect();
        if spans.is_empty() {
            return Vec::new();
        }
        let Some(at) = self.walk.iter().position(|w| std::ptr::eq(w, n)) else {
            return Vec::new();
        };
        // The walk lists each node after its parent: its descendants follow it.
        let mut below = vec![false; self.walk.len()];
        below[at] = true;
        let mut found = Vec::new();
        for (j, w) in self.walk.iter().enumerate().skip(at + 1) {
            let parent = usize::try_from(w.parent).ok().filter(|&p| p < j);
            if w.parent != NO_PARENT && parent.is_some_and(|p| below[p]) {
                below[j] = true;
                if spans
                    .iter()
                    .any(|&(start, end)| (start..end).contains(&w.addr))
                {
                    found.push(w.addr);
                }
            }
        }
        found
    }

    /// Local (or wait target part) `l` of the future at `base`, unread, to be checked by `check`.
    fn unread(&self, l: &LocalPlan, base: u64, check: Check) -> Local {
        Local {
            info: l.info(&self.plan.values),
            value: Value::Unread {
                shape: l.ty,
                addr: base.wrapping_add(u64::from(l.offset)),
                check,
            },
        }
    }

    /// The task a `JoinHandle`'s cell or header pointer names: the edge moves to the handle's line.
    fn joined_task(&mut self, n: &WalkNode, kind: &Kind, at: Slot, root_awaits: &mut Vec<u64>) {
        let task = n.discr.and_then(|v| match kind {
            Kind::CellRef { plus } => self.refs.cells.get(&v.wrapping_add(*plus)).copied(),
            _ => self.refs.headers.get(&v).copied(),
        });
        let (Some(d), Some(task)) = (at.parent.and_then(|p| self.placed[p].join), task) else {
            return;
        };
        // The agent attributes the edge to the innermost annotated frame (or the root); the
        // handle's own line is more precise: show it there only.
        root_awaits.retain(|&t| t != task);
        let mut up = self.arena.nodes[d].parent;
        while let Some(a) = up {
            self.arena.nodes[a].awaits.retain(|&t| t != task);
            up = self.arena.nodes[a].parent;
        }
        self.arena.nodes[d].awaits.push(task);
    }

    /// Annotated frame `a`'s line under `under`, with the tasks it awaits.
    fn annotated_line(&mut self, under: Option<usize>, a: usize) -> usize {
        let f = &self.annotated[a];
        let d = self.arena.push(under, f.info.clone());
        self.arena.nodes[d].awaits = f.awaits.clone();
        self.matched.insert(f.id, d);
        d
    }

    /// Annotated frames the walk did not reach (behind a leaf it cannot see into, or cut by a limit)
    /// hang under their own parent frame, which pre-order guarantees is placed already.
    fn hang_unreached(&mut self) {
        for a in 0..self.annotated.len() {
            let f = &self.annotated[a];
            if self.matched.contains_key(&f.id) {
                continue;
            }
            let under = f.parent.and_then(|p| self.matched.get(&p).copied());
            self.annotated_line(under, a);
        }
    }

    /// A hand-written future the walk went into but below which nothing shows (its fields hold no
    /// future the plan can read further: hyper's HTTP/2 connection, waiting on its socket) is what its
    /// parent awaits: it is named as the leaf, once, at the topmost such future of its branch.
    fn name_dead_ends(&mut self) {
        let (walk, placed) = (self.walk, &self.placed);
        let parent_of = |i: usize| {
            let p = walk[i].parent;
            (p != NO_PARENT && (p as usize) < i).then_some(p as usize)
        };
        let mut below = vec![false; walk.len()];
        for i in (0..walk.len()).rev() {
            below[i] |= placed[i].shows;
            if let (true, Some(p)) = (below[i], parent_of(i)) {
                below[p] = true;
            }
        }
        let plan = self.plan;
        // Sender-only types are among the hand-written ones (the planner names both).
        let hand_written = |i: usize| plan.hand_written.contains_key(&walk[i].ty);
        // Holding senders only, it is state when a hand-written type (or its `Option`) holds it.
        let state = |i: usize| {
            plan.sender_only.contains(&walk[i].ty) && parent_of(i).is_some_and(hand_written)
        };
        let dead = |i: usize| {
            !below[i]
                && !placed[i].skipped
                && walk[i].status == NodeStatus::Read
                && hand_written(i)
                && !state(i)
        };
        for i in (0..walk.len()).filter(|&i| dead(i)) {
            let mut up = parent_of(i);
            let mut topmost = true;
            while let Some(a) = up.filter(|&a| !below[a]) {
                if dead(a) {
                    topmost = false;
                    break;
                }
                up = parent_of(a);
            }
            if topmost {
                let info = self.plan.hand_written[&walk[i].ty].clone();
                self.arena.push(placed[i].attach, info);
            }
        }
    }

    /// The select whose branches tuple node `t` holds: up through the pointers between them.
    fn select_of(&self, t: usize) -> Option<usize> {
        let walk = self.walk;
        let mut at = t;
        for _ in 0..4 {
            let p = walk.get(at)?.parent as usize;
            match self.plan.kinds.get(walk.get(p)?.ty as usize)? {
                Kind::Select(_) => return Some(p),
                Kind::Transparent => at = p,
                _ => return None,
            }
        }
        None
    }
}

/// Whether `child` is an async block defined in the async fn `parent` (`f::{async block#0}` in `f`),
/// both decoded, and suspended where `parent` is: a wrapper the fn awaits, whose await is the real one.
pub(super) fn is_own_block(parent: &FrameInfo, child: &FrameInfo) -> bool {
    if parent.source != Source::Decoded || child.source != Source::Decoded {
        return false;
    }
    let (p, c) = (base_name(&parent.name), base_name(&child.name));
    c.strip_prefix(p)
        .and_then(|rest| rest.strip_prefix("::{async block#"))
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// What a semaphore is to the frame `above` that awaits its acquire: the lock or channel built on it.
/// Shared text: a dump names one in every waiter.
fn lock_named(above: &str) -> Arc<str> {
    const LOCKS: &[(&str, &str)] = &[
        ("tokio::sync::mutex::", "Mutex"),
        ("tokio::sync::rwlock::", "RwLock"),
        ("tokio::sync::mpsc::", "channel"),
        ("tokio::sync::semaphore::", "Semaphore"),
    ];
    static NAMES: std::sync::LazyLock<Vec<Arc<str>>> = std::sync::LazyLock::new(|| {
        let names = LOCKS.iter().map(|(_, name)| *name);
        names.chain(["semaphore"]).map(Arc::from).collect()
    });
    let i = (LOCKS.iter()).position(|(path, _)| above.starts_with(path));
    NAMES[i.unwrap_or(LOCKS.len())].clone()
}
