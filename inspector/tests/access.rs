//! Walks read the host's memory, so the agent allows them only to a client the kernel would let read
//! it, or as the host chose with `ASYNCDUMP_WALKS`: a client refused walks still gets every task and
//! every annotated frame, with a note saying why nothing was decoded.

use std::path::Path;
use std::process::Command;

use asyncdump_protocol::{
    ClientHello, ErrorKind, Handshake, MAX_REPLY_BYTES, Reply, Request, SnapshotRequest, WalkPlan,
    decode, encode, read_frame, write_frame,
};

use crate::support::{Fixture, asyncdump_ok};

fn host(walks: &str) -> Fixture {
    Fixture::start_with(
        "mass",
        &["--tasks", "3", "--changing", "1"],
        &[("ASYNCDUMP_WALKS", Path::new(walks))],
    )
}

#[test]
fn a_host_that_allows_no_walks_is_dumped_undecoded_with_the_reason() {
    let fx = host("off");
    let text = asyncdump_ok(&["dump", &fx.pid.to_string()]);
    let why = format!(
        "chains not decoded: the agent allows this client no memory walks: process {} allows no memory walks (ASYNCDUMP_WALKS=off)",
        fx.pid
    );
    assert!(text.contains(&why), "{text}");
    assert!(!text.contains("mass::wait"), "{text}");
    assert!(text.contains("mass::hold"), "annotated frames stay: {text}");
}

#[test]
fn a_walk_plan_from_a_refused_client_is_refused_in_words() {
    let fx = host("off");
    let mut s = std::os::unix::net::UnixStream::connect(fx.socket()).unwrap();
    Handshake::from_bytes(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    write_frame(&mut s, &ClientHello::new("test").to_bytes()).unwrap();
    let request = Request::Snapshot(SnapshotRequest {
        walk: Some(WalkPlan::default()),
        ..SnapshotRequest::default()
    });
    write_frame(&mut s, &encode(&request).unwrap()).unwrap();
    let reply = decode::<Reply>(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    let Reply::Error(e) = reply else {
        panic!("expected a refusal, got {reply:?}")
    };
    assert_eq!(e.kind, ErrorKind::PermissionDenied);
    assert!(
        e.message.starts_with("walk plan refused: process"),
        "{}",
        e.message
    );
}

#[test]
fn walks_for_ptrace_capable_clients_only_decode_for_root_and_not_for_root_without_the_capability() {
    let fx = host("root");
    let pid = fx.pid.to_string();
    let with_cap = asyncdump_ok(&["dump", &pid]);
    assert!(with_cap.contains("mass::wait"), "decoded: {with_cap}");
    // Root still, but with CAP_SYS_PTRACE dropped from every set.
    let out = Command::new("setpriv")
        .args([
            "--inh-caps=-sys_ptrace",
            "--bounding-set=-sys_ptrace",
            env!("CARGO_BIN_EXE_asyncdump"),
            "dump",
            &pid,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains(
            "allows memory walks only to clients with CAP_SYS_PTRACE (ASYNCDUMP_WALKS=root)"
        ),
        "{text}"
    );
    assert!(!text.contains("mass::wait"), "{text}");
}
