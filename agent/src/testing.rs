//! Tests that time out with a dump: [`timeout`] runs a test's future, and if it has not finished in
//! time, prints every task's chain (the installed `asyncdump` inspector run on this process, as a
//! signal's dump is) and fails the test, naming it. `#[asyncdump_agent::test(timeout = "30s")]`
//! writes that around a `#[tokio::test]`.
//!
//! ```no_run
//! #[asyncdump_agent::test(timeout = "5s")]
//! async fn replies_arrive() {
//!     let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
//!     drop(tokio::spawn(async move { tx.send(7) }));
//!     assert_eq!(rx.await, Ok(7));
//! }
//! ```
//!
//! The test's own future is a task of the agent while it runs, so its chain is in the dump with its
//! runtime's tasks (every registered runtime's, in fact: tests of one binary share a process). A test
//! whose thread is blocked inside a poll cannot be failed from another thread: after a grace period
//! the dump is taken from the agent's side and the process exits with a message, as a test binary
//! that panicked would.

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::self_dump::inspector::{self, Output};

/// How long a timed-out test's thread may take to notice before the process exits for it.
pub const GRACE: Duration = Duration::from_secs(5);

/// Runs `fut`, the test named `test`, for at most `limit`. Past it, prints every task's chain to
/// stderr and panics with the test's name; a test's thread blocked in a poll for [`GRACE`] more
/// makes the process exit (status 101) after the same dump.
#[track_caller]
pub fn timeout<F: Future>(limit: Duration, test: &str, fut: F) -> impl Future<Output = F::Output> {
    // Made here, so that the test's task is spawned where the test is written.
    let fut = crate::instrument_named(format!("test {test}"), fut);
    let test = test.to_owned();
    async move { run(limit, &test, fut).await }
}

async fn run<F: Future>(limit: Duration, test: &str, fut: crate::Instrumented<F>) -> F::Output {
    let socket = agent_socket();
    let deadline = Deadline::start(limit, test, socket.clone());
    let mut fut = pin!(fut);
    let out = std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        match deadline.passed(cx.waker()) {
            true => Poll::Ready(None),
            false => Poll::Pending,
        }
    })
    .await;
    let Some(out) = out else {
        drop(deadline);
        let why = format!("test `{test}` timed out after {limit:?}");
        dump(&why, socket.as_ref());
        panic!("{why}: every task's chain is printed above");
    };
    out
}

/// The agent's socket, starting the agent if this process has none yet, with the current tokio
/// runtime registered; `Err`: why there is no agent to dump through.
fn agent_socket() -> Result<PathBuf, String> {
    let socket = match crate::init() {
        Ok(agent) => agent.socket_path().to_owned(),
        Err(crate::InitError::AlreadyStarted(path)) => path,
        Err(e) => return Err(e.to_string()),
    };
    #[cfg(feature = "tokio")]
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        crate::register_runtime(&handle);
    }
    Ok(socket)
}

fn dump(why: &str, socket: Result<&PathBuf, &String>) {
    match socket {
        Ok(socket) => inspector::dump(why, socket, &Output::Stderr),
        Err(e) => crate::containment::log(&format!("{why}: no dump: no agent: {e}")),
    }
}

/// A test's deadline, kept by a thread of its own.
struct Deadline {
    state: Arc<(Mutex<State>, Condvar)>,
}

#[derive(Default)]
struct State {
    passed: bool,
    /// The test's side saw the end (finished, or noticed the deadline).
    noticed: bool,
    waker: Option<Waker>,
}

impl Deadline {
    fn start(limit: Duration, test: &str, socket: Result<PathBuf, String>) -> Deadline {
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let keeper = state.clone();
        let name = test.to_owned();
        let started = std::thread::Builder::new()
            .name("asyncdump-test-deadline".into())
            .spawn(move || keep(&keeper, limit, &name, socket));
        if let Err(e) = started {
            crate::containment::log(&format!("test `{test}`: no deadline: {e}"));
        }
        Deadline { state }
    }

    /// Whether the deadline passed; if not, `waker` is woken when it does.
    fn passed(&self, waker: &Waker) -> bool {
        let mut s = self.state.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !s.passed {
            s.waker = Some(waker.clone());
        }
        s.passed
    }
}

/// However the test ends (its value, its own panic, the deadline), the deadline's thread is told,
/// and never ends the process for a test that is over.
impl Drop for Deadline {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap_or_else(PoisonError::into_inner).noticed = true;
        cvar.notify_all();
    }
}

/// The deadline's thread: waits `limit` (or for the test to end), wakes the test, and if its thread
/// does not notice within [`GRACE`], dumps and ends the process itself.
fn keep(
    state: &(Mutex<State>, Condvar),
    limit: Duration,
    test: &str,
    socket: Result<PathBuf, String>,
) {
    let (lock, cvar) = state;
    let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut s, _) = (cvar.wait_timeout_while(guard, limit, |s| !s.noticed))
        .unwrap_or_else(PoisonError::into_inner);
    if s.noticed {
        return;
    }
    s.passed = true;
    if let Some(w) = s.waker.take() {
        w.wake();
    }
    let (s, _) =
        (cvar.wait_timeout_while(s, GRACE, |s| !s.noticed)).unwrap_or_else(PoisonError::into_inner);
    if s.noticed {
        return;
    }
    drop(s);
    let why = format!(
        "test `{test}` timed out after {limit:?}, its thread blocked inside a poll for {GRACE:?} more"
    );
    dump(&why, socket.as_ref());
    crate::containment::log(&format!(
        "{why}: it cannot be failed from another thread; the process exits"
    ));
    std::process::exit(101);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_that_ends_any_way_releases_its_deadline() {
        let deadline = Deadline::start(Duration::from_secs(3600), "t", Err("none".into()));
        let state = deadline.state.clone();
        // A test that panics drops its deadline while unwinding, as one that returns does.
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = deadline;
            panic!("the test's own failure");
        }));
        assert!(unwound.is_err());
        assert!(state.0.lock().unwrap().noticed);
        // Its thread is gone at once, not after the hour: it held the only other reference.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while Arc::strong_count(&state) > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the deadline's thread still waits"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
