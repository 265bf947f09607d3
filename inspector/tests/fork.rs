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
