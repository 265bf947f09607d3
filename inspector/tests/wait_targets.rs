//! What each leaf waits for, decoded in every dump: a sleep's deadline and time left, a lock's state
//! and the task's place in its queue; through the agent, without it, and from a core.

use std::io::Write;
use std::net::TcpStream;

use crate::agentless::dump_settled;
use crate::support::{Fixture, asyncdump_ok};

/// What each leaf `leaf` of a dump waits for: the line under it, from ` · ` on (as if appended), or
/// the empty string where there is none.
fn leaf_lines(text: &str, leaf: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    (lines.iter().enumerate())
        .filter(|(_, l)| l.trim_start() == format!("awaiting {leaf}"))
        .map(|(i, _)| {
            match lines
                .get(i + 1)
                .and_then(|n| n.trim_start().strip_prefix("↳ "))
            {
                Some(w) => format!(" · {w}"),
                None => String::new(),
            }
        })
        .collect()
}

#[test]
fn a_sleep_says_how_long_until_its_deadline_and_a_lock_where_the_task_is_in_its_queue() {
    let fx = Fixture::start("no_agent", &[]);
    let text = dump_settled(fx.pid, &[], 5);
    // tick_forever sleeps an hour at a time, and began a moment ago.
    let sleep = leaf_lines(&text, "tokio::time::sleep::Sleep");
    assert_eq!(sleep.len(), 1, "{text}");
    assert!(
        sleep[0].starts_with(" · deadline in 59m") || sleep[0].starts_with(" · deadline in 1h"),
        "{}",
        sleep[0]
    );
    // wait_for_lock waits alone for the mutex hold_lock holds.
    let lock = leaf_lines(&text, "tokio::sync::batch_semaphore::Acquire");
    assert_eq!(lock.len(), 1, "{text}");
    assert!(lock[0].starts_with(" · Mutex @ 0x"), "{}", lock[0]);
    assert_held_by_hold_lock(&lock[0]);
}

/// The no-agent fixture's lock line: locked by `hold_lock`'s guard, this task alone waiting.
fn assert_held_by_hold_lock(line: &str) {
    let taken = crate::support::at_line("no_agent", "let _guard = lock.lock().await;");
    let holder = format!("(`_guard` in no_agent::hold_lock, acquired at {taken})");
    let (state, rest) = line.split_once(", held by tokio task ").expect(line);
    assert!(state.ends_with(": locked"), "{line}");
    let (_, rest) = rest.split_once(' ').expect(line);
    assert_eq!(rest, format!("{holder}, this task 1st of 1 waiting"));
}

#[test]
fn requests_queued_on_one_mutex_each_know_their_place() {
    let (fx, port) = crate::support::axum_service(&[]);
    let mut connections = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(c, "GET /mutex HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        connections.push(c);
        // One at a time, so that they queue in this order.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = fx.pid.to_string();
    let mut places = Vec::new();
    for _ in 0..50 {
        let text = asyncdump_ok(&["dump", &pid]);
        places = leaf_lines(&text, "tokio::sync::batch_semaphore::Acquire")
            .iter()
            .filter(|l| l.contains("Mutex @"))
            .filter_map(|l| l.split("this task ").nth(1).map(str::to_owned))
            .collect();
        if places.len() == 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    places.sort();
    assert_eq!(
        places,
        ["1st of 3 waiting", "2nd of 3 waiting", "3rd of 3 waiting"]
    );
    // The same through the agent and read from outside.
    let outside = asyncdump_ok(&["dump", &pid, "--no-agent"]);
    let mut from_outside: Vec<String> =
        leaf_lines(&outside, "tokio::sync::batch_semaphore::Acquire")
            .iter()
            .filter_map(|l| l.split("this task ").nth(1).map(str::to_owned))
            .filter(|l| l.ends_with("of 3 waiting"))
            .collect();
    from_outside.sort();
    assert_eq!(from_outside, places);
}

#[test]
fn a_cores_sleep_has_its_deadline_but_no_time_left() {
    let fx = Fixture::start("no_agent", &[]);
    dump_settled(fx.pid, &[], 5);
    let dir = crate::support::tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
    let sleep = leaf_lines(&text, "tokio::time::sleep::Sleep");
    assert_eq!(sleep.len(), 1, "{text}");
    assert!(
        sleep[0].starts_with(" · deadline at monotonic "),
        "{}",
        sleep[0]
    );
    let lock = leaf_lines(&text, "tokio::sync::batch_semaphore::Acquire");
    assert_held_by_hold_lock(&lock[0]);
}

#[test]
fn json_carries_the_wait_target_as_data() {
    let fx = Fixture::start("no_agent", &[]);
    dump_settled(fx.pid, &[], 5);
    let doc = crate::support::dump_json(fx.pid, &[]);
    let mut found = Vec::new();
    fn walk(frames: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
        for f in frames.as_array().unwrap() {
            if let Some(w) = f.get("waits_on") {
                out.push(w.clone());
            }
            walk(&f["children"], out);
        }
    }
    for t in doc["tasks"].as_array().unwrap() {
        walk(&t["frames"], &mut found);
    }
    let sleep = found
        .iter()
        .find(|w| w["kind"] == "sleep")
        .expect("a sleep");
    let left = sleep["parts"][0]["value"]["instant"]["age_ns"]
        .as_i64()
        .unwrap();
    assert!(left < 0 && left > -3_600_000_000_000, "{left}");
    let lock = found
        .iter()
        .find(|w| w["kind"]["permits"]["lock"] == "Mutex")
        .expect("a mutex");
    assert_eq!(lock["parts"][0]["name"], "wanted");
    assert_eq!(lock["parts"][0]["value"]["uint"], 1);
    let sem = &lock["parts"][1]["value"]["struct"]["fields"];
    let field = |name: &str| {
        sem.as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()["value"]
            .clone()
    };
    assert_eq!(field("available")["uint"], 0);
    assert_eq!(field("queued")["uint"], 1);
    assert_eq!(field("position")["uint"], 1);
}

#[test]
fn a_socket_read_names_its_descriptor_and_both_ends() {
    let (fx, port) = crate::support::axum_service(&[]);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(c, "GET /peer HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let pid = fx.pid.to_string();
    let leaf = "tokio::io::util::read::Read<tokio::net::tcp::stream::TcpStream>";
    let mut reads = Vec::new();
    for _ in 0..50 {
        reads = leaf_lines(&asyncdump_ok(&["dump", &pid]), leaf);
        if reads.len() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(reads.len(), 1, "{reads:?}");
    // ` · reading fd N, tcp 127.0.0.1:LOCAL → 127.0.0.1:PEER, 0 bytes queued`
    let words: Vec<&str> = reads[0]
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .collect();
    assert_eq!(words[..3], ["·", "reading", "fd"], "{}", reads[0]);
    assert_eq!((words[4], words[6]), ("tcp", "→"), "{}", reads[0]);
    assert_eq!(words[8..], ["0", "bytes", "queued"], "{}", reads[0]);
    let fd: u32 = words[3].parse().unwrap();
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
    assert!(link.to_str().unwrap().starts_with("socket:["), "{link:?}");
    let (local, peer) = (words[5], words[7]);
    assert!(
        local.starts_with("127.0.0.1:") && peer.starts_with("127.0.0.1:"),
        "{}",
        reads[0]
    );
    // The peer is the fixture's own silent listener, not the service's port, and not this end.
    assert_ne!(peer, format!("127.0.0.1:{port}"));
    assert_ne!(local, peer);
    // Read from outside, the same.
    let outside = leaf_lines(&asyncdump_ok(&["dump", &pid, "--no-agent"]), leaf);
    assert_eq!(outside, reads);
}

/// The `signals` fixture's wait lines, by the leaf and the frame above it, with addresses and
/// descriptors as `0x…` and `N`, in the fixture's task order.
fn signal_lines(text: &str) -> Vec<String> {
    (text.lines())
        .filter_map(|l| l.trim_start().strip_prefix("↳ "))
        .filter(|l| !l.starts_with("deadline"))
        .map(|l| numbers_after(&numbers_after(l, "0x", "0x…"), "fd ", "fd N"))
        .collect()
}

/// `line` with each `prefix` and the hex digits after it as `with`.
fn numbers_after(line: &str, prefix: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        out.push_str(with);
        rest = rest[at + prefix.len()..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// The descriptors a dump's wait lines name.
fn fds_named(text: &str) -> Vec<u32> {
    (text.split("fd ").skip(1))
        .filter_map(|w| w.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

/// What the `signals` fixture's tasks wait for, as its documentation says, where `/proc` is read.
fn signals_expected(pid: u32, port: &str) -> Vec<String> {
    let dir = std::env::temp_dir();
    let socket = format!("{}/asyncdump-signals-{pid}/quiet.sock", dir.display());
    vec![
        "Notify @ 0x…: not notified, this task 1st of 1 waiting".into(),
        "watch @ 0x…: version 1 seen, unchanged since, 1 sender alive".into(),
        "watch @ 0x…: changed to version 2 (seen 1), not yet polled".into(),
        "receiving from broadcast @ 0x…: lagged, 5 sent since its last read, capacity 2 (3 missed), \
         1 sender alive, 1 receiver"
            .into(),
        "Barrier @ 0x…: 1 of 3 arrived, waiting for 2 more".into(),
        format!("accepting on fd N, tcp 127.0.0.1:{port}, 1 connection waiting"),
        format!("reading fd N, unix (unnamed) → \"{socket}\", 0 bytes queued"),
        format!("accepting on fd N, unix \"{socket}\", 0 connections waiting"),
    ]
}

/// The port the fixture's listener has: the one listening TCP socket among its descriptors.
fn listening_port(pid: u32) -> String {
    let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap();
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            Some(
                l.to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    let line = (tcp.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| {
            f.get(3) == Some(&"0A") && f.get(9).is_some_and(|i| inodes.iter().any(|n| n == i))
        })
        .expect("the fixture's listener");
    let port = line[1].split(':').nth(1).unwrap();
    u16::from_str_radix(port, 16).unwrap().to_string()
}

#[test]
fn notify_watch_broadcast_barrier_accept_and_unix_sockets_say_why_they_wait() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("signals", args);
        let text = dump_settled(fx.pid, &[], 10);
        let expected = signals_expected(fx.pid, &listening_port(fx.pid));
        assert_eq!(signal_lines(&text), expected, "{args:?}\n{text}");
        // The descriptors the wait lines name are the fixture's sockets (a task waiting to read
        // its Unix socket has it on a line of its own too).
        let waits: Vec<&str> = (text.lines())
            .filter(|l| l.trim_start().starts_with("↳ "))
            .collect();
        let fds = fds_named(&waits.join("\n"));
        assert_eq!(fds.len(), 3, "{text}");
        for n in fds {
            let link = std::fs::read_link(format!("/proc/{}/fd/{n}", fx.pid)).unwrap();
            assert!(link.to_str().unwrap().starts_with("socket:["), "{link:?}");
        }
        // Each task waits on the socket its wait line names, found from the driver's side: the
        // reader's waker for the read, the listener's list of readiness futures for each accept.
        for section in text
            .split("\n\n")
            .filter(|s| s.contains("↳ accepting on fd ") || s.contains("↳ reading fd "))
        {
            let wait = (section.lines())
                .find(|l| l.trim_start().starts_with("↳ "))
                .unwrap();
            let fd = fds_named(wait)[0];
            let line = format!("  socket fd {fd}: ");
            let own = (section.lines())
                .find(|l| l.starts_with(&line))
                .unwrap_or_else(|| panic!("{args:?}: a line for fd {fd}:\n{section}"));
            assert!(own.ends_with(" · it waits to read"), "{own}");
            if wait.contains("accepting") {
                assert!(
                    own.contains("(listening)") || own.contains(": unix /"),
                    "a listener: {own}"
                );
            }
        }
    }
}

#[test]
fn a_core_says_the_same_of_them_but_what_only_proc_knows() {
    let fx = Fixture::start("signals", &[]);
    dump_settled(fx.pid, &[], 10);
    let dir = crate::support::tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap()]);
    let mut expected = signals_expected(fx.pid, "");
    expected[5] = "accepting on fd N".into();
    expected[6] = "reading fd N".into();
    expected[7] = "accepting on fd N".into();
    assert_eq!(signal_lines(&text), expected, "{text}");
}

#[test]
fn json_names_each_of_these_waits_by_kind() {
    let fx = Fixture::start("signals", &[]);
    dump_settled(fx.pid, &[], 10);
    let doc = crate::support::dump_json(fx.pid, &[]);
    let text = doc.to_string();
    for kind in ["notify", "watch", "broadcast", "barrier", "accept"] {
        assert!(
            text.contains(&format!("\"kind\":\"{kind}\"")),
            "{kind}: {text}"
        );
    }
    let unix = text.find("\"proto\"").map(|at| &text[at..]).unwrap_or("");
    assert!(unix.contains("quiet.sock"), "{text}");
}
