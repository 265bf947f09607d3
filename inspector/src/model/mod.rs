//! What a dump shows, and the questions asked of it: the schema (a [`Dump`] of [`TaskView`]s, each
//! with its chain as a tree of [`FrameNode`]s, its cross-task edges and its delegates), and its queries:
//! [`Dump::filter`] keeps what the user asked for, [`TaskView::mentions`] searches, [`coalesce`] groups
//! identical chains, `find_cycles` finds wait cycles, [`summary`] says a chain in one line (the leaf
//! that matters, and a name for a task the program did not name). The `assemble` stage builds a dump; nothing here
//! knows the protocol's snapshots, the plan or the walks, and nothing here does I/O or formatting (the
//! views in `view/` do).
//!
//! The serde derives here *are* the `--json` format (documented in the user guide, docs/src/json.md); change them only together
//! with [`JSON_VERSION`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub mod causes;
pub mod diff;
mod groups;
pub mod progress;
pub mod stats;
mod summary;
pub mod threads;
pub mod values;
pub mod verdicts;
pub mod waits;
pub mod wakers;
pub use groups::{Group, coalesce};
pub use stats::{AgeBucket, Count, Stats, Stuck, stats};
pub use summary::{Summary, derived_name, summary};

/// Version of the `--json` document. Bump on any incompatible change of the types below.
pub const JSON_VERSION: u32 = 4;
/// The oldest version still read: version 3 wrote `null` where 4 leaves a field out (what only the
/// agent knows, for a task it did not spawn), which reads the same.
pub const OLDEST_JSON_VERSION: u32 = 3;
/// The `format` of a `--json` document.
pub const FORMAT: &str = "asyncdump-dump";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Dump {
    pub format: String,
    pub version: u32,
    pub process: Process,
    pub snapshot: SnapshotInfo,
    /// The tokio runtimes and `LocalSet`s, registered with the agent or found by its census: how many
    /// tasks each has, and how many were listed.
    pub runtimes: Vec<RuntimeView>,
    /// What the census for unregistered runtimes covered, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub census: Option<CensusView>,
    /// Wait cycles, each listed in "waits for" order starting at its lowest task id: across
    /// JoinHandles, and with wait targets read, across locks held (see [`Dump::waits`]).
    pub deadlocks: Vec<Vec<u64>>,
    /// The wait graph's edges, with wait targets read: who awaits whose JoinHandle, who waits for a
    /// lock whom holds. Empty without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<waits::WaitEdge>,
    /// The program's statics that may hold a lock guard or a channel's end, read with the wait
    /// targets to name such holders (see `Plan::statics`); not written.
    #[serde(skip)]
    pub statics: Vec<values::Local>,
    /// The locals of the program's threads' stack frames that may hold a lock guard or a
    /// channel's end, read with the wait targets to name such holders; not written.
    #[serde(skip)]
    pub on_threads: Vec<values::ThreadLocal>,
    /// The bytes of those locals that optimised code keeps in registers, not memory, each at an
    /// address no process maps (see `threads::REGISTER_BYTES_AT`), which their `Value::Unread`
    /// names; not written.
    #[serde(skip)]
    pub register_bytes: Vec<(u64, Vec<u8>)>,
    /// The program's threads, where they were read: what each is blocked in, its native stack, the
    /// task it polls (see [`threads::ThreadView`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<threads::ThreadView>,
    /// Runtimes none of whose workers can poll, with tasks waiting for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starved: Vec<threads::Starved>,
    /// What holds the waiting tasks up in the end, worst first (see [`causes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<causes::Cause>,
    /// With `--group waker`: the waiting tasks by who keeps their waker (see [`wakers`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waker_groups: Vec<wakers::WakerGroup>,
    /// Whether chains were also decoded from the binary's DWARF, and if not, why.
    pub decoding: DecodingInfo,
    pub tasks: Vec<TaskView>,
    /// Task index by id, built on first use (see [`Dump::task`]).
    #[serde(skip)]
    pub(crate) index: std::sync::OnceLock<FastMap<u64, usize>>,
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
    /// Futures the walks met and could not decode, each shown where it was met, in every task:
    /// `dyn Future`s whose vtable the binary's DWARF does not name (another object's, or no vtable
    /// at all), and futures at addresses that could not be read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown_dyn: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreadable: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub program: String,
    /// Where the dump was read from; files written before there was a choice were read through the
    /// agent.
    #[serde(default)]
    pub read_from: ReadFrom,
    /// The agent's, when the dump was read through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<u32>,
    pub start_time_unix_ms: u64,
    pub uptime_ns: u64,
}

/// Where a dump's bytes came from: what it can know follows from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFrom {
    /// The process's agent, over its socket: names given through it, timings, spawn sites.
    #[default]
    Agent,
    /// The live process's memory, read from outside (no agent, or `--no-agent`).
    LiveMemory,
    /// A core file.
    Core,
}

impl ReadFrom {
    /// How the header says it.
    pub fn describe(self) -> &'static str {
        match self {
            ReadFrom::Agent => "agent",
            ReadFrom::LiveMemory => "live memory",
            ReadFrom::Core => "core file",
        }
    }
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
    /// Threads whose own future (a `block_on`'s) the dump has, besides its tasks: not counted among
    /// them.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub block_ons: usize,
    /// With `--stop`: how long the process's threads were held stopped for this snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StoppedView>,
    /// With `--samples`: how the dump was sampled (this snapshot is the first sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<progress::Sampling>,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// How a snapshot taken with every thread stopped held them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedView {
    pub threads: usize,
    /// Threads that did not stop in time (in an uninterruptible sleep): read while they ran.
    pub unstopped: usize,
    /// From the first thread stopped to the last let go.
    pub held_ns: u64,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<u64>,
    /// tokio's task id (`tokio::task::Id`), for a task listed from a registered runtime.
    pub tokio_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Arc<str>>,
    /// For a task without a `name`: the one its chain gives it ([`derived_name`]: the innermost frame
    /// of the program's own code on the branch that matters, else its root type's last segment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_name: Option<Arc<str>>,
    /// The HTTP request it serves, where a frame of its chain holds one (see
    /// [`values::request_of`]): read with the wait targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<values::Request>,
    /// The sockets it waits to read or write through tokio's I/O driver (a connection's), from the
    /// driver's registrations: read with the wait targets, from a live process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sockets: Vec<values::TaskSocket>,
    /// The HTTP/2 stream it serves or awaits the response of, and the connection's task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<values::Stream>,
    /// For a connection's task: the HTTP/2 streams it drives, and the tasks serving them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<values::ServedStream>,
    /// With `--samples`: whether a later sample saw it make progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<progress::Progress>,
    /// Why it waits, for a waiting task, and the evidence (see [`verdicts`]). Boxed: every task
    /// carries the field, and a dump of 100,000 moves them about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Box<verdicts::Verdict>>,
    pub state: State,
    /// OS thread running the task, when running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<Thread>,
    /// Time in the current state: suspended for (idle), running for, or completed for. Only the agent
    /// times tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_age_ns: Option<u64>,
    /// A lower bound of how long the task has been as it is now: every listing since this long ago saw
    /// it in this state with this chain (its decoded walk). Listings happen at snapshot time only, so it
    /// is sampled: a task that changed and changed back between two of them looks unchanged. Absent
    /// when no earlier listing saw it so. For any listed task, the agent's or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged_ns: Option<u64>,
    /// Time since the task was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakes: Option<u64>,
    /// Time since the last wake, if it was ever woken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wake_ago_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_at: Option<Arc<Loc>>,
    pub root_type: Arc<str>,
    pub capture: CaptureView,
    /// Frames the task root awaits directly; each holds its children down to the leaves. Shared: a
    /// live view's dumps share the chains of tasks that did not change.
    pub frames: Arc<Vec<FrameNode>>,
    /// Tasks whose JoinHandle the task root awaits directly (outside any frame).
    pub awaits_tasks: Vec<u64>,
    pub awaited_by: Option<AwaitedBy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    /// Where tokio keeps the task and the code that polls it, for a task its runtime lists: what
    /// tells, from a thread's stack, that the thread is inside its poll. Not written.
    #[serde(skip)]
    pub(crate) tokio_task: Option<TokioTask>,
    /// For a thread's own future (keyed [`THREAD`] and its id): the `block_on` that runs it, as its
    /// user calls it (`tokio::runtime::Runtime::block_on`, `futures::executor::block_on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_on: Option<Arc<str>>,
}

/// A task as its tokio runtime keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokioTask {
    /// The task's header: its allocation starts there.
    pub header: u64,
    /// Its type's poll function (`tokio::runtime::task::raw::poll::<T, S>`).
    pub poll_fn: u64,
    /// The runtime it is in: its place in [`Dump::runtimes`].
    pub runtime: u32,
    /// References to it that tokio counts beyond its list's and its `JoinHandle`'s: its wakers,
    /// its `AbortHandle`s, and a scheduled task's place in a queue. 0: no waker of it exists;
    /// `None` where the word could not say.
    pub other_refs: Option<u64>,
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
/// Added to a thread's id to key, in the wait graph, a thread that waits or holds outside any
/// task's poll.
pub const THREAD: u64 = 1 << 61;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: u32,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Loc {
    /// Shared: a dump copies the same few locations into many of its parts.
    pub file: Arc<str>,
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
    /// The locals that live across its await, when asked for (`-v`, `--fields`): decoded frames only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locals: Vec<values::Local>,
    /// What this leaf waits for, decoded (a sleep's deadline, a lock's queue), where its type is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_on: Option<Box<values::WaitOn>>,
    /// The locks and permits it holds, found in its locals (with wait targets on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<waits::Held>,
    /// Futures the walk went into that lie inside its locals (a `select!` branch pinned in it):
    /// polled, so what they hold is theirs to show, not this frame's.
    #[serde(skip)]
    pub walked_within: Vec<u64>,
    pub children: Vec<FrameNode>,
}

impl FrameNode {
    /// Stands for the `n` frames below [`MAX_CHAIN_DEPTH`] where a chain was cut.
    pub fn cut(n: u64) -> FrameNode {
        FrameNode {
            id: 0,
            meta: Arc::new(FrameInfo::cut(n)),
            awaits_tasks: Vec::new(),
            locals: Vec::new(),
            waits_on: None,
            holds: Vec::new(),
            walked_within: Vec::new(),
            children: Vec::new(),
        }
    }
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
    /// Whether the name or the awaited type holds a line break, computed once with the hash: the
    /// text dump must escape one, and asks for each of the frames of every task.
    breaks: bool,
    /// Whether it is the program's own code ([`FrameInfo::is_own_code`]), computed once with the
    /// hash: names, summaries and the wait graph ask for every frame of every task.
    own: bool,
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
            breaks: false,
            own: false,
        }
        .rehash()
    }

    /// What a chain awaits that is not a future it decodes further: a leaf's type, or why the chain
    /// stops there.
    pub fn awaitee(name: String) -> FrameInfo {
        FrameInfo::new(name, None, Source::Awaitee)
    }

    /// Stands for the `n` frames below a chain's [`MAX_CHAIN_DEPTH`].
    pub fn cut(n: u64) -> FrameInfo {
        FrameInfo::new(format!("… {n} more frames"), None, Source::Cut)
    }

    /// Whether the name or the awaited type holds a line break.
    pub fn has_breaks(&self) -> bool {
        self.breaks
    }

    /// Whether it is a function of the program's own code (an async fn or block, decoded or
    /// annotated; not a label around a leaf): it has a source file, and that file is no
    /// dependency's (cargo's registry or git checkouts) and not the standard library's.
    pub fn is_own_code(&self) -> bool {
        self.own
    }

    /// Where the frame is: the await it is suspended at, else where it is defined.
    pub fn at(&self) -> Option<&Loc> {
        self.suspended_at.as_ref().or(self.location.as_ref())
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
        let texts = [Some(&self.name), self.awaits_type.as_ref()];
        self.breaks = texts.into_iter().flatten().any(|t| t.contains('\n'));
        let function = matches!(self.source, Source::Decoded | Source::AnnotatedFn);
        self.own = match self.location.as_ref().or(self.suspended_at.as_ref()) {
            Some(at) => function && crate::names::short_path(&at.file).len() == at.file.len(),
            None => false,
        };
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
    /// Not a frame: where a chain deeper than [`MAX_CHAIN_DEPTH`] was cut, named `… N more frames`.
    Cut,
}

/// The deepest a chain is kept: below this, frames are counted into one [`Source::Cut`] frame. Far
/// deeper than anyone reads, and it bounds every walk over a chain, a document's nesting and a text
/// line's indentation; a recursion thousands of futures deep still reads, with its count.
pub const MAX_CHAIN_DEPTH: usize = 512;

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
/// The waker a leaf keeps, as read through DWARF.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DecodedDelegate {
    /// The leaf's type.
    pub leaf: String,
    /// Whether the leaf has a waker registered at all. A pending receiver without one is never woken.
    pub registered: bool,
    /// The task whose waker (the agent's or tokio's own) it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waker_of: Option<u64>,
    /// The vtable of a waker that is neither the agent's nor tokio's (another executor's or wrapper's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreign_vtable: Option<u64>,
    /// That waker's clone function, as the binary's DWARF names it: whose waker it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_waker: Option<String>,
    /// The sender already sent a value: the task should have been woken.
    pub value_sent: bool,
    /// The sender was dropped.
    pub closed: bool,
    /// The task that holds the `Sender` across an await, when a walk found it: who can wake this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_held_by: Option<u64>,
}

/// One registered runtime, as the header of a dump shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeView {
    /// `current_thread`, `multi_thread` or `local_set`, when the runtime could be read.
    pub flavor: Option<String>,
    /// How the agent knows it.
    #[serde(default)]
    pub found_by: FoundBy,
    /// Live tasks, as tokio counts them, when it does (see `RuntimeReport::alive` in the protocol).
    pub alive: Option<u64>,
    /// Tasks listed (and so shown, subject to the filters).
    pub listed: usize,
    /// Tasks tokio counts that could not be listed (the list changed under the read, or a limit).
    pub skipped: u64,
    /// Why the runtime's tasks are not listed, when they are not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_listed: Option<String>,
}

/// How a runtime came to be listed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// Registered with the agent (`init` inside it, or a `register_*` call).
    #[default]
    Registration,
    /// Found by the census, from its tasks in the process's memory.
    Census,
}

/// What a census of the process's memory covered (see the agent's runtime module).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CensusView {
    /// Bytes of private writable memory the process had, and how many were scanned.
    pub total_bytes: u64,
    pub scanned_bytes: u64,
    /// Bytes that could not be read (unmapped while being scanned).
    pub unreadable_bytes: u64,
    /// Stopped at its deadline before the end: runtimes whose tasks lie beyond may be missing.
    pub cut: bool,
    /// Runtimes and `LocalSet`s found that nobody registered.
    pub found: u64,
    /// Blocking-pool tasks found (queued or running).
    #[serde(default)]
    pub blocking: u64,
    /// Task lists named by task headers that did not check out (stale or random words).
    pub rejected_lists: u64,
    pub elapsed_ns: u64,
    /// How long before the snapshot the scan ran: 0 when it ran for it, else its lists served again
    /// (runtimes made since are found by a later scan).
    #[serde(default)]
    pub age_ns: u64,
}

pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(crate) type FastSet<K> = rustc_hash::FxHashSet<K>;

impl DecodingInfo {
    pub fn off(note: String) -> DecodingInfo {
        DecodingInfo {
            note: Some(note),
            ..DecodingInfo::default()
        }
    }
}

impl Dump {
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

    /// Gives every waiting task its verdict and the dump its root causes (see [`verdicts`] and
    /// [`causes`]): after the wait graph, the threads and any samples are read.
    pub fn judge(&mut self) {
        verdicts::judge(self);
        self.causes = causes::of(self);
    }

    /// Drops the task index after the tasks were reordered: built again on first use.
    pub fn reindex(&mut self) {
        self.index = Default::default();
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
            && t.waiting_ns().map_or(0, |w| w.0) >= self.min_age_ns
            && self.type_substr.as_deref().is_none_or(|s| {
                t.root_type.contains(s) || any_frame(&t.frames, &|f| f.meta.name.contains(s))
            })
    }
}

/// Gives every frame of a chain its stable id (see [`FrameNode::id`]). Iterative: chains may be deep.
pub(crate) fn assign_frame_ids(frames: &mut [FrameNode]) {
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
    /// A task only its decoded chain tells of (a listed task without the agent's record, a
    /// thread's own future): key `id`, in `state` (frames unavailable when running), with no
    /// agent's timings, name, spawn site or delegate, and no edges yet.
    pub(crate) fn decoded(id: u64, state: State, root_type: Arc<str>) -> TaskView {
        TaskView {
            id,
            agent_id: None,
            tokio_id: None,
            name: None,
            derived_name: None,
            request: None,
            sockets: Vec::new(),
            stream: None,
            serves: Vec::new(),
            progress: None,
            verdict: None,
            state,
            thread: None,
            state_age_ns: None,
            unchanged_ns: None,
            age_ns: None,
            polls: None,
            busy_ns: None,
            wakes: None,
            last_wake_ago_ns: None,
            spawned_at: None,
            root_type,
            capture: match state {
                State::Running => CaptureView::Unavailable,
                _ => CaptureView::Fresh,
            },
            frames: Arc::default(),
            awaits_tasks: Vec::new(),
            awaited_by: None,
            delegate: None,
            decoded_delegates: Arc::default(),
            decode_note: None,
            searched: Arc::from(""),
            tokio_task: None,
            block_on: None,
        }
    }

    /// How long the task has been waiting as it is: the agent's time in its state when the agent
    /// times it, else the lower bound of [`TaskView::unchanged_ns`]; `true` when it is that bound.
    pub fn waiting_ns(&self) -> Option<(u64, bool)> {
        match (self.state_age_ns, self.unchanged_ns) {
            (Some(exact), _) => Some((exact, false)),
            (None, Some(at_least)) => Some((at_least, true)),
            (None, None) => None,
        }
    }

    /// This task `dt_ns` later, had nothing happened to it: each of its ages grown by `dt_ns`.
    /// Ages come from the agent or from a file, so they grow saturating: a crafted one near the largest
    /// stops there, never wraps.
    pub fn aged(&self, dt_ns: u64) -> TaskView {
        let grow = |v: &mut u64| *v = v.saturating_add(dt_ns);
        let mut t = self.clone();
        for age in [
            &mut t.state_age_ns,
            &mut t.unchanged_ns,
            &mut t.age_ns,
            &mut t.last_wake_ago_ns,
        ] {
            age.iter_mut().for_each(grow);
        }
        if let Some(d) = &mut t.delegate {
            grow(&mut d.held_ns);
        }
        if let CaptureView::Stale { age_ns } = &mut t.capture {
            grow(age_ns);
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
    pub(crate) fn search_text(&self) -> Arc<str> {
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

/// The chain's leaf that matters (see [`summary`]).
pub fn leaf_frame(frames: &[FrameNode]) -> Option<&FrameNode> {
    summary(frames).map(|s| s.leaf)
}

/// Whether a frame or a file of `frames` is one `has` finds.
fn frames_mention(frames: &[FrameNode], has: &dyn Fn(&str) -> bool) -> bool {
    any_frame(frames, &|f| {
        let m = &f.meta;
        let files = [&m.location, &m.suspended_at];
        has(&m.name)
            || files
                .iter()
                .any(|l| l.as_ref().is_some_and(|l| has(&l.file)))
    })
}

/// Whether any frame of `frames`, at any depth, is `has`. Iterative: a tree read from a file may
/// be of any depth. Allocates only where a chain branches: a search visits every chain of 100,000
/// tasks per key, and each dump's later stages every chain.
pub fn any_frame(frames: &[FrameNode], has: &dyn Fn(&FrameNode) -> bool) -> bool {
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
        if has(f) {
            return true;
        }
        if !rest.is_empty() {
            later.push(rest);
        }
        cur = &f.children;
    }
}

/// Cycles in the "task awaits task" graph. Every task has at most one awaiter (`awaited_by`), so following
/// awaiters from any task either ends or enters exactly one cycle.
pub(crate) fn find_cycles(tasks: &[TaskView]) -> Vec<Vec<u64>> {
    let awaits = (tasks.iter()).filter_map(|t| t.awaited_by.as_ref().map(|a| (a.task, t.id)));
    waits::cycles(awaits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{edge_snapshot, handshake, sample};
    use asyncdump_protocol::TaskState;

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
}
