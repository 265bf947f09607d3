//! A core file through the same stages as a live process without its agent: its memory walked by
//! the walker's discovery and listing, planned from the executable the core names (or `--exe`),
//! checked against the build-id the core holds. One dump; nothing in a core changes.

use std::path::Path;
use std::time::{Duration, Instant};

use asyncdump_protocol::Snapshot;
use asyncdump_walker::Walker;
use asyncdump_walker::tasks::{self, Discovery};

use crate::agentless::core_file::{CoreFile, build_id_at};
use crate::assemble::ChainCache;
use crate::error::TargetError;
use crate::model::values::Reading;
use crate::model::{Dump, Process, ReadFrom};
use crate::plan::Plan;
use crate::plan::planner::Planner;

/// How to read a core: the executable (default: the one the core names), its separate debug file,
/// and whether to use the plan cache.
#[derive(Debug, Clone, Default)]
pub struct CoreOptions {
    pub exe: Option<std::path::PathBuf>,
    pub debug_file: Option<std::path::PathBuf>,
    pub cache: bool,
    /// What to read after the chains: locals of decoded frames, what leaves wait for.
    pub reading: crate::model::values::Reading,
}

/// How long the census of a core may scan its memory: it reads at the speed of the disk, and what
/// it did not reach is said (`census: … cut`), never waited for without end.
const CENSUS_BUDGET: Duration = Duration::from_secs(20);

/// Dumps the core at `path`, read with the DWARF of its executable.
pub fn dump(path: &Path, options: &CoreOptions) -> Result<Dump, TargetError> {
    let (exe, cache) = (options.exe.as_deref(), options.cache);
    let core = CoreFile::open(path)?;
    let cannot = |why: String| TargetError::CoreCannotWalk {
        path: path.to_owned(),
        why,
    };
    let (named, base) = executable(&core).map_err(|why| cannot(why.into()))?;
    let exe = exe.unwrap_or(named);
    if !exe.exists() {
        return Err(cannot(format!(
            "its executable {} is not on this machine; pass a copy of that build with --exe",
            exe.display()
        )));
    }
    let running = build_id_at(&core, base).map(|id| crate::dwarf::hex(&id));
    let mut planner = Planner::for_core(exe, running.clone(), base, cache)
        .map_err(&cannot)?
        .with_debug_file(options.debug_file.as_deref());
    let planned = planner.plan(true).map_err(&cannot)?;
    let Some(rp) = planned.decoder.walk.runtime.as_deref() else {
        let why = planned.decoder.runtime_note.clone().unwrap_or_else(|| {
            "its DWARF has no tokio runtime to follow (asyncdump reads tokio's tasks from a core)".into()
        });
        return Err(cannot(why));
    };
    let start = Instant::now();
    let deadline = Some(start + CENSUS_BUDGET);
    let known = Discovery::new(Duration::ZERO).known(&core, rp, || core.regions(), deadline);
    let mut runtimes = Vec::new();
    let (mut census, _) = tasks::list_known(&core, rp, known, &[], &mut runtimes);
    // What the core left out is the census's memory too, unread.
    let missing = core.missing_bytes();
    census.total_bytes = census.total_bytes.saturating_add(missing);
    census.unreadable_bytes = census.unreadable_bytes.saturating_add(missing);
    let mut all: Vec<_> = runtimes.iter_mut().flat_map(|r| &mut r.tasks).collect();
    // No agent walks the tasks spawned through one: their futures are followed here.
    let walk = planned.decoder.walk_without_agent();
    tasks::walk_tasks(&core, &walk, rp, &mut all, &mut Walker::default());
    let snap = Snapshot {
        capture_ns: start.elapsed().as_nanos() as u64,
        runtimes,
        census: Some(census),
        ..Snapshot::default()
    };
    let mut decoding = planned.decoding;
    if running.is_none() {
        decoding.note = Some(format!(
            "the core does not hold its executable's build-id (its first page was not dumped): {} is taken to be the build it ran",
            exe.display()
        ));
    }
    let process = Process {
        pid: core.pid,
        program: core.program(),
        read_from: ReadFrom::Core,
        ..Process::default()
    };
    let mut dump = Dump::build_decoded(
        process,
        &snap,
        0,
        Some(&planned.decoder),
        decoding,
        &mut ChainCache::one_off().reading(options.reading.clone()),
    );
    read_threads(
        &mut dump,
        &core,
        (named, exe),
        &planned.decoder,
        &options.reading,
    );
    read_values(&mut dump, &core, &planned.decoder, &options.reading);
    Ok(dump)
}

/// The executable the core's process ran, and where it was loaded; or why the core does not say.
fn executable(core: &CoreFile) -> Result<(&Path, u64), &'static str> {
    core.executable().ok_or(match core.notes_cut {
        true => {
            "it is cut off before its notes (truncated?), which say which executable its process ran and where"
        }
        false => {
            "it does not say which executable its process ran, or where (no NT_FILE or NT_AUXV note)"
        }
    })
}

/// What the threads of the core's process ran and were doing: the futures of their `block_on`s,
/// and their stacks (see `crate::threads`), its executable read from `exe` where the core names
/// it `named`.
fn read_threads(
    dump: &mut Dump,
    core: &CoreFile,
    (named, exe): (&Path, &Path),
    plan: &Plan,
    reading: &Reading,
) {
    let mut mappings = core.mapped.clone();
    for m in mappings.iter_mut().filter(|m| m.path == named) {
        m.path = exe.to_owned();
    }
    let roots = crate::threads::block_on::find(core, &mappings, &core.threads, plan, Some(exe));
    dump.add_thread_futures(&roots, plan, reading, false);
    let debug_file = dump.decoding.debug_file.as_ref().map(Into::into);
    let mut symbols = crate::threads::symbols::Symbols::new(Some(exe.to_owned()), debug_file);
    read_stacks(dump, core, (&mappings, plan), reading, &mut symbols);
}

/// What every thread of the core's process was doing (see `crate::threads::stacks`), its files
/// read where `mappings` say (the executable where the user put it).
fn read_stacks(
    dump: &mut Dump,
    core: &CoreFile,
    (mappings, plan): (&[crate::threads::Mapping], &Plan),
    reading: &Reading,
    symbols: &mut crate::threads::symbols::Symbols,
) {
    use crate::threads::stacks;
    if !(reading.threads || reading.targets) || !stacks::wanted(dump, reading.threads) {
        return;
    }
    // A core keeps no descriptor table.
    let src = stacks::Sources {
        mem: core,
        mappings,
        threads: &core.threads,
        running: Vec::new(),
        what_fd: &|_| None,
        parked: plan.parked,
    };
    stacks::read(dump, &src, symbols);
}

/// Reads what `dump`'s frames carry unread from `core`, with the statics and the threads' locals
/// where wait targets are read, and finds who holds what.
fn read_values(dump: &mut Dump, core: &CoreFile, plan: &Plan, reading: &Reading) {
    if reading.targets {
        crate::values::add_statics(dump, &plan.statics, &plan.values);
        if crate::waits::any_holdable_wait(dump) {
            crate::threads::add_locals(dump, core, &core.mapped, &core.threads, plan);
        }
    }
    // A core keeps no clock: instants show without an age.
    let read = crate::values::read_locals(dump, &plan.values, core, None);
    if reading.targets {
        crate::waits::resolve(dump, reading, &read.held_tasks);
    }
}
