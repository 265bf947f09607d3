//! A real axum service with `init()` only: hyper spawns each connection (and over HTTP/2 each request
//! stream) with plain `tokio::spawn`, and every request's chain runs through hyper, tower and axum's
//! middleware down to its handler's leaf.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use crate::support::{asyncdump_ok, at_line, dump_json};

/// Each route, the handler's await (a needle in the fixture's source) and the leaf it ends in.
const ROUTES: [(&str, &str, &str, &str); 5] = [
    (
        "/mutex",
        "locked",
        "deps.lock.lock().await",
        "tokio::sync::batch_semaphore::Acquire",
    ),
    (
        "/sleep",
        "slept",
        "sleep(Duration::from_secs(3600))",
        "tokio::time::sleep::Sleep",
    ),
    (
        "/mpsc",
        "queued",
        "deps.queue.send(1).await",
        "tokio::sync::batch_semaphore::Acquire",
    ),
    (
        "/oneshot",
        "answered",
        "rx.await.unwrap_or(0)",
        "tokio::sync::oneshot::Receiver<u32>",
    ),
    (
        "/peer",
        "peer_read",
        "peer.read(&mut buf).await",
        "tokio::io::util::read::Read<tokio::net::tcp::stream::TcpStream>",
    ),
];

/// The task sections of a text dump.
fn sections(text: &str) -> Vec<Vec<String>> {
    text.split("\n\n")
        .filter(|s| s.starts_with("tokio task ") || s.starts_with("task "))
        .map(|s| {
            (s.lines().filter(|l| !crate::support::is_verdict(l)))
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn every_hanging_request_is_a_task_whose_chain_ends_at_its_handlers_leaf() {
    let (fx, port) = crate::support::axum_service(&[]);
    // `/mutex` twice: two requests alike, one behind the other in the mutex's queue.
    let paths = ROUTES.iter().map(|r| r.0).chain(["/mutex"]);
    let _connections: Vec<TcpStream> = paths
        .map(|path| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
            c
        })
        .collect();
    let pid = fx.pid.to_string();
    let text = dump_until_every_leaf(fx.pid);
    assert!(
        text.contains("\nruntime multi_thread: 7 alive, 7 listed\n"),
        "{text}"
    );
    let all = sections(&text);
    let connections: Vec<_> = all
        .iter()
        .filter(|s| s[1].starts_with("  root axum::serve::handle_connection::"))
        .collect();
    assert_eq!(connections.len(), 6, "one task per connection:\n{text}");
    each_route_reaches_its_leaf(&text, &connections);
    // Each connection's socket, tied to its task through tokio's I/O driver, and the client it
    // was accepted from on the request's line.
    for c in &connections {
        // (`/peer`'s task has a second socket: the one it reads from the silent peer.)
        let ours = format!(": tcp 127.0.0.1:{port} ↔ 127.0.0.1:");
        let line = c
            .iter()
            .find(|l| l.starts_with("  socket fd ") && l.contains(&ours));
        let line = line.unwrap_or_else(|| panic!("its socket: {c:#?}"));
        assert!(line.ends_with(" · it waits to read"), "{line}");
        let client = line
            .rsplit_once(" ↔ ")
            .unwrap()
            .1
            .split(' ')
            .next()
            .unwrap();
        assert!(c[0].contains(&format!(" from {client} · ")), "{}", c[0]);
    }
    // `#[tracing::instrument]` wraps the handler's body in an async block inside `Instrumented`: one
    // frame, at the real await, not the attribute's line.
    assert!(!text.contains("slept::{async block"), "{text}");
    let coalesced = asyncdump_ok(&["dump", &pid, "--coalesce"]);
    let groups: Vec<&str> = coalesced
        .split("\n\n")
        .filter(|g| g.starts_with('×'))
        .collect();
    // And `main`'s own future, serving: a group of its own.
    assert_eq!(
        groups.len(),
        7,
        "five handlers, the silent peer and main stay apart, the two `/mutex` requests one group:\n{coalesced}"
    );
    // Each connection waits at its own place in the shutdown signal's queue, and the two at theirs
    // in the mutex's: what varies inside the group reads as a range.
    let locked = groups
        .iter()
        .find(|g| g.starts_with("×2 tasks"))
        .unwrap_or_else(|| panic!("the two `/mutex` requests, one group:\n{coalesced}"));
    assert!(locked.contains("axum_service::locked at "), "{locked}");
    let queue = locked
        .lines()
        .find(|l| l.contains("↳ Mutex @ "))
        .unwrap_or_else(|| panic!("the mutex's queue: {locked}"));
    assert!(
        queue.contains("locked, held by thread ") && queue.contains(" this task 1st–2nd of "),
        "{queue}"
    );
    let doc = dump_json(fx.pid, &["--coalesce"]);
    let group = (doc["groups"].as_array().unwrap().iter())
        .find(|g| g["count"] == 2)
        .unwrap_or_else(|| panic!("{doc}"));
    let route = |t: &serde_json::Value| t["request"]["target"] == "/mutex";
    let requests = dump_json(fx.pid, &[]);
    let mutex = (requests["tasks"].as_array().unwrap().iter())
        .filter(|t| route(t) && t["request"]["method"] == "GET")
        .count();
    assert_eq!(mutex, 2, "{requests}");
    let by_leaf = crate::support::stats_by_leaf(fx.pid);
    assert!(!by_leaf.is_empty());
    let stats = asyncdump_ok(&["dump", &pid, "--stats"]);
    let by_route = stats
        .split("by the HTTP request served (method and path):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(by_route.starts_with("        2  GET /mutex\n"), "{stats}");
    let varies = group["varies"].as_array().unwrap();
    assert!(
        varies.iter().any(|v| v["waits_on"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(" 1st–2nd of ") && v["waits_on"][0]["tasks"] == 2)),
        "{group}"
    );
}

/// Dumps `pid` until every route's handler and leaf show.
fn dump_until_every_leaf(pid: u32) -> String {
    let pid = pid.to_string();
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&["dump", &pid]);
        // Each route's own handler and leaf: two routes wait at the same leaf, so the leaves alone
        // can all show while one request is still on its way.
        if ROUTES.iter().all(|(_, handler, _, leaf)| {
            text.contains(&format!("axum_service::{handler} at "))
                && text.contains(&format!("awaiting {leaf}"))
        }) {
            break;
        }
        // The clients (curl processes, for HTTP/2) may take a while to connect on a busy machine.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    text
}

/// Each route's request is one of `tasks`, whose chain runs through the middleware to its handler at
/// the handler's await, and on to the route's leaf.
fn each_route_reaches_its_leaf(text: &str, tasks: &[&Vec<String>]) {
    for (path, handler, needle, leaf) in ROUTES {
        let at = at_line("axum_service", needle);
        let line = format!("axum_service::{handler} at {at} [decoded]");
        let task = tasks
            .iter()
            .find(|s| s.iter().any(|l| l.trim_start() == line))
            .unwrap_or_else(|| panic!("no chain reaches {line} ({path}):\n{text}"));
        // The request it serves, from the method and URI the middleware keeps to log.
        assert!(
            task[0].contains(&format!(" · GET {path} ")),
            "{path} on its title: {}",
            task[0]
        );
        let chain: Vec<&str> = task.iter().map(|l| l.trim_start()).collect();
        let audit = format!(
            "axum_service::audit at {} [decoded]",
            at_line("axum_service", "next.run(request).await")
        );
        assert!(
            chain.contains(&audit.as_str()),
            "through the middleware: {chain:#?}"
        );
        let from_handler = chain.iter().position(|l| *l == line).unwrap();
        assert!(
            chain[from_handler..]
                .iter()
                .any(|l| *l == format!("awaiting {leaf}")),
            "{path} ends at {leaf}: {chain:#?}"
        );
    }
}

/// Kills the `curl` clients on drop.
struct Clients(Vec<Child>);

impl Drop for Clients {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn over_http2_every_request_is_a_stream_task_whose_chain_ends_at_its_handlers_leaf() {
    let (fx, port) = crate::support::axum_service(&[]);
    // hyper serves HTTP/2 (prior knowledge, as curl speaks it) with one task per request stream.
    let _clients = Clients(
        ROUTES
            .iter()
            .map(|(path, ..)| {
                Command::new("curl")
                    .args(["-s", "--http2-prior-knowledge"])
                    .arg(format!("http://127.0.0.1:{port}{path}"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("curl (with HTTP/2) is installed")
            })
            .collect(),
    );
    let text = dump_until_every_leaf(fx.pid);
    let all = sections(&text);
    let streams: Vec<_> = all
        .iter()
        .filter(|s| s[1].starts_with("  root hyper::proto::h2::server::H2Stream<"))
        .collect();
    assert_eq!(streams.len(), 5, "one task per request stream:\n{text}");
    each_route_reaches_its_leaf(&text, &streams);
    // Each stream is tied to its connection's task (curl opens a connection a request, whose first
    // stream is 1), and that task's socket names the client the request came from.
    for s in &streams {
        let line = (s.iter())
            .find_map(|l| l.strip_prefix("  HTTP/2 stream 1 of the connection "))
            .unwrap_or_else(|| panic!("the stream's line: {s:#?}"));
        let ours = format!(": tcp 127.0.0.1:{port} ↔ 127.0.0.1:");
        assert!(line.contains(&ours), "{line}");
        let client = line.rsplit(" ↔ ").next().unwrap();
        assert!(s[0].contains(&format!(" from {client} · ")), "{}", s[0]);
    }
    // Each connection's own task waits on its socket: named as the hand-written future it is in.
    let connections = all
        .iter()
        .filter(|s| s[1].starts_with("  root axum::serve::handle_connection::"))
        .filter(|s| {
            s.last().unwrap().trim_start()
                == "awaiting hyper_util::server::conn::auto::UpgradeableConnection<…>"
        })
        // Its socket named: tied to it through tokio's I/O driver.
        .filter(|s| {
            let ours = format!(": tcp 127.0.0.1:{port} ↔ 127.0.0.1:");
            s.iter()
                .any(|l| l.starts_with("  socket fd ") && l.contains(&ours))
        })
        .count();
    assert_eq!(connections, 5, "{text}");
    // And that, not the graceful-shutdown branch beside it (deeper, all in axum and tokio), is
    // what `--stats` counts them by.
    let by_leaf = crate::support::stats_by_leaf(fx.pid);
    assert!(
        by_leaf.contains(&"5  hyper_util::server::conn::auto::UpgradeableConnection".to_owned()),
        "{by_leaf:#?}"
    );
    assert!(
        !by_leaf.iter().any(|l| l.contains("Notified")),
        "{by_leaf:#?}"
    );
}

/// The section of the task whose chain has `line` (trimmed), and its title.
fn task_with<'a>(text: &'a str, line: &str) -> &'a str {
    text.split("\n\n")
        .find(|s| s.lines().any(|l| l.trim_start() == line))
        .unwrap_or_else(|| panic!("no task has {line}:\n{text}"))
}

/// The task whose chain has a frame named `axum_service::HANDLER` suspended at the line of
/// `needle`, in a `dump --json` document.
fn task_at<'a>(
    doc: &'a serde_json::Value,
    handler: &str,
    needle: &str,
) -> Option<&'a serde_json::Value> {
    fn has(frames: &serde_json::Value, name: &str, line: u64) -> bool {
        frames.as_array().into_iter().flatten().any(|f| {
            (f["name"] == name && f["suspended_at"]["line"] == line)
                || has(&f["children"], name, line)
        })
    }
    let name = format!("axum_service::{handler}");
    let line = crate::support::line_of("axum_service", needle);
    doc["tasks"]
        .as_array()?
        .iter()
        .find(|t| has(&t["frames"], &name, line))
}

/// `unchanged_ns` of [`task_at`]'s task, which must be there.
fn unchanged(doc: &serde_json::Value, handler: &str, needle: &str) -> Option<u64> {
    let task =
        task_at(doc, handler, needle).unwrap_or_else(|| panic!("{handler} at {needle}: {doc}"));
    task["unchanged_ns"].as_u64()
}

/// With `init()` alone, every request's task reads well: named (in parentheses) by its handler, the
/// innermost frame of the program's own code; listed in `watch` with the handler's own wait as its
/// leaf, not that of axum's graceful-shutdown branch beside it; what such tasks lack said once; and
/// how long each has looked as it does, growing while it waits and starting again when its chain
/// moves on (`/steps` sleeps, then waits on the mutex), which `--min-age` selects by. Before: no
/// name, the shutdown branch's `Notified` as every row's leaf, no age, and the same note on each task.
#[test]
fn plain_request_tasks_are_named_by_their_handler_listed_at_its_wait_and_aged() {
    let (fx, port) = crate::support::axum_service(&[]);
    let paths = ROUTES.iter().map(|r| r.0).chain(["/steps"]);
    let _connections: Vec<TcpStream> = paths
        .map(|path| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
            c
        })
        .collect();
    let pid = fx.pid.to_string();
    let text = dump_until_every_leaf(fx.pid);
    for (path, handler, needle, _) in ROUTES {
        let line = format!(
            "axum_service::{handler} at {} [decoded]",
            at_line("axum_service", needle)
        );
        let title = task_with(&text, &line).lines().next().unwrap();
        assert!(
            title.starts_with("tokio task ")
                && title.contains(&format!(
                    " (axum_service::{handler}) · GET {path} from 127.0.0.1:"
                ))
                && title.contains(" · idle"),
            "{path}: {title}"
        );
    }
    assert_eq!(
        text.matches("not spawned through the agent").count(),
        1,
        "said once: {text}"
    );

    // Ages: the mutex's request keeps waiting as it is; `/steps` moves on from its sleep.
    let sleep = "Duration::from_millis(step as u64)";
    let lock = "let _held = deps.lock.lock().await;";
    let mutex = "let _guard = deps.lock.lock().await;";
    let first = dump_json(fx.pid, &[]);
    assert!(first.to_string().contains("stepped"), "{first}");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let second = dump_json(fx.pid, &[]);
    let (m1, m2) = (
        unchanged(&first, "locked", mutex).unwrap_or(0),
        unchanged(&second, "locked", mutex).expect("seen before"),
    );
    assert!(
        m2 >= m1 + 600_000_000,
        "grows while it waits: {m1} then {m2}"
    );
    let stepped_before = unchanged(&second, "stepped", sleep).expect("seen asleep before");
    // The first listing that sees `/steps` at the mutex has not seen it so before.
    let moved = (0..100)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            dump_json(fx.pid, &[])
        })
        .find(|d| task_at(d, "stepped", lock).is_some())
        .expect("/steps moves on to the mutex");
    assert_eq!(
        unchanged(&moved, "stepped", lock),
        None,
        "starts again: {moved}"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = dump_json(fx.pid, &[]);
    let since_move = unchanged(&after, "stepped", lock).expect("seen at the mutex before");
    let still = unchanged(&after, "locked", mutex).unwrap();
    assert!(
        since_move >= 400_000_000
            && since_move < stepped_before + 400_000_000
            && still > since_move + 2_000_000_000,
        "/steps restarted at its move ({since_move}); /mutex kept its age ({still})"
    );
    let min_age = asyncdump_ok(&["dump", &pid, "--min-age", "2s"]);
    let mutex_line = format!(
        "axum_service::locked at {} [decoded]",
        at_line("axum_service", mutex)
    );
    assert!(min_age.contains(&mutex_line), "{min_age}");
    assert!(
        !min_age.contains("(axum_service::stepped)"),
        "too young: {min_age}"
    );

    // The list: each request's row by its handler's name, at its handler's wait.
    let bin = env!("CARGO_BIN_EXE_asyncdump");
    let watch = crate::watch::Tmux::sized(&format!("{bin} watch {pid}; sleep 60"), 220, 50);
    let screen = watch.until("the requests listed", |s| {
        s.contains("(axum_service::peer_read)")
    });
    for (path, handler, _, leaf) in ROUTES {
        let row = screen
            .lines()
            .find(|l| l.contains(&format!("(axum_service::{handler})")))
            .unwrap_or_else(|| panic!("{path} listed:\n{screen}"));
        let short = leaf.rsplit("::").next().unwrap();
        assert!(
            row.contains(short.split('<').next().unwrap()) && !row.contains("Notified"),
            "{path}'s row shows its wait, {leaf}: {row}"
        );
    }
}
