//! Garbage, truncated and oversized input sent to a real agent: an error reply, the connection closed,
//! and the host program unaffected (it keeps running and keeps answering).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use asyncdump_protocol::{
    ClientHello, ErrorKind, Handshake, MAX_REPLY_BYTES, MAX_REQUEST_BYTES, PROTOCOL_VERSION, Reply,
    decode, read_frame, write_frame,
};

use crate::support::{Fixture, asyncdump_ok};

fn connect(fx: &Fixture) -> UnixStream {
    let mut s = UnixStream::connect(fx.socket()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let hs = Handshake::from_bytes(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    assert_eq!(hs.pid, fx.pid);
    s
}

fn after_hello(fx: &Fixture) -> UnixStream {
    let mut s = connect(fx);
    write_frame(&mut s, &ClientHello::new("test").to_bytes()).unwrap();
    s
}

/// Reads the agent's error reply, then expects the connection to be closed.
fn expect_error_then_close(mut s: UnixStream, kind: ErrorKind) -> String {
    let reply = decode::<Reply>(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    let Reply::Error(e) = reply else {
        panic!("expected an error reply, got {reply:?}")
    };
    assert_eq!(e.kind, kind, "{}", e.message);
    let mut rest = Vec::new();
    assert_eq!(
        s.read_to_end(&mut rest).unwrap_or(0),
        0,
        "connection closed after the error"
    );
    e.message
}

fn host_unaffected(fx: &mut Fixture) {
    host_still_shows(fx, "depth_chain::descend");
}

/// The host is alive and an ordinary dump still shows `chain`.
fn host_still_shows(fx: &mut Fixture, chain: &str) {
    assert!(fx.is_alive());
    let text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    assert!(text.contains(chain), "{text}");
}

#[test]
fn garbage_request_gets_malformed_and_close() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    let mut s = after_hello(&fx);
    write_frame(&mut s, &[0xde, 0xad, 0xbe, 0xef, 0xff]).unwrap();
    expect_error_then_close(s, ErrorKind::Malformed);
    host_unaffected(&mut fx);
}

#[test]
fn garbage_hello_gets_malformed_and_close() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    let mut s = connect(&fx);
    write_frame(&mut s, b"GET / HTTP/1.1\r\n\r\n").unwrap();
    expect_error_then_close(s, ErrorKind::Malformed);
    host_unaffected(&mut fx);
}

#[test]
fn oversized_request_gets_too_large_and_close() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    let mut s = after_hello(&fx);
    s.write_all(&((MAX_REQUEST_BYTES as u32) + 1).to_be_bytes())
        .unwrap();
    let msg = expect_error_then_close(s, ErrorKind::TooLarge);
    assert!(msg.contains("exceeds"), "{msg}");
    host_unaffected(&mut fx);
}

#[test]
fn truncated_request_gets_truncated_and_close() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    let mut s = after_hello(&fx);
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(&[1, 2, 3]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    expect_error_then_close(s, ErrorKind::Truncated);
    host_unaffected(&mut fx);
}

#[test]
fn a_client_of_another_protocol_version_is_told_so() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    let mut s = connect(&fx);
    let mut hello = ClientHello::new("future").to_bytes();
    let theirs = PROTOCOL_VERSION + 1;
    hello[8..12].copy_from_slice(&theirs.to_le_bytes());
    write_frame(&mut s, &hello).unwrap();
    let msg = expect_error_then_close(s, ErrorKind::VersionMismatch);
    let expected = format!("speaks protocol {PROTOCOL_VERSION}, the client speaks {theirs}");
    assert!(msg.contains(&expected), "{msg}");
    host_unaffected(&mut fx);
}

/// Asks `req` on `s` and gives the reply.
fn ask(s: &mut UnixStream, req: &asyncdump_protocol::Request) -> Reply {
    write_frame(s, &asyncdump_protocol::encode(req).unwrap()).unwrap();
    decode::<Reply>(&read_frame(s, MAX_REPLY_BYTES).unwrap()).unwrap()
}

/// The live tasks' root anchors, as a client asks for them.
fn anchors(s: &mut UnixStream) -> Vec<u64> {
    let Reply::WalkInfo(info) = ask(s, &asyncdump_protocol::Request::WalkInfo) else {
        panic!("no walk info")
    };
    assert!(!info.root_anchors.is_empty());
    info.root_anchors
}

/// A walk plan is data from a client: one that does not hold together (huge sizes, wild offsets,
/// type numbers out of range, odd discriminant sizes, unsorted vtables) is refused before any work
/// with the reason, and the host and the next ordinary dump are unaffected.
#[test]
fn a_walk_plan_that_does_not_hold_together_is_refused_before_any_work() {
    use asyncdump_protocol::{
        Case, Discr, Edge, EdgeTarget, Request, SnapshotRequest, TypePlan, WalkPlan,
    };
    let mut fx = Fixture::start("depth_chain", &["--depth", "3"]);
    let mut s = after_hello(&fx);
    let edge = |offset, to| Edge { offset, to };
    let wild = TypePlan {
        size: 1 << 20,
        discr: Some(Discr { offset: 0, size: 8 }),
        always: vec![
            edge(0, EdgeTarget::Pointer(0)),
            edge(16, EdgeTarget::Dyn { vtable_offset: 8 }),
            edge(4_000_000, EdgeTarget::Inline(0)),
            edge(u32::MAX, EdgeTarget::Pointer(1)),
        ],
        cases: vec![Case {
            value: None,
            edges: vec![edge(8, EdgeTarget::Inline(77))],
        }],
    };
    let mut roots: Vec<(u64, u32)> = anchors(&mut s).iter().map(|&a| (a, 0)).collect();
    roots.push((1, 12345));
    let plan = WalkPlan {
        types: vec![wild],
        roots,
        vtables: vec![(u64::MAX, 0), (0, 0)],
        max_nodes: u32::MAX,
        max_bytes: u32::MAX,
        runtime: None,
    };
    let req = Request::Snapshot(SnapshotRequest {
        include_completed: true,
        walk: Some(plan),
    });
    write_frame(&mut s, &asyncdump_protocol::encode(&req).unwrap()).unwrap();
    let msg = expect_error_then_close(s, ErrorKind::Malformed);
    assert!(
        msg.starts_with("walk plan refused: it does not hold together: "),
        "{msg}"
    );
    host_unaffected(&mut fx);
}

/// A plan that holds together but asks for endless work: 2,000 tasks, each a chain of 4,096 futures
/// of one type whose 4,096 cases are each searched at every future (before: about 30 billion steps,
/// one core for half a minute). The agent's walks stop at the request's deadline, marked cut, and
/// the answer comes in seconds.
#[test]
fn a_plan_asking_for_endless_work_is_cut_at_the_requests_deadline() {
    use asyncdump_protocol::{Request, SnapshotRequest, Walk};
    let mut fx = Fixture::start("mass", &["--tasks", "2000", "--changing", "0"]);
    let mut s = after_hello(&fx);
    let plan = crate::support::endless_plan(anchors(&mut s));
    let asked = std::time::Instant::now();
    let Reply::Snapshot(snap) = ask(
        &mut s,
        &Request::Snapshot(SnapshotRequest {
            include_completed: false,
            walk: Some(plan),
        }),
    ) else {
        panic!("no snapshot")
    };
    let took = asked.elapsed();
    let cut = (snap.tasks.iter())
        .filter(|t| {
            matches!(
                t.walk,
                Some(Walk::Nodes {
                    truncated: true,
                    ..
                })
            )
        })
        .count();
    eprintln!("an endless plan over 2,000 tasks: answered in {took:?}, {cut} walks cut");
    assert!(took < std::time::Duration::from_secs(6), "{took:?}");
    assert!(cut >= 2000, "{cut} walks cut");
    host_still_shows(&mut fx, "mass::wait");
}

#[test]
fn clients_that_trickle_their_requests_lose_their_slot_and_a_dump_gets_through() {
    let mut fx = Fixture::start("depth_chain", &["--depth", "2"]);
    // As many as the agent serves at once (its MAX_CLIENTS), each sending a byte of a request a second.
    let tricklers: Vec<_> = (0..4)
        .map(|_| {
            let mut s = after_hello(&fx);
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                for b in 100u32.to_be_bytes().into_iter().chain([0; 100]) {
                    if s.write_all(&[b]).is_err() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                // The agent gave up on us: its error reply, or the closed connection.
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest);
                start.elapsed()
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // While they hold every slot, `dump` waits for one (up to --timeout) rather than failing.
    let start = std::time::Instant::now();
    let text = asyncdump_ok(&["dump", &fx.pid.to_string(), "--timeout", "20s"]);
    let waited = start.elapsed();
    assert!(text.contains("depth_chain::descend"), "{text}");
    assert!(
        waited < std::time::Duration::from_secs(15),
        "a trickler keeps a slot at most 10 s: waited {waited:?}"
    );
    for t in tricklers {
        let held = t.join().unwrap();
        assert!(held < std::time::Duration::from_secs(15), "held {held:?}");
    }
    host_unaffected(&mut fx);
}
