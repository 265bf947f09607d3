//! Specs of the merge: hand-made plans and walks in, the lines a dump shows out.

use std::sync::Arc;

use asyncdump_protocol::{NO_PARENT, NodeStatus, WalkNode};

use super::merge::is_own_block;
use super::{AnnotatedFrame, TaskRefs};
use crate::model::values::{Reading, Wanted};
use crate::model::{FastMap, FrameInfo, FrameNode, Loc, Source};
use crate::plan::{Kind, Plan, StateView};

fn decoded(name: &str) -> FrameInfo {
    FrameInfo::new(name.into(), None, Source::Decoded)
}

/// An async fn `name`, suspended (state 3) at `line`; state 1 is its end.
fn async_fn(name: &str, line: u32) -> Kind {
    let at = |line: u32| {
        Some(Loc {
            file: "src/main.rs".into(),
            line,
            column: 0,
        })
    };
    let suspended = decoded(name).with_suspended_at(at(line));
    let mut states = FastMap::default();
    let view = |info: FrameInfo, done| StateView {
        info: Arc::new(info),
        done,
        locals: Arc::from([]),
        target: None,
    };
    states.insert(3, view(suspended, false));
    states.insert(1, view(decoded(name), true));
    Kind::Coroutine(states)
}

fn leaf(name: &str) -> Kind {
    Kind::Leaf(Arc::new(FrameInfo::awaitee(name.into())))
}

fn plan(kinds: Vec<Kind>) -> Plan {
    Plan {
        kinds,
        ..Plan::default()
    }
}

/// A node of type `ty` under node `parent` (`NO_PARENT` for the root), read with `discr`.
fn node(parent: u32, ty: u32, discr: Option<u64>) -> WalkNode {
    WalkNode {
        parent,
        ty,
        addr: 0x1000 + ty as u64 * 0x100,
        discr,
        status: NodeStatus::Read,
    }
}

/// The lines of `frames`, one per frame in pre-order, indented by depth: `name@line [awaits]`.
fn lines(frames: &[FrameNode]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<(&FrameNode, usize)> = frames.iter().rev().map(|f| (f, 0)).collect();
    while let Some((f, depth)) = stack.pop() {
        let mut line = format!("{}{}", "  ".repeat(depth), f.meta.name);
        if let Some(at) = &f.meta.suspended_at {
            line += &format!("@{}", at.line);
        }
        if !f.awaits_tasks.is_empty() {
            line += &format!(" {:?}", f.awaits_tasks);
        }
        out.push(line);
        stack.extend(f.children.iter().rev().map(|c| (c, depth + 1)));
    }
    out
}

fn merged(plan: &Plan, walk: &[WalkNode], annotated: &[AnnotatedFrame]) -> Vec<String> {
    let (frames, _) = plan.merge(
        walk,
        annotated,
        &mut Vec::new(),
        &TaskRefs::default(),
        &Reading::default(),
    );
    lines(&frames)
}

#[test]
fn a_suspended_async_fn_shows_its_await_line_then_what_it_awaits() {
    let p = plan(vec![
        async_fn("svc::handler", 12),
        leaf("tokio::time::Sleep"),
    ]);
    let walk = [node(NO_PARENT, 0, Some(3)), node(0, 1, None)];
    assert_eq!(
        merged(&p, &walk, &[]),
        ["svc::handler@12", "  tokio::time::Sleep"]
    );
}

#[test]
fn a_finished_join_branch_shows_nothing() {
    let join = Kind::Combinator(Arc::new(decoded("tokio::join!")));
    let p = plan(vec![
        join,
        Kind::Tuple,
        async_fn("svc::a", 3),
        async_fn("svc::b", 4),
    ]);
    let walk = [
        node(NO_PARENT, 0, None),
        node(0, 1, None),
        node(1, 2, Some(1)), // returned
        node(1, 3, Some(3)),
    ];
    assert_eq!(merged(&p, &walk, &[]), ["tokio::join!", "  svc::b@4"]);
}

#[test]
fn a_select_branch_its_mask_disables_is_left_out() {
    let select = Kind::Select(Arc::new(decoded("tokio::select!")));
    let kinds = vec![
        select,
        Kind::SelectMask,
        Kind::Tuple,
        async_fn("svc::a", 3),
        async_fn("svc::b", 4),
    ];
    let p = plan(kinds);
    let walk = [
        node(NO_PARENT, 0, None),
        node(0, 1, Some(0b01)), // branch 0 disabled
        node(0, 2, None),
        node(2, 3, Some(3)),
        node(2, 4, Some(3)),
    ];
    assert_eq!(merged(&p, &walk, &[]), ["tokio::select!", "  svc::b@4"]);
}

#[test]
fn an_annotated_frame_the_walk_reaches_shows_once_and_the_others_hang_under_their_parent() {
    let p = plan(vec![
        Kind::Framed { node_offset: 0x10 },
        async_fn("svc::handler", 12),
        leaf("tokio::time::Sleep"),
    ]);
    // The `Framed` node is at 0x1000: its frame node, 0x10 into it, is the annotated frame's id.
    let walk = [
        node(NO_PARENT, 0, None),
        node(0, 1, Some(3)),
        node(1, 2, None),
    ];
    let annotated = |id, parent, name: &str| AnnotatedFrame {
        id,
        parent,
        info: Arc::new(FrameInfo::new(name.into(), None, Source::AnnotatedFn)),
        awaits: vec![],
    };
    let frames = [
        annotated(0x1010, None, "handler"),
        annotated(0x2000, Some(0x1010), "audit"),
    ];
    assert_eq!(
        merged(&p, &walk, &frames),
        ["handler@12", "  tokio::time::Sleep", "  audit"],
        "the decoded fn folds into its annotated line; the unreached frame keeps its parent"
    );
}

#[test]
fn a_join_handle_edge_moves_from_the_root_to_the_handles_line() {
    let handle = Kind::JoinHandle(Arc::new(FrameInfo::awaitee("JoinHandle<()>".into())));
    let p = plan(vec![
        async_fn("svc::main", 5),
        handle,
        Kind::CellRef { plus: 0x10 },
    ]);
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, None),
        node(1, 2, Some(0x4ff0)),
    ];
    let mut refs = TaskRefs::default();
    refs.cells.insert(0x5000, 7);
    let mut root_awaits = vec![7];
    let (frames, _) = p.merge(&walk, &[], &mut root_awaits, &refs, &Reading::default());
    assert_eq!(lines(&frames), ["svc::main@5", "  JoinHandle<()> [7]"]);
    assert!(root_awaits.is_empty());
}

#[test]
fn an_unreadable_future_and_an_unknown_vtable_are_named_not_dropped() {
    let p = plan(vec![async_fn("svc::main", 5), leaf("x")]);
    let mut fault = node(0, 1, None);
    fault.status = NodeStatus::Fault;
    let mut dyn_ = node(0, u32::MAX, None);
    dyn_.status = NodeStatus::UnknownVtable { vtable: 0xabc };
    let mut null = node(0, u32::MAX, None);
    null.status = NodeStatus::Null;
    let walk = [node(NO_PARENT, 0, Some(3)), fault, dyn_, null];
    assert_eq!(
        merged(&p, &walk, &[]),
        [
            "svc::main@5",
            "  unreadable future at 0x1100",
            "  dyn Future (vtable 0xabc not in the binary's DWARF)",
        ]
    );
}

#[test]
fn an_async_fn_awaiting_only_its_own_block_is_one_line_at_the_blocks_await() {
    let p = plan(vec![
        async_fn("svc::locked", 5),
        async_fn("svc::locked::{async block#0}", 20),
        leaf("tokio::sync::batch_semaphore::Acquire"),
    ]);
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, Some(3)),
        node(1, 2, None),
    ];
    assert_eq!(
        merged(&p, &walk, &[]),
        ["svc::locked@20", "  tokio::sync::batch_semaphore::Acquire"]
    );
}

#[test]
fn a_hand_written_future_nothing_below_shows_is_named_as_the_leaf() {
    let mut p = plan(vec![
        async_fn("svc::serve", 9),
        Kind::Transparent,
        leaf("state"),
    ]);
    let conn = Arc::new(FrameInfo::awaitee("hyper::proto::Conn".into()));
    p.hand_written.insert(1, conn);
    // Its only child is skipped state: a `Null` pointer.
    let mut inner = node(1, 2, None);
    inner.status = NodeStatus::Null;
    let walk = [node(NO_PARENT, 0, Some(3)), node(0, 1, None), inner];
    assert_eq!(
        merged(&p, &walk, &[]),
        ["svc::serve@9", "  hyper::proto::Conn"]
    );
}

/// A receiver's line awaits the task that holds its sender; a hand-written type holding senders only
/// is the leaf where its parent expects a future (hyper's connection), and state inside another
/// hand-written future whose own future shows (its dispatcher's callback), never a leaf there.
#[test]
fn a_sender_holder_is_a_leaf_as_a_future_and_state_as_a_field() {
    let mut p = plan(vec![
        async_fn("svc::serve", 9),
        Kind::Transparent,
        Kind::Transparent,
        Kind::OneshotSender,
        Kind::Oneshot(Arc::new(FrameInfo::awaitee("oneshot::Receiver".into()))),
        Kind::OneshotInner,
    ]);
    let named = |n: &str| Arc::new(FrameInfo::awaitee(n.into()));
    p.hand_written.insert(1, named("hyper::Connection"));
    p.hand_written.insert(2, named("hyper::Callback"));
    p.sender_only.insert(2);
    let held = node(2, 3, Some(0xc4a7));
    // serve → Connection { callback: Callback { sender }, rx: Receiver }.
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, None),
        node(1, 2, None),
        held,
        node(1, 4, None),
        node(4, 5, Some(0)),
    ];
    let mut refs = TaskRefs::default();
    refs.senders.insert(walk[5].addr, 77);
    let (frames, _) = p.merge(&walk, &[], &mut Vec::new(), &refs, &Reading::default());
    assert_eq!(
        lines(&frames),
        ["svc::serve@9", "  oneshot::Receiver [77]"],
        "the callback is the connection's state, and the receiver waits for task 77"
    );
    // Where a future is expected, the holder is the leaf.
    p.sender_only.insert(1);
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, None),
        node(1, 3, Some(1)),
    ];
    assert_eq!(
        merged(&p, &walk, &[]),
        ["svc::serve@9", "  hyper::Connection"]
    );
}

#[test]
fn an_async_fn_awaiting_only_its_own_block_is_recognised_by_name() {
    let own = |p: &str, c: &str| is_own_block(&decoded(p), &decoded(c));
    assert!(own("svc::slept", "svc::slept::{async block#0}"));
    assert!(own(
        "tokio::sync::mutex::Mutex::lock<()>",
        "tokio::sync::mutex::Mutex::lock::{async block#0}<()>"
    ));
    assert!(own(
        "axum::handler::<F as Handler>::call<fn(State<Deps>) -> svc::locked, S>",
        "axum::handler::<F as Handler>::call::{async block#3}<fn(State<Deps>) -> svc::locked, S>"
    ));
    // Another fn's block, a block's block, or an annotated frame: kept apart.
    assert!(!own("svc::slept", "svc::slept_more::{async block#0}"));
    assert!(!own(
        "svc::slept",
        "svc::slept::{async block#0}::{async block#1}"
    ));
    assert!(!own("svc::a::{async block#0}", "svc::a::{async block#0}"));
    let annotated = FrameInfo::new("svc::slept".into(), None, Source::AnnotatedFn);
    assert!(!is_own_block(
        &annotated,
        &decoded("svc::slept::{async block#0}")
    ));
}

#[test]
fn a_suspended_frame_carries_the_wanted_locals_unread_with_the_state_to_check() {
    use crate::model::values::{Check, Value};
    use crate::plan::values::{LocalPlan, Shape, ValueType};
    let mut sm = async_fn("svc::handler", 12);
    if let Kind::Coroutine(states) = &mut sm {
        let s = states.get_mut(&3).unwrap();
        s.locals = Arc::from([
            LocalPlan {
                name: "id".into(),
                offset: 8,
                ty: 0,
                acquired: None,
                info: Default::default(),
            },
            LocalPlan {
                name: "name".into(),
                offset: 16,
                ty: 0,
                acquired: None,
                info: Default::default(),
            },
        ]);
    }
    let mut p = plan(vec![sm]);
    p.walk.types = vec![asyncdump_protocol::TypePlan {
        size: 32,
        discr: Some(asyncdump_protocol::Discr { offset: 4, size: 1 }),
        ..Default::default()
    }];
    p.values.types = vec![ValueType {
        name: "u64".into(),
        size: 8,
        shape: Shape::Int { signed: false },
    }];
    let walk = [node(NO_PARENT, 0, Some(3))];
    let locals = |wanted: &Wanted| {
        let reading = Reading {
            locals: wanted.clone(),
            targets: false,
            threads: false,
        };
        let (frames, _) = p.merge(&walk, &[], &mut Vec::new(), &TaskRefs::default(), &reading);
        frames[0].locals.clone()
    };
    assert!(locals(&Wanted::None).is_empty());
    let only = locals(&Wanted::Named(vec!["name".into()]));
    assert_eq!(only.len(), 1);
    assert_eq!((only[0].name(), only[0].type_name()), ("name", "u64"));
    let check = Check {
        addr: 0x1004,
        size: 1,
        expected: 3,
    };
    assert_eq!(
        only[0].value,
        Value::Unread {
            shape: 0,
            addr: 0x1010,
            check
        }
    );
    assert_eq!(locals(&Wanted::All).len(), 2);
}

/// An async fn (see [`async_fn`]) whose suspend state plans a wait target of `kind`, one part at
/// offset 8.
fn async_fn_waiting(name: &str, line: u32, kind: crate::plan::values::TargetKind) -> Kind {
    use crate::plan::values::{LocalPlan, TargetPlan};
    let mut sm = async_fn(name, line);
    if let Kind::Coroutine(states) = &mut sm {
        let part = LocalPlan {
            name: "part".into(),
            offset: 8,
            ty: 0,
            acquired: None,
            info: Default::default(),
        };
        states.get_mut(&3).unwrap().target = Some(TargetPlan {
            kind,
            parts: Arc::from([part]),
        });
    }
    sm
}

/// Each frame's wait kind, in pre-order, where it has one: (frame name, kind).
fn wait_kinds(frames: &[FrameNode]) -> Vec<(String, crate::model::values::WaitKind)> {
    let mut out = Vec::new();
    let mut stack: Vec<&FrameNode> = frames.iter().rev().collect();
    while let Some(f) = stack.pop() {
        if let Some(w) = &f.waits_on {
            out.push((f.meta.name.to_string(), w.kind.clone()));
        }
        stack.extend(f.children.iter().rev());
    }
    out
}

#[test]
fn a_frames_wait_target_goes_to_its_leaf_and_the_outermost_says_it() {
    use crate::model::values::WaitKind;
    use crate::plan::values::TargetKind;
    let reading = Reading {
        locals: Wanted::None,
        targets: true,
        threads: false,
    };
    let merge = |p: &Plan, walk: &[WalkNode]| {
        let (frames, _) = p.merge(walk, &[], &mut Vec::new(), &TaskRefs::default(), &reading);
        wait_kinds(&frames)
    };
    // A barrier's wait through a watch's change: the barrier's target reaches the leaf.
    let p = plan(vec![
        async_fn_waiting(
            "tokio::sync::barrier::Barrier::wait_internal",
            188,
            TargetKind::Barrier,
        ),
        async_fn_waiting("tokio::sync::watch::changed_impl", 1017, TargetKind::Watch),
        leaf("tokio::sync::notify::Notified"),
    ]);
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, Some(3)),
        node(1, 2, None),
    ];
    assert_eq!(
        merge(&p, &walk),
        [("tokio::sync::notify::Notified".into(), WaitKind::Barrier)]
    );
    // The watch's alone.
    let walk = [node(NO_PARENT, 1, Some(3)), node(0, 2, None)];
    assert_eq!(
        merge(&p, &walk),
        [("tokio::sync::notify::Notified".into(), WaitKind::Watch)]
    );
    // Where the chain forks below it, the frame keeps its target.
    let p = plan(vec![
        async_fn_waiting("app::both", 3, TargetKind::Watch),
        Kind::Tuple,
        leaf("a"),
        leaf("b"),
    ]);
    let walk = [
        node(NO_PARENT, 0, Some(3)),
        node(0, 1, None),
        node(1, 2, None),
        node(1, 3, None),
    ];
    assert_eq!(merge(&p, &walk), [("app::both".into(), WaitKind::Watch)]);
    // Without targets asked for, none.
    let (frames, _) = p.merge(
        &walk,
        &[],
        &mut Vec::new(),
        &TaskRefs::default(),
        &Reading::default(),
    );
    assert!(wait_kinds(&frames).is_empty());
}
