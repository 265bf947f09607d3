//! Requests, replies and the snapshot model.
//!
//! A [`Snapshot`] is a flat, interned description of every task: each [`Task`] lists its [`Frame`]s in
//! pre-order (a parent before its children, siblings in the order they were first polled), and each frame
//! names its continuation — the frame that awaits it — by `parent` id (`None`: the task itself). Cross-task
//! edges are carried by the awaited task ([`Task::awaited_by`]): "task B's continuation is frame F of task A".
//! Names and locations are interned in [`Snapshot::frame_metas`] and [`Snapshot::spawn_sites`] so that
//! 100,000 similar tasks do not repeat the same strings.
//!
//! All times are nanoseconds on the agent's monotonic clock; [`Snapshot::now_ns`] is on the same clock, so
//! ages are `now_ns - t` and need no clock agreement between processes. The delegate ([`Task::delegate`]) is
//! optional: it exists only when a leaf kept the task's waker, and no reader may need it to build a chain.

use serde::{Deserialize, Serialize};

/// What a client asks for after the handshake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Counts only; cheap enough for `asyncdump ps` to ask every agent.
    Stats,
    /// A full snapshot of every task.
    Snapshot(SnapshotRequest),
    /// What the inspector needs to build a walk plan: the live tasks' root anchors and the build-id.
    WalkInfo,
    /// Updates at an interval from now on ([`Reply::Update`]), until the client closes the connection or
    /// sends another request (which ends the subscription; another `Subscribe` starts a new one).
    Subscribe(SubscribeRequest),
    /// Bytes of the process's memory ([`Reply::Read`]): the values a walked frame holds. Like a walk,
    /// it reads memory, so it is allowed to the clients a walk is. Added after version 7's first
    /// agents, which answer it as malformed: a client then reads the memory itself, or goes without.
    Read(ReadRequest),
}

/// See [`Request::Read`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    /// `(address, length)` of each range, read whole or not at all.
    pub ranges: Vec<(u64, u32)>,
    /// Linked lists to follow where the memory is, one exchange for a list of any length:
    /// `(at, next, max)` as `asyncdump_walker::Memory::chase` takes them, `max` at most
    /// [`MAX_CHASE`].
    pub chases: Vec<(u64, u32, u32)>,
}

/// Most nodes one chase of a [`ReadRequest`] follows.
pub const MAX_CHASE: u32 = 4096;

/// Most bytes one [`ReadRequest`] may ask for, all ranges together.
pub const MAX_READ_BYTES: u64 = 32 << 20;

/// Most ranges one [`ReadRequest`] may ask for: each costs the agent a few hundred bytes while it
/// is answered, whatever its length.
pub const MAX_READ_RANGES: usize = 16_384;

/// Most nodes all the chases of one [`ReadRequest`] may follow together: each is a read of its own,
/// and one request is answered in a bounded time (about a tenth of a second), not seconds.
pub const MAX_CHASE_NODES: u64 = 65_536;

impl ReadRequest {
    /// Why the agent must not answer it, if it must not: more than [`MAX_READ_BYTES`] in all, more
    /// than [`MAX_READ_RANGES`] ranges or more than [`MAX_CHASE_NODES`] nodes to chase.
    pub fn check(&self) -> Result<(), String> {
        if self.ranges.len() > MAX_READ_RANGES {
            return Err(format!(
                "a read of {} ranges, over the {MAX_READ_RANGES} one request may ask for",
                self.ranges.len()
            ));
        }
        let nodes: u64 = (self.chases.iter())
            .map(|&(_, _, max)| u64::from(max.min(MAX_CHASE)))
            .sum();
        if nodes > MAX_CHASE_NODES {
            return Err(format!(
                "chases of {nodes} nodes, over the {MAX_CHASE_NODES} one request may follow"
            ));
        }
        let total: u64 = self.ranges.iter().map(|&(_, len)| u64::from(len)).sum();
        // A chase's nodes come back as words.
        let chased: u64 = self
            .chases
            .iter()
            .map(|&(_, _, max)| 8 * u64::from(max.min(MAX_CHASE)))
            .sum();
        let total = total + chased;
        match total <= MAX_READ_BYTES {
            true => Ok(()),
            false => Err(format!(
                "a read of {total} bytes, over the {MAX_READ_BYTES} one request may ask for"
            )),
        }
    }
}

/// See [`Request::Read`]: per range, its bytes, or `None` where it could not be read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadReply {
    /// Per range, in one buffer (see [`crate::ReadData`]).
    pub data: crate::ReadData,
    /// Per chase, the list as followed.
    pub chased: Vec<asyncdump_walker::Chased>,
}

impl Request {
    /// The walk plan this request carries, if any.
    pub fn walk_plan(&self) -> Option<&crate::WalkPlan> {
        match self {
            Request::Snapshot(r) => r.walk.as_ref(),
            Request::Subscribe(r) => r.walk.as_ref(),
            Request::Stats | Request::WalkInfo | Request::Read(_) => None,
        }
    }

    /// Whether answering it reads the process's memory (a walk plan, or a read).
    pub fn reads_memory(&self) -> bool {
        self.walk_plan().is_some() || matches!(self, Request::Read(_))
    }
}

/// See [`Request::Subscribe`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribeRequest {
    /// Time between updates; the agent uses at least [`MIN_INTERVAL_MS`].
    pub interval_ms: u32,
    /// Also report tasks as they complete (otherwise they are reported [`Update::gone`]).
    pub include_completed: bool,
    /// Walk each new or changed idle task's future with this plan, and list registered runtimes.
    pub walk: Option<crate::WalkPlan>,
}

/// Shortest interval between two updates of a subscription.
pub const MIN_INTERVAL_MS: u32 = 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRequest {
    /// Include the retained, recently completed tasks.
    pub include_completed: bool,
    /// Also walk each idle task's future with this plan ([`Task::walk`]).
    pub walk: Option<crate::WalkPlan>,
}

/// The agent's answer to one [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Stats(Stats),
    Snapshot(Snapshot),
    WalkInfo(WalkInfo),
    /// One update of a subscription.
    Update(Update),
    Read(ReadReply),
    /// The request (or the frame carrying it) was refused; the agent closes the connection after this.
    Error(ErrorReply),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The frame's payload did not decode as a request.
    Malformed,
    /// The frame's length exceeded [`crate::MAX_REQUEST_BYTES`].
    TooLarge,
    /// The connection ended inside a frame.
    Truncated,
    /// The client's handshake has another protocol version.
    VersionMismatch,
    /// SO_PEERCRED showed a uid that is neither the agent's nor root.
    PermissionDenied,
    /// Too many clients are connected at once.
    Busy,
    /// The agent failed while answering (a bug); the host program is unaffected.
    Internal,
}

/// See [`Request::WalkInfo`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkInfo {
    /// The distinct [`Task::root_anchor`]s of the live tasks, sorted.
    pub root_anchors: Vec<u64>,
    /// The GNU build-id of the running executable, from its loaded `PT_NOTE` segment: tells the inspector
    /// whether the binary it reads DWARF from is the one running. `None` if the executable has none.
    pub build_id: Option<Vec<u8>>,
    /// Where the `tokio::runtime::Handle` of each runtime registered with the agent is, in the target.
    pub runtimes: Vec<u64>,
    /// Why this client may not send walk plans, if it may not: walks read the process's memory, and
    /// the agent allows them only to a client the kernel would let read it (or as its host chose).
    pub walks_refused: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub tasks_live: u64,
    pub tasks_spawned: u64,
    pub tasks_completed_retained: u64,
}

/// Everything the agent knows, at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The agent's monotonic clock when the capture started.
    pub now_ns: u64,
    /// How long the agent spent capturing, including waits for running tasks.
    pub capture_ns: u64,
    /// Process uptime when the capture started.
    pub uptime_ns: u64,
    pub frame_metas: Vec<FrameMeta>,
    pub spawn_sites: Vec<SpawnSite>,
    pub tasks: Vec<Task>,
    pub stats: Stats,
    /// One per registered runtime, then per runtime a census found: tokio's count of its live tasks
    /// and, when the request's walk plan carried a runtime plan, the tasks listed from it.
    pub runtimes: Vec<crate::RuntimeReport>,
    /// What the census covered, when the walk plan asked for one.
    pub census: Option<crate::CensusReport>,
}

/// What changed since a subscription's previous update (or, when [`Update::full`], everything).
///
/// A reader keeps a table of tasks by id, and of the frame metas and spawn sites by index: an update's
/// `frame_metas` and `spawn_sites` are appended to the subscription's tables (their first entry is
/// number `metas_before` and `sites_before`), its `tasks` replace the reader's tasks of the same id or
/// are new, and its `gone` ids are dropped. A task not in an update has not been registered, polled,
/// woken, awaited or ended since the previous one: its record and chain are as they were, and only its
/// ages grow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Update {
    /// The subscription's first update: `tasks` is every task, and the reader starts its tables afresh.
    pub full: bool,
    pub now_ns: u64,
    /// How long the agent spent on this update.
    pub capture_ns: u64,
    pub uptime_ns: u64,
    pub metas_before: u32,
    pub frame_metas: Vec<FrameMeta>,
    pub sites_before: u32,
    pub spawn_sites: Vec<SpawnSite>,
    /// New and changed tasks, each whole; completed ones too when the subscription asked for them.
    pub tasks: Vec<Task>,
    /// Ids of tasks that ended (when completed tasks were not asked for).
    pub gone: Vec<u64>,
    pub stats: Stats,
    /// The registered runtimes, when they were listed for this update and changed since last sent;
    /// `None`: as in the previous update that had them. Tasks nobody spawned through the agent are
    /// never marked as they change, so the runtimes are listed on the full update, then at most once a
    /// second (less often when a listing is slow), and sent only when the listing differs.
    pub runtimes: Option<Vec<crate::RuntimeReport>>,
    /// The census that found `runtimes`' unregistered ones, sent with them.
    pub census: Option<crate::CensusReport>,
}

/// The static description of a frame, shared by every instance of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FrameMeta {
    pub name: String,
    pub location: Location,
    pub source: FrameSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Location {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameSource {
    /// An `async fn` annotated with `#[asyncdump_agent::frame]`.
    AnnotatedFn,
    /// Any future wrapped with `.frame("label")`.
    Labelled,
}

/// Where tasks were spawned and what their root future is; interned per spawn site.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpawnSite {
    pub location: Location,
    /// `std::any::type_name` of the root future: informative, not unique.
    pub root_type: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: u64,
    pub name: Option<String>,
    /// Index into [`Snapshot::spawn_sites`].
    pub spawn_site: u32,
    /// Address, in the target, of `<Instrumented<F> as Future>::poll` for this task's root future type
    /// `F`: monomorphized per type, so the inspector can map it (minus the load bias) through the binary's
    /// symbols and DWARF to the exact type of the root future. 0 if unknown.
    pub root_anchor: u64,
    /// Address of the agent's record of this task in the target: what the data pointer of the task's
    /// wakers, and `JoinHandle`s to it, point at. Lets a decoded walk name the task a pointer leads to.
    pub cell: u64,
    /// The data pointer of the waker the executor last polled this task with (0 before the first
    /// poll). Under tokio it is the task's header, so a task the runtime lists can be known as this one
    /// even while it runs and its future cannot be walked.
    pub poll_waker_data: u64,
    pub state: TaskState,
    pub created_ns: u64,
    pub polls: u64,
    pub busy_ns: u64,
    pub last_poll_end_ns: Option<u64>,
    pub wakes: u64,
    pub last_wake_ns: Option<u64>,
    /// The task's frames in pre-order; empty when the task awaits nothing annotated.
    pub frames: Vec<Frame>,
    /// How fresh `frames` is.
    pub capture: Capture,
    /// Set when a frame of another task awaits this task's JoinHandle.
    pub awaited_by: Option<Awaiter>,
    /// Present only when a leaf cloned and kept the task's waker.
    pub delegate: Option<Delegate>,
    /// What the walk plan found in the task's future, when the request carried one.
    pub walk: Option<crate::Walk>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// Suspended: not being polled.
    Idle,
    /// Being polled on an OS thread since `since_ns`.
    Running { thread: ThreadInfo, since_ns: u64 },
    /// Finished (returned, or dropped before returning) at `at_ns`.
    Completed { at_ns: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// OS thread id (what `gdb`, `perf` and `/proc/PID/task` use).
    pub tid: u32,
    pub name: Option<String>,
}

/// Whether a task's frames were read in this snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Capture {
    /// Read in this snapshot while the task was not being polled.
    Fresh,
    /// The task was being polled for the whole wait; these frames are from an earlier snapshot, taken at
    /// `captured_ns`.
    Stale { captured_ns: u64 },
    /// The task was being polled and no earlier capture exists; `frames` is empty.
    Unavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// Opaque id, unique among the live frames of one snapshot.
    pub id: u64,
    /// Continuation link: the frame that awaits this one; `None` means the task root.
    pub parent: Option<u64>,
    /// Index into [`Snapshot::frame_metas`].
    pub meta: u32,
}

/// The frame that awaits a task's JoinHandle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Awaiter {
    pub task: u64,
    /// Frame id within `task`; `None` when the awaiting code is the task root itself.
    pub frame: Option<u64>,
}

/// The waker the task handed to the leaf it waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegate {
    /// Live clones of the task's waker held outside the poll.
    pub clones: u32,
    /// When the oldest live clone was taken.
    pub since_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode};

    #[test]
    fn a_snapshot_round_trips() {
        let snap = Snapshot {
            now_ns: 10,
            frame_metas: vec![FrameMeta {
                name: "handler".into(),
                location: Location {
                    file: "src/main.rs".into(),
                    line: 3,
                    column: 1,
                },
                source: FrameSource::AnnotatedFn,
            }],
            tasks: vec![Task {
                id: 1,
                name: Some("t".into()),
                spawn_site: 0,
                root_anchor: 0,
                cell: 0,
                poll_waker_data: 0,
                state: TaskState::Running {
                    thread: ThreadInfo { tid: 7, name: None },
                    since_ns: 4,
                },
                created_ns: 1,
                polls: 2,
                busy_ns: 3,
                last_poll_end_ns: None,
                wakes: 0,
                last_wake_ns: None,
                frames: vec![Frame {
                    id: 9,
                    parent: None,
                    meta: 0,
                }],
                capture: Capture::Stale { captured_ns: 5 },
                awaited_by: Some(Awaiter {
                    task: 2,
                    frame: None,
                }),
                delegate: None,
                walk: Some(crate::Walk::NotStarted),
            }],
            ..Default::default()
        };
        let reply = Reply::Snapshot(snap);
        assert_eq!(decode::<Reply>(&encode(&reply).unwrap()).unwrap(), reply);
    }

    #[test]
    fn a_reads_bytes_go_as_one_run_and_read_as_they_did_one_u8_at_a_time() {
        // The reply as agents and clients before bytes went as one run encoded and decoded it.
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Before {
            data: Vec<Option<Vec<u8>>>,
            chased: Vec<asyncdump_walker::Chased>,
        }
        let data = vec![
            Some(vec![1, 2, 0xff]),
            None,
            Some(Vec::new()),
            Some(vec![7; 300]),
        ];
        let before = Before {
            data: data.clone(),
            chased: Vec::new(),
        };
        let now = ReadReply {
            data: data.iter().map(|d| d.as_deref()).collect(),
            chased: Vec::new(),
        };
        let bytes = encode(&now).unwrap();
        assert_eq!(bytes, encode(&before).unwrap());
        assert_eq!(decode::<ReadReply>(&bytes).unwrap(), now);
        assert_eq!(decode::<Before>(&bytes).unwrap(), before);
    }

    #[test]
    fn garbage_does_not_decode_as_a_request() {
        assert!(decode::<Request>(&[0xff, 0xff, 0xff]).is_err());
        assert!(decode::<Request>(&[]).is_err());
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut bytes = encode(&Request::Stats).unwrap();
        bytes.push(0);
        assert!(decode::<Request>(&bytes).is_err());
    }
}
