//! A process that forks: its child inherits the agent's exit hook, and exiting must not take the
//! parent's socket with it.

use crate::support::{Fixture, asyncdump_ok};

#[test]
fn a_forked_child_exiting_leaves_its_parents_socket_serving() {
    let fx = Fixture::start("forker", &[]);
    assert!(
        fx.socket().exists(),
        "the child exited before `ready`; the socket is still there"
    );
    let text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert!(text.contains("task 1 \"parked\""), "{text}");
}

#[test]
fn a_forked_child_that_calls_init_serves_on_its_own_socket_and_leaves_its_parents_alone() {
    let pid_file_dir = crate::support::tempdir();
    let pid_file = pid_file_dir.join("child.pid");
    let fx = Fixture::start("forker", &["--child-init", pid_file.to_str().unwrap()]);
    let child: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let kill_child = || {
        let _ = std::process::Command::new("kill")
            .arg(child.to_string())
            .status();
    };
    let child_socket = crate::support::socket_of(child);
    let child_text = asyncdump_ok(&["dump", &child.to_string(), "--no-decode"]);
    kill_child();
    if let Some(socket) = &child_socket {
        let _ = std::fs::remove_file(socket);
    }
    assert!(child_socket.is_some(), "the child bound its own socket");
    assert_ne!(child_socket, Some(fx.socket()));
    assert!(
        child_text.starts_with(&format!("pid {child} (forker)")),
        "{child_text}"
    );
    let parent_text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert!(
        parent_text.starts_with(&format!("pid {} (forker)", fx.pid)),
        "{parent_text}"
    );
    assert!(parent_text.contains("task 1 \"parked\""), "{parent_text}");
    assert!(fx.socket().exists());
}

/// The parent killed while its forked child lives on: the child still holds the parent's listening
/// socket, where the kernel queues connections nobody will ever accept. A dump of that socket says
/// at once that it is stale, and removes it (ours as it is); before, it waited out its timeout.
#[test]
fn a_dead_parents_socket_held_by_its_forked_child_is_stale_at_once() {
    let kill = |pid: u32| {
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        assert!(status.is_ok_and(|s| s.success()));
    };
    let pid_file_dir = crate::support::tempdir();
    let pid_file = pid_file_dir.join("child.pid");
    let fx = Fixture::start("forker", &["--child-init", pid_file.to_str().unwrap()]);
    let child: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let child_socket = crate::support::socket_of(child);
    let socket = fx.socket();
    kill(fx.pid);
    let gone = || {
        std::fs::read_to_string(format!("/proc/{}/stat", fx.pid)).map_or(true, |s| {
            s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z'))
        })
    };
    while !gone() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let start = std::time::Instant::now();
    let out = crate::support::asyncdump(&["dump", socket.to_str().unwrap(), "--timeout", "8s"]);
    let took = start.elapsed();
    kill(child);
    if let Some(s) = child_socket {
        let _ = std::fs::remove_file(s);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("stale socket") && err.contains("removed it"),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    assert!(!socket.exists());
}
