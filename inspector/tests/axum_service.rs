//! A real axum service with `init()` only: hyper spawns each connection (and over HTTP/2 each request
//! stream) with plain `tokio::spawn`, and every request's chain runs through hyper, tower and axum's
//! middleware down to its handler's leaf.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use crate::support::{Fixture, asyncdump_ok, at_line};

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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The task sections of a text dump.
fn sections(text: &str) -> Vec<Vec<String>> {
    text.split("\n\n")
        .filter(|s| s.starts_with("tokio task ") || s.starts_with("task "))
        .map(|s| s.lines().map(str::to_owned).collect())
        .collect()
}

#[test]
fn every_hanging_request_is_a_task_whose_chain_ends_at_its_handlers_leaf() {
    let port = free_port();
    let fx = Fixture::start("axum_service", &["--port", &port.to_string()]);
    let _connections: Vec<TcpStream> = ROUTES
        .iter()
        .map(|(path, ..)| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
            c
        })
        .collect();
    let pid = fx.pid.to_string();
    let text = dump_until_every_leaf(fx.pid);
    assert!(
        text.contains("\nruntime multi_thread: 6 alive, 6 listed\n"),
        "{text}"
    );
    let all = sections(&text);
    let connections: Vec<_> = all
        .iter()
        .filter(|s| s[1].starts_with("  root axum::serve::handle_connection::"))
        .collect();
    assert_eq!(connections.len(), 5, "one task per connection:\n{text}");
    each_route_reaches_its_leaf(&text, &connections);
    // `#[tracing::instrument]` wraps the handler's body in an async block inside `Instrumented`: one
    // frame, at the real await, not the attribute's line.
    assert!(!text.contains("slept::{async block"), "{text}");
    let coalesced = asyncdump_ok(&["dump", &pid, "--coalesce"]);
    let groups = coalesced.lines().filter(|l| l.starts_with('×')).count();
    assert_eq!(
        groups, 6,
        "five handlers and the silent peer stay apart:\n{coalesced}"
    );
}

/// Dumps `pid` until every route's leaf shows.
fn dump_until_every_leaf(pid: u32) -> String {
    let pid = pid.to_string();
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&["dump", &pid]);
        if ROUTES
            .iter()
            .all(|(_, _, _, leaf)| text.contains(&format!("awaiting {leaf}")))
        {
            break;
        }
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
    let port = free_port();
    let fx = Fixture::start("axum_service", &["--port", &port.to_string()]);
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
    // Each connection's own task waits on its socket: named as the hand-written future it is in.
    let connections = all
        .iter()
        .filter(|s| s[1].starts_with("  root axum::serve::handle_connection::"))
        .filter(|s| {
            s.last().unwrap().trim_start()
                == "awaiting hyper_util::server::conn::auto::UpgradeableConnection<…>"
        })
        .count();
    assert_eq!(connections, 5, "{text}");
}
