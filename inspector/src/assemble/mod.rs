//! From a protocol [`Snapshot`] and decoded walks to a [`Dump`]: the assembly stage.
//!
//! Chains are rebuilt *only* from continuation links (each frame's `parent`) and the awaited tasks'
//! `awaited_by` edges; the delegate is carried along as extra information and never consulted to build a
//! chain, and decoded walks (see `decode`) are merged in by the same pass. [`Dump::build_decoded`] does the
//! reconstruction once for every task, before any filter, so that edges and cycles are right even for
//! tasks a filter hides. Tasks only listed from registered runtimes are added by `runtime`, and chains
//! that cannot have changed are kept from one dump to the next by `chains`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use asyncdump_protocol::{Capture, FrameSource, Handshake, Snapshot, TaskState, Walk};

use crate::decode::{AnnotatedFrame, TaskRefs};
use crate::model::values::Reading;
use crate::model::{
    AwaitedBy, CaptureView, CensusView, DecodedDelegate, DecodingInfo, DelegateView, Dump, FORMAT,
    FastMap, FastSet, FrameInfo, FrameNode, JSON_VERSION, Loc, MAX_CHAIN_DEPTH, Process, ReadFrom,
    SnapshotInfo, Source, State, TaskView, Thread, assign_frame_ids, derived_name, find_cycles,
};
use crate::plan::Plan;

mod chains;
mod runtime;
mod threads;
pub use chains::ChainCache;
use chains::{Chain, ChainKey};

/// Values shared by many tasks, built once per snapshot.
struct Shared {
    metas: Vec<Arc<FrameInfo>>,
    sites: Vec<(Arc<Loc>, Arc<str>)>,
    /// What most tasks have: no decoded delegate and no search text yet, one allocation for all.
    no_delegates: Arc<Vec<DecodedDelegate>>,
    no_text: Arc<str>,
}

impl Shared {
    /// Frame meta `i`; one that says it is missing when a reply names one it does not hold (the
    /// session refuses such replies; the model never panics on one).
    fn meta(&self, i: u32) -> Arc<FrameInfo> {
        self.metas.get(i as usize).cloned().unwrap_or_else(|| {
            Arc::new(FrameInfo::new(
                format!("(frame {i}: not in the reply)"),
                None,
                Source::Labelled,
            ))
        })
    }

    fn site(&self, i: u32) -> (Arc<Loc>, Arc<str>) {
        self.sites.get(i as usize).cloned().unwrap_or_else(|| {
            let nowhere = Loc {
                file: format!("(spawn site {i}: not in the reply)").into(),
                line: 0,
                column: 0,
            };
            (Arc::new(nowhere), Arc::from("?"))
        })
    }
}

/// Why a snapshot does not hold together, if it does not: a task naming a frame meta or spawn site
/// the snapshot lacks.
pub fn inconsistency(snap: &Snapshot) -> Option<String> {
    let (metas, sites) = (snap.frame_metas.len(), snap.spawn_sites.len());
    snap.tasks
        .iter()
        .find_map(|t| task_inconsistency(t, metas, sites))
}

/// The dump of a snapshot as it came off the wire, without decoding; refused in words when it does
/// not hold together (see [`inconsistency`]).
pub fn undecoded(handshake: &Handshake, snap: &Snapshot) -> Result<Dump, String> {
    if let Some(why) = inconsistency(snap) {
        return Err(why);
    }
    let mut cache = ChainCache::default();
    Ok(Dump::build_decoded(
        process(handshake),
        snap,
        0,
        None,
        DecodingInfo::default(),
        &mut cache,
    ))
}

/// The process as its agent's handshake describes it.
pub fn process(handshake: &Handshake) -> Process {
    Process {
        pid: handshake.pid,
        program: handshake.program.clone(),
        read_from: ReadFrom::Agent,
        agent_version: Some(handshake.agent_version.clone()),
        protocol_version: Some(handshake.protocol_version),
        start_time_unix_ms: handshake.start_time_unix_ms,
        uptime_ns: 0,
    }
}

/// Why task `t` does not fit tables of `metas` frame metas and `sites` spawn sites, if it does not.
pub fn task_inconsistency(
    t: &asyncdump_protocol::Task,
    metas: usize,
    sites: usize,
) -> Option<String> {
    if t.spawn_site as usize >= sites {
        return Some(format!(
            "task {} names spawn site {} of {sites}",
            t.id, t.spawn_site
        ));
    }
    let f = t.frames.iter().find(|f| f.meta as usize >= metas)?;
    Some(format!("task {} names frame {} of {metas}", t.id, f.meta))
}

impl Dump {
    #[cfg(test)]
    pub fn build(handshake: &Handshake, snap: &Snapshot, round_trip_ns: u64) -> Dump {
        Dump::build_decoded(
            process(handshake),
            snap,
            round_trip_ns,
            None,
            DecodingInfo::default(),
            &mut ChainCache::default(),
        )
    }

    /// Rebuilds every task's chain, merging its decoded walk (if any) with `decoder`, and adds the tasks
    /// only listed from registered runtimes (see the `runtime` module). Chains in `cache` that are
    /// still their task's are taken from it instead (see `chains`).
    pub fn build_decoded(
        process: Process,
        snap: &Snapshot,
        round_trip_ns: u64,
        decoder: Option<&Plan>,
        decoding: DecodingInfo,
        cache: &mut ChainCache,
    ) -> Dump {
        let mut decoding = decoding;
        (decoding.unknown_dyn, decoding.unreadable) = undecodable(snap);
        let listed = runtime::Listed::new(snap, decoder);
        let mut tasks = agent_tasks(snap, decoder, &listed, cache);
        cache.sweep();
        tasks.extend(listed.views(decoder, cache.live(), &cache.reading));
        listed.join_edges(&mut tasks, decoder);
        // Edges only decoded frames can hold (a walked `JoinHandle`, a held sender); the agent's own
        // edges named their awaiter already.
        if decoder.is_some() {
            runtime::Listed::frame_edges(&mut tasks);
        }
        derive_names(&mut tasks);
        crate::model::values::link_streams(&mut tasks);
        // Built here, on the thread that builds the dump, not where it is first looked at (a live
        // view's screen, which should not wait for it).
        let mut index = FastMap::default();
        index.reserve(tasks.len());
        index.extend(tasks.iter().enumerate().map(|(i, t)| (t.id, i)));
        Dump {
            format: FORMAT.to_owned(),
            version: JSON_VERSION,
            process: Process {
                uptime_ns: snap.uptime_ns,
                ..process
            },
            snapshot: snapshot_info(snap, round_trip_ns, &tasks),
            runtimes: listed.reports(snap, decoder, &decoding),
            census: snap.census.map(|c| CensusView {
                total_bytes: c.total_bytes,
                scanned_bytes: c.scanned_bytes,
                unreadable_bytes: c.unreadable_bytes,
                cut: c.cut,
                found: c.found,
                blocking: c.blocking,
                rejected_lists: c.rejected_lists,
                elapsed_ns: c.elapsed_ns,
                age_ns: c.age_ns,
            }),
            deadlocks: find_cycles(&tasks),
            waits: Vec::new(),
            statics: Vec::new(),
            on_threads: Vec::new(),
            threads: Vec::new(),
            starved: Vec::new(),
            causes: Vec::new(),
            waker_groups: Vec::new(),
            register_bytes: Vec::new(),
            decoding,
            tasks,
            index: index.into(),
        }
    }
}

impl Shared {
    /// The snapshot's frame metas and spawn sites, each made once.
    fn of(snap: &Snapshot) -> Shared {
        let meta = |m: &asyncdump_protocol::FrameMeta| {
            let source = match m.source {
                FrameSource::AnnotatedFn => Source::AnnotatedFn,
                FrameSource::Labelled => Source::Labelled,
            };
            Arc::new(FrameInfo::new(
                m.name.clone(),
                Some(loc(&m.location)),
                source,
            ))
        };
        let site = |s: &asyncdump_protocol::SpawnSite| {
            (Arc::new(loc(&s.location)), Arc::from(s.root_type.as_str()))
        };
        Shared {
            metas: snap.frame_metas.iter().map(meta).collect(),
            sites: snap.spawn_sites.iter().map(site).collect(),
            no_delegates: Arc::default(),
            no_text: Arc::from(""),
        }
    }
}

/// The views of the agent's tasks, with the JoinHandle edges into and out of each.
fn agent_tasks(
    snap: &Snapshot,
    decoder: Option<&Plan>,
    listed: &runtime::Listed<'_>,
    cache: &mut ChainCache,
) -> Vec<TaskView> {
    let shared = Shared::of(snap);
    let by_id: FastMap<u64, usize> = (snap.tasks.iter().enumerate())
        .map(|(i, t)| (t.id, i))
        .collect();
    // Edges, keyed by the awaiting task: (awaiting frame id or None for the root, awaited task).
    let mut edges: FastMap<u64, Vec<(Option<u64>, u64)>> = FastMap::default();
    for t in &snap.tasks {
        if let Some(a) = t.awaited_by {
            edges.entry(a.task).or_default().push((a.frame, t.id));
        }
    }
    let view = |t: &asyncdump_protocol::Task| {
        let edges = edges.get(&t.id).map_or(&[][..], |v| v);
        let mut view = task_view(snap, &shared, t, edges, decoder, listed.refs(), cache);
        listed.annotate(&mut view);
        view.awaited_by = t.awaited_by.map(|edge| {
            let awaiter = by_id.get(&edge.task).map(|&j| &snap.tasks[j]);
            AwaitedBy {
                task: edge.task,
                task_name: awaiter.and_then(|a| a.name.clone()),
                path: awaiter
                    .map(|a| frame_path(snap, a, edge.frame))
                    .unwrap_or_default(),
            }
        });
        view
    };
    snap.tasks.iter().map(view).collect()
}

/// How many nodes of the snapshot's walks (the agent's tasks' and the runtimes') are `dyn Future`s of
/// a vtable the plan does not know, and how many could not be read.
fn undecodable(snap: &Snapshot) -> (u64, u64) {
    let walks = (snap.tasks.iter().filter_map(|t| t.walk.as_ref())).chain(
        snap.runtimes
            .iter()
            .flat_map(|r| &r.tasks)
            .filter_map(|t| t.walk.as_ref()),
    );
    let (mut unknown, mut unreadable) = (0, 0);
    for walk in walks {
        let Walk::Nodes { nodes, .. } = walk else {
            continue;
        };
        for n in nodes {
            match n.status {
                asyncdump_protocol::NodeStatus::UnknownVtable { .. } => unknown += 1,
                asyncdump_protocol::NodeStatus::Fault => unreadable += 1,
                _ => {}
            }
        }
    }
    (unknown, unreadable)
}

/// A name from its chain for each task without one (see [`derived_name`]); tasks that share a name
/// share its string (a dump may hold 100,000 tasks and a handful of names).
fn derive_names(tasks: &mut [TaskView]) {
    let mut interned: FastMap<&str, Arc<str>> = FastMap::default();
    let names: Vec<Option<Arc<str>>> = (tasks.iter())
        .map(|t| {
            if t.name.is_some() {
                return None;
            }
            let name = derived_name(&t.frames, &t.root_type);
            if let Some(shared) = interned.get(&*name) {
                return Some(shared.clone());
            }
            let shared: Arc<str> = Arc::from(&*name);
            if let std::borrow::Cow::Borrowed(key) = name {
                interned.insert(key, shared.clone());
            }
            Some(shared)
        })
        .collect();
    for (t, name) in tasks.iter_mut().zip(names) {
        t.derived_name = name;
    }
}

/// The header's counts of the snapshot.
fn snapshot_info(snap: &Snapshot, round_trip_ns: u64, tasks: &[TaskView]) -> SnapshotInfo {
    let count = |s: State| tasks.iter().filter(|t| t.state == s).count();
    SnapshotInfo {
        now_ns: snap.now_ns,
        capture_ns: snap.capture_ns,
        round_trip_ns,
        tasks_total: tasks.len(),
        idle: count(State::Idle),
        scheduled: count(State::Scheduled),
        running: count(State::Running),
        completed: count(State::Completed),
        tasks_spawned: snap.stats.tasks_spawned,
        block_ons: 0,
        stopped: None,
        sampling: None,
    }
}

fn loc(l: &asyncdump_protocol::Location) -> Loc {
    Loc {
        file: l.file.as_str().into(),
        line: l.line,
        column: l.column,
    }
}

/// An agent task's state, the thread running it, and since when it has been so.
fn task_state(t: &asyncdump_protocol::Task) -> (State, Option<Thread>, u64) {
    match &t.state {
        TaskState::Idle => (
            State::Idle,
            None,
            t.last_poll_end_ns.unwrap_or(t.created_ns),
        ),
        TaskState::Running { thread, since_ns } => (
            State::Running,
            Some(Thread {
                tid: thread.tid,
                name: thread.name.clone(),
            }),
            *since_ns,
        ),
        TaskState::Completed { at_ns } => (State::Completed, None, *at_ns),
    }
}

fn task_view(
    snap: &Snapshot,
    shared: &Shared,
    t: &asyncdump_protocol::Task,
    edges: &[(Option<u64>, u64)],
    decoder: Option<&Plan>,
    refs: &TaskRefs,
    cache: &mut ChainCache,
) -> TaskView {
    let now = snap.now_ns;
    let (state, thread, since) = task_state(t);
    let (spawned_at, mut root_type) = shared.site(t.spawn_site);
    if let Some(name) = decoder.and_then(|d| d.root_names.get(&t.root_anchor)) {
        root_type = name.clone();
    }
    let key = ChainKey {
        polls: t.polls,
        capture: t.capture,
        edges: edges.to_vec(),
    };
    cache.saw(t.id);
    let cached = cache.get(t.id, &key).cloned();
    let fresh = cached.is_none();
    let live = cache.live();
    let wanted = &cache.reading;
    let chain = cached.unwrap_or_else(|| chain(shared, t, edges, (decoder, wanted), refs, live));
    let mut view = TaskView {
        id: t.id,
        agent_id: Some(t.id),
        tokio_id: None,
        name: chain.name,
        derived_name: None,
        request: None,
        sockets: Vec::new(),
        stream: None,
        serves: Vec::new(),
        progress: None,
        verdict: None,
        state,
        thread,
        state_age_ns: Some(now.saturating_sub(since)),
        unchanged_ns: None,
        age_ns: Some(now.saturating_sub(t.created_ns)),
        polls: Some(t.polls),
        busy_ns: Some(t.busy_ns),
        wakes: Some(t.wakes),
        last_wake_ago_ns: t.last_wake_ns.map(|w| now.saturating_sub(w)),
        spawned_at: Some(spawned_at),
        root_type,
        capture: match t.capture {
            Capture::Fresh => CaptureView::Fresh,
            Capture::Stale { captured_ns } => CaptureView::Stale {
                age_ns: now.saturating_sub(captured_ns),
            },
            Capture::Unavailable => CaptureView::Unavailable,
        },
        frames: chain.frames,
        awaits_tasks: chain.awaits_tasks,
        awaited_by: None,
        delegate: t.delegate.map(|d| DelegateView {
            clones: d.clones,
            held_ns: now.saturating_sub(d.since_ns),
        }),
        decoded_delegates: chain.decoded_delegates,
        decode_note: chain.decode_note,
        searched: chain.searched,
        tokio_task: None,
        block_on: None,
    };
    if fresh && live {
        view.searched = view.search_text();
        let chain = Chain {
            frames: view.frames.clone(),
            awaits_tasks: view.awaits_tasks.clone(),
            decoded_delegates: view.decoded_delegates.clone(),
            decode_note: view.decode_note.clone(),
            name: view.name.clone(),
            searched: view.searched.clone(),
        };
        cache.put(t.id, key, chain);
    }
    view
}

/// A task's chain: its annotated frames as a tree with the edges `edges` hung on them, merged with its
/// decoded walk when there is one; for a `live` view, with frame ids.
fn chain(
    shared: &Shared,
    t: &asyncdump_protocol::Task,
    edges: &[(Option<u64>, u64)],
    (decoder, wanted): (Option<&Plan>, &Reading),
    refs: &TaskRefs,
    live: bool,
) -> Chain {
    let mut awaits_root: Vec<u64> = Vec::new();
    let mut by_frame: FastMap<u64, Vec<u64>> = FastMap::default();
    if !edges.is_empty() {
        let known: HashSet<u64> = t.frames.iter().map(|f| f.id).collect();
        for &(frame, awaited) in edges {
            match frame {
                Some(f) if known.contains(&f) => by_frame.entry(f).or_default().push(awaited),
                // The task root itself, or a frame that has since gone: attach the edge to the root.
                _ => awaits_root.push(awaited),
            }
        }
        awaits_root.sort_unstable();
    }
    let mut decoded_delegates = Vec::new();
    let (frames, decode_note) = match (decoder, &t.walk) {
        (Some(dec), Some(walk @ Walk::Nodes { nodes, .. })) => {
            let annotated: Vec<AnnotatedFrame> = t
                .frames
                .iter()
                .map(|f| AnnotatedFrame {
                    id: f.id,
                    parent: f.parent,
                    info: shared.meta(f.meta),
                    awaits: by_frame.get(&f.id).cloned().unwrap_or_default(),
                })
                .collect();
            let (frames, delegates) = dec.merge(nodes, &annotated, &mut awaits_root, refs, wanted);
            decoded_delegates = delegates;
            (frames, Plan::note(walk))
        }
        (Some(_), Some(walk)) => (build_tree(shared, &t.frames, &by_frame), Plan::note(walk)),
        _ => (build_tree(shared, &t.frames, &by_frame), None),
    };
    let mut frames = frames;
    if live {
        assign_frame_ids(&mut frames);
    }
    Chain {
        frames: frames.into(),
        awaits_tasks: awaits_root,
        decoded_delegates: match decoded_delegates.is_empty() {
            true => shared.no_delegates.clone(),
            false => decoded_delegates.into(),
        },
        decode_note: decode_note.map(Arc::from),
        name: t.name.as_deref().map(Arc::from),
        searched: shared.no_text.clone(),
    }
}

/// Builds the frame forest from frames in pre-order (the agent's order: a parent before its children,
/// each subtree contiguous), with a stack holding the path from the root to the current frame. A frame
/// whose parent is not on that path (cut by the agent's frame limit) becomes a top-level frame. Frames
/// below [`MAX_CHAIN_DEPTH`] are counted into one cut frame under the deepest one kept, which also
/// takes their edges: which tasks the chain awaits stays shown.
fn build_tree(
    shared: &Shared,
    frames: &[asyncdump_protocol::Frame],
    edges: &FastMap<u64, Vec<u64>>,
) -> Vec<FrameNode> {
    let mut roots = Vec::new();
    let mut stack: Vec<Building> = Vec::new();
    // The frames counted into the cut of the stack's top: a subtree is contiguous, so all of them
    // come before the stack is next popped.
    let mut cut_ids: FastSet<u64> = FastSet::default();
    for f in frames {
        let edges_of = edges.get(&f.id).map(Vec::as_slice).unwrap_or_default();
        let full = stack.len() >= MAX_CHAIN_DEPTH;
        let below_cut = f.parent.is_some_and(|p| cut_ids.contains(&p));
        if below_cut || (full && f.parent == stack.last().map(|b| b.id)) {
            let top = stack.last_mut().expect("a cut is under a kept frame");
            top.cut += 1;
            top.node.awaits_tasks.extend_from_slice(edges_of);
            cut_ids.insert(f.id);
            continue;
        }
        cut_ids.clear();
        while stack.last().is_some_and(|b| Some(b.id) != f.parent) {
            let done = stack.pop().expect("non-empty").finish();
            attach(&mut stack, &mut roots, done);
        }
        stack.push(Building {
            id: f.id,
            cut: 0,
            node: FrameNode {
                id: 0,
                meta: shared.meta(f.meta),
                awaits_tasks: edges_of.to_vec(),
                locals: Vec::new(),
                waits_on: None,
                holds: Vec::new(),
                walked_within: Vec::new(),
                children: Vec::new(),
            },
        });
    }
    while let Some(b) = stack.pop() {
        attach(&mut stack, &mut roots, b.finish());
    }
    roots
}

/// A frame on [`build_tree`]'s path, with how many frames below it were cut.
struct Building {
    id: u64,
    cut: u64,
    node: FrameNode,
}

impl Building {
    fn finish(mut self) -> FrameNode {
        if self.cut > 0 {
            self.node.children.push(FrameNode::cut(self.cut));
        }
        self.node.awaits_tasks.sort_unstable();
        self.node.awaits_tasks.dedup();
        self.node
    }
}

fn attach(stack: &mut [Building], roots: &mut Vec<FrameNode>, node: FrameNode) {
    match stack.last_mut() {
        Some(b) => b.node.children.push(node),
        None => roots.push(node),
    }
}

/// Names from the task root down to frame `target` (empty if it is the root or unknown).
fn frame_path(snap: &Snapshot, t: &asyncdump_protocol::Task, target: Option<u64>) -> Vec<String> {
    let by_id: HashMap<u64, &asyncdump_protocol::Frame> =
        t.frames.iter().map(|f| (f.id, f)).collect();
    let mut path = Vec::new();
    let mut cur = target.and_then(|id| by_id.get(&id));
    while let Some(f) = cur {
        let name = snap
            .frame_metas
            .get(f.meta as usize)
            .map(|m| m.name.clone());
        path.push(name.unwrap_or_else(|| format!("frame {}", f.meta)));
        cur = f.parent.and_then(|p| by_id.get(&p));
        if path.len() > t.frames.len() {
            break; // malformed parent links: never loop forever on bad input
        }
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{edge_snapshot, handshake, names, sample};
    use asyncdump_protocol::{Delegate, Frame};

    #[test]
    fn a_reply_naming_frames_and_sites_it_lacks_is_named_and_never_panics() {
        let mut snap = sample();
        snap.tasks[0].frames[1].meta = 99;
        snap.tasks[0].spawn_site = 7;
        assert!(inconsistency(&snap).is_some_and(|why| why.contains("spawn site 7")));
        let dump = Dump::build(&handshake(), &snap, 0);
        let t = &dump.tasks[0];
        assert_eq!(
            t.frames[0].children[0].meta.name,
            "(frame 99: not in the reply)"
        );
        assert!(t.spawned_at.as_ref().unwrap().file.contains("spawn site 7"));
        snap.tasks[0].spawn_site = 0;
        assert!(inconsistency(&snap).is_some_and(|why| why.contains("frame 99")));
        assert!(inconsistency(&sample()).is_none());
    }

    #[test]
    fn frames_become_a_tree_in_poll_order() {
        let dump = Dump::build(&handshake(), &sample(), 0);
        let root = &dump.tasks[0].frames;
        assert_eq!(names(root), ["handler"]);
        assert_eq!(names(&root[0].children), ["read_frame", "timer"]);
        assert_eq!(names(&root[0].children[0].children), ["recv"]);
        assert_eq!(dump.tasks[0].state_age_ns, Some(2_000_000_000 - 1_000));
    }

    #[test]
    fn chains_do_not_depend_on_the_delegate() {
        let mut with = sample();
        with.tasks[0].delegate = Some(Delegate {
            clones: 1,
            since_ns: 5,
        });
        let a = Dump::build(&handshake(), &with, 0);
        let b = Dump::build(&handshake(), &sample(), 0);
        assert_eq!(a.tasks[0].frames, b.tasks[0].frames);
        assert!(a.tasks[0].delegate.is_some() && b.tasks[0].delegate.is_none());
    }

    #[test]
    fn frame_ids_stay_put_across_snapshots_and_tell_siblings_apart() {
        let ids = |d: &Dump| {
            let root = &d.tasks[0].frames[0];
            let kids: Vec<u64> = root.children.iter().map(|c| c.id).collect();
            (root.id, kids, root.children[0].children[0].id)
        };
        let first = Dump::build(&handshake(), &sample(), 0);
        // A later snapshot: the agent's frame node addresses differ, the chain does not.
        let mut later = sample();
        for f in &mut later.tasks[0].frames {
            f.id += 1000;
            f.parent = f.parent.map(|p| p + 1000);
        }
        let second = Dump::build(&handshake(), &later, 0);
        assert_eq!(ids(&first), ids(&second));
        let (root, kids, leaf) = ids(&first);
        let mut all = vec![root, leaf];
        all.extend(kids);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 4, "every frame its own id");
        // The same frame under another parent is another frame.
        let mut moved = sample();
        let recv = moved.tasks[0].frames.remove(2);
        moved.tasks[0].frames.push(Frame {
            parent: Some(13),
            ..recv
        });
        let third = Dump::build(&handshake(), &moved, 0);
        assert_ne!(third.tasks[0].frames[0].children[1].children[0].id, leaf);
    }

    #[test]
    fn a_join_handle_edge_hangs_under_the_awaiting_frame() {
        let dump = Dump::build(&handshake(), &edge_snapshot(&[(1, 2)]), 0);
        assert_eq!(dump.tasks[0].frames[0].awaits_tasks, [2]);
        let by = dump.tasks[1].awaited_by.as_ref().unwrap();
        assert_eq!((by.task, by.path.clone()), (1, vec!["handler".to_owned()]));
        assert!(dump.deadlocks.is_empty());
    }

    #[test]
    fn frames_cut_by_the_agent_limit_still_show() {
        let mut s = sample();
        s.tasks[0].frames.remove(0); // parent of read_frame and timer is missing
        let dump = Dump::build(&handshake(), &s, 0);
        assert_eq!(names(&dump.tasks[0].frames), ["read_frame", "timer"]);
    }

    /// Below `MAX_CHAIN_DEPTH`, frames are counted into one cut frame; a JoinHandle awaited down
    /// there is still an edge, from the deepest frame kept.
    #[test]
    fn a_chain_deeper_than_kept_is_cut_and_keeps_its_edges() {
        let mut s = edge_snapshot(&[(1, 2)]);
        let deep = MAX_CHAIN_DEPTH as u64 + 10;
        let chain = (0..deep).map(|i| Frame {
            id: 1000 + i,
            parent: (i > 0).then(|| 999 + i),
            meta: 0,
        });
        s.tasks[0].frames = chain.collect();
        s.tasks[1].awaited_by.as_mut().unwrap().frame = Some(1000 + deep - 1);
        let dump = Dump::build(&handshake(), &s, 0);
        let mut at = &dump.tasks[0].frames[0];
        for _ in 1..MAX_CHAIN_DEPTH {
            assert!(at.awaits_tasks.is_empty());
            at = &at.children[0];
        }
        assert_eq!(names(&at.children), ["… 10 more frames"]);
        assert_eq!(at.children[0].meta.source, Source::Cut);
        assert_eq!(at.awaits_tasks, [2], "the edge from below the cut");
        assert!(dump.tasks[1].awaited_by.is_some());
    }

    /// A `dyn Future` whose vtable the DWARF does not name and a future that could not be read are
    /// shown where they were met, and counted once for the header, however many tasks meet them.
    #[test]
    fn undecodable_futures_are_counted_for_the_header() {
        use asyncdump_protocol::{NO_PARENT, NodeStatus, WalkNode};
        let node = |status| WalkNode {
            parent: NO_PARENT,
            ty: 0,
            addr: 0x1000,
            discr: None,
            status,
        };
        let walk = |nodes| Walk::Nodes {
            nodes,
            truncated: false,
        };
        let mut s = sample();
        let unknown = NodeStatus::UnknownVtable { vtable: 0xbad };
        s.tasks[0].walk = Some(walk(vec![node(NodeStatus::Read), node(unknown)]));
        s.tasks.push(s.tasks[0].clone());
        s.tasks[1].id += 1;
        s.tasks[1].walk = Some(walk(vec![node(unknown), node(NodeStatus::Fault)]));
        let dump = Dump::build(&handshake(), &s, 0);
        assert_eq!(
            (dump.decoding.unknown_dyn, dump.decoding.unreadable),
            (2, 1)
        );
        let text = crate::view::text::render(&dump, None, Default::default());
        assert!(
            text.contains("not decoded (each shown where it was met): 2 dyn Futures of a type the DWARF does not name, 1 unreadable future\n"),
            "{text}"
        );
    }
}
