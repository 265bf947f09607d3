//! Each way a target can be wrong: a one-line message that says what to do, and exit status 1
//! (usage errors: 2).

use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;

use crate::support::{Fixture, asyncdump, fake_handshake, tempdir};

fn fails_with(args: &[&str], code: i32, needle: &str) -> String {
    let out = asyncdump(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "asyncdump {args:?}: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "asyncdump {args:?}: expected {needle:?} in {stderr:?}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    stderr
}

#[test]
fn an_unknown_pid_is_no_such_process() {
    fails_with(&["dump", "4194311"], 1, "no such process: 4194311");
}

#[test]
fn a_process_without_agent_says_how_to_add_one() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    // Not a Rust program with debug info either: it cannot be read from its memory.
    fails_with(&["dump", &pid], 6, "has no asyncdump agent");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn a_stale_socket_in_our_socket_directory_is_reported_and_removed() {
    let xdg = tempdir();
    let dir = xdg.join("asyncdump");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("4194315.sock");
    drop(UnixListener::bind(&path).unwrap()); // bound, then nobody listens
    let out = crate::support::asyncdump_with(
        &["dump", path.to_str().unwrap()],
        &[("XDG_RUNTIME_DIR", &xdg)],
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("stale socket") && err.contains("removed it"),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn a_stale_socket_elsewhere_is_reported_and_left_in_place() {
    let dir = tempdir();
    let path = dir.join("stale.sock");
    drop(UnixListener::bind(&path).unwrap());
    let err = fails_with(&["dump", path.to_str().unwrap()], 1, "stale socket");
    assert!(err.contains("left it in place"), "{err}");
    assert!(path.exists(), "not ours to remove");
}

#[test]
fn an_ordinary_file_is_not_a_socket_and_is_never_touched() {
    let dir = tempdir();
    let path = dir.join("notes.txt");
    std::fs::write(&path, "precious").unwrap();
    fails_with(&["dump", path.to_str().unwrap()], 1, "is not a socket");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}

#[test]
fn a_missing_socket_path_is_named() {
    fails_with(
        &["dump", "/nonexistent/agent.sock"],
        1,
        "no such socket: /nonexistent/agent.sock",
    );
}

#[test]
fn another_protocol_version_is_named_with_what_to_do() {
    let dir = tempdir();
    let path = dir.join("future.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut body = b"ASYNCDMP".to_vec();
        body.extend_from_slice(&99u32.to_le_bytes());
        asyncdump_protocol::write_frame(&mut conn, &body).unwrap();
    });
    let err = fails_with(
        &["dump", path.to_str().unwrap()],
        1,
        "protocol version mismatch",
    );
    assert!(err.contains("agent speaks protocol 99"), "{err}");
    server.join().unwrap();
}

#[test]
fn a_reply_that_does_not_hold_together_is_refused_in_one_line() {
    use asyncdump_protocol::{
        ClientHello, MAX_REQUEST_BYTES, Reply, Snapshot, Task, decode, encode, read_frame,
        write_frame,
    };
    let dir = tempdir();
    let path = dir.join("crafted.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        fake_handshake(&mut conn, "crafted", std::process::id()).unwrap();
        ClientHello::from_bytes(&read_frame(&mut conn, MAX_REQUEST_BYTES).unwrap()).unwrap();
        let _request: asyncdump_protocol::Request =
            decode(&read_frame(&mut conn, MAX_REQUEST_BYTES).unwrap()).unwrap();
        // A task naming spawn site 5 and frame 9 of a snapshot that has neither.
        let snap = Snapshot {
            tasks: vec![Task {
                spawn_site: 5,
                frames: vec![asyncdump_protocol::Frame {
                    id: 1,
                    parent: None,
                    meta: 9,
                }],
                ..crate::support::crafted_task(1)
            }],
            ..Snapshot::default()
        };
        write_frame(&mut conn, &encode(&Reply::Snapshot(snap)).unwrap()).unwrap();
    });
    let err = fails_with(
        &["dump", path.to_str().unwrap(), "--no-decode"],
        1,
        "does not hold together (task 1 names spawn site 5 of 0)",
    );
    assert!(!err.contains("panicked"), "{err}");
    server.join().unwrap();
}

#[test]
fn permission_is_refused_to_another_user() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED permission_is_refused_to_another_user: needs root to run asyncdump as another user"
        );
        return;
    }
    // A private socket directory: other tests' agents would re-tighten a shared one while we loosen it.
    let xdg = tempdir();
    let fx = Fixture::start_with(
        "depth_chain",
        &["--depth", "2"],
        &[("XDG_RUNTIME_DIR", xdg.as_path())],
    );
    let socket = fx.socket();
    let as_nobody = |socket: &str| {
        Command::new("setpriv")
            .env("XDG_RUNTIME_DIR", &xdg)
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_asyncdump"),
                "dump",
                socket,
            ])
            .output()
            .unwrap()
    };
    // The socket sits in a 0700 directory: the kernel refuses the connection.
    let out = as_nobody(socket.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("permission denied"),
        "{out:?}"
    );
    // By pid, its memory is another way in, refused too: the error names whose process it is.
    let out = as_nobody(&fx.pid.to_string());
    assert_eq!(out.status.code(), Some(5));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("it runs as uid 0 and this asyncdump as uid 65534"),
        "by pid: {out:?}"
    );
    // Even with the socket exposed, the agent's SO_PEERCRED check refuses a foreign uid.
    let exposed_dir = tempdir();
    let exposed = exposed_dir.join("exposed.sock");
    std::os::unix::fs::symlink(&socket, &exposed).unwrap();
    for p in [exposed.parent().unwrap(), socket.parent().unwrap()] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&socket, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = as_nobody(exposed.to_str().unwrap());
    std::fs::set_permissions(
        socket.parent().unwrap(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("agent refused the connection: permission denied: this process runs as uid 0, you are uid 65534"), "{stderr}");
}

#[test]
fn usage_errors_exit_with_2() {
    let out = asyncdump(&["dump"]);
    assert_eq!(out.status.code(), Some(2));
    let out = asyncdump(&["dump", "1", "--min-age", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a unit"));
}

#[test]
fn watch_without_a_terminal_says_so_and_leaves_the_target_alone() {
    let mut fx = Fixture::start("deadlock", &[]);
    // `asyncdump(...)` captures standard output: a pipe, not a terminal.
    let out = asyncdump(&["watch", &fx.pid.to_string()]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard output is not one"), "{err}");
    assert!(out.stdout.is_empty(), "no escape codes written");
    assert!(fx.is_alive());
}

#[test]
fn control_characters_from_the_target_reach_the_terminal_escaped() {
    let fx = Fixture::start("hostile_names", &[]);
    let out = asyncdump(&["dump", &fx.pid.to_string()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        !text.contains('\x1b') && !text.contains('\x07') && !text.contains('\r'),
        "{text:?}"
    );
    assert!(
        text.contains(r#"task 1 "evil\u{1b}[2J\u{1b}]0;pwned\u{7}\rname""#),
        "{text}"
    );
    assert!(text.contains(r"label\u{1b}[31mred at"), "{text}");
    // The JSON document keeps them, escaped as JSON does.
    let doc = crate::support::dump_json(fx.pid, &[]);
    assert_eq!(doc["tasks"][0]["name"], "evil\x1b[2J\x1b]0;pwned\x07\rname");
}

/// A line break in a task name or a frame label is printed escaped, in text and in folded stacks: it
/// cannot forge a task or a frame line.
#[test]
fn a_line_break_in_a_name_or_label_cannot_forge_a_line() {
    let fx = Fixture::start("hostile_names", &[]);
    let text = String::from_utf8(asyncdump(&["dump", &fx.pid.to_string()]).stdout).unwrap();
    let forged = |l: &str| l.starts_with("task 99") || l.trim_start().starts_with("forged frame");
    assert!(!text.lines().any(forged), "{text}");
    assert!(
        text.contains(r#"task 2 "x\ntask 99 "forged" · idle""#),
        "{text}"
    );
    assert!(
        text.contains(r"y\n  forged frame at src/main.rs:1:1"),
        "{text}"
    );
    let folded = asyncdump(&["dump", &fx.pid.to_string(), "--format", "folded"]);
    let folded = String::from_utf8(folded.stdout).unwrap();
    // Two tasks' chains, and `main`'s own future's (the fixture's `block_on`).
    assert_eq!(folded.lines().count(), 3, "one line per chain: {folded}");
    assert!(!folded.lines().any(forged), "{folded}");
}

#[test]
fn a_binary_that_is_not_a_regular_file_is_refused_at_once() {
    let start = std::time::Instant::now();
    fails_with(
        &["index", "/dev/zero"],
        3,
        "/dev/zero is not an executable asyncdump can read: not a regular file",
    );
    let fx = Fixture::start("depth_chain", &["--depth", "1"]);
    let out = asyncdump(&["dump", &fx.pid.to_string(), "--binary", "/dev/zero"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("chains not decoded: /dev/zero is not an executable asyncdump can read: not a regular file"), "{text}");
    assert!(
        text.contains("depth_chain::descend"),
        "annotated frames still show: {text}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "never reads it"
    );
}

/// Serves a fake agent at `path` that says it is process `claims`, on its own thread.
fn fake_agent(path: &std::path::Path, claims: u32) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            let _ = fake_handshake(&mut conn, "fake", claims);
        }
    })
}

/// What an agent says comes from the target: its error text reaches the terminal escaped, on one
/// line, however it is made.
#[test]
fn an_agents_error_text_reaches_the_terminal_escaped_on_one_line() {
    use asyncdump_protocol::{
        ErrorKind, ErrorReply, MAX_REQUEST_BYTES, Reply, encode, read_frame, write_frame,
    };
    let dir = tempdir();
    let path = dir.join("evil.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        fake_handshake(&mut conn, "evil", std::process::id()).unwrap();
        // The hello, then the request this error answers; then the client's leaving.
        let _hello = read_frame(&mut conn, MAX_REQUEST_BYTES);
        let _request = read_frame(&mut conn, MAX_REQUEST_BYTES);
        let message = "evil\x1b[2J\x1b]0;pwned\x07\nasyncdump: a forged line".to_owned();
        let reply = Reply::Error(ErrorReply {
            kind: ErrorKind::Internal,
            message,
        });
        let _ = write_frame(&mut conn, &encode(&reply).unwrap());
        let _ = std::io::Read::read_to_end(&mut conn, &mut Vec::new());
    });
    let out = asyncdump(&["dump", path.to_str().unwrap(), "--no-decode"]);
    server.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "one line, no forged one: {err:?}");
    assert!(
        err.contains(r"evil\u{1b}[2J\u{1b}]0;pwned\u{7}\nasyncdump: a forged line"),
        "{err:?}"
    );
}

/// A zero timeout is a usage error, said as one, not an agent that "did not answer".
#[test]
fn a_zero_timeout_is_a_usage_error() {
    let fx = Fixture::start("depth_chain", &["--depth", "1"]);
    for args in [
        vec!["dump", &*fx.pid.to_string(), "--timeout", "0s"],
        vec!["ps", "--timeout", "0ms"],
    ] {
        let out = asyncdump(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("a timeout must be longer than 0"), "{err}");
        assert!(!err.contains("did not answer"), "{err}");
    }
}

#[test]
fn an_agent_that_says_it_is_another_process_is_refused() {
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let dir = tempdir();
    let path = dir.join("impostor.sock");
    let server = fake_agent(&path, victim.id());
    let err = fails_with(&["dump", path.to_str().unwrap()], 1, "refusing");
    assert!(
        err.contains(&format!(
            "it answers as process {}, but the kernel says process {} ",
            victim.id(),
            std::process::id()
        )),
        "{err}"
    );
    server.join().unwrap();
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// A live process (`sleep`) whose agent socket someone else made: a fake agent at
/// `XDG/asyncdump/<pid>.sock`, waiting for its first client.
struct Planted {
    victim: std::process::Child,
    xdg: crate::support::Scratch,
    dir: std::path::PathBuf,
    socket: std::path::PathBuf,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Planted {
    fn new() -> Planted {
        let victim = Command::new("sleep").arg("30").spawn().unwrap();
        let xdg = tempdir();
        let dir = xdg.join("asyncdump");
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join(format!("{}.sock", victim.id()));
        let server = Some(fake_agent(&socket, victim.id()));
        Planted {
            victim,
            xdg,
            dir,
            socket,
            server,
        }
    }

    /// `asyncdump dump PID` fails with status 1, saying `why`.
    fn refused(&self, why: &str) {
        let pid = self.victim.id().to_string();
        let env = [("XDG_RUNTIME_DIR", self.xdg.as_path())];
        let out = crate::support::asyncdump_with(&["dump", &pid], &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(why), "{err}");
    }

    /// Checks that nobody connected to the fake agent at `listening`, then ends it.
    fn never_connected(mut self, listening: &std::path::Path) {
        drop(UnixStream::connect(listening).expect("still listening: asyncdump never connected"));
        self.server.take().unwrap().join().unwrap();
        self.victim.kill().unwrap();
        self.victim.wait().unwrap();
    }
}

#[test]
fn a_socket_directory_others_may_write_to_or_a_symlinked_socket_is_refused_unread() {
    use std::os::unix::fs::PermissionsExt;
    let planted = Planted::new();
    std::fs::set_permissions(&planted.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    planted.refused("may be written by others (mode 777)");
    // A symlink where the socket should be, in a proper directory.
    std::fs::set_permissions(&planted.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let real = planted.dir.join("elsewhere.sock");
    std::fs::rename(&planted.socket, &real).unwrap();
    std::os::unix::fs::symlink(&real, &planted.socket).unwrap();
    planted.refused("it is not a socket (a symlink?)");
    planted.never_connected(&real);
}

#[test]
fn a_socket_directory_planted_by_another_user_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root, to give the planted directory to another user");
        return;
    }
    let planted = Planted::new();
    // As if uid 65534 had made both before the victim's agent could.
    std::os::unix::fs::chown(&planted.dir, Some(65534), None).unwrap();
    std::os::unix::fs::chown(&planted.socket, Some(65534), None).unwrap();
    planted.refused("is owned by uid 65534, not the target's uid 0");
    let socket = planted.socket.clone();
    planted.never_connected(&socket);
}

#[test]
fn a_stopped_target_is_named_at_once_by_dump_and_ps() {
    let fx = Fixture::start("depth_chain", &["--depth", "1"]);
    let pid = fx.pid.to_string();
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    signal("-STOP");
    let start = std::time::Instant::now();
    fails_with(
        &["dump", &pid],
        1,
        &format!("process {pid} is stopped (state T)"),
    );
    let listing = crate::support::asyncdump_ok(&["ps"]);
    let took = start.elapsed();
    signal("-CONT");
    assert!(listing.contains("is stopped (state T)"), "{listing}");
    assert!(
        took < std::time::Duration::from_secs(5),
        "no waiting for it: {took:?}"
    );
}

#[test]
fn a_peer_that_trickles_its_answer_is_given_up_on_at_the_timeout() {
    let dir = tempdir();
    let path = dir.join("trickle.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // A frame header promising 100 bytes, then one byte every 300 ms.
        let _ = std::io::Write::write_all(&mut conn, &100u32.to_be_bytes());
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(300));
            if std::io::Write::write_all(&mut conn, b"x").is_err() {
                return;
            }
        }
    });
    let start = std::time::Instant::now();
    fails_with(
        &["dump", path.to_str().unwrap(), "--timeout", "1s"],
        1,
        "its answers took longer than 1.00s in all (--timeout)",
    );
    let took = start.elapsed();
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    server.join().unwrap();
}

#[test]
fn asyncdump_disable_keeps_the_agent_from_starting() {
    let xdg = tempdir();
    let out = Command::new(crate::support::bin("depth_chain"))
        .args(["--depth", "1"])
        .env("ASYNCDUMP_DISABLE", "1")
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", "5")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // The fixture treats an agent that does not start as fatal; a service would log it and go on.
    assert!(
        err.contains("asyncdump agent disabled by ASYNCDUMP_DISABLE"),
        "{err}"
    );
    assert!(
        !xdg.join("asyncdump").exists(),
        "no socket directory, no socket"
    );
}

/// Runs a fixture whose agent cannot start; returns what it said on stderr.
fn agent_refuses(env: &[(&str, &std::path::Path)]) -> String {
    agent_refuses_in(&std::env::temp_dir(), env)
}

/// Like [`agent_refuses`], with the fixture's working directory at `cwd`.
fn agent_refuses_in(cwd: &std::path::Path, env: &[(&str, &std::path::Path)]) -> String {
    let out = Command::new(crate::support::bin("depth_chain"))
        .args(["--depth", "1"])
        .current_dir(cwd)
        .envs(env.iter().copied())
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", "5")
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the fixture treats a refused agent as fatal"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_agent_refuses_to_serve_in_a_planted_directory_or_over_a_planted_file() {
    use std::os::unix::fs::PermissionsExt;
    // A socket directory others could write to before the agent came.
    let xdg = tempdir();
    let dir = xdg.join("asyncdump");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = agent_refuses(&[("XDG_RUNTIME_DIR", &xdg)]);
    assert!(
        err.contains("refusing socket directory") && err.contains("mode 777"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing bound there"
    );
    // A symlink, or an ordinary file, where the socket is to go.
    let elsewhere = tempdir();
    let target = elsewhere.join("victim");
    std::fs::write(&target, "keep").unwrap();
    let link_dir = tempdir();
    let link = link_dir.join("agent.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = agent_refuses(&[("ASYNCDUMP_SOCKET", &link)]);
    assert!(err.contains("a symlink is there already"), "{err}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let err = agent_refuses(&[("ASYNCDUMP_SOCKET", &target)]);
    assert!(err.contains("not a socket is there already"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // An explicit socket path in a directory anyone may write to, without the sticky bit; with it
    // (as /tmp has), the agent serves there.
    let shared = tempdir();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = agent_refuses(&[("ASYNCDUMP_SOCKET", &shared.join("agent.sock"))]);
    assert!(
        err.contains("others may write to it (mode 777) and it has no sticky bit"),
        "{err}"
    );
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let socket = shared.join("agent.sock");
    let fx = Fixture::start_with(
        "depth_chain",
        &["--depth", "1"],
        &[("ASYNCDUMP_SOCKET", &socket)],
    );
    assert!(socket.exists(), "served in a sticky shared directory");
    drop(fx);
}

/// A relative `ASYNCDUMP_SOCKET` would land wherever the process was started, in a directory nobody
/// checked (here one anyone may write to): refused, and nothing bound.
#[test]
fn a_relative_socket_path_is_refused_and_nothing_is_bound() {
    use std::os::unix::fs::PermissionsExt;
    let shared = tempdir();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let relative = std::path::Path::new("agent.sock");
    let err = agent_refuses_in(&shared, &[("ASYNCDUMP_SOCKET", relative)]);
    assert!(
        err.contains("refusing socket path agent.sock: it is relative"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        0,
        "nothing bound"
    );
}

/// `ASYNCDUMP_SOCKET=` (set, but empty) is what users write to mean unset: the default socket.
#[test]
fn an_empty_socket_variable_means_the_default_socket() {
    let fx = Fixture::start_with(
        "depth_chain",
        &["--depth", "1"],
        &[("ASYNCDUMP_SOCKET", std::path::Path::new(""))],
    );
    assert!(fx.socket().exists(), "served at the default path");
    let out = asyncdump(&["dump", &fx.pid.to_string()]);
    assert!(out.status.success(), "{out:?}");
}

/// Two processes given one `ASYNCDUMP_SOCKET`: the second refuses to serve there, and the first stays
/// dumpable through it.
#[test]
fn a_live_agents_socket_is_never_taken_over() {
    let dir = tempdir();
    let socket = dir.join("shared.sock");
    let first = Fixture::start_with(
        "depth_chain",
        &["--depth", "1"],
        &[("ASYNCDUMP_SOCKET", &socket)],
    );
    let err = agent_refuses(&[("ASYNCDUMP_SOCKET", &socket)]);
    assert!(err.contains("a live agent listens there already"), "{err}");
    let out = asyncdump(&["dump", socket.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.starts_with(&format!("pid {} ", first.pid)), "{text}");
}

#[test]
fn another_users_ps_neither_lists_nor_touches_our_agents() {
    let fx = Fixture::start("depth_chain", &["--depth", "1"]);
    let socket = fx.socket();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_asyncdump"),
            "ps",
        ])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!listing.contains(&fx.pid.to_string()), "{listing}");
    assert!(socket.exists(), "our socket is left alone");
    assert!(crate::support::asyncdump_ok(&["ps"]).contains(&fx.pid.to_string()));
}

/// Every string an agent sends, in the handshake (program, version), the tasks (name, spawn file,
/// root type, thread), the frames (name, file), the runtimes (why not listed) and the answer on walks,
/// holds a line break followed by a line of its own making: none starts a line of the text dump or
/// of `ps`.
#[test]
fn no_string_an_agent_sends_can_forge_a_line_of_dump_or_ps() {
    use asyncdump_protocol::{
        Frame, FrameMeta, FrameSource, Location, RuntimeReport, Snapshot, SpawnSite, Task,
        TaskState, ThreadInfo,
    };
    let forged = |what: &str| format!("{what}\nFORGED {what}");
    let at = |file: &str| Location {
        file: forged(file),
        line: 1,
        column: 1,
    };
    let snap = Snapshot {
        frame_metas: vec![FrameMeta {
            name: forged("frame"),
            location: at("frame.rs"),
            source: FrameSource::Labelled,
        }],
        spawn_sites: vec![SpawnSite {
            location: at("spawn.rs"),
            root_type: forged("root"),
        }],
        tasks: vec![Task {
            name: Some(forged("task")),
            state: TaskState::Running {
                thread: ThreadInfo {
                    tid: 7,
                    name: Some(forged("thread")),
                },
                since_ns: 0,
            },
            frames: vec![Frame {
                id: 1,
                parent: None,
                meta: 0,
            }],
            ..crate::support::crafted_task(1)
        }],
        runtimes: vec![RuntimeReport {
            handle: 1,
            flavor: None,
            alive: Some(1),
            tasks: Vec::new(),
            skipped: 0,
            error: Some(forged("runtime")),
            source: Default::default(),
        }],
        ..Snapshot::default()
    };
    let dir = tempdir();
    let socket = dir.join("forging.sock");
    let program = forged("program");
    let server = crate::support::serve_fake_agent(&socket, &program, snap.clone());
    let out = asyncdump(&["dump", socket.to_str().unwrap(), "--all"]);
    server.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let starts_forged = |text: &str| text.lines().any(|l| l.trim_start().starts_with("FORGED"));
    assert!(!starts_forged(&text), "{text}");
    for field in [
        "program", "task", "thread", "root", "spawn.rs", "frame", "runtime",
    ] {
        assert!(
            text.contains(&format!("{field}\\nFORGED {field}")),
            "{field}: {text}"
        );
    }

    // `ps` finds agents in its socket directories: this one is ours, named by our pid.
    let xdg = tempdir();
    let agents = xdg.join("asyncdump");
    std::fs::create_dir(&agents).unwrap();
    std::fs::set_permissions(&agents, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let socket = agents.join(format!("{}.sock", std::process::id()));
    let server = crate::support::serve_fake_agent(&socket, &program, snap);
    let out = crate::support::asyncdump_with(&["ps"], &[("XDG_RUNTIME_DIR", xdg.as_path())]);
    server.join().unwrap();
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing.contains("program\\nFORGED program"), "{listing}");
    assert!(!starts_forged(&listing), "{listing}");
}

/// An agent that answers every request just in time, each slower than the last would allow in
/// all: `--timeout` bounds the whole dump, not each answer (before, each answer had the whole
/// timeout, and a slow agent held a dump for many times it).
#[test]
fn a_slow_agent_holds_a_dump_no_longer_than_the_timeout_in_all() {
    let dir = tempdir();
    let socket = dir.join("slow.sock");
    let snap = asyncdump_protocol::Snapshot {
        tasks: vec![crate::support::crafted_task(1)],
        ..Default::default()
    };
    let each = std::time::Duration::from_millis(1200);
    let server = crate::support::serve_fake_agent_slowly(&socket, "slow", snap, each);
    let start = std::time::Instant::now();
    let err = fails_with(
        &["dump", socket.to_str().unwrap(), "--timeout", "2s"],
        1,
        "its answers took longer than 2.00s in all (--timeout)",
    );
    let took = start.elapsed();
    server.join().unwrap();
    assert!(
        took < std::time::Duration::from_millis(2900),
        "{took:?}: {err}"
    );
}
