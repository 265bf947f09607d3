//! Fixtures for the crate's unit specs: protocol snapshots with known chains.

use asyncdump_protocol::{
    Awaiter, Capture, Frame, FrameMeta, FrameSource, Handshake, Location, PROTOCOL_VERSION,
    Snapshot, SpawnSite, Task, TaskState,
};

use crate::model::waits::{Held, Holder, WaitEdge, WaitsFor};
use crate::model::{FrameNode, Loc};

/// A runtime of `flavor`, found by the census, of four tasks all listed.
pub(crate) fn runtime(flavor: &str) -> crate::model::RuntimeView {
    crate::model::RuntimeView {
        flavor: Some(flavor.into()),
        found_by: crate::model::FoundBy::Census,
        alive: Some(4),
        listed: 4,
        skipped: 0,
        not_listed: None,
    }
}

/// A runtime worker blocked (asleep) inside the poll of task `polling`.
pub(crate) fn blocked_worker(tid: u32, polling: u64) -> crate::model::threads::ThreadView {
    use crate::model::threads::{Blocking, Doing, NativeFrame, ThreadRole, ThreadView};
    ThreadView {
        tid,
        name: None,
        role: ThreadRole::Worker,
        doing: Doing::Blocked {
            on: Blocking::Sleep { asked_ns: None },
        },
        polling: Some(polling),
        frames: vec![NativeFrame {
            function: "tokio::runtime::task::raw::poll".into(),
            file: None,
            line: 0,
            inlined: false,
            library: None,
            own: false,
        }],
        unwind_stopped: None,
    }
}

/// A fresh directory for one spec's files, removed with them when this is dropped.
pub(crate) fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("asyncdump-unit-")
        .tempdir()
        .expect("a temporary directory")
}

pub(crate) fn handshake() -> Handshake {
    Handshake {
        protocol_version: PROTOCOL_VERSION,
        agent_version: "0.1.0".into(),
        pid: 42,
        program: "svc".into(),
        start_time_unix_ms: 0,
    }
}

pub(crate) fn meta(name: &str, line: u32) -> FrameMeta {
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

pub(crate) fn f(id: u64, parent: Option<u64>, meta: u32) -> Frame {
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

pub(crate) fn names(nodes: &[FrameNode]) -> Vec<String> {
    nodes.iter().map(|n| n.meta.name.clone()).collect()
}

/// An edge of the wait graph: `from` waits in `bank::transfer` at line `waits` of `src/bank.rs` for
/// a mutex `to` holds in `source`, taken at line `acquired`.
pub(crate) fn lock_edge(from: u64, to: u64, waits: u32, acquired: u32) -> WaitEdge {
    let at = |line: u32| Loc {
        file: "src/bank.rs".into(),
        line,
        column: 9,
    };
    WaitEdge {
        from,
        to,
        waits_in: Some("bank::transfer".into()),
        waits_at: Some(at(waits)),
        any_of: false,
        on: WaitsFor::Lock {
            holder: Holder {
                task: to,
                frame: "bank::transfer".into(),
                at: Some(at(waits)),
                held: Held {
                    lock: "Mutex".into(),
                    write: false,
                    addr: 0x1000 * from,
                    local: "source".into(),
                    acquired_at: Some(at(acquired)),
                    polled: true,
                    stopped_at: None,
                },
            },
        },
    }
}
