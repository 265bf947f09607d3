//! Walks read the host's memory, so the agent allows them only to a client the kernel would let read
//! it, or as the host chose with `ASYNCDUMP_WALKS`: a client refused walks still gets every task and
//! every annotated frame, with a note saying why nothing was decoded.

use std::path::Path;
use std::process::Command;

use asyncdump_protocol::{
    ClientHello, ErrorKind, Handshake, MAX_REPLY_BYTES, ReadRequest, Reply, Request,
    SnapshotRequest, WalkPlan, decode, encode, read_frame, write_frame,
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
    let request = Request::Snapshot(SnapshotRequest {
        walk: Some(WalkPlan::default()),
        ..SnapshotRequest::default()
    });
    let reply = ask(&fx, &request);
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

/// A connection to `fx`'s agent after the handshake, and the reply to one `request` on it.
fn ask(fx: &Fixture, request: &Request) -> Reply {
    let mut s = std::os::unix::net::UnixStream::connect(fx.socket()).unwrap();
    Handshake::from_bytes(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    write_frame(&mut s, &ClientHello::new("test").to_bytes()).unwrap();
    write_frame(&mut s, &encode(request).unwrap()).unwrap();
    decode::<Reply>(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap()
}

#[test]
fn a_memory_read_is_refused_to_whom_walks_are() {
    let fx = host("off");
    let request = Request::Read(ReadRequest {
        ranges: vec![(0x1000, 8)],
        chases: Vec::new(),
    });
    let Reply::Error(e) = ask(&fx, &request) else {
        panic!("expected a refusal")
    };
    assert_eq!(e.kind, ErrorKind::PermissionDenied);
    assert!(
        e.message.starts_with("memory read refused: process"),
        "{}",
        e.message
    );
}

#[test]
fn a_memory_read_gives_each_range_or_none_and_a_read_too_large_is_refused() {
    let fx = host("same-uid");
    // The executable's first page holds its ELF header; address 8 is never mapped.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", fx.pid)).unwrap();
    let start = u64::from_str_radix(maps.split('-').next().unwrap(), 16).unwrap();
    let request = Request::Read(ReadRequest {
        ranges: vec![(start, 4), (8, 8)],
        chases: vec![(8, 0, 10)],
    });
    let Reply::Read(r) = ask(&fx, &request) else {
        panic!("expected bytes")
    };
    let data: Vec<Option<Vec<u8>>> = r.data.iter().map(|d| d.map(<[u8]>::to_vec)).collect();
    assert_eq!(data, [Some(b"\x7fELF".to_vec()), None]);
    // A list whose first word cannot be read is followed no further, and says so.
    assert_eq!(r.chased.len(), 1);
    assert!(r.chased[0].failed && r.chased[0].nodes.is_empty());
    let huge = Request::Read(ReadRequest {
        ranges: vec![(start, u32::MAX), (start, u32::MAX)],
        chases: Vec::new(),
    });
    let Reply::Error(e) = ask(&fx, &huge) else {
        panic!("expected a refusal")
    };
    assert_eq!(e.kind, ErrorKind::TooLarge, "{}", e.message);
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

/// The host's peak resident memory (`VmHWM`), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap();
    line.trim().trim_end_matches(" kB").trim().parse().unwrap()
}

// A chase request of 11 KB kept the agent busy 7-8 s (another client's dump timed out), and a read
// request took the host 105 MB (231 MB with four at once): a request's chases and ranges are
// bounded, and the memory of all reads together is the agent's to bound, not each request's.
#[test]
fn reads_and_chases_are_bounded_per_request_and_their_memory_per_agent() {
    use asyncdump_protocol::{MAX_CHASE_NODES, MAX_READ_RANGES};
    let fx = host("same-uid");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", fx.pid)).unwrap();
    let start = u64::from_str_radix(maps.split('-').next().unwrap(), 16).unwrap();
    // 900 chases of 4,096 nodes: 11 KB asking for 3.7 million reads.
    let chases = Request::Read(ReadRequest {
        ranges: Vec::new(),
        chases: vec![(start, 0, 4096); 900],
    });
    let Reply::Error(e) = ask(&fx, &chases) else {
        panic!("expected a refusal")
    };
    assert_eq!(e.kind, ErrorKind::TooLarge, "{}", e.message);
    assert!(
        e.message.contains(&MAX_CHASE_NODES.to_string()),
        "{}",
        e.message
    );
    let ranges = Request::Read(ReadRequest {
        ranges: vec![(start, 8); MAX_READ_RANGES + 1],
        chases: Vec::new(),
    });
    let Reply::Error(e) = ask(&fx, &ranges) else {
        panic!("expected a refusal")
    };
    assert_eq!(e.kind, ErrorKind::TooLarge, "{}", e.message);
    // Four clients asking for the most each may, again and again, while a dump is taken.
    let largest = Request::Read(ReadRequest {
        ranges: vec![(start, 2000); MAX_READ_RANGES],
        chases: vec![(start, 0, 4096); 16],
    });
    let before = peak_kib(fx.pid);
    let done = std::sync::atomic::AtomicBool::new(false);
    let answered = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                // Dropped when the slots are full and a newcomer needs one: connected again.
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut c = std::os::unix::net::UnixStream::connect(fx.socket()).unwrap();
                    let _ = read_frame(&mut c, MAX_REPLY_BYTES);
                    let _ = write_frame(&mut c, &ClientHello::new("test").to_bytes());
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        if write_frame(&mut c, &encode(&largest).unwrap()).is_err() {
                            break;
                        }
                        let Ok(bytes) = read_frame(&mut c, MAX_REPLY_BYTES) else {
                            break;
                        };
                        match decode::<Reply>(&bytes).unwrap() {
                            Reply::Read(_) => {
                                answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            Reply::Error(e) => {
                                assert_eq!(e.kind, ErrorKind::Busy, "{}", e.message)
                            }
                            other => panic!("{other:?}"),
                        }
                    }
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
        let out = crate::support::asyncdump(&["dump", &fx.pid.to_string(), "--timeout", "10s"]);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    assert!(answered.into_inner() > 0);
    let grew_mb = peak_kib(fx.pid).saturating_sub(before) >> 10;
    eprintln!("four clients reading at most: the host's peak grew {grew_mb} MB");
    // The room all reads share (48 MB), and a little: a big read's buffer is unmapped once written,
    // not kept by the allocator of the thread that answered it.
    assert!(grew_mb < 64, "the host's peak grew {grew_mb} MB");
}
