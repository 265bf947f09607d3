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
