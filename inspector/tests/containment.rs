//! A panic inside the agent (armed on purpose with `ASYNCDUMP_FAULT`) is contained: the host keeps
//! running, the panic is logged in one line on the host's stderr, and the agent answers again, or, after
//! its listener failed three times, says on every connection that it is disabled.

use std::path::Path;
use std::time::Duration;

use asyncdump::attach::target::Target;
use asyncdump::session::{Session, SessionOptions};

use crate::support::{Fixture, asyncdump};

struct Logged {
    fx: Fixture,
    stderr: std::path::PathBuf,
    /// Holds the stderr file; removed when the spec ends.
    _dir: crate::support::Scratch,
}

/// A `depth_chain` fixture whose agent panics where `fault` says, its stderr kept.
fn faulty(fault: &str) -> Logged {
    let stderr_dir = crate::support::tempdir();
    let stderr = stderr_dir.join("stderr");
    let fx = Fixture::start_logging(
        "depth_chain",
        &["--depth", "2"],
        &[("ASYNCDUMP_FAULT", Path::new(fault))],
        &stderr,
    );
    Logged {
        fx,
        stderr,
        _dir: stderr_dir,
    }
}

impl Logged {
    fn agent_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.stderr)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("asyncdump agent: "))
            .map(str::to_owned)
            .collect()
    }

    /// The host is alive and its agent answers with the fixture's chain.
    fn answers(&mut self) {
        assert!(self.fx.is_alive(), "the host survived");
        let out = asyncdump(&["dump", &self.fx.pid.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("depth_chain::descend"), "{text}");
    }
}

fn failed_dump(pid: u32) -> String {
    let out = asyncdump(&["dump", &pid.to_string(), "--timeout", "5s"]);
    assert!(!out.status.success(), "the dump should have failed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    err.trim().to_owned()
}

#[test]
fn a_panic_inside_a_snapshot_fails_that_request_alone() {
    let mut host = faulty("snapshot=1");
    let err = failed_dump(host.fx.pid);
    assert!(err.contains("the agent failed while answering"), "{err}");
    assert!(err.contains("the process is unaffected"), "{err}");
    host.answers();
    let lines = host.agent_lines();
    assert_eq!(
        lines,
        [
            "asyncdump agent: a request failed (fault injected at snapshot); contained, the host is unaffected; please report this bug"
        ],
    );
}

#[test]
fn the_listener_is_restarted_after_a_panic() {
    let mut host = faulty("accept=2");
    for _ in 0..2 {
        failed_dump(host.fx.pid);
    }
    host.answers();
    let lines = host.agent_lines();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].contains("listener failed (fault injected at accept)"));
    assert_eq!(lines[1], "asyncdump agent: listener restarted");
}

#[test]
fn after_three_listener_failures_every_client_is_told_the_agent_is_disabled() {
    let mut host = faulty("accept=3");
    for _ in 0..3 {
        failed_dump(host.fx.pid);
    }
    for _ in 0..2 {
        let err = failed_dump(host.fx.pid);
        assert!(
            err.contains(&format!(
                "the agent in process {} is disabled: its listener failed 3 times",
                host.fx.pid
            )),
            "{err}"
        );
    }
    assert!(host.fx.is_alive(), "the host survived");
    let lines = host.agent_lines();
    assert_eq!(
        lines.last().map(String::as_str),
        Some("asyncdump agent: disabled after 3 listener failures; clients are told so")
    );
}

#[test]
fn a_panic_inside_a_subscription_update_ends_it_and_a_new_one_starts_afresh() {
    let mut host = faulty("update=2");
    let options = SessionOptions {
        timeout: Duration::from_secs(5),
        ..SessionOptions::default()
    };
    let target = Target::Pid(host.fx.pid);
    let mut session = Session::attach(&target, &options).expect("attached");
    session.subscribe(50, false).expect("subscribed");
    assert!(session.next_update().is_err(), "the first update failed");
    let mut session = Session::attach(&target, &options).expect("attached again");
    session.subscribe(50, false).expect("subscribed again");
    assert!(session.next_update().is_err(), "the second failed too");
    let mut session = Session::attach(&target, &options).expect("attached a third time");
    session
        .subscribe(50, false)
        .expect("subscribed a third time");
    let (dump, applied) = session.next_update().expect("the full state");
    assert!(applied.full);
    assert!(
        dump.tasks
            .iter()
            .any(|t| t.frames.iter().any(|f| f.meta.name.contains("descend"))),
        "chains"
    );
    host.answers();
    assert_eq!(host.agent_lines().len(), 2);
}
