//! What a task's chain says in one line: the leaf that matters, and a name for a task the program
//! did not name.
//!
//! A chain branches where a task waits on several futures at once (`select!`, `join!`, a collection
//! of futures). A list shows one leaf per task: of the branches that can end the wait for what the
//! task is there to do (not one that never completes, nor one that completes only to stop it, see
//! [`ARMS`]), the branch that goes deepest into the program's own code (frames whose file is
//! neither a dependency's nor the standard library's), then the longest, then the first; so a
//! framework's shutdown-signal branch never hides the handler's own wait, nor the connection a
//! task serves. The innermost frame of the program's own code on that branch names the task.
//! `watch`, `--stats`, `--coalesce` and JSON's statistics all say a chain by this one rule.

use std::borrow::Cow;

use super::FrameNode;
use crate::names::{base_name, display_name};

/// One line's worth of a chain (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Summary<'a> {
    /// The leaf of the chosen branch; where that is a `poll_fn`, the frame that polls it
    /// (`Receiver::recv`), which names what it waits on.
    pub leaf: &'a FrameNode,
    /// How many other leaves the chain has (pending branches elsewhere).
    pub others: usize,
    /// The innermost frame of the program's own code on the chosen branch, if any.
    pub own: Option<&'a FrameNode>,
}

/// The summary of a chain; `None` for no frames. Iterative (chains may be deep), and allocates only
/// the stack of branches still to visit.
pub fn summary(frames: &[FrameNode]) -> Option<Summary<'_>> {
    if let [only] = frames {
        // Most chains do not branch: down them without a stack.
        let (mut at, mut parent, mut own) = (only, None, None);
        loop {
            if at.meta.is_own_code() {
                own = Some(at);
            }
            match &at.children[..] {
                [] => break,
                [next] => (parent, at) = (Some(at), next),
                _ => return branching(frames),
            }
        }
        return Some(Summary {
            leaf: shown_leaf(at, parent),
            others: 0,
            own,
        });
    }
    branching(frames)
}

/// What a branch of a chain that branches may do for its task, least first: the branch a list
/// shows is of the highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Arm {
    /// It never completes (`std::future::pending()`: an arm of a `select!` left in for a timeout
    /// or a limit that is off).
    Never,
    /// It completes only to stop the task: a shutdown signal, a cancellation.
    Stops,
    /// Anything else: what the task is there to wait for.
    Works,
}

/// The futures a branch is known by, as their paths start (generic arguments left out), and
/// what the branch then does for its task. A branch is of the least arm of its frames.
const ARMS: &[(&str, Arm)] = &[
    ("core::future::pending::Pending", Arm::Never),
    ("futures_util::future::pending::Pending", Arm::Never),
    // Graceful shutdown: axum's and others' "stop once nobody listens".
    ("tokio::sync::watch::Sender::closed", Arm::Stops),
    ("tokio_util::sync::cancellation_token::", Arm::Stops),
    ("tokio::signal::", Arm::Stops),
    ("hyper_util::server::graceful::", Arm::Stops),
    ("actix_server::shutdown::GracefulShutdownSignal", Arm::Stops),
];

/// The arm frame `f` makes a branch it is on (see [`ARMS`]).
fn arm_of(f: &FrameNode) -> Arm {
    let path = base_name(&f.meta.name);
    (ARMS.iter())
        .find(|(prefix, _)| path.starts_with(prefix))
        .map_or(Arm::Works, |&(_, arm)| arm)
}

/// [`summary`] of a chain that branches.
fn branching(frames: &[FrameNode]) -> Option<Summary<'_>> {
    struct At<'a> {
        f: &'a FrameNode,
        parent: Option<&'a FrameNode>,
        depth: usize,
        /// The deepest own frame above and at `f`, with its depth + 1 (0: none).
        own: (usize, Option<&'a FrameNode>),
        /// The least arm of the frames above and at `f`.
        arm: Arm,
    }
    let start = |f, parent| At {
        f,
        parent,
        depth: 0,
        own: (0, None),
        arm: Arm::Works,
    };
    let mut stack: Vec<At<'_>> = frames.iter().rev().map(|f| start(f, None)).collect();
    let mut best: Option<((Arm, usize, usize), Summary<'_>)> = None;
    let mut leaves = 0;
    while let Some(mut at) = stack.pop() {
        if at.f.meta.is_own_code() {
            at.own = (at.depth + 1, Some(at.f));
        }
        at.arm = at.arm.min(arm_of(at.f));
        if at.f.children.is_empty() {
            leaves += 1;
            let score = (at.arm, at.own.0, at.depth);
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                let leaf = shown_leaf(at.f, at.parent);
                let own = at.own.1;
                best = Some((
                    score,
                    Summary {
                        leaf,
                        others: 0,
                        own,
                    },
                ));
            }
            continue;
        }
        for c in at.f.children.iter().rev() {
            stack.push(At {
                f: c,
                parent: Some(at.f),
                depth: at.depth + 1,
                own: at.own,
                arm: at.arm,
            });
        }
    }
    best.map(|(_, s)| Summary {
        others: leaves - 1,
        ..s
    })
}

/// The leaf a list shows for chain end `at` under `parent`: a `poll_fn`'s caller (see [`is_poll_fn`]).
fn shown_leaf<'a>(at: &'a FrameNode, parent: Option<&'a FrameNode>) -> &'a FrameNode {
    match parent {
        Some(p) if is_poll_fn(at) => p,
        _ => at,
    }
}

/// A `poll_fn` names nothing a reader knows; the frame that awaits it does.
fn is_poll_fn(f: &FrameNode) -> bool {
    let name = &f.meta.name;
    // As named now, and as files written before named it (by its type: core's, tokio's or futures').
    name.starts_with("poll_fn in ")
        || (name.ends_with('>')
            && name
                .split('<')
                .next()
                .is_some_and(|t| t.ends_with("::PollFn")))
}

/// The name a task's chain gives it: its innermost frame of the program's own code (`stuck::enqueue`),
/// else its root: an async fn or block as frames name it (`plain_tasks::busy`, for a task running
/// through the snapshot), a root named after its closure whole (`blocking_task in
/// blocking::await_blocking`), any other type by its last path segment (`UpgradeableConnection`).
pub fn derived_name<'a>(frames: &'a [FrameNode], root_type: &'a str) -> Cow<'a, str> {
    if let Some(own) = summary(frames).and_then(|s| s.own) {
        return Cow::Borrowed(base_name(&own.meta.name));
    }
    if root_type.contains("{async") {
        return Cow::Owned(base_name(&display_name(root_type)).to_owned());
    }
    let path = base_name(root_type);
    if root_type.contains(" in ") {
        return Cow::Borrowed(path);
    }
    Cow::Borrowed(path.rsplit("::").next().unwrap_or(path))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{derived_name, summary};
    use crate::model::{FrameInfo, FrameNode, Loc, Source};

    fn frame(name: &str, file: Option<&str>, children: Vec<FrameNode>) -> FrameNode {
        let at = file.map(|file| Loc {
            file: file.into(),
            line: 7,
            column: 0,
        });
        let source = if file.is_some() {
            Source::Decoded
        } else {
            Source::Awaitee
        };
        FrameNode {
            id: 0,
            meta: Arc::new(FrameInfo::new(name.into(), at, source)),
            awaits_tasks: Vec::new(),
            locals: Vec::new(),
            waits_on: None,
            holds: Vec::new(),
            walked_within: Vec::new(),
            children,
        }
    }

    const DEP: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/axum-0.8.4/src/serve.rs";
    const TOKIO: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/tokio-1.54.1/src/sync/mutex.rs";

    /// axum's connection: `select!` of the graceful-shutdown signal (all in axum and tokio) and the
    /// request, down through the program's handler to tokio's mutex.
    fn served() -> Vec<FrameNode> {
        let shutdown = frame(
            "axum::serve::signal",
            Some(DEP),
            vec![frame("tokio::sync::notify::Notified", None, vec![])],
        );
        let handler = frame(
            "stuck::enqueue",
            Some("src/main.rs"),
            vec![frame(
                "tokio::sync::mutex::Mutex::lock<()>",
                Some(TOKIO),
                vec![frame("tokio::sync::batch_semaphore::Acquire", None, vec![])],
            )],
        );
        let route = frame("axum::routing::Route::call", Some(DEP), vec![handler]);
        vec![frame(
            "axum::serve::handle_connection::{async block#3}",
            Some(DEP),
            vec![frame("tokio::select!", None, vec![shutdown, route])],
        )]
    }

    #[test]
    fn the_leaf_that_matters_is_the_branch_deepest_in_the_programs_own_code() {
        let frames = served();
        let s = summary(&frames).unwrap();
        assert_eq!(s.leaf.meta.name, "tokio::sync::batch_semaphore::Acquire");
        assert_eq!(s.others, 1, "the shutdown branch, counted");
        assert_eq!(s.own.unwrap().meta.name, "stuck::enqueue");
    }

    /// A connection's task: `select!` of the connection it serves and `arm`, deeper.
    fn serving(arm: FrameNode) -> Vec<FrameNode> {
        let conn = frame(
            "hyper_util::server::conn::auto::UpgradeableConnection<…>",
            None,
            vec![],
        );
        vec![frame(
            "tonic::transport::server::serve_connection::{async block#0}",
            Some(DEP),
            vec![frame("tokio::select!", None, vec![arm, conn])],
        )]
    }

    #[test]
    fn a_branch_that_never_completes_is_never_the_leaf_that_matters() {
        // tonic's max-connection-age arm, with no age set.
        let age = frame(
            "tonic::transport::server::sleep_or_pending::{async fn body#0}",
            Some(DEP),
            vec![frame("core::future::pending::Pending<()>", None, vec![])],
        );
        let frames = serving(age);
        let s = summary(&frames).unwrap();
        assert!(s.leaf.meta.name.contains("UpgradeableConnection"), "{s:?}");
        assert_eq!(s.others, 1);
    }

    #[test]
    fn a_branch_that_completes_only_to_stop_the_task_is_not_the_leaf_that_matters() {
        // axum's graceful shutdown, and a program's own signal handler: even in its own code.
        let closed = frame(
            "tokio::sync::watch::Sender::closed<()>",
            Some(TOKIO),
            vec![frame("tokio::sync::notify::Notified", None, vec![])],
        );
        let ctrl_c = frame(
            "app::shutdown_signal",
            Some("src/main.rs"),
            vec![frame(
                "tokio::signal::ctrl_c",
                Some(TOKIO),
                vec![frame("tokio::signal::unix::Signal", None, vec![])],
            )],
        );
        for arm in [closed, ctrl_c] {
            let frames = serving(arm);
            let s = summary(&frames).unwrap();
            assert!(s.leaf.meta.name.contains("UpgradeableConnection"), "{s:?}");
        }
        // Where stopping is all there is to wait for, it is the leaf.
        let only = vec![frame(
            "tokio::select!",
            None,
            vec![
                frame("core::future::pending::Pending<()>", None, vec![]),
                frame("tokio::signal::unix::Signal", None, vec![]),
            ],
        )];
        let s = summary(&only).unwrap();
        assert_eq!(s.leaf.meta.name, "tokio::signal::unix::Signal");
    }

    #[test]
    fn without_own_code_the_longest_branch_then_the_first_and_a_poll_fn_names_its_caller() {
        let recv = frame(
            "tokio::sync::mpsc::bounded::Receiver::recv<u64>",
            Some(TOKIO),
            vec![frame(
                "poll_fn in tokio::sync::mpsc::bounded::Receiver::recv",
                None,
                vec![],
            )],
        );
        let frames = vec![
            frame("a", None, vec![]),
            frame("tokio::select!", None, vec![recv, frame("b", None, vec![])]),
        ];
        let s = summary(&frames).unwrap();
        assert_eq!(
            s.leaf.meta.name,
            "tokio::sync::mpsc::bounded::Receiver::recv<u64>"
        );
        assert_eq!((s.others, s.own.is_none()), (2, true));
        assert!(summary(&[]).is_none());
    }

    #[test]
    fn a_task_is_named_by_its_own_code_else_by_its_root_type() {
        assert_eq!(
            derived_name(&served(), "axum::serve::Serve<…>"),
            "stuck::enqueue"
        );
        let conn = [frame("hyper::proto::Conn", None, vec![])];
        assert_eq!(
            derived_name(
                &conn,
                "hyper::client::conn::http1::upgrades::UpgradeableConnection<Conn, Body>"
            ),
            "UpgradeableConnection"
        );
        assert_eq!(
            derived_name(&[], "blocking_task in blocking::await_blocking"),
            "blocking_task in blocking::await_blocking"
        );
        assert_eq!(
            derived_name(&[], "plain_tasks::busy::{async_fn_env#0}"),
            "plain_tasks::busy",
            "running: no frames"
        );
    }
}
