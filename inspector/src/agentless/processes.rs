//! Which processes run tokio without an agent: what `ps` lists beside the agents, each of which
//! `dump PID` reads from its memory.
//!
//! A process counts when one of its threads bears a default name of tokio's workers, or when its
//! executable's symbol table has `tokio::runtime` (a current-thread runtime, or workers named by
//! their program). Only processes this user may read are looked at: its own, or every one as root.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use crate::attach::procfs;
use crate::attach::ps::Plain;

/// tokio's default worker thread names, as `comm` cuts them (15 bytes): `tokio-rt-worker` since
/// tokio 1.50, `tokio-runtime-worker` before.
const TOKIO_WORKERS: [&str; 2] = ["tokio-rt-worker", "tokio-runtime-w"];

/// Every tokio process this user may read that is not in `skip` (those with an agent), by pid.
pub fn tokio_without_agent(skip: &[u32]) -> Vec<Plain> {
    let me = std::process::id();
    let euid = nix::unistd::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| *p != me && !skip.contains(p))
        .collect();
    pids.sort_unstable();
    // By the executable's device and inode: many processes share one binary.
    let mut verdicts: HashMap<(u64, u64), bool> = HashMap::new();
    let mut out = Vec::new();
    for pid in pids {
        if euid != 0 && procfs::uid(pid) != Some(euid) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(procfs::exe(pid)) else {
            continue;
        };
        let tokio = worker_named(pid)
            || *verdicts
                .entry((meta.dev(), meta.ino()))
                .or_insert_with(|| crate::dwarf::links_tokio_runtime(&procfs::exe(pid)));
        if tokio {
            out.push(Plain {
                pid,
                program: procfs::program(pid).unwrap_or_default(),
                uptime_ms: super::uptime_ns(pid).unwrap_or(0) / 1_000_000,
            });
        }
    }
    out
}

/// Whether a thread of `pid` bears one of tokio's default worker names.
fn worker_named(pid: u32) -> bool {
    let tids = procfs::threads(pid).unwrap_or_default();
    tids.into_iter().any(|tid| {
        crate::attach::procfs::read(format!("/proc/{pid}/task/{tid}/comm"))
            .is_ok_and(|c| TOKIO_WORKERS.contains(&c.trim_end()))
    })
}
