//! `asyncdump ps`: lists live agents, removes stale sockets.

use std::os::unix::net::UnixListener;

use crate::support::{Fixture, asyncdump_ok, asyncdump_with};

#[test]
fn lists_live_agents_with_program_and_task_count() {
    let fx = Fixture::start("fan_out", &[]);
    let text = asyncdump_ok(&["ps"]);
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&fx.pid.to_string()))
        .expect("row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "fan_out");
    assert_eq!(cols[2], "16");
    assert!(text.starts_with("    PID  PROGRAM"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&asyncdump_ok(&["ps", "--json"])).unwrap();
    let agent = doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pid"] == fx.pid)
        .expect("agent");
    assert_eq!(agent["tasks_live"], 16);
}

#[test]
fn removes_sockets_of_dead_processes_and_of_nobody_listening() {
    // A private XDG_RUNTIME_DIR, so that `ps` runs of other tests do not tidy our planted sockets first.
    let xdg = crate::support::tempdir();
    let env = [("XDG_RUNTIME_DIR", xdg.as_path())];
    let fx = Fixture::start_with("depth_chain", &["--depth", "1"], &env);
    let dir = xdg.join("asyncdump");
    assert_eq!(fx.socket().parent(), Some(dir.as_path()));
    // A pid above pid_max never lives; and a live pid (ours) whose socket nobody listens on.
    let dead = dir.join("4194313.sock");
    drop(UnixListener::bind(&dead).unwrap());
    let unheard = dir.join(format!("{}.sock", std::process::id()));
    drop(UnixListener::bind(&unheard).unwrap());
    let out = asyncdump_with(&["ps"], &env);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("removed stale socket {}", dead.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("removed stale socket {}", unheard.display())),
        "{text}"
    );
    assert!(!dead.exists() && !unheard.exists());
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().next() == Some(&fx.pid.to_string())),
        "{text}"
    );
    assert!(fx.socket().exists(), "the live agent's socket stays");
}

#[test]
fn the_socket_is_private_and_removed_when_the_process_exits() {
    use std::os::unix::fs::PermissionsExt;
    let xdg = crate::support::tempdir();
    let env = [("XDG_RUNTIME_DIR", xdg.as_path())];
    let fx = Fixture::start_with("depth_chain", &["--depth", "1"], &env);
    let socket = fx.socket();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(socket.parent().unwrap()), 0o700, "socket directory");
    assert_eq!(mode(&socket), 0o600, "socket");
    drop(fx);
    // A normal exit (here: the fixture's park timeout) runs the agent's exit hook, which removes the socket.
    let mut child = std::process::Command::new(crate::support::bin("depth_chain"))
        .args(["--depth", "1"])
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", "1")
        .env("XDG_RUNTIME_DIR", &xdg)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    assert!(status.success());
    let gone = xdg.join("asyncdump").join(format!("{pid}.sock"));
    assert!(!gone.exists(), "{} left behind", gone.display());
}
