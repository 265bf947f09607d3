//! Dumps without the agent: the walker pointed at another live process's memory.
//!
//! The same plan and walker the agent uses on itself, over `process_vm_readv` on the target: its
//! runtimes and `LocalSet`s found by the walker's census (`asyncdump_walker::tasks::Discovery`,
//! which needs no thread registers), their task lists followed and their idle tasks' futures walked,
//! into the same protocol [`Snapshot`] an agent sends, so every later stage (decode, assemble, every
//! view) is the agent path's. What only an agent knows (names given through its spawn helpers,
//! timings, spawn sites) is absent, and the dump says it was read from live memory.
//!
//! The process keeps running while it is read: every header is validated as the agent's are, a
//! task list that changed under the read is listed again, and a task polled while its chain was
//! read is read again, up to `retries` times, then reported as torn (`Walk::Torn`) rather than
//! shown as if consistent.
//!
//! - `access`: whether this user may read the process, and why not in one line.
//! - `core_file`: an ELF core file as a memory source, with what its notes say of the process.
//! - `freeze`: `--stop`, every thread held still for one consistent snapshot, and always let go.
//! - `processes`: which processes run tokio without an agent (for `ps`).
//! - [`Reader`]: one target process, its discovery and ages kept from snapshot to snapshot.

pub mod access;
pub mod core_file;
pub mod freeze;
pub mod processes;

use std::time::Instant;

use asyncdump_protocol::{RuntimePlan, RuntimeReport, RuntimeTask, Snapshot};
use asyncdump_walker::tasks::{self, Ages, Discovery};
use asyncdump_walker::{ProcessMemory, Walker};
use nix::errno::Errno;

use crate::attach::procfs;
use crate::error::TargetError;
use crate::model::{Process, ReadFrom};
use crate::plan::Plan;

/// How many times a torn read is tried again, by default (`--retries`).
pub const DEFAULT_RETRIES: u32 = 3;

/// One live process read from outside, across snapshots.
pub struct Reader {
    pid: u32,
    /// The live thread the process is read through: `pid` unless its main thread has ended.
    through: u32,
    mem: ProcessMemory,
    /// Every snapshot scans again: from outside, a runtime made since the last one must be seen.
    discovery: Discovery,
    ages: Ages,
    /// Listings taken: an age is known from the second on.
    listings: u64,
    retries: u32,
    program: String,
    start_ticks: Option<u64>,
}

impl Reader {
    /// Opens process `pid` for reading, checking first that this user may read it and that it is
    /// a program this asyncdump can read (64-bit, this machine's architecture).
    pub fn open(pid: u32, retries: u32) -> Result<Reader, TargetError> {
        if !procfs::settled(pid, procfs::exists) {
            return Err(TargetError::NoSuchProcess { pid });
        }
        let Some(through) = (!gone(pid)).then(|| procfs::live_thread(pid)).flatten() else {
            return Err(TargetError::Exited { pid });
        };
        let mem = ProcessMemory::of(through as i32);
        probe(pid, through, &mem)?;
        check_architecture(pid, through, &mem)?;
        let program = procfs::program(through)
            .or_else(|| procfs::name(pid))
            .unwrap_or_default();
        Ok(Reader {
            pid,
            through,
            mem,
            discovery: Discovery::new(std::time::Duration::ZERO),
            ages: Ages::default(),
            listings: 0,
            retries,
            program,
            start_ticks: procfs::start_ticks(pid),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The live thread the process is read through (its `/proc` files, its memory): the pid,
    /// unless the main thread has ended while others run on.
    pub fn through(&self) -> u32 {
        self.through
    }

    /// The build-id (hex) of the executable the process runs: the file's, as `/proc/PID/exe` opens
    /// it, else (an execute-only file, or one not this user's to read, whose readable copy
    /// `--binary` names) the notes of its image in memory. `Err`: neither says, and why.
    pub fn running_build_id(&self) -> Result<Option<String>, String> {
        let from_file = crate::dwarf::build_id(&procfs::exe(self.through));
        from_file.or_else(|e| {
            let image = procfs::exe_image(self.through).ok().flatten();
            match image.and_then(|at| core_file::build_id_at(&self.mem, at)) {
                Some(id) => Ok(Some(crate::dwarf::hex(&id))),
                None => Err(format!("cannot read the running binary's build-id: {e}")),
            }
        })
    }

    /// The process's memory, as this reader reads it.
    pub fn memory(&self) -> &ProcessMemory {
        &self.mem
    }

    /// The process, as the dump's header describes it.
    pub fn process(&self) -> Process {
        let uptime_ns = self.uptime_ns();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Process {
            pid: self.pid,
            program: self.program.clone(),
            read_from: ReadFrom::LiveMemory,
            agent_version: None,
            protocol_version: None,
            start_time_unix_ms: now_ms.saturating_sub(uptime_ns / 1_000_000),
            uptime_ns,
        }
    }

    /// How long the process has run, from its start time in `/proc` and the boot clock.
    fn uptime_ns(&self) -> u64 {
        let started = self
            .start_ticks
            .unwrap_or(0)
            .saturating_mul(1_000_000_000 / clock_tick());
        clock_ns(nix::time::ClockId::CLOCK_BOOTTIME).saturating_sub(started)
    }

    /// One snapshot: every runtime and `LocalSet` the census finds, their tasks listed and walked
    /// with `plan` (which must carry a runtime plan), until `deadline`.
    pub fn snapshot(
        &mut self,
        plan: &Plan,
        deadline: Option<Instant>,
    ) -> Result<Snapshot, TargetError> {
        let found = self.discover(plan, deadline)?;
        self.read(plan, found, deadline)
    }

    /// The census: the task lists of the process, found in its memory. The first half of a
    /// snapshot, which `--stop` takes before it stops the threads: only listing and walking need
    /// them still.
    pub fn discover(
        &mut self,
        plan: &Plan,
        deadline: Option<Instant>,
    ) -> Result<Discovered, TargetError> {
        let rp = runtime_plan(self.pid, plan)?;
        let mem = self.mem;
        let regions = || mem.heap_regions().unwrap_or_default();
        let start = Instant::now();
        let known = self.discovery.known(&mem, rp, regions, deadline);
        Ok(Discovered {
            known,
            took: start.elapsed(),
        })
    }

    /// The second half of a snapshot: the lists `found` listed, their idle tasks walked.
    pub fn read(
        &mut self,
        plan: &Plan,
        found: Discovered,
        deadline: Option<Instant>,
    ) -> Result<Snapshot, TargetError> {
        let (pid, rp) = (self.pid, runtime_plan(self.pid, plan)?);
        let start = Instant::now();
        let now_ns = clock_ns(nix::time::ClockId::CLOCK_MONOTONIC);
        let mut walker = Walker::default();
        walker.set_deadline(deadline);
        let (mut reports, census) = self.list(rp, found.known);
        let mut all: Vec<&mut RuntimeTask> =
            reports.iter_mut().flat_map(|r| &mut r.tasks).collect();
        // No agent walks the tasks spawned through one: their futures are followed here.
        let walk = plan.walk_without_agent();
        tasks::walk_tasks_retrying(&self.mem, &walk, rp, &mut all, &mut walker, self.retries);
        self.ages.observe(now_ns, &rp.state_bits, all);
        if self.listings == 0 {
            // Seen once, not yet unchanged for any time.
            let tasks = reports.iter_mut().flat_map(|r| &mut r.tasks);
            tasks.for_each(|t| t.unchanged_since_ns = None);
        }
        self.listings += 1;
        if gone(pid) {
            return Err(TargetError::Exited { pid });
        }
        Ok(Snapshot {
            now_ns,
            capture_ns: (start.elapsed() + found.took).as_nanos() as u64,
            uptime_ns: self.uptime_ns(),
            runtimes: reports,
            census: Some(census),
            ..Snapshot::default()
        })
    }

    /// Every task list `known` holds, listed; a listing that met a header changing under it is
    /// taken again, up to `retries` times.
    fn list(
        &mut self,
        rp: &RuntimePlan,
        known: tasks::Known,
    ) -> (Vec<RuntimeReport>, asyncdump_protocol::CensusReport) {
        let mem = self.mem;
        let mut tries = 0;
        loop {
            let mut reports = Vec::new();
            let (census, stale) = tasks::list_known(&mem, rp, known.clone(), &[], &mut reports);
            tries += 1;
            let torn = reports.iter().any(|r| r.skipped > 0);
            if !torn || tries > self.retries {
                for list in stale {
                    self.discovery.forget(list);
                }
                return (reports, census);
            }
        }
    }
}

/// What a census found (see [`Reader::discover`]), and how long it took.
pub struct Discovered {
    known: tasks::Known,
    took: std::time::Duration,
}

/// The plan's runtime plan, which a reading without the agent cannot do without.
fn runtime_plan(pid: u32, plan: &Plan) -> Result<&RuntimePlan, TargetError> {
    plan.walk
        .runtime
        .as_deref()
        .ok_or_else(|| TargetError::CannotWalk {
            pid,
            why: "its DWARF describes no tokio runtime this asyncdump can follow".into(),
        })
}

/// Whether this user may read the process's maps and memory at all, and if not, why.
fn probe(pid: u32, through: u32, mem: &ProcessMemory) -> Result<(), TargetError> {
    let denied = || TargetError::AccessDenied {
        pid,
        why: access::explain(&access::Facts::of(pid)),
    };
    match procfs::maps(through) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(denied()),
        Err(_) => return Err(TargetError::NoSuchProcess { pid }),
    }
    match mem.access() {
        Ok(()) => Ok(()),
        // Gone since, or a zombie, which has no memory left.
        Err(e) if e.errno == Errno::ESRCH as i32 => Err(TargetError::Exited { pid }),
        Err(_) => Err(denied()),
    }
}

/// The ELF machine this asyncdump reads (`e_machine`).
pub(crate) const OUR_MACHINE: u16 = if cfg!(target_arch = "x86_64") {
    62
} else if cfg!(target_arch = "aarch64") {
    183
} else {
    0
};

/// Refuses a 32-bit or another architecture's executable: its layouts are not this build's.
fn check_architecture(pid: u32, through: u32, mem: &ProcessMemory) -> Result<(), TargetError> {
    use asyncdump_walker::Memory as _;
    use std::io::Read as _;
    let mut header = [0u8; 20];
    let read =
        std::fs::File::open(procfs::exe(through)).and_then(|mut f| f.read_exact(&mut header));
    if let Err(e) = read {
        // The image the process runs starts with the same header, in its memory.
        let image = procfs::exe_image(through).ok().flatten();
        match image.and_then(|at| mem.read_vec(at, header.len())) {
            Some(bytes) => header.copy_from_slice(&bytes),
            None if !procfs::exists(pid) => return Err(TargetError::Exited { pid }),
            None => {
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        "it has no executable (a kernel thread?)".to_owned()
                    }
                    _ => format!("its executable cannot be read ({e}), nor its image in memory"),
                };
                return Err(TargetError::CannotWalk { pid, why });
            }
        }
    }
    let why = architecture_problem(&header);
    why.map_or(Ok(()), |why| Err(TargetError::CannotWalk { pid, why }))
}

/// What keeps an executable with this ELF header (its first 20 bytes) from being read by this
/// build, if anything.
fn architecture_problem(header: &[u8; 20]) -> Option<String> {
    match (&header[..4], header[4], header[5]) {
        (b"\x7fELF", 2, 1) => {
            let machine = u16::from_le_bytes([header[18], header[19]]);
            (machine != OUR_MACHINE).then(|| {
                format!("its executable is for another architecture (ELF machine {machine}); use an asyncdump built for it")
            })
        }
        (b"\x7fELF", 1, _) => {
            Some("it is a 32-bit program; asyncdump reads 64-bit ones".to_owned())
        }
        (b"\x7fELF", _, _) => Some("its executable is big-endian or damaged".to_owned()),
        _ => Some("its executable is not an ELF file".to_owned()),
    }
}

fn clock_ns(clock: nix::time::ClockId) -> u64 {
    nix::time::clock_gettime(clock)
        .map(|ts| ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Whether process `pid` has exited: gone, or a zombie whose memory is gone already. A main thread
/// that has ended while others run on leaves a process that lives.
pub fn gone(pid: u32) -> bool {
    !procfs::settled(pid, |p| procfs::live_thread(p).is_some())
}

/// Clock ticks per second, as `/proc/PID/stat` counts them.
fn clock_tick() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&t| t > 0)
        .map_or(100, |t| t as u64)
}

/// How long process `pid` has run, or `None` when `/proc` does not say.
pub fn uptime_ns(pid: u32) -> Option<u64> {
    let started = procfs::start_ticks(pid)?.saturating_mul(1_000_000_000 / clock_tick());
    Some(clock_ns(nix::time::ClockId::CLOCK_BOOTTIME).saturating_sub(started))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(class: u8, data: u8, machine: u16) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[..4].copy_from_slice(b"\x7fELF");
        (h[4], h[5]) = (class, data);
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn only_this_machines_64_bit_programs_are_read() {
        assert_eq!(architecture_problem(&elf(2, 1, OUR_MACHINE)), None);
        let other = if OUR_MACHINE == 62 { 183 } else { 62 };
        let why = architecture_problem(&elf(2, 1, other)).unwrap();
        assert!(
            why.contains(&format!("another architecture (ELF machine {other})")),
            "{why}"
        );
        let why = architecture_problem(&elf(1, 1, 3)).unwrap();
        assert!(why.contains("32-bit"), "{why}");
        assert!(
            architecture_problem(&elf(2, 2, OUR_MACHINE))
                .unwrap()
                .contains("big-endian")
        );
        assert!(
            architecture_problem(&[b'#'; 20])
                .unwrap()
                .contains("not an ELF file")
        );
    }

    /// A process that is gone by the time it is opened is no such process; one that exits while
    /// it is read is said to have exited.
    #[test]
    fn a_process_that_is_gone_says_so() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(matches!(
            Reader::open(pid, 0),
            Err(TargetError::NoSuchProcess { .. })
        ));
    }
}
