//! One attached target: a connection to its agent, kept with the DWARF plan for as many snapshots as the
//! caller takes (`dump` takes one). The session drives the pipeline for it: attach, plan, and for each
//! snapshot decode and assemble. A process without an agent is read from its memory instead
//! (`memory`, over [`crate::agentless`]), and a core file ([`core`]), through the same stages.
//!
//! The walk plan covers every root future type of the binary, so a task of a root type first seen
//! later needs no new plan; it comes from the plan cache when that has the running build's
//! (`crate::plan::cache`), else from the binary's DWARF, checked against the build-id the agent reports
//! (`crate::plan::planner`). Only a runtime registered after the plan was made asks for a new one (with the runtime
//! plan). A live view subscribes instead ([`Session::subscribe`]): the agent then sends what changed at
//! every interval, the session keeps the agent's state current (`mirror`), and each
//! [`Session::next_update`] is a whole dump of it. What keeps chains from being decoded (no debug info,
//! another binary, a plan too big to send) is the dump's note, never an error: the annotated frames are
//! still worth showing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use asyncdump_protocol::{Handshake, SubscribeRequest};

use crate::assemble::ChainCache;
use crate::attach::client::{Client, Patience};
use crate::attach::target::Target;
use crate::error::TargetError;
use crate::model::values::Reading;
use crate::model::{DecodingInfo, Dump};
use crate::plan::Plan;
use crate::threads::symbols::Symbols;

pub mod core;
mod memory;
mod mirror;
mod sockets;
use crate::plan::planner::Planner;
pub use memory::MIN_INTERVAL as MEMORY_MIN_INTERVAL;
use memory::MemorySession;
pub use mirror::{Applied, COMPLETED_KEPT, Mirror, OutOfStep};

/// How to attach.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Read the DWARF from this file instead of the process's own executable.
    pub binary: Option<PathBuf>,
    /// Read it from this separate debug file (`--debug-file`).
    pub debug_file: Option<PathBuf>,
    /// Decode unannotated chains from the DWARF (`false`: annotated frames only).
    pub decode: bool,
    /// How long to wait for the agent (`--timeout`): each reply to arrive whole, and with `whole`,
    /// all of them together.
    pub timeout: std::time::Duration,
    /// Whether `timeout` bounds the whole session (a one-off dump), not only each reply.
    pub whole: bool,
    /// Read and keep walk plans in the plan cache (`false`: `--no-cache`).
    pub cache: bool,
    /// Read the process's memory even if it has an agent (`--no-agent`).
    pub no_agent: bool,
    /// Read it with every thread stopped, for one consistent snapshot (`--stop`; implies `no_agent`).
    pub stop: bool,
    /// How many times a read torn by the running process is tried again, without the agent.
    pub retries: u32,
    /// What a snapshot reads after its chains: the locals of decoded frames (`-v`, `--fields`), and
    /// what leaves wait for (unless `--no-targets`).
    pub reading: Reading,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            binary: None,
            debug_file: None,
            decode: true,
            timeout: crate::attach::client::DEFAULT_TIMEOUT,
            whole: false,
            cache: true,
            no_agent: false,
            stop: false,
            retries: crate::agentless::DEFAULT_RETRIES,
            reading: Reading::default(),
        }
    }
}

/// One target, read through its agent or, without one, from its memory.
pub struct Session(Link);

enum Link {
    Agent(Box<AgentSession>),
    Memory(Box<MemorySession>),
}

/// A target read through its agent's socket.
struct AgentSession {
    client: Client,
    /// `None` when not decoding.
    planner: Option<Planner>,
    /// The plan.
    decoder: Option<Plan>,
    /// Root anchors seen that the plan does not have (not in the DWARF): the dump's note says so.
    unplanned: Vec<u64>,
    /// Distinct root anchors seen.
    anchors_seen: Vec<u64>,
    decoding: DecodingInfo,
    /// The open subscription, if any.
    live: Option<Live>,
    /// What a snapshot reads after its chains.
    reading: Reading,
    /// The names of the process's code, loaded once for its threads' stacks and kept for the
    /// snapshots after.
    symbols: Option<Symbols>,
    /// While subscribed: a second connection for those reads, opened at the first update that
    /// needs it (the subscribed one carries updates only).
    reader: Option<Client>,
}

/// A subscription's parameters and the state its updates built.
struct Live {
    interval_ms: u32,
    include_completed: bool,
    mirror: Mirror,
    chains: ChainCache,
    /// Set after subscribing anew, until the new subscription's full state arrives: the old one's
    /// updates still in flight are skipped.
    awaiting_full: bool,
}

/// Connects to the target's agent, and makes sure it is that agent: the kernel's word on who listens
/// must match what the agent says it is (see [`Client::connect`]), and for a pid, the socket and its
/// directory must be the target user's own (no one else could have planted them) and the listener
/// must run as the target's user.
pub fn connect(target: &Target, patience: Patience) -> Result<Client, TargetError> {
    let path = target.resolve()?;
    let owner = match target.pid() {
        Some(pid) => {
            if let Some(state) = crate::attach::target::stopped(pid) {
                return Err(TargetError::Stopped { pid, state });
            }
            let owner = crate::attach::procfs::uid(pid).unwrap_or_else(crate::attach::target::euid);
            crate::attach::target::check_not_planted(&path, owner)?;
            Some(owner)
        }
        None => None,
    };
    let client = connect_when_free(&path, patience)?;
    let (pid, uid) = client.peer();
    if owner.is_some_and(|o| uid != o) {
        return Err(TargetError::Impostor {
            path,
            claims: client.handshake.pid,
            pid,
            uid,
        });
    }
    if let Some(expected) = target.pid()
        && client.handshake.pid != expected
    {
        return Err(TargetError::WrongProcess {
            path,
            expected,
            actual: client.handshake.pid,
        });
    }
    Ok(client)
}

/// Connects, trying again while the agent is busy (its connection slots all taken), until its
/// patience runs out.
fn connect_when_free(path: &Path, patience: Patience) -> Result<Client, TargetError> {
    let give_up = match patience.until {
        Some((at, _)) => at,
        None => Instant::now() + patience.each,
    };
    // Short pauses: a slot held by a greedy client is taken from it by the agent, so one comes free soon.
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        match Client::connect(path, patience) {
            Err(TargetError::Busy { .. }) if Instant::now() + pause < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

impl Session {
    /// Connects to the target's agent, handshakes and, when decoding, checks which binary the
    /// target runs. A process without an agent (or any, with `no_agent`) is read from its memory
    /// instead.
    pub fn attach(target: &Target, options: &SessionOptions) -> Result<Session, TargetError> {
        if options.no_agent || options.stop {
            let pid = match target {
                Target::Pid(pid) => *pid,
                Target::Socket(path) => {
                    return Err(TargetError::NoAgentNeedsPid { path: path.clone() });
                }
            };
            let cannot = |why| TargetError::CannotWalk { pid, why };
            return MemorySession::open(pid, options, cannot).map(|m| Session(Link::Memory(m)));
        }
        let patience = match options.whole {
            true => Patience::whole(options.timeout),
            false => Patience::each(options.timeout),
        };
        match connect(target, patience) {
            Err(TargetError::NoAgent { pid, program, .. }) => {
                let cannot = |why| TargetError::NoAgentNorWalk {
                    pid,
                    program: program.clone(),
                    why,
                };
                MemorySession::open(pid, options, cannot).map(|m| Session(Link::Memory(m)))
            }
            // Another user's socket directory hides whether there is an agent at all; its memory
            // is refused as well, and that error names the cause.
            Err(TargetError::PermissionDenied { path }) => match target.pid() {
                Some(pid) => {
                    let cannot = |_| TargetError::PermissionDenied { path: path.clone() };
                    MemorySession::open(pid, options, cannot).map(|m| Session(Link::Memory(m)))
                }
                None => Err(TargetError::PermissionDenied { path }),
            },
            Err(e) => Err(e),
            Ok(client) => {
                AgentSession::attach(client, options).map(|a| Session(Link::Agent(Box::new(a))))
            }
        }
    }

    /// What the agent said at the handshake; `None` without one.
    pub fn handshake(&self) -> Option<&Handshake> {
        match &self.0 {
            Link::Agent(a) => Some(&a.client.handshake),
            Link::Memory(_) => None,
        }
    }

    /// One snapshot, decoded with the plan.
    pub fn snapshot(&mut self, include_completed: bool) -> Result<Dump, TargetError> {
        match &mut self.0 {
            Link::Agent(a) => a.snapshot(include_completed),
            Link::Memory(m) => m.snapshot(),
        }
    }

    /// Takes a snapshot every `interval_ms` from now on (the agent sends what changed); read them
    /// with [`Session::next_update`].
    pub fn subscribe(
        &mut self,
        interval_ms: u32,
        include_completed: bool,
    ) -> Result<(), TargetError> {
        match &mut self.0 {
            Link::Agent(a) => a.subscribe(interval_ms, include_completed),
            Link::Memory(m) => {
                m.subscribe(interval_ms);
                Ok(())
            }
        }
    }

    /// Waits for the subscription's next update and returns the whole state it leaves, with what it
    /// changed.
    pub fn next_update(&mut self) -> Result<(Dump, Applied), TargetError> {
        match &mut self.0 {
            Link::Agent(a) => a.next_update(),
            Link::Memory(m) => m.next_update(),
        }
    }
}

/// Reads what `dump`'s decoded frames carry unread (locals, what leaves wait for) from outside where
/// the kernel lets us, else through the agent's `client`, as the walk was; and finds who holds
/// what. Whether the agent was asked and answered every read.
fn read_values(
    client: Option<&mut Client>,
    plan: &Plan,
    (reading, live): (&Reading, bool),
    dump: &mut Dump,
    symbols: &mut Option<Symbols>,
) -> bool {
    let pid = dump.process.pid;
    let now = Some(dump.snapshot.now_ns);
    if reading.targets {
        crate::values::add_statics(dump, &plan.statics, &plan.values);
    }
    // What the kernel lets us read ourselves costs the process nothing; the agent reads the rest.
    let client = client.filter(|_| !crate::attach::memory::readable_from_outside(pid));
    let agent = client.map(|client| crate::attach::memory::AgentMemory::new(client, pid));
    let outside = asyncdump_walker::ProcessMemory::of(pid as i32);
    let mem: &dyn asyncdump_walker::Memory = match &agent {
        Some(agent) => agent,
        None => &outside,
    };
    add_block_ons(dump, mem, plan, (reading, live), None);
    // What the threads are blocked in first: a thread waiting for a std lock is a reason to look
    // for its holder among the threads' locals.
    read_stacks(dump, mem, reading, (None, plan.parked), symbols);
    let threads = add_thread_locals(dump, mem, plan, reading, None);
    let read = crate::values::read_locals(dump, &plan.values, mem, now);
    let tables = crate::attach::procfs::SocketTables::new(pid);
    if reading.targets {
        sockets::add(dump, mem, plan, &tables);
    }
    after_values(dump, &threads, &read, (reading, &tables));
    agent.is_some_and(|agent| agent.through_agent())
}

/// What follows reading a live process's values, as `read` found them: its threads' locals kept
/// where the threads did not move, each descriptor a leaf waits on described from `/proc` (its
/// socket `tables`, read once a dump), and with wait targets, who holds what.
fn after_values(
    dump: &mut Dump,
    threads: &[crate::threads::Thread],
    read: &crate::values::ValuesRead,
    (reading, tables): (&Reading, &crate::attach::procfs::SocketTables),
) {
    let pid = dump.process.pid;
    crate::threads::keep_unmoved(dump, pid, threads);
    let socket_of = |fd| socket_value(tables, fd);
    crate::values::describe_fds(dump, &read.fd_tasks, &socket_of);
    if reading.targets {
        crate::waits::resolve(dump, reading, &read.held_tasks);
        crate::threads::starved::time(dump);
    }
}

/// Gives `dump` the locals of its live process's threads (those not running, or every one where
/// they are `held` stopped, with all their registers) that may hold what a task waits for, from
/// their stacks read through `mem`, where wait targets are read, the plan has such locals and a
/// task waits on something a thread can hold. The threads read, for
/// [`crate::threads::keep_unmoved`].
pub(crate) fn add_thread_locals(
    dump: &mut Dump,
    mem: &dyn asyncdump_walker::Memory,
    plan: &Plan,
    reading: &Reading,
    held: Option<&crate::agentless::freeze::Frozen>,
) -> Vec<crate::threads::Thread> {
    if !reading.targets || plan.frame_locals.is_empty() || !crate::waits::any_holdable_wait(dump) {
        return Vec::new();
    }
    let pid = dump.process.pid;
    let threads = match held {
        Some(frozen) => crate::threads::registers::held(pid, frozen.registers()),
        None => crate::threads::registers::live(pid),
    };
    if threads.is_empty() {
        return threads;
    }
    let maps = crate::attach::procfs::maps(pid).unwrap_or_default();
    let mappings = crate::threads::registers::mappings(&maps);
    crate::threads::add_locals(dump, mem, &mappings, &threads, plan);
    threads
}

impl AgentSession {
    fn attach(mut client: Client, options: &SessionOptions) -> Result<AgentSession, TargetError> {
        let (planner, decoding) = if options.decode {
            let pid = client.handshake.pid;
            let info = client.walk_info()?;
            match Planner::new(pid, info, options.binary.as_deref(), options.cache) {
                Ok(planner) => (
                    Some(planner.with_debug_file(options.debug_file.as_deref())),
                    DecodingInfo::default(),
                ),
                Err(note) => (None, not_decoded(note)),
            }
        } else {
            let note = "chains not decoded (--no-decode): annotated frames only".to_owned();
            (None, DecodingInfo::off(note))
        };
        Ok(AgentSession {
            client,
            planner,
            decoder: None,
            unplanned: Vec::new(),
            anchors_seen: Vec::new(),
            decoding,
            live: None,
            reading: options.reading.clone(),
            symbols: None,
            reader: None,
        })
    }

    /// One snapshot, decoded with the plan (planned again first if a root type is new).
    fn snapshot(&mut self, include_completed: bool) -> Result<Dump, TargetError> {
        self.plan_for_live_tasks()?;
        if self.live.is_none()
            && let Some(planner) = &mut self.planner
        {
            // Not needed while the dump is built, which for many tasks is when memory peaks.
            planner.forget_dwarf();
        }
        let walk = self.decoder.as_ref().map(|d| d.walk.clone());
        let (snap, rtt) = match self.client.snapshot(include_completed, walk) {
            // A plan too big to send: the annotated frames are still worth a dump.
            Err(TargetError::RequestTooLarge { bytes, max }) if self.decoder.is_some() => {
                self.drop_plan(bytes, max);
                self.client.snapshot(include_completed, None)?
            }
            other => other?,
        };
        if let Some(detail) = crate::assemble::inconsistency(&snap) {
            return Err(TargetError::Inconsistent { detail });
        }
        let mut dump = Dump::build_decoded(
            crate::assemble::process(&self.client.handshake),
            &snap,
            rtt.as_nanos() as u64,
            self.decoder.as_ref(),
            self.decoding.clone(),
            &mut ChainCache::one_off().reading(self.reading.clone()),
        );
        if let Some(plan) = &self.decoder {
            read_values(
                Some(&mut self.client),
                plan,
                (&self.reading, false),
                &mut dump,
                &mut self.symbols,
            );
        }
        Ok(dump)
    }

    /// Subscribes to updates every `interval_ms`; read them with [`Session::next_update`].
    fn subscribe(&mut self, interval_ms: u32, include_completed: bool) -> Result<(), TargetError> {
        self.plan_for_live_tasks()?;
        self.live = Some(Live {
            interval_ms,
            include_completed,
            mirror: Mirror::default(),
            chains: ChainCache::default().reading(self.reading.clone()),
            awaiting_full: true,
        });
        self.resubscribe()
    }

    fn resubscribe(&mut self) -> Result<(), TargetError> {
        let Some(live) = &mut self.live else {
            return Ok(());
        };
        live.awaiting_full = true;
        let req = SubscribeRequest {
            interval_ms: live.interval_ms,
            include_completed: live.include_completed,
            walk: self.decoder.as_ref().map(|d| d.walk.clone()),
        };
        match self.client.subscribe(req.clone()) {
            Err(TargetError::RequestTooLarge { bytes, max }) if self.decoder.is_some() => {
                self.drop_plan(bytes, max);
                self.client
                    .subscribe(SubscribeRequest { walk: None, ..req })
            }
            other => other,
        }
    }

    fn next_update(&mut self) -> Result<(Dump, Applied), TargetError> {
        loop {
            let update = self.client.update()?;
            let start = Instant::now();
            let live = self.live.as_mut().expect("subscribed");
            if live.awaiting_full && !update.full {
                continue;
            }
            live.awaiting_full = false;
            let Ok(mut applied) = live.mirror.apply(update) else {
                // Start again from a full state rather than show a state that is not the agent's.
                self.resubscribe()?;
                continue;
            };
            if applied.full {
                // Its walks may follow a newer plan than the kept chains, at the same poll counts.
                live.chains.clear();
            }
            // Only the tasks this update carried can be of a root type not seen before.
            self.note_unplanned(&applied.anchors);
            if self.needs_plan() {
                self.plan();
                self.resubscribe()?;
            }
            let live = self.live.as_mut().expect("subscribed");
            let dump = Dump::build_decoded(
                crate::assemble::process(&self.client.handshake),
                &live.mirror.snap,
                0,
                self.decoder.as_ref(),
                self.decoding.clone(),
                &mut live.chains,
            );
            applied.bytes = self.client.last_reply_bytes;
            let mut dump = dump;
            let reads = self.reading.targets || self.reading.locals.any();
            let pid = dump.process.pid;
            if let Some(plan) = self.decoder.as_ref().filter(|_| !reads)
                && crate::attach::memory::readable_from_outside(pid)
            {
                // Nothing else to read: the threads' own futures still are, from outside.
                let mem = asyncdump_walker::ProcessMemory::of(pid as i32);
                let reading = (&self.reading, true);
                add_block_ons(&mut dump, &mem, plan, reading, None);
            }
            if let Some(plan) = self.decoder.as_ref().filter(|_| reads) {
                // A second connection, only where the kernel lets us read nothing ourselves.
                if self.reader.is_none() && !crate::attach::memory::readable_from_outside(pid) {
                    self.reader = self.client.reconnect().ok();
                }
                // Without a second connection (the agent's slots are taken), from outside.
                let through_agent = read_values(
                    self.reader.as_mut(),
                    plan,
                    (&self.reading, true),
                    &mut dump,
                    &mut self.symbols,
                );
                if !through_agent {
                    self.reader = None;
                }
            }
            applied.build_ns = start.elapsed().as_nanos() as u64;
            return Ok((dump, applied));
        }
    }

    /// Decoding off, because the plan is too big for the agent to take.
    fn drop_plan(&mut self, bytes: usize, max: usize) {
        let types = self.decoder.take().map_or(0, |d| d.walk.types.len());
        self.planner = None;
        self.decoding = DecodingInfo::off(format!(
            "chains not decoded: the walk plan for {types} future types is {bytes} bytes, over the agent's limit of {max}"
        ));
    }

    /// Makes the plan the live tasks need, unless the one made already serves.
    fn plan_for_live_tasks(&mut self) -> Result<(), TargetError> {
        let Some(planner) = &mut self.planner else {
            return Ok(());
        };
        let info = match planner.first_info.take() {
            Some(info) => info,
            None => self.client.walk_info()?,
        };
        if self.needs_plan() {
            self.plan();
        }
        self.note_unplanned(&info.root_anchors);
        Ok(())
    }

    /// Whether there is no plan yet.
    fn needs_plan(&self) -> bool {
        self.planner.is_some() && self.decoder.is_none()
    }

    /// Plans (a no-op when not decoding), with the runtime plan: every process may have runtimes,
    /// registered or not, that a census finds. A plan that cannot be made turns decoding off, with why.
    fn plan(&mut self) {
        let Some(planner) = &mut self.planner else {
            return;
        };
        match planner.plan(true) {
            Ok(planned) => {
                self.decoder = Some(planned.decoder);
                self.decoding = planned.decoding;
                self.unplanned.clear();
                let seen = std::mem::take(&mut self.anchors_seen);
                self.note_unplanned(&seen);
            }
            Err(note) => {
                self.planner = None;
                self.decoder = None;
                self.decoding = not_decoded(note);
            }
        }
        if let Some(live) = &mut self.live {
            live.chains.clear();
        }
    }

    /// Counts the root anchors among `anchors` that the plan lacks (their type is not in the DWARF),
    /// for the dump's note.
    fn note_unplanned(&mut self, anchors: &[u64]) {
        let Some(decoder) = &self.decoder else {
            return;
        };
        for &a in anchors {
            if self.anchors_seen.contains(&a) {
                continue;
            }
            self.anchors_seen.push(a);
            if !decoder.walk.roots.iter().any(|r| r.0 == a) {
                self.unplanned.push(a);
            }
        }
        let missing = self.unplanned.len();
        self.decoding.note = (missing > 0).then(|| {
            format!(
                "{missing} of {} root future types are not in {}'s DWARF; those tasks show annotated frames only",
                self.anchors_seen.len(),
                self.decoding.debug_file.as_deref().unwrap_or("the binary")
            )
        });
    }
}

/// What `/proc` says of file descriptor `fd` of a live process (its socket `tables`), as a wait
/// target's `socket` part.
pub(crate) fn socket_value(
    tables: &crate::attach::procfs::SocketTables,
    fd: i64,
) -> Option<crate::model::values::Value> {
    use crate::attach::procfs::End;
    use crate::model::values::{Field, Value};
    let s = tables.socket(fd)?;
    // A Unix socket's path is the target's text: a string value, escaped when shown.
    let end = |e: End| match e {
        End::Inet(a) => Value::SocketAddr(a.to_string()),
        End::Unix(Some(path)) => Value::text(path),
        End::Unix(None) => Value::Unreadable,
    };
    let field = |name: &str, value| Field {
        name: name.into(),
        value,
    };
    Some(Value::Struct {
        type_name: "socket".into(),
        fields: vec![
            field("proto", Value::text(s.proto)),
            field("local", end(s.local)),
            field("peer", end(s.peer)),
            field("to_send", Value::Uint(s.tx_queue)),
            field("to_read", Value::Uint(s.rx_queue)),
        ],
    })
}

/// What every thread of live process `dump.process.pid` is doing, where the dump wants it (see
/// [`crate::threads::stacks::wanted`]): the threads `held` stopped, or those not running, read
/// through `mem`.
pub(crate) fn read_stacks(
    dump: &mut Dump,
    mem: &dyn asyncdump_walker::Memory,
    reading: &Reading,
    (held, parked): (
        Option<&crate::agentless::freeze::Frozen>,
        Option<crate::plan::ParkedKey>,
    ),
    symbols: &mut Option<Symbols>,
) {
    use crate::threads::{registers, stacks};
    let every = reading.threads;
    if !(every || reading.targets) || !stacks::wanted(dump, every) {
        return;
    }
    let pid = dump.process.pid;
    let threads = match held {
        Some(frozen) => registers::held(pid, frozen.registers()),
        None => registers::live(pid),
    };
    let running = registers::others(pid, &threads);
    let maps = crate::attach::procfs::maps(pid).unwrap_or_default();
    let tables = crate::attach::procfs::SocketTables::new(pid);
    let what_fd = |fd: i32| Some(describe_fd(&tables.socket(fd.into())?));
    let src = stacks::Sources {
        mem,
        mappings: &registers::mappings(&maps),
        threads: &threads,
        running,
        what_fd: &what_fd,
        parked,
    };
    let symbols = symbols.get_or_insert_with(|| {
        // The file the chains' DWARF came from, checked again to be of this build.
        let debug_file = dump.decoding.debug_file.as_ref().map(Into::into);
        Symbols::new(
            std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
            debug_file,
        )
    });
    stacks::read(dump, &src, symbols);
    if held.is_none() {
        stacks::forget_moved(dump, &crate::threads::moved(pid, &threads));
    }
}

/// Adds to `dump` the futures its live process's threads run through a `block_on` (see
/// [`crate::threads::block_on`]): from the threads `held` stopped, or those not running, read
/// through `mem`. One whose thread ran while it was read is named, not shown torn.
pub(crate) fn add_block_ons(
    dump: &mut Dump,
    mem: &dyn asyncdump_walker::Memory,
    plan: &Plan,
    (reading, live): (&Reading, bool),
    held: Option<&crate::agentless::freeze::Frozen>,
) {
    use crate::threads::{block_on, registers};
    if plan.block_ons.is_empty() {
        return;
    }
    let pid = dump.process.pid;
    // Named once found: most threads run no `block_on`.
    let threads = match held {
        Some(frozen) => registers::held(pid, frozen.registers()),
        None => registers::live_unnamed(pid, &[]),
    };
    let maps = crate::attach::procfs::maps(pid).unwrap_or_default();
    let mappings = registers::mappings(&maps);
    let exe = std::fs::read_link(crate::attach::procfs::exe(pid)).ok();
    let mut roots = block_on::find(mem, &mappings, &threads, plan, exe.as_deref());
    for r in roots.iter_mut().filter(|r| r.thread.is_none()) {
        r.thread = registers::comm(pid, r.tid);
    }
    if held.is_none() {
        block_on::forget_moved(&mut roots, &crate::threads::moved(pid, &threads));
    }
    dump.add_thread_futures(&roots, plan, reading, live);
}

/// A socket as a thread's blocked line says it: `tcp 127.0.0.1:80 ← 10.0.0.2:5123`.
pub(crate) fn describe_fd(s: &crate::attach::procfs::Socket) -> String {
    use crate::attach::procfs::End;
    let end = |e: &End| match e {
        End::Inet(a) => a.to_string(),
        End::Unix(Some(path)) if path.is_empty() => "unnamed".into(),
        End::Unix(Some(path)) => path.clone(),
        End::Unix(None) => "unknown".into(),
    };
    match (&s.local, &s.peer) {
        (local, End::Unix(None)) if s.proto == "unix" => format!("unix {}", end(local)),
        (local, End::Inet(a)) if a.port() == 0 => format!("{} {} (listening)", s.proto, end(local)),
        (local, peer) => format!("{} {} ↔ {}", s.proto, end(local), end(peer)),
    }
}

pub(crate) fn not_decoded(note: String) -> DecodingInfo {
    DecodingInfo::off(format!("chains not decoded: {note}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live view keeps the session on one thread and hands snapshots to another (the screen's).
    #[test]
    fn a_session_and_its_dumps_can_move_to_another_thread() {
        fn send<T: Send + 'static>() {}
        fn shared<T: Send + Sync + 'static>() {}
        send::<Session>();
        shared::<Dump>();
        shared::<Plan>();
        send::<crate::plan::cache::Entry>();
    }
}
