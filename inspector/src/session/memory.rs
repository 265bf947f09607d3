//! A target without an agent (or read as if it had none): its memory read from outside by an
//! [`agentless::Reader`], with the plan made once from its binary's DWARF. A live view gets a whole
//! snapshot at each update, no more often than [`MIN_INTERVAL`].

use std::time::{Duration, Instant};

use crate::agentless::Reader;
use crate::agentless::freeze::Frozen;
use crate::assemble::ChainCache;
use crate::error::TargetError;
use crate::model::{DecodingInfo, Dump, StoppedView};
use crate::plan::Plan;
use crate::plan::planner::Planner;

use super::{Applied, SessionOptions};

/// The shortest interval between two snapshots of a live view without the agent: each is a whole
/// listing of the process, read from outside.
pub const MIN_INTERVAL: Duration = Duration::from_millis(500);

pub(super) struct MemorySession {
    reader: Reader,
    decoder: Plan,
    decoding: DecodingInfo,
    /// Each snapshot's deadline, from its start.
    timeout: Duration,
    /// Every thread stopped while a snapshot is read (`--stop`).
    stop: bool,
    /// A live view's interval and when its next snapshot is due.
    every: Option<(Duration, Instant)>,
    chains: ChainCache,
    /// What a snapshot reads after its chains.
    reading: crate::model::values::Reading,
    /// The names of the process's code, loaded once for its threads' stacks.
    symbols: Option<crate::threads::symbols::Symbols>,
}

impl MemorySession {
    /// Opens `pid` for reading and plans from its binary; what makes that impossible is `cannot`'s
    /// error (access and a process gone have their own).
    pub(super) fn open(
        pid: u32,
        options: &SessionOptions,
        cannot: impl Fn(String) -> TargetError,
    ) -> Result<Box<MemorySession>, TargetError> {
        Self::open_now(pid, options, cannot).map_err(|e| changed_if_alive(pid, e))
    }

    fn open_now(
        pid: u32,
        options: &SessionOptions,
        cannot: impl Fn(String) -> TargetError,
    ) -> Result<Box<MemorySession>, TargetError> {
        // What fails because the process exited meanwhile says so, not what it tried.
        let cannot = |why| match crate::agentless::gone(pid) {
            true => TargetError::Exited { pid },
            false => cannot(why),
        };
        if !options.decode {
            return Err(cannot(
                "without the agent, chains come only from the binary's DWARF; drop --no-decode"
                    .into(),
            ));
        }
        let reader = Reader::open(pid, options.retries)?;
        let running = reader.running_build_id().map_err(&cannot)?;
        let binary = options.binary.as_deref();
        let mut planner = Planner::without_agent(reader.through(), running, binary, options.cache)
            .map_err(&cannot)?
            .with_debug_file(options.debug_file.as_deref());
        let planned = planner.plan(true).map_err(&cannot)?;
        if planned.decoder.walk.runtime.is_none() {
            // The planner's own word on why, when it has one (a tokio whose layout it does not know).
            let why = planned.decoder.runtime_note.clone().unwrap_or_else(|| {
                "its DWARF has no tokio runtime to follow (asyncdump reads tokio's tasks without the agent)".into()
            });
            return Err(cannot(why));
        }
        Ok(Box::new(MemorySession {
            reader,
            decoder: planned.decoder,
            decoding: planned.decoding,
            timeout: options.timeout,
            stop: options.stop,
            every: None,
            chains: ChainCache::one_off().reading(options.reading.clone()),
            reading: options.reading.clone(),
            symbols: None,
        }))
    }

    pub(super) fn snapshot(&mut self) -> Result<Dump, TargetError> {
        let pid = self.reader.pid();
        self.snapshot_now().map_err(|e| changed_if_alive(pid, e))
    }

    fn snapshot_now(&mut self) -> Result<Dump, TargetError> {
        let deadline = Instant::now() + self.timeout;
        // The census first: the threads need be held only while the lists are read and walked.
        let found = self.reader.discover(&self.decoder, Some(deadline))?;
        let frozen = match self.stop {
            true => Some(Frozen::all(self.reader.pid())?),
            false => None,
        };
        if let Some(ms) = frozen.as_ref().and(hold_stopped_ms()) {
            std::thread::sleep(Duration::from_millis(ms));
        }
        let snap = self.reader.read(&self.decoder, found, Some(deadline));
        let release = |f: Option<Frozen>| {
            f.map(|f| {
                let held = (f.held_for(), f.threads(), f.unstopped);
                drop(f);
                held
            })
        };
        // Let go before anything else (the threads wait for nothing of ours), unless locals are
        // to be read, a task's or a thread's: then they are read held, as the chains were (a
        // thread let go may be between leaving its system call and entering it again).
        let snap = snap?;
        let threads_read = self.reading.targets && !self.decoder.frame_locals.is_empty()
            || !self.decoder.block_ons.is_empty()
            || self.reading.threads
            || self.reading.targets && self.any_running(&snap);
        let (mut frozen, mut stopped) = match self.reading.locals.any() || threads_read {
            true => (frozen, None),
            false => (None, release(frozen)),
        };
        let mut dump = Dump::build_decoded(
            self.reader.process(),
            &snap,
            0,
            Some(&self.decoder),
            self.decoding.clone(),
            &mut self.chains,
        );
        let now = Some(dump.snapshot.now_ns);
        if self.reading.targets {
            crate::values::add_statics(&mut dump, &self.decoder.statics, &self.decoder.values);
        }
        let mem = self.reader.memory();
        let held = frozen.as_ref();
        let reading = (&self.reading, self.chains.live());
        super::add_block_ons(&mut dump, mem, &self.decoder, reading, held);
        let parked = self.decoder.parked;
        super::read_stacks(
            &mut dump,
            mem,
            &self.reading,
            (held, parked),
            &mut self.symbols,
        );
        let threads = super::add_thread_locals(&mut dump, mem, &self.decoder, &self.reading, held);
        let read = crate::values::read_locals(&mut dump, &self.decoder.values, mem, now);
        let tables = crate::attach::procfs::SocketTables::new(dump.process.pid);
        if self.reading.targets {
            super::sockets::add(&mut dump, mem, &self.decoder, &tables);
        }
        super::after_values(&mut dump, &threads, &read, (&self.reading, &tables));
        if frozen.is_some() {
            stopped = release(frozen.take());
        }
        if let Some((held, threads, unstopped)) = stopped {
            dump.snapshot.stopped = Some(StoppedView {
                threads,
                unstopped,
                held_ns: held.as_nanos() as u64,
            });
        }
        Ok(dump)
    }

    /// Whether a task of `snap` is running: the stacks of the threads are then read, held.
    fn any_running(&self, snap: &asyncdump_protocol::Snapshot) -> bool {
        let Some(bits) = self.decoder.walk.runtime.as_ref().map(|r| r.state_bits) else {
            return false;
        };
        (snap.runtimes.iter().flat_map(|r| &r.tasks))
            .any(|t| t.state & bits.running != 0 && t.state & bits.complete == 0)
    }

    /// Takes a snapshot every `interval_ms` (at least [`MIN_INTERVAL`]) from now on.
    pub(super) fn subscribe(&mut self, interval_ms: u32) {
        let every = Duration::from_millis(interval_ms.into()).max(MIN_INTERVAL);
        self.every = Some((every, Instant::now()));
        // Kept from snapshot to snapshot: the chains of tasks that did not move are not decoded again.
        self.chains = ChainCache::default().reading(self.reading.clone());
    }

    /// The next snapshot, when it is due.
    pub(super) fn next_update(&mut self) -> Result<(Dump, Applied), TargetError> {
        let (every, due) = self.every.unwrap_or((MIN_INTERVAL, Instant::now()));
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let start = Instant::now();
        self.every = Some((every, start + every));
        let dump = self.snapshot()?;
        let applied = Applied {
            full: true,
            new: dump.tasks.len(),
            build_ns: start.elapsed().as_nanos() as u64,
            ..Applied::default()
        };
        Ok((dump, applied))
    }
}

/// A process said gone (or never there) that lives after all changed under the read: in the middle
/// of an `execve` (its other threads ended, the one that made it taking the process's id), or its
/// main thread ending, it looks gone for a moment.
fn changed_if_alive(pid: u32, e: TargetError) -> TargetError {
    match e {
        TargetError::Exited { .. } | TargetError::NoSuchProcess { .. }
            if !crate::agentless::gone(pid) =>
        {
            TargetError::Changed { pid }
        }
        e => e,
    }
}

/// For the specs of the paths out of `--stop`: how long to hold the threads stopped before reading
/// (`ASYNCDUMP_HOLD_STOPPED_MS`), so that a spec can kill the inspector while it holds them.
fn hold_stopped_ms() -> Option<u64> {
    std::env::var("ASYNCDUMP_HOLD_STOPPED_MS")
        .ok()?
        .parse()
        .ok()
}
