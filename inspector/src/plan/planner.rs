//! Where a session's walk plan comes from: the plan cache when it has this binary's, else the binary's
//! DWARF, read at most once per session and planned for every root future type it has (so a task of a
//! root type first seen later needs no new plan), then kept in the cache.
//!
//! The running binary is known by the build-id the agent reads from what the loader mapped; `--binary`
//! must name a build with the same one. A plan is made at load bias 0 and moved to the process's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use asyncdump_protocol::WalkInfo;

use crate::dwarf;
use crate::model::DecodingInfo;
use crate::plan::Plan;
use crate::plan::cache::{Entry, Lookup, PlanCache};

/// Plans for one attached process.
pub struct Planner {
    placement: Placement,
    /// The file the DWARF is read from: `--binary`, else `/proc/PID/exe`.
    path: PathBuf,
    /// The separate debug file to read it from instead (`--debug-file`).
    debug_file: Option<PathBuf>,
    /// The running executable's build-id, hex: the cache's key.
    build_id: Option<String>,
    /// `Err`: why plans are not cached (no cache directory); `Err(None)`: `--no-cache`, said by the
    /// user, so the dump need not say it again.
    cache: Result<PlanCache, Option<String>>,
    /// The DWARF, once a plan had to be made from it.
    dwarf: Option<Loaded>,
    /// What the agent said while the planner was made, for the first plan.
    pub first_info: Option<WalkInfo>,
}

/// Where the plan is placed: a live process (its load bias read from `/proc`), or a core's process
/// (the address its executable's file offset 0 was mapped at, from the core's notes).
#[derive(Debug, Clone, Copy)]
enum Placement {
    Process(u32),
    Core { base: u64 },
}

impl Placement {
    /// Who runs the binary, and the option that names another build, for messages.
    fn runner(self) -> (String, &'static str) {
        match self {
            Placement::Process(pid) => (format!("process {pid} runs"), "--binary"),
            Placement::Core { .. } => ("the core's process ran".to_owned(), "--exe"),
        }
    }
}

/// The binary's DWARF, loaded once.
struct Loaded {
    debug: dwarf::Debug,
    load_ns: u64,
}

/// A plan moved to the process's load bias, and what the dump says about it.
pub struct Planned {
    pub decoder: Plan,
    pub decoding: DecodingInfo,
    /// Whether the plan lists tokio runtimes' tasks.
    pub runtimes: bool,
}

impl Planner {
    /// A planner for process `pid`, from what its agent said (`info`: whether this client may walk its
    /// memory, and which binary it runs), with `binary` checked against it. `Err(note)`: decoding is
    /// off, and why.
    pub fn new(
        pid: u32,
        info: WalkInfo,
        binary: Option<&Path>,
        cache: bool,
    ) -> Result<Planner, String> {
        let exe = crate::attach::procfs::exe(pid);
        if let Some(why) = &info.walks_refused {
            return Err(format!(
                "the agent allows this client no memory walks: {why}"
            ));
        }
        // The agent's word is the truth about what runs, whether the file on disk was replaced,
        // `--binary` names another build, or the pid is another namespace's.
        let running = match info.build_id.as_deref().map(dwarf::hex) {
            Some(id) => Some(id),
            None if binary.is_some() => match dwarf::build_id(&exe) {
                Ok(id) => id,
                Err(e) => return Err(format!("cannot check the running binary's build-id: {e}")),
            },
            None => None,
        };
        Planner::running(Placement::Process(pid), running, binary, cache, Some(info))
    }

    /// A planner for process `pid` read without its agent, which runs the build `running` (its
    /// build-id, hex: what the image the process runs says, even if the file was replaced on disk).
    pub fn without_agent(
        pid: u32,
        running: Option<String>,
        binary: Option<&Path>,
        cache: bool,
    ) -> Result<Planner, String> {
        Planner::running(Placement::Process(pid), running, binary, cache, None)
    }

    /// A planner for the process of a core, whose executable is `exe` (its build-id, hex, as the
    /// core recorded it: `running`), loaded with its file offset 0 at `base`.
    pub fn for_core(
        exe: &Path,
        running: Option<String>,
        base: u64,
        cache: bool,
    ) -> Result<Planner, String> {
        Planner::running(Placement::Core { base }, running, Some(exe), cache, None)
    }

    /// A planner for process `pid`, which runs the build `running` (its build-id, hex), with
    /// `binary` checked against it.
    fn running(
        placement: Placement,
        running: Option<String>,
        binary: Option<&Path>,
        cache: bool,
        first_info: Option<WalkInfo>,
    ) -> Result<Planner, String> {
        let exe = match placement {
            Placement::Process(pid) => crate::attach::procfs::exe(pid),
            Placement::Core { .. } => binary.map(Path::to_owned).unwrap_or_default(),
        };
        if let (Some(path), Some(running)) = (binary, &running) {
            // A binary without type info is still checked by its own build-id: its separate debug
            // file is found by it.
            let given = dwarf::build_id(path).map_err(|e| e.to_string());
            match given {
                Ok(given) if given.as_ref() == Some(running) => {}
                Ok(given) => {
                    return Err(not_running(path, given.as_deref(), running, placement));
                }
                Err(e) => return Err(e),
            }
        }
        let cache = if cache {
            PlanCache::open().map_err(Some)
        } else {
            Err(None)
        };
        Ok(Planner {
            placement,
            path: binary.map_or(exe, Path::to_owned),
            debug_file: None,
            build_id: running,
            cache,
            dwarf: None,
            first_info,
        })
    }

    /// Reads the DWARF from `debug_file` (checked against the executable's build-id), when given.
    pub fn with_debug_file(mut self, debug_file: Option<&Path>) -> Planner {
        self.debug_file = debug_file.map(Path::to_owned);
        self
    }

    /// A plan for every root future type, with the runtime plan if `runtimes`: from the cache if it
    /// has one, else from the DWARF (then cached). `Err(note)`: decoding is off, and why.
    pub fn plan(&mut self, runtimes: bool) -> Result<Planned, String> {
        let start = Instant::now();
        let mut cache_note = None;
        if let (Ok(cache), Some(id)) = (&self.cache, &self.build_id) {
            match cache.get(id, runtimes) {
                Lookup::Hit(entry) => {
                    let mut planned = self.placed(*entry, start)?;
                    planned.decoding.plan_cached = true;
                    return Ok(planned);
                }
                Lookup::Miss => {}
                Lookup::Ignored(why) => cache_note = Some(why),
            }
        }
        let loaded_now = self.dwarf.is_none();
        let loaded = match &mut self.dwarf {
            Some(loaded) => loaded,
            none => none.insert(load(
                &self.path,
                self.debug_file.as_deref(),
                self.build_id.as_deref(),
                self.placement,
            )?),
        };
        let plan_start = Instant::now();
        let decoder = Plan::for_every_root(&loaded.debug, runtimes);
        let debug = &loaded.debug;
        // The agent refuses a plan that does not hold together: say so here, where it is a bug.
        if let Err(e) = decoder.walk.validate() {
            return Err(format!(
                "the walk plan made from {} does not hold together ({e}): a bug in asyncdump, please report it",
                debug.path.display()
            ));
        }
        let debug_path = debug.path.clone();
        let plan_ns =
            plan_start.elapsed().as_nanos() as u64 + if loaded_now { loaded.load_ns } else { 0 };
        let entry = Entry {
            build_id: self.build_id.clone().unwrap_or_default(),
            runtimes,
            debug_file: lasting_name(&debug.path),
            debug_info_bytes: debug.debug_info_bytes,
            vaddr_at_zero: debug.vaddr_at_zero,
            decoder,
        };
        match (&self.cache, &self.build_id) {
            (Ok(cache), Some(_)) => {
                if let Err(why) = cache.put(&entry) {
                    cache_note.get_or_insert(why);
                }
            }
            (Ok(_), None) => {
                cache_note = Some("not cached: the binary has no build-id to key it by".into())
            }
            (Err(Some(why)), _) => cache_note = Some(format!("not cached: {why}")),
            (Err(None), _) => {}
        }
        let mut planned = self.placed(entry, start)?;
        planned.decoding.debug_file = Some(debug_path.display().to_string());
        planned.decoding.plan_ns = plan_ns;
        planned.decoding.cache_note = cache_note;
        Ok(planned)
    }

    /// Frees the DWARF. Planning again, only needed when a runtime is registered later, loads it again.
    pub fn forget_dwarf(&mut self) {
        self.dwarf = None;
    }

    /// `entry`'s plan moved to where the process loaded the executable.
    fn placed(&self, entry: Entry, start: Instant) -> Result<Planned, String> {
        let bias = match self.placement {
            Placement::Process(pid) => {
                dwarf::load_bias(pid, entry.vaddr_at_zero).map_err(|e| e.to_string())?
            }
            Placement::Core { base } => base.saturating_sub(entry.vaddr_at_zero.unwrap_or(0)),
        };
        let mut decoder = entry.decoder;
        decoder.rebase(bias);
        let decoding = DecodingInfo {
            enabled: true,
            note: None,
            debug_file: Some(entry.debug_file),
            build_id: self.build_id.clone(),
            debug_info_bytes: entry.debug_info_bytes,
            plan_ns: start.elapsed().as_nanos() as u64,
            plan_types: decoder.walk.types.len(),
            plan_cached: false,
            cache_note: None,
            ..DecodingInfo::default()
        };
        Ok(Planned {
            decoder,
            decoding,
            runtimes: entry.runtimes,
        })
    }
}

/// The name of the file the DWARF came from that still means something after the process is gone:
/// `/proc/PID/exe` resolved to the executable's path.
fn lasting_name(path: &Path) -> String {
    let resolved = crate::attach::procfs::is_under(path)
        .then(|| std::fs::read_link(path).ok())
        .flatten();
    resolved.as_deref().unwrap_or(path).display().to_string()
}

fn not_running(path: &Path, given: Option<&str>, running: &str, placement: Placement) -> String {
    let (runner, option) = placement.runner();
    format!(
        "{} (build-id {}) is not the binary {runner} (build-id {running}); pass the matching build with {option}",
        path.display(),
        given.unwrap_or("none"),
    )
}

/// Loads the DWARF of `path`, checked against the running binary's build-id.
fn load(
    path: &Path,
    debug_file: Option<&Path>,
    running: Option<&str>,
    placement: Placement,
) -> Result<Loaded, String> {
    let start = Instant::now();
    let debug = dwarf::Debug::load_with(path, debug_file).map_err(|e| match e {
        e if e.is_running_image_refused() => {
            format!("{e}; give a readable copy of the program with --binary PATH")
        }
        e => e.to_string(),
    })?;
    if let Some(running) = running
        && debug.build_id.as_deref() != Some(running)
    {
        return Err(not_running(
            path,
            debug.build_id.as_deref(),
            running,
            placement,
        ));
    }
    Ok(Loaded {
        debug,
        load_ns: start.elapsed().as_nanos() as u64,
    })
}
