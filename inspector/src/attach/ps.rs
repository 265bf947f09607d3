//! `asyncdump ps`: every live agent of this user, found by scanning the socket directories; sockets whose
//! process is gone or that nobody listens on are stale and removed. Beside them, the tokio processes
//! without an agent (found elsewhere, see [`Listing::without_agent`]).

use std::fmt::Write;
use std::path::PathBuf;

use asyncdump_protocol::paths;
use serde::Serialize;

use crate::attach::client::Client;
use crate::attach::target::{dirs_for, euid};
use crate::error::TargetError;
use crate::view::{duration, no_breaks};

#[derive(Debug, Serialize)]
pub struct Agent {
    pub pid: u32,
    pub program: String,
    pub agent_version: String,
    pub tasks_live: u64,
    pub uptime_ms: u64,
    pub socket: PathBuf,
}

/// A tokio process without an agent, which `dump PID` reads from its memory.
#[derive(Debug, Serialize)]
pub struct Plain {
    pub pid: u32,
    pub program: String,
    pub uptime_ms: u64,
}

#[derive(Debug, Serialize)]
pub struct Listing {
    pub agents: Vec<Agent>,
    /// Tokio processes this user may read that have no agent (filled by the caller: finding them
    /// reads executables, see `crate::agentless::processes`).
    pub without_agent: Vec<Plain>,
    pub removed_stale: Vec<PathBuf>,
    /// Sockets that exist but could not be queried (e.g. another version), with the reason.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Most agents asked at the same time.
const AT_ONCE: usize = 32;

/// Every agent of this user; each is asked at once, on its own thread, and may take up to `timeout`.
pub fn scan(timeout: std::time::Duration) -> Listing {
    let mut listing = Listing {
        agents: Vec::new(),
        without_agent: Vec::new(),
        removed_stale: Vec::new(),
        unreadable: Vec::new(),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut sockets: Vec<(u32, PathBuf)> = Vec::new();
    for dir in dirs_for(euid()) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        sockets.extend(
            entries
                .flatten()
                .filter_map(|e| Some((paths::pid_of_socket(&e.path())?, e.path()))),
        );
    }
    sockets.sort();
    // At most `AT_ONCE` threads: a directory may hold many stale sockets.
    let answers: Vec<_> = sockets
        .chunks(AT_ONCE)
        .flat_map(|batch| {
            std::thread::scope(|scope| {
                let asked: Vec<_> = batch
                    .iter()
                    .map(|(pid, path)| scope.spawn(move || ask(*pid, path, timeout)))
                    .collect();
                asked.into_iter().map(|h| h.join()).collect::<Vec<_>>()
            })
        })
        .collect();
    for ((_, path), answer) in sockets.into_iter().zip(answers) {
        match answer {
            Ok(Answer::Agent(stats, hs)) => listing.agents.push(Agent {
                pid: hs.pid,
                program: hs.program,
                agent_version: hs.agent_version,
                tasks_live: stats.tasks_live,
                uptime_ms: now_ms.saturating_sub(hs.start_time_unix_ms),
                socket: path,
            }),
            Ok(Answer::Removed) => listing.removed_stale.push(path),
            Ok(Answer::Unreadable(why)) => listing.unreadable.push((path, why)),
            Err(_) => listing
                .unreadable
                .push((path, "asking it failed (a bug)".into())),
        }
    }
    listing
}

enum Answer {
    Agent(asyncdump_protocol::Stats, asyncdump_protocol::Handshake),
    Removed,
    /// Not queried or not answering, and why.
    Unreadable(String),
}

/// What the socket of process `pid` at `path` says, tidying it away if it is stale and ours.
fn ask(pid: u32, path: &std::path::Path, timeout: std::time::Duration) -> Answer {
    if !crate::attach::procfs::exists(pid) {
        return match crate::attach::target::remove_stale(path) {
            true => Answer::Removed,
            false => Answer::Unreadable("its process is gone; not ours to remove".into()),
        };
    }
    if let Some(state) = crate::attach::target::stopped(pid) {
        return Answer::Unreadable(TargetError::Stopped { pid, state }.to_string());
    }
    let patience = crate::attach::client::Patience::whole(timeout);
    match Client::connect(path, patience).and_then(|mut c| Ok((c.stats()?, c.handshake))) {
        Ok((stats, hs)) => Answer::Agent(stats, hs),
        // `Client::connect` already removed it, if it was ours.
        Err(TargetError::StaleSocket { removed: true, .. }) => Answer::Removed,
        Err(e) => Answer::Unreadable(e.to_string()),
    }
}

/// The PROGRAM column's width: its longest name, at least the heading's.
fn program_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names
        .map(|n| no_breaks(n).chars().count())
        .max()
        .unwrap_or(7)
        .max(7)
}

pub fn render(l: &Listing) -> String {
    let mut out = String::new();
    if l.agents.is_empty() {
        out.push_str("no asyncdump agents running as this user\n");
    } else {
        let width = program_width(l.agents.iter().map(|a| a.program.as_str()));
        let _ = writeln!(
            out,
            "{:>7}  {:<width$}  {:>6}  {:>8}  SOCKET",
            "PID", "PROGRAM", "TASKS", "UPTIME"
        );
        for a in &l.agents {
            let _ = writeln!(
                out,
                "{:>7}  {:<width$}  {:>6}  {:>8}  {}",
                a.pid,
                no_breaks(&a.program),
                a.tasks_live,
                duration(a.uptime_ms * 1_000_000),
                a.socket.display()
            );
        }
    }
    if !l.without_agent.is_empty() {
        let width = program_width(l.without_agent.iter().map(|p| p.program.as_str()));
        let _ = writeln!(
            out,
            "\ntokio processes without an agent (`asyncdump dump PID` reads their memory):"
        );
        let _ = writeln!(out, "{:>7}  {:<width$}  {:>8}", "PID", "PROGRAM", "UPTIME");
        for p in &l.without_agent {
            let _ = writeln!(
                out,
                "{:>7}  {:<width$}  {:>8}",
                p.pid,
                no_breaks(&p.program),
                duration(p.uptime_ms * 1_000_000)
            );
        }
    }
    for path in &l.removed_stale {
        let _ = writeln!(out, "removed stale socket {}", path.display());
    }
    for (path, why) in &l.unreadable {
        let _ = writeln!(out, "cannot read {}: {}", path.display(), no_breaks(why));
    }
    out
}
