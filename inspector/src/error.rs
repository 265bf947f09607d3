//! The inspector's typed errors about targets; each message says what to do next.
//!
//! A [`TargetError`] exits with status 1 (DESIGN.md: "target problem"), except two that need
//! something else of the user: 5 when this user may not read the process's memory (ptrace access),
//! 6 when the process (or a core's) cannot be dumped without its agent (no tokio or no debug info
//! to walk by, another architecture, a core whose executable is missing or another build); a core
//! file that cannot be read is 4, as any file. Usage errors exit with 2 (clap's, and `--no-agent` given a socket),
//! failures on this side (an unbuilt demo fixture, an unwritable output) with 3, and a file that
//! cannot be read back with 4.

use std::path::PathBuf;

/// Exit status for a problem with the target process or its agent.
pub const EXIT_TARGET: u8 = 1;
/// Exit status for a problem on the inspector's side.
pub const EXIT_LOCAL: u8 = 3;
/// Exit status for a snapshot file or recording that cannot be read (damaged, another format or
/// version, written with `--coalesce`).
pub const EXIT_FILE: u8 = 4;
/// Exit status when this user may not read the target's memory (ptrace access: uid, Yama, capability).
pub const EXIT_ACCESS: u8 = 5;
/// Exit status when the target cannot be dumped without its agent.
pub const EXIT_CANNOT_WALK: u8 = 6;
/// Exit status for a usage error (as clap's).
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("no such process: {pid} (check the pid with `ps` or `asyncdump ps`)")]
    NoSuchProcess { pid: u32 },
    #[error(
        "process {pid} ({program}) has no asyncdump agent: no socket in {searched}; link asyncdump-agent and call asyncdump_agent::init() at start-up"
    )]
    NoAgent {
        pid: u32,
        program: String,
        searched: String,
    },
    #[error("no such socket: {} (give a pid or an agent socket path)", path.display())]
    NoSuchSocket { path: PathBuf },
    #[error(
        "stale socket {}: no agent is listening (the process exited or was killed); {}",
        path.display(),
        if *removed { "removed it" } else { "left it in place (only our own sockets in our own socket directory are removed)" }
    )]
    StaleSocket { path: PathBuf, removed: bool },
    #[error("{} is not a socket (give a pid or an agent socket path)", path.display())]
    NotASocket { path: PathBuf },
    #[error(
        "permission denied connecting to {}: the agent runs as another user; run asyncdump as that user or as root",
        path.display()
    )]
    PermissionDenied { path: PathBuf },
    #[error("agent refused the connection: {message}")]
    Refused { message: String },
    /// Every connection slot of the agent is taken; [`crate::session::connect`] retries until its
    /// timeout before saying so.
    #[error("agent refused the connection: {message} (for the whole --timeout)")]
    Busy { message: String },
    #[error(
        "protocol version mismatch: the agent speaks protocol {agent}, this asyncdump ({ours_version}) speaks {ours}; use an asyncdump built for protocol {agent}"
    )]
    VersionMismatch {
        agent: u32,
        ours: u32,
        ours_version: &'static str,
    },
    #[error("{} is not an asyncdump agent socket ({detail})", path.display())]
    NotAnAgent { path: PathBuf, detail: String },
    #[error("socket {} answers for process {actual}, not {expected} (left in place; is ASYNCDUMP_SOCKET shared, or the pid another namespace's?)", path.display())]
    WrongProcess {
        path: PathBuf,
        expected: u32,
        actual: u32,
    },
    #[error("agent at {} did not answer: {detail}", path.display())]
    NoAnswer { path: PathBuf, detail: String },
    #[error("refusing {}: {why}; the target's agent did not make it (remove it if you did not either)", path.display())]
    Planted { path: PathBuf, why: String },
    #[error("refusing {}: it answers as process {claims}, but the kernel says process {pid} (uid {uid}) listens there", path.display())]
    Impostor {
        path: PathBuf,
        claims: u32,
        pid: u32,
        uid: u32,
    },
    #[error(
        "process {pid} is stopped (state {state}): it cannot answer until resumed, e.g. with `kill -CONT {pid}`"
    )]
    Stopped { pid: u32, state: char },
    #[error("agent error: {message}")]
    AgentError { message: String },
    #[error(
        "the agent's reply does not hold together ({detail}); the agent or this asyncdump is broken, please report it"
    )]
    Inconsistent { detail: String },
    /// Not sent: the agent would refuse it. Only a walk plan can grow this big, and `dump` then goes on
    /// without one.
    #[error("request of {bytes} bytes is over the agent's limit of {max}")]
    RequestTooLarge { bytes: usize, max: usize },
    /// The ptrace access check refused reading another process's memory; `why` names the cause and
    /// the fix (see `crate::agentless::access`).
    #[error("cannot read the memory of process {pid}: {why}")]
    AccessDenied { pid: u32, why: String },
    #[error("cannot dump process {pid} without its agent: {why}")]
    CannotWalk { pid: u32, why: String },
    #[error(
        "process {pid} ({program}) has no asyncdump agent, and cannot be read without one: {why}"
    )]
    NoAgentNorWalk {
        pid: u32,
        program: String,
        why: String,
    },
    #[error("process {pid} exited during the dump")]
    Exited { pid: u32 },
    #[error(
        "process {pid} replaced its program (execve) while its threads were being stopped; dump it again"
    )]
    Replaced { pid: u32 },
    #[error(
        "process {pid}'s threads could not all be stopped within 10 s (an execve stuck in the kernel?); dump it again, or without --stop"
    )]
    StopTimedOut { pid: u32 },
    #[error(
        "process {pid} changed under the dump (it replaced its program, or its main thread ended, while it was read); dump it again"
    )]
    Changed { pid: u32 },
    #[error(
        "process {pid} is traced by process {tracer} (a debugger?); detach it first, or dump without --stop"
    )]
    Traced { pid: u32, tracer: u32 },
    #[error("--no-agent reads a process's memory: give its pid, not a socket ({})", path.display())]
    NoAgentNeedsPid { path: PathBuf },
    /// The core file itself: missing, damaged, not a core, another architecture's.
    #[error("{} is not a core file this asyncdump reads: {detail}", path.display())]
    CoreUnreadable { path: PathBuf, detail: String },
    #[error("cannot dump the core {}: {why}", path.display())]
    CoreCannotWalk { path: PathBuf, why: String },
}

impl TargetError {
    /// The exit status for this error (see the module docs).
    pub fn exit_code(&self) -> u8 {
        match self {
            TargetError::AccessDenied { .. } => EXIT_ACCESS,
            TargetError::CannotWalk { .. } | TargetError::NoAgentNorWalk { .. } => EXIT_CANNOT_WALK,
            TargetError::NoAgentNeedsPid { .. } => EXIT_USAGE,
            TargetError::CoreUnreadable { .. } => EXIT_FILE,
            TargetError::CoreCannotWalk { .. } => EXIT_CANNOT_WALK,
            _ => EXIT_TARGET,
        }
    }
}
