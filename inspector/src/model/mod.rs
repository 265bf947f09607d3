//! From a protocol [`Snapshot`] to what a dump shows: chains as trees, cross-task edges, wait cycles.
//!
//! Chains are rebuilt *only* from continuation links (each frame's `parent`) and the awaited tasks'
//! `awaited_by` edges; the delegate is carried along as extra information and never consulted to build a
//! chain, and decoded walks (see `decode`) are merged in by the same pass. [`Dump::build_decoded`] does the
//! reconstruction once for every task, before any filter, so that edges and cycles are right even for
//! tasks a filter hides; [`Dump::filter`] then keeps what the user asked for, and
//! [`coalesce`] groups identical chains. Nothing here does I/O or formatting: the views in `view/` do.
//!
//! The serde derives here *are* the `--json` format (documented in the README); change them only together
//! with [`JSON_VERSION`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use asyncdump_protocol::{Capture, FrameSource, Handshake, Snapshot, TaskState, Walk};

use crate::decode::{AnnotatedFrame, DecodedDelegate, Decoder, TaskRefs};

mod chains;
mod runtime;
pub use chains::ChainCache;
use chains::{Chain, ChainKey};
pub use runtime::RuntimeView;
use serde::{Deserialize, Serialize};

/// Version of the `--json` document. Bump on any incompatible change of the types below.
pub const JSON_VERSION: u32 = 3;
/// The `format` of a `--json` document.
pub const FORMAT: &str = "asyncdump-dump";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Dump {
    pub format: String,
    pub version: u32,
    pub process: Process,
    pub snapshot: SnapshotInfo,
    /// The tokio runtimes registered with the agent: how many tasks each has, and how many were listed.
    pub runtimes: Vec<RuntimeView>,
    /// Wait cycles across JoinHandle edges, each listed in "awaits" order starting at its lowest task id.
    pub deadlocks: Vec<Vec<u64>>,
    /// Whether chains were also decoded from the binary's DWARF, and if not, why.
    pub decoding: DecodingInfo,
    pub tasks: Vec<TaskView>,
    /// Task index by id, built on first use (see [`Dump::task`]).
    #[serde(skip)]
    index: std::sync::OnceLock<FastMap<u64, usize>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DecodingInfo {
    /// True when the snapshot carried a walk plan and tasks were decoded.
    pub enabled: bool,
    /// Why decoding is off, or what limits it; one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The file the DWARF was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debug_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    pub debug_info_bytes: u64,
    /// Time to load the DWARF and build the walk plan in the inspector, or to read it from the plan
    /// cache (`plan_cached`).
    pub plan_ns: u64,
    /// Distinct future types in the walk plan.
    pub plan_types: usize,
    /// The plan was read from the plan cache (no DWARF read).
    #[serde(default)]
    pub plan_cached: bool,
    /// Why the plan was not cached, or why a cached one was not used; one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_note: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub program: String,
    pub agent_version: String,
    pub protocol_version: u32,
    pub start_time_unix_ms: u64,
    pub uptime_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// The agent's monotonic clock at the capture: what every age here is measured from.
    #[serde(default)]
    pub now_ns: u64,
    pub capture_ns: u64,
    pub round_trip_ns: u64,
    pub tasks_total: usize,
    pub idle: usize,
    pub scheduled: usize,
    pub running: usize,
    pub completed: usize,
    pub tasks_spawned: u64,
}

/// A task of the dump: one the agent records (spawned through it: name, spawn site, poll counts), one
/// only listed from a tokio runtime (`agent_id` is `None`, and so is everything only the agent knows),
/// or one that is both, shown once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskView {
    /// Unique within the dump, and what edges and deadlocks refer to: the agent's id for a task with
    /// agent data, [`TOKIO_ONLY`] plus tokio's id for one without.
    pub id: u64,
    /// The agent's id, for a task spawned through the agent.
    pub agent_id: Option<u64>,
    /// tokio's task id (`tokio::task::Id`), for a task listed from a registered runtime.
    pub tokio_id: Option<u64>,
    pub name: Option<Arc<str>>,
    pub state: State,
    /// OS thread running the task, when running.
    pub thread: Option<Thread>,
    /// Time in the current state: suspended for (idle), running for, or completed for. Only the agent
    /// times tasks.
    pub state_age_ns: Option<u64>,
    /// Time since the task was created.
    pub age_ns: Option<u64>,
    pub polls: Option<u64>,
    pub busy_ns: Option<u64>,
    pub wakes: Option<u64>,
    /// Time since the last wake, if it was ever woken.
    pub last_wake_ago_ns: Option<u64>,
    pub spawned_at: Option<Arc<Loc>>,
    pub root_type: Arc<str>,
    pub capture: CaptureView,
    /// Frames the task root awaits directly; each holds its children down to the leaves. Shared: a
    /// live view's dumps share the chains of tasks that did not change.
    pub frames: Arc<Vec<FrameNode>>,
    /// Tasks whose JoinHandle the task root awaits directly (outside any frame).
    pub awaits_tasks: Vec<u64>,
    pub awaited_by: Option<AwaitedBy>,
    pub delegate: Option<DelegateView>,
    /// What decoded leaves say about the waker they keep (tokio oneshot receivers), when decoding is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decoded_delegates: Arc<Vec<DecodedDelegate>>,
    /// Why this task's chain was not (fully) decoded, when decoding is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_note: Option<Arc<str>>,
    /// See [`TaskView::search_text`]: made with the chain, so that a search of 100,000 tasks at each
    /// key typed is one substring search per task.
    #[serde(skip)]
    pub(crate) searched: Arc<str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Idle,
    /// Woken and waiting in the runtime's queue to be polled (from tokio's state word).
    Scheduled,
    Running,
    Completed,
}

impl State {
    /// Idle or scheduled: the task's future is suspended at an await.
    pub fn suspended(self) -> bool {
        matches!(self, State::Idle | State::Scheduled)
    }
}

/// Added to tokio's id to key a task the agent has no record of (see [`TaskView::id`]).
pub const TOKIO_ONLY: u64 = 1 << 62;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: u32,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Loc {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CaptureView {
    Fresh,
    /// Frames from an earlier snapshot, `age_ns` old: the task was running throughout this one.
    Stale {
        age_ns: u64,
    },
    /// The task was running throughout and no earlier frames exist.
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FrameNode {
    /// Stable across snapshots while the chain above it stays the same: from its parent's id, its name
    /// and location, and which of its like-named siblings it is (not from the await it is suspended
    /// at, which moves as it runs). A view keeps its selection by `(task id, frame id)`; identical
    /// chains have identical ids, so coalescing is unaffected.
    #[serde(skip)]
    pub id: u64,
    /// Name, location and source, shared by every frame of the same kind in the dump.
    #[serde(flatten)]
    pub meta: Arc<FrameInfo>,
    /// Tasks whose JoinHandle this frame awaits (cross-task edges).
    pub awaits_tasks: Vec<u64>,
    pub children: Vec<FrameNode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(from = "FrameInfoFields")]
pub struct FrameInfo {
    pub name: String,
    /// Where the frame is defined: the annotation's call site, or a decoded async fn's header line.
    /// `None` for decoded combinators and awaited leaf futures.
    pub location: Option<Loc>,
    /// The await the future is suspended at (decoded from its state; the column is 0: DWARF has none).
    /// Left out of a JSON document when absent.
    pub suspended_at: Option<Loc>,
    /// For an annotated frame around a leaf future, the leaf's type as decoding saw it. Left out of a
    /// JSON document when absent.
    pub awaits_type: Option<String>,
    pub source: Source,
    /// Hash of the fields above, computed once: coalescing hashes every frame of every task.
    hash: u64,
}

/// A JSON document leaves absent optional fields out; a compact format (the plan cache's) has no
/// field names, so it writes every field, in order.
impl Serialize for FrameInfo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let every_field = !s.is_human_readable();
        let mut st = s.serialize_struct("FrameInfo", 5)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("location", &self.location)?;
        if every_field || self.suspended_at.is_some() {
            st.serialize_field("suspended_at", &self.suspended_at)?;
        } else {
            st.skip_field("suspended_at")?;
        }
        if every_field || self.awaits_type.is_some() {
            st.serialize_field("awaits_type", &self.awaits_type)?;
        } else {
            st.skip_field("awaits_type")?;
        }
        st.serialize_field("source", &self.source)?;
        st.end()
    }
}

/// [`FrameInfo`] as a document holds it: its hash is computed again on reading.
#[derive(Deserialize)]
struct FrameInfoFields {
    name: String,
    location: Option<Loc>,
    #[serde(default)]
    suspended_at: Option<Loc>,
    #[serde(default)]
    awaits_type: Option<String>,
    source: Source,
}

impl From<FrameInfoFields> for FrameInfo {
    fn from(f: FrameInfoFields) -> FrameInfo {
        FrameInfo {
            suspended_at: f.suspended_at,
            awaits_type: f.awaits_type,
            ..FrameInfo::new(f.name, f.location, f.source)
        }
        .rehash()
    }
}

impl FrameInfo {
    pub fn new(name: String, location: Option<Loc>, source: Source) -> FrameInfo {
        FrameInfo {
            name,
            location,
            suspended_at: None,
            awaits_type: None,
            source,
            hash: 0,
        }
        .rehash()
    }

    /// This frame, also decoded: suspended at `at`.
    pub fn with_suspended_at(&self, at: Option<Loc>) -> FrameInfo {
        FrameInfo {
            suspended_at: at,
            ..self.clone()
        }
        .rehash()
    }

    /// This frame, also decoded: awaiting a leaf future of type `ty`.
    pub fn with_awaits_type(&self, ty: &str) -> FrameInfo {
        FrameInfo {
            awaits_type: Some(ty.to_owned()),
            ..self.clone()
        }
        .rehash()
    }

    fn rehash(mut self) -> FrameInfo {
        use std::hash::BuildHasher;
        self.hash = rustc_hash::FxBuildHasher.hash_one((
            &self.name,
            &self.location,
            &self.suspended_at,
            &self.awaits_type,
            self.source,
        ));
        self
    }
}

impl PartialEq for FrameInfo {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.name == other.name
            && self.location == other.location
            && self.suspended_at == other.suspended_at
            && self.awaits_type == other.awaits_type
            && self.source == other.source
    }
}

impl Eq for FrameInfo {}

impl std::hash::Hash for FrameInfo {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Where a frame comes from. Frames that are both annotated and decoded keep their annotation's source
/// and carry `suspended_at` or `awaits_type` from decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    AnnotatedFn,
    Labelled,
    /// Decoded from the binary's DWARF: an async fn or block, or a combinator (`join!`, `select!`,
    /// `timeout`).
    Decoded,
    /// Decoded: the leaf future the chain ends in, named by its type.
    Awaitee,
}

/// The frame of another task that awaits this task's JoinHandle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwaitedBy {
    pub task: u64,
    pub task_name: Option<String>,
    /// Frame names from the awaiting task's root down to the awaiting frame; empty for the task root.
    pub path: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelegateView {
    pub clones: u32,
    pub held_ns: u64,
}

/// What the user asked to see.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Include running and completed tasks, not only suspended ones.
    pub all: bool,
    /// Keep tasks where any frame name or the root future type contains this.
    pub type_substr: Option<String>,
    /// Keep tasks that have been in their state at least this long.
    pub min_age_ns: u64,
}

/// The maps here are keyed by ids and short strings from one trusted snapshot, where SipHash's flood
/// resistance buys nothing and costs a third of the build time at 100,000 tasks.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

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
                file: format!("(spawn site {i}: not in the reply)"),
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
        handshake,
        snap,
        0,
        None,
        DecodingInfo::default(),
        &mut cache,
    ))
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

impl DecodingInfo {
    pub fn off(note: String) -> DecodingInfo {
        DecodingInfo {
            note: Some(note),
            ..DecodingInfo::default()
        }
    }
}

impl Dump {
    #[cfg(test)]
    pub fn build(handshake: &Handshake, snap: &Snapshot, round_trip_ns: u64) -> Dump {
        Dump::build_decoded(
            handshake,
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
        handshake: &Handshake,
        snap: &Snapshot,
        round_trip_ns: u64,
        decoder: Option<&Decoder>,
        decoding: DecodingInfo,
        cache: &mut ChainCache,
    ) -> Dump {
        let shared = Shared {
            metas: snap
                .frame_metas
                .iter()
                .map(|m| {
                    Arc::new(FrameInfo::new(
                        m.name.clone(),
                        Some(loc(&m.location)),
                        match m.source {
                            FrameSource::AnnotatedFn => Source::AnnotatedFn,
                            FrameSource::Labelled => Source::Labelled,
                        },
                    ))
                })
                .collect(),
            sites: snap
                .spawn_sites
                .iter()
                .map(|s| (Arc::new(loc(&s.location)), Arc::from(s.root_type.as_str())))
                .collect(),
            no_delegates: Arc::default(),
            no_text: Arc::from(""),
        };
        let by_id: FastMap<u64, usize> = snap
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, i))
            .collect();
        let listed = runtime::Listed::new(snap, decoder);
        // Edges, keyed by the awaiting task: (awaiting frame id or None for the root, awaited task).
        let mut edges: FastMap<u64, Vec<(Option<u64>, u64)>> = FastMap::default();
        for t in &snap.tasks {
            if let Some(a) = t.awaited_by {
                edges.entry(a.task).or_default().push((a.frame, t.id));
            }
        }
        let mut tasks: Vec<TaskView> = snap
            .tasks
            .iter()
            .map(|t| {
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
            })
            .collect();
        cache.sweep();
        tasks.extend(listed.views(decoder, cache.live()));
        listed.join_edges(&mut tasks, decoder);
        let count = |s: State| tasks.iter().filter(|t| t.state == s).count();
        // Built here, on the thread that builds the dump, not where it is first looked at (a live
        // view's screen, which should not wait for it).
        let mut index = FastMap::default();
        index.reserve(tasks.len());
        index.extend(tasks.iter().enumerate().map(|(i, t)| (t.id, i)));
        Dump {
            format: FORMAT.to_owned(),
            version: JSON_VERSION,
            process: Process {
                pid: handshake.pid,
                program: handshake.program.clone(),
                agent_version: handshake.agent_version.clone(),
                protocol_version: handshake.protocol_version,
                start_time_unix_ms: handshake.start_time_unix_ms,
                uptime_ns: snap.uptime_ns,
            },
            snapshot: SnapshotInfo {
                now_ns: snap.now_ns,
                capture_ns: snap.capture_ns,
                round_trip_ns,
                tasks_total: tasks.len(),
                idle: count(State::Idle),
                scheduled: count(State::Scheduled),
                running: count(State::Running),
                completed: count(State::Completed),
                tasks_spawned: snap.stats.tasks_spawned,
            },
            runtimes: listed.reports(snap, decoder, &decoding),
            deadlocks: find_cycles(&tasks),
            decoding,
            tasks,
            index: index.into(),
        }
    }

    /// A `--json` document read back (see `file`). Frame ids are not in the document; they are
    /// computed again.
    pub fn from_value(doc: serde_json::Value) -> Result<Dump, serde_json::Error> {
        let mut dump: Dump = serde_json::from_value(doc)?;
        dump.restore_frame_ids();
        Ok(dump)
    }

    /// Gives every frame its id again (see [`FrameNode::id`]), and every task what a search looks
    /// in, after reading a document.
    pub fn restore_frame_ids(&mut self) {
        for t in &mut self.tasks {
            assign_frame_ids(Arc::<Vec<FrameNode>>::make_mut(&mut t.frames));
            t.searched = t.search_text();
        }
    }

    /// Keeps the tasks `filter` selects. Header counts and deadlocks still describe the whole process.
    pub fn filter(mut self, filter: &Filter) -> Dump {
        self.tasks.retain(|t| filter.matches(t));
        self.index = Default::default();
        self
    }

    /// The task with this id (its `TaskView::id`), by an index built on first use.
    pub fn task(&self, id: u64) -> Option<&TaskView> {
        let index = self.index.get_or_init(|| {
            self.tasks
                .iter()
                .enumerate()
                .map(|(i, t)| (t.id, i))
                .collect()
        });
        index.get(&id).map(|&i| &self.tasks[i])
    }

    /// The tasks `filter` selects, leaving the dump whole (a live view filters the same state again as
    /// the filter changes).
    pub fn matching<'a>(&'a self, filter: &'a Filter) -> impl Iterator<Item = &'a TaskView> + 'a {
        self.tasks.iter().filter(|t| filter.matches(t))
    }
}

impl Filter {
    /// Whether `t` is selected: suspended (unless `all`), in its state long enough, and with the
    /// substring in its root type or a frame's name.
    pub fn matches(&self, t: &TaskView) -> bool {
        (self.all || t.state.suspended())
            && t.state_age_ns.unwrap_or(0) >= self.min_age_ns
            && self
                .type_substr
                .as_deref()
                .is_none_or(|s| t.root_type.contains(s) || any_frame(&t.frames, s))
    }
}

/// Gives every frame of a chain its stable id (see [`FrameNode::id`]). Iterative: chains may be deep.
pub(super) fn assign_frame_ids(frames: &mut [FrameNode]) {
    use std::hash::BuildHasher;
    let mut stack: Vec<(&mut [FrameNode], u64)> = vec![(frames, 0)];
    while let Some((level, parent)) = stack.pop() {
        let mut seen: FastMap<u64, u64> = FastMap::default();
        for f in level.iter_mut() {
            let what = rustc_hash::FxBuildHasher.hash_one((&f.meta.name, &f.meta.location));
            let nth = seen.entry(what).or_insert(0);
            f.id = rustc_hash::FxBuildHasher.hash_one((parent, what, *nth));
            *nth += 1;
            stack.push((&mut f.children, f.id));
        }
    }
}

impl TaskView {
    /// This task `dt_ns` later, had nothing happened to it: each of its ages grown by `dt_ns`.
    pub fn aged(&self, dt_ns: u64) -> TaskView {
        let grow = |v: &mut Option<u64>| {
            if let Some(v) = v {
                *v += dt_ns;
            }
        };
        let mut t = self.clone();
        grow(&mut t.state_age_ns);
        grow(&mut t.age_ns);
        grow(&mut t.last_wake_ago_ns);
        if let Some(d) = &mut t.delegate {
            d.held_ns += dt_ns;
        }
        if let CaptureView::Stale { age_ns } = &mut t.capture {
            *age_ns += dt_ns;
        }
        t
    }

    /// Whether `text` is in the task's name, root type, spawn site, or any frame's name or file
    /// (case-insensitive), for a live view's `/` search. `lower` is `text` in lower case.
    pub fn mentions(&self, lower: &str) -> bool {
        if !self.searched.is_empty() && lower.is_ascii() {
            return self.searched.contains(lower);
        }
        let has = |s: &str| contains_folded(s, lower);
        self.name.as_deref().is_some_and(has)
            || has(&self.root_type)
            || self.spawned_at.as_deref().is_some_and(|l| has(&l.file))
            || frames_mention(&self.frames, &has)
    }

    /// What [`TaskView::mentions`] looks in, in ASCII lower case, one string per line.
    fn search_text(&self) -> Arc<str> {
        let mut text = String::new();
        let mut add = |s: &str| {
            text.push_str(s);
            text.push('\n');
        };
        add(self.name.as_deref().unwrap_or_default());
        add(&self.root_type);
        add(self.spawned_at.as_deref().map_or("", |l| &l.file));
        let mut stack: Vec<&FrameNode> = self.frames.iter().collect();
        while let Some(f) = stack.pop() {
            add(&f.meta.name);
            for l in [&f.meta.location, &f.meta.suspended_at]
                .into_iter()
                .flatten()
            {
                add(&l.file);
            }
            stack.extend(&f.children);
        }
        text.make_ascii_lowercase();
        text.into()
    }
}

/// Whether `hay` contains `lower` (already lower case), ignoring case. Without allocating when
/// `lower` is ASCII: a search runs over every string of 100,000 tasks at each key typed.
fn contains_folded(hay: &str, lower: &str) -> bool {
    if !lower.is_ascii() {
        return hay.to_lowercase().contains(lower);
    }
    let (hay, needle) = (hay.as_bytes(), lower.as_bytes());
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// The chain's leaf: the deepest frame of its first branch. A `poll_fn` closure names nothing; the
/// frame that awaits it does (`Receiver::recv`).
pub fn leaf_frame(frames: &[FrameNode]) -> Option<&FrameNode> {
    let (mut at, mut above) = (frames.first()?, None);
    while let Some(c) = at.children.first() {
        (above, at) = (Some(at), c);
    }
    match above {
        Some(parent) if at.meta.name.contains("::poll_fn::PollFn<") => Some(parent),
        _ => Some(at),
    }
}

/// Iterative: chains may be deep.
/// Allocates only where a chain branches: a search visits every chain of 100,000 tasks per key.
fn frames_mention(frames: &[FrameNode], has: &dyn Fn(&str) -> bool) -> bool {
    // Siblings still to visit, one slice per branch point above the current frame.
    let mut later: Vec<&[FrameNode]> = Vec::new();
    let mut cur = frames;
    loop {
        let Some((f, rest)) = cur.split_first() else {
            match later.pop() {
                Some(next) => {
                    cur = next;
                    continue;
                }
                None => return false,
            }
        };
        let m = &f.meta;
        let files = [&m.location, &m.suspended_at];
        if has(&m.name)
            || files
                .iter()
                .any(|l| l.as_ref().is_some_and(|l| has(&l.file)))
        {
            return true;
        }
        if !rest.is_empty() {
            later.push(rest);
        }
        cur = &f.children;
    }
}

fn any_frame(frames: &[FrameNode], substr: &str) -> bool {
    frames
        .iter()
        .any(|f| f.meta.name.contains(substr) || any_frame(&f.children, substr))
}

fn loc(l: &asyncdump_protocol::Location) -> Loc {
    Loc {
        file: l.file.clone(),
        line: l.line,
        column: l.column,
    }
}

fn task_view(
    snap: &Snapshot,
    shared: &Shared,
    t: &asyncdump_protocol::Task,
    edges: &[(Option<u64>, u64)],
    decoder: Option<&Decoder>,
    refs: &TaskRefs,
    cache: &mut ChainCache,
) -> TaskView {
    let now = snap.now_ns;
    let (state, thread, since) = match &t.state {
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
    };
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
    let chain = cached.unwrap_or_else(|| chain(shared, t, edges, decoder, refs, live));
    let mut view = TaskView {
        id: t.id,
        agent_id: Some(t.id),
        tokio_id: None,
        name: chain.name,
        state,
        thread,
        state_age_ns: Some(now.saturating_sub(since)),
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
    decoder: Option<&Decoder>,
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
            let (frames, delegates) = dec.merge(nodes, &annotated, &mut awaits_root, refs);
            decoded_delegates = delegates;
            (frames, Decoder::note(walk))
        }
        (Some(_), Some(walk)) => (
            build_tree(shared, &t.frames, &by_frame),
            Decoder::note(walk),
        ),
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
/// whose parent is not on that path (cut by the agent's frame limit) becomes a top-level frame.
fn build_tree(
    shared: &Shared,
    frames: &[asyncdump_protocol::Frame],
    edges: &FastMap<u64, Vec<u64>>,
) -> Vec<FrameNode> {
    fn attach(stack: &mut [(u64, FrameNode)], roots: &mut Vec<FrameNode>, node: FrameNode) {
        match stack.last_mut() {
            Some((_, parent)) => parent.children.push(node),
            None => roots.push(node),
        }
    }
    let mut roots = Vec::new();
    let mut stack: Vec<(u64, FrameNode)> = Vec::new();
    for f in frames {
        while stack.last().is_some_and(|(id, _)| Some(*id) != f.parent) {
            let (_, done) = stack.pop().expect("non-empty");
            attach(&mut stack, &mut roots, done);
        }
        let mut awaits = edges.get(&f.id).cloned().unwrap_or_default();
        awaits.sort_unstable();
        let meta = shared.meta(f.meta);
        stack.push((
            f.id,
            FrameNode {
                id: 0,
                meta,
                awaits_tasks: awaits,
                children: Vec::new(),
            },
        ));
    }
    while let Some((_, done)) = stack.pop() {
        attach(&mut stack, &mut roots, done);
    }
    roots
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

/// Cycles in the "task awaits task" graph. Every task has at most one awaiter (`awaited_by`), so following
/// awaiters from any task either ends or enters exactly one cycle.
fn find_cycles(tasks: &[TaskView]) -> Vec<Vec<u64>> {
    let awaiter: BTreeMap<u64, u64> = tasks
        .iter()
        .filter_map(|t| t.awaited_by.as_ref().map(|a| (t.id, a.task)))
        .collect();
    let mut done: std::collections::HashSet<u64> = Default::default();
    let mut cycles = Vec::new();
    for &start in awaiter.keys() {
        let mut path: Vec<u64> = Vec::new();
        let mut cur = Some(start);
        while let Some(id) = cur {
            if done.contains(&id) {
                break;
            }
            if let Some(pos) = path.iter().position(|&p| p == id) {
                // `path[pos..]` follows "is awaited by"; reverse it to read "awaits".
                let mut cycle: Vec<u64> = path[pos..].iter().rev().copied().collect();
                let min = cycle
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, id)| **id)
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                cycle.rotate_left(min);
                cycles.push(cycle);
                break;
            }
            path.push(id);
            cur = awaiter.get(&id).copied();
        }
        done.extend(path);
    }
    cycles.sort();
    cycles
}

/// Identical chains grouped: same state, frame tree (names and locations), root type and spawn site.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub count: usize,
    pub task_ids: Vec<u64>,
    pub state: State,
    pub spawned_at: Option<Arc<Loc>>,
    pub root_type: Arc<str>,
    /// The range of time in their state, of the tasks whose time the agent knows.
    pub min_age_ns: Option<u64>,
    pub max_age_ns: Option<u64>,
    pub frames: Arc<Vec<FrameNode>>,
    pub awaits_tasks: Vec<u64>,
}

/// What makes two chains identical for [`coalesce`].
type GroupKey<'a> = (State, &'a [FrameNode], Option<&'a Loc>, &'a str, &'a [u64]);

pub fn coalesce<'a>(tasks: impl IntoIterator<Item = &'a TaskView>) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut index: FastMap<GroupKey<'_>, usize> = FastMap::default();
    for t in tasks {
        let key = (
            t.state,
            &t.frames[..],
            t.spawned_at.as_deref(),
            &*t.root_type,
            &t.awaits_tasks[..],
        );
        match index.get(&key) {
            Some(&g) => {
                let g = &mut groups[g];
                g.count += 1;
                g.task_ids.push(t.id);
                // `None` (not timed) is no minimum: `Option::min` would take it as one.
                g.min_age_ns = match (g.min_age_ns, t.state_age_ns) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                g.max_age_ns = g.max_age_ns.max(t.state_age_ns);
            }
            None => {
                index.insert(key, groups.len());
                groups.push(Group {
                    count: 1,
                    task_ids: vec![t.id],
                    state: t.state,
                    spawned_at: t.spawned_at.clone(),
                    root_type: t.root_type.clone(),
                    min_age_ns: t.state_age_ns,
                    max_age_ns: t.state_age_ns,
                    frames: t.frames.clone(),
                    awaits_tasks: t.awaits_tasks.clone(),
                });
            }
        }
    }
    // Biggest groups first, as in Go's goroutine profile: the pile-up is what you came for.
    groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.task_ids[0].cmp(&b.task_ids[0]))
    });
    groups
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use asyncdump_protocol::{
        Awaiter, Delegate, Frame, FrameMeta, Location, PROTOCOL_VERSION, SpawnSite, Task,
    };

    pub(crate) fn handshake() -> Handshake {
        Handshake {
            protocol_version: PROTOCOL_VERSION,
            agent_version: "0.1.0".into(),
            pid: 42,
            program: "svc".into(),
            start_time_unix_ms: 0,
        }
    }

    fn meta(name: &str, line: u32) -> FrameMeta {
        FrameMeta {
            name: name.into(),
            location: Location {
                file: "src/main.rs".into(),
                line,
                column: 1,
            },
            source: FrameSource::AnnotatedFn,
        }
    }

    pub(crate) fn task(id: u64, frames: Vec<Frame>) -> Task {
        Task {
            id,
            name: None,
            spawn_site: 0,
            root_anchor: 0,
            cell: 0,
            poll_waker_data: 0,
            state: TaskState::Idle,
            created_ns: 0,
            polls: 1,
            busy_ns: 10,
            last_poll_end_ns: Some(1_000),
            wakes: 0,
            last_wake_ns: None,
            frames,
            capture: Capture::Fresh,
            awaited_by: None,
            delegate: None,
            walk: None,
        }
    }

    fn f(id: u64, parent: Option<u64>, meta: u32) -> Frame {
        Frame { id, parent, meta }
    }

    /// handler → read_frame → recv, plus a second branch handler → timer.
    pub(crate) fn sample() -> Snapshot {
        Snapshot {
            now_ns: 2_000_000_000,
            frame_metas: vec![
                meta("handler", 1),
                meta("read_frame", 5),
                meta("recv", 9),
                meta("timer", 12),
            ],
            spawn_sites: vec![SpawnSite {
                location: Location {
                    file: "src/main.rs".into(),
                    line: 30,
                    column: 5,
                },
                root_type: "svc::handler::{{closure}}".into(),
            }],
            tasks: vec![task(
                1,
                vec![
                    f(10, None, 0),
                    f(11, Some(10), 1),
                    f(12, Some(11), 2),
                    f(13, Some(10), 3),
                ],
            )],
            ..Snapshot::default()
        }
    }

    fn names(nodes: &[FrameNode]) -> Vec<String> {
        nodes.iter().map(|n| n.meta.name.clone()).collect()
    }

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
    fn a_search_finds_any_frame_of_any_branch_by_name_or_file() {
        // `handler` branches into `read_frame` → `recv` and `timer`: the search must reach the second.
        let dump = Dump::build(&handshake(), &sample(), 0);
        let t = &dump.tasks[0];
        let last = "timer";
        assert!(t.mentions(last), "{last} in {:?}", t.searched);
        assert!(t.mentions("src/main.rs"));
        assert!(!t.mentions("no such thing"));
        // The fallback for text the folded copy does not cover, and a task read from a file.
        let mut bare = t.clone();
        bare.searched = Arc::from("");
        assert!(bare.mentions(last) && !bare.mentions("no such thing"));
    }

    #[test]
    fn a_search_ignores_case_in_any_script() {
        assert!(contains_folded("tokio::sync::Mutex", "mutex"));
        assert!(contains_folded("ÉCOLE", "école"));
        assert!(!contains_folded("oneshot", "mpsc"));
        assert!(contains_folded("anything", ""));
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

    pub(crate) fn edge_snapshot(edges: &[(u64, u64)]) -> Snapshot {
        let mut s = sample();
        s.tasks = (1..=4)
            .map(|id| task(id, vec![f(id * 100, None, 0)]))
            .collect();
        for &(awaiter, awaited) in edges {
            let t = s.tasks.iter_mut().find(|t| t.id == awaited).unwrap();
            t.awaited_by = Some(Awaiter {
                task: awaiter,
                frame: Some(awaiter * 100),
            });
        }
        s
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
    fn wait_cycles_are_deadlocks_listed_in_awaits_order() {
        let dump = Dump::build(&handshake(), &edge_snapshot(&[(3, 4), (4, 3), (1, 2)]), 0);
        assert_eq!(dump.deadlocks, vec![vec![3, 4]]);
        let three = Dump::build(&handshake(), &edge_snapshot(&[(1, 2), (2, 3), (3, 1)]), 0);
        assert_eq!(three.deadlocks, vec![vec![1, 2, 3]]);
    }

    #[test]
    fn filters_select_by_state_frame_name_and_age() {
        let mut s = edge_snapshot(&[]);
        s.tasks[1].state = TaskState::Completed { at_ns: 1 };
        s.tasks[2].last_poll_end_ns = Some(s.now_ns - 10);
        let dump = Dump::build(&handshake(), &s, 0);
        let ids = |d: Dump| d.tasks.iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(dump.clone().filter(&Filter::default())), [1, 3, 4]);
        assert_eq!(
            ids(dump.clone().filter(&Filter {
                all: true,
                ..Default::default()
            })),
            [1, 2, 3, 4]
        );
        let old = Filter {
            min_age_ns: 1_000_000,
            ..Default::default()
        };
        assert_eq!(ids(dump.clone().filter(&old)), [1, 4]);
        let typed = Filter {
            type_substr: Some("nope".into()),
            ..Default::default()
        };
        assert!(ids(dump.clone().filter(&typed)).is_empty());
        let typed = Filter {
            type_substr: Some("handl".into()),
            ..Default::default()
        };
        assert_eq!(ids(dump.clone().filter(&typed)), [1, 3, 4]);
        // Matching leaves the dump whole: the same state filtered again, another way.
        let matching = |f: &Filter| dump.matching(f).map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(matching(&old), [1, 4]);
        assert_eq!(matching(&typed), [1, 3, 4]);
        assert_eq!(dump.tasks.len(), 4);
    }

    #[test]
    fn identical_chains_coalesce_with_a_count() {
        let dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        let groups = coalesce(&dump.tasks);
        assert_eq!(groups.len(), 1);
        assert_eq!(
            (groups[0].count, groups[0].task_ids.clone()),
            (4, vec![1, 2, 3, 4])
        );
    }

    #[test]
    fn frames_cut_by_the_agent_limit_still_show() {
        let mut s = sample();
        s.tasks[0].frames.remove(0); // parent of read_frame and timer is missing
        let dump = Dump::build(&handshake(), &s, 0);
        assert_eq!(names(&dump.tasks[0].frames), ["read_frame", "timer"]);
    }
}
