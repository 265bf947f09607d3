//! The command line's words: subcommands and their options, as clap parses them. The options that
//! attach to a process are declared once ([`Attach`]) and flattened into `dump` and `watch`; the wait
//! for an agent ([`Wait`]) into `ps` as well.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use asyncdump::model::values::{Reading, Wanted};
use asyncdump::session::SessionOptions;
use asyncdump::view;

/// `0.1.0 (commit 1a2b3c4d5e6f)`: the version and the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ASYNCDUMP_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "asyncdump",
    version = VERSION,
    about = "Dump the suspended async chains of a live Rust process"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List processes of this user that run an asyncdump agent (and remove stale sockets), then
    /// the tokio processes without one.
    Ps {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        wait: Wait,
    },
    /// Print every suspended chain of a process (through its agent, or from its memory when it has
    /// none) or of a core file: annotated frames, and chains decoded from its DWARF.
    Dump {
        /// Process id (with or without an agent), or the path of an agent socket.
        #[arg(required_unless_present_any = ["from", "core"])]
        target: Option<String>,
        /// Print a snapshot file (`dump -o`, `s` in watch) or a recording's last state instead, as if
        /// live.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "core"])]
        from: Option<PathBuf>,
        /// Dump an ELF core file (from a crash, or `gcore PID`) instead, read with the DWARF of the
        /// executable it names, or of --exe.
        #[arg(long, value_name = "FILE", conflicts_with = "target")]
        core: Option<PathBuf>,
        /// Take N snapshots INTERVAL apart and mark each task of the first, which is shown, stuck (no
        /// later one saw it polled, completed or changed) or progressing; the stuck first.
        #[arg(long, value_name = "N", default_value_t = 1, conflicts_with_all = ["from", "core"],
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        samples: u32,
        /// The time between two samples (e.g. 500ms, 2s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1s")]
        interval: u64,
        #[command(flatten)]
        options: DumpOptions,
    },
    /// Compare two dumps of one process (snapshot files, `dump -o`; or a recording's states,
    /// `FILE@N` for its Nth update, FILE alone for its last): the tasks new, gone, moved to another
    /// await, and unchanged.
    Diff {
        /// The earlier dump.
        a: String,
        /// The later dump.
        b: String,
        /// Print the versioned JSON document, every task, instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the async state machines in a binary's DWARF, with their await points (what `dump` decodes
    /// chains with).
    Index {
        /// The executable to read (default with --pid: the process's own executable).
        #[arg(required_unless_present = "pid")]
        binary: Option<PathBuf>,
        /// Also resolve each live task of this process to its root future's type in the DWARF.
        #[arg(long)]
        pid: Option<u32>,
        /// Print JSON instead of text (whose paths are always whole).
        #[arg(long)]
        json: bool,
        /// Print source paths whole (text shows a dependency's from its crate's directory, the
        /// standard library's from `std/`).
        #[arg(long)]
        full_paths: bool,
    },
    /// Watch a process's tasks and chains live in the terminal (`?` lists the keys), or open a
    /// snapshot file, a recording or a core file with --from.
    Watch {
        /// Process id, or the path of an agent socket.
        #[arg(required_unless_present = "from")]
        target: Option<String>,
        /// Open a snapshot file or a core file, or replay a recording (←/→ step through it), instead
        /// of a process.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "record"])]
        from: Option<PathBuf>,
        #[command(flatten)]
        options: WatchOptions,
    },
    /// Start a bundled fixture program and dump it (or, with --watch, watch it).
    Demo {
        /// Open the demo in the live view instead of printing one dump.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        options: DumpOptions,
    },
    /// Print a completion script for a shell (`asyncdump completions bash > ~/.local/share/bash-completion/completions/asyncdump`).
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `asyncdump man > asyncdump.1; man ./asyncdump.1`; with --out-dir,
    /// write it and one page per subcommand (`asyncdump-dump.1`, …) there.
    Man {
        /// Write every page into this directory instead of printing the main one.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// How long to wait for an agent.
#[derive(Args, Clone, Copy)]
pub struct Wait {
    /// The longest to wait for an agent (e.g. 500ms, 15s): for `dump` and `ps`, all its answers
    /// together; for `watch`, each of them.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout_ns, default_value = "10s")]
    pub timeout: u64,
}

/// How to attach to a process and decode its chains.
#[derive(Args, Clone)]
pub struct Attach {
    /// Include running and recently completed tasks, not only suspended ones.
    #[arg(long)]
    pub all: bool,
    /// Read the DWARF from this file instead of the process's own executable, or the one a core
    /// names (it must have the same build-id; a binary without type info is looked up as a
    /// separate debug file).
    #[arg(long, value_name = "PATH", visible_alias = "exe")]
    pub binary: Option<PathBuf>,
    /// Read the DWARF from this separate debug file (`objcopy --only-keep-debug`; it must have the
    /// executable's build-id). Without it, one is looked for by build-id under /usr/lib/debug (or
    /// $ASYNCDUMP_DEBUG_DIR) and by the executable's .gnu_debuglink, as gdb does.
    #[arg(long, value_name = "PATH")]
    pub debug_file: Option<PathBuf>,
    /// Show annotated frames only: do not decode unannotated chains from DWARF.
    #[arg(long)]
    pub no_decode: bool,
    /// Plan from the DWARF and neither read nor write the plan cache
    /// ($XDG_CACHE_HOME/asyncdump/plans, by build-id).
    #[arg(long)]
    pub no_cache: bool,
    /// Read the process's memory from outside even if it has an agent (a process without one is
    /// read so anyway): needs ptrace access to it, gives no names, timings or spawn sites.
    #[arg(long)]
    pub no_agent: bool,
    /// Read the process's memory with every thread stopped, for one consistent snapshot (implies
    /// --no-agent). Threads are stopped with PTRACE_INTERRUPT, no signal, and always let go, also
    /// when asyncdump is killed.
    #[arg(long)]
    pub stop: bool,
    /// Without the agent: how many times a task list or chain that changed while it was read is
    /// read again before it is reported as torn.
    #[arg(long, value_name = "N", default_value_t = asyncdump::agentless::DEFAULT_RETRIES, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    #[command(flatten)]
    pub wait: Wait,
}

impl Attach {
    pub fn session(&self) -> SessionOptions {
        SessionOptions {
            binary: self.binary.clone(),
            debug_file: self.debug_file.clone(),
            decode: !self.no_decode,
            timeout: std::time::Duration::from_nanos(self.wait.timeout),
            whole: false,
            cache: !self.no_cache,
            no_agent: self.no_agent,
            stop: self.stop,
            retries: self.retries,
            reading: Reading::default(),
        }
    }
}

#[derive(Args, Clone)]
pub struct DumpOptions {
    #[command(flatten)]
    pub attach: Attach,
    /// Print the versioned JSON document (described in the user guide, docs/) instead of text (`--format json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// text (for people), json (for tools), or folded: one line per distinct chain, root first,
    /// frames separated by `;`, then its weight, for flame graph tools.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Draw the chains as a flame graph into FILE (SVG) instead of printing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["output", "json", "format"])]
    pub svg: Option<PathBuf>,
    /// What a folded line or a flame graph box weighs: tasks (how many) or suspended (for how long
    /// they have been suspended, in microseconds).
    #[arg(long, value_enum, default_value = "tasks")]
    pub weight: WeightArg,
    /// Group identical chains and print each group once with its count.
    #[arg(long)]
    pub coalesce: bool,
    /// List the waiting tasks by who keeps their waker (what they wait on, the task whose
    /// JoinHandle they await, somewhere unnamed), those whose waker nobody keeps first: nothing
    /// can wake them.
    #[arg(long, value_enum, value_name = "BY", conflicts_with_all = ["coalesce", "stats", "svg"])]
    pub group: Option<GroupBy>,
    /// Print the overview instead of every task: the suspended tasks counted by what they wait on,
    /// by root future, by the await in the program's own code, and by how long they have waited.
    #[arg(long, conflicts_with_all = ["coalesce", "svg"])]
    pub stats: bool,
    /// Keep only chains where a frame name (or the root future type) contains SUBSTR.
    #[arg(long = "type", value_name = "SUBSTR")]
    pub type_substr: Option<String>,
    /// Keep only tasks in their state for at least DURATION (e.g. 500ms, 2s, 1m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub min_age: Option<u64>,
    /// Print source paths whole (text shows a dependency's from its crate's directory, the standard
    /// library's from `std/`; `--json` always has them whole).
    #[arg(long)]
    pub full_paths: bool,
    /// Write the JSON document to FILE (a snapshot file `dump --from` and `watch --from` read)
    /// instead of printing: a new file (0600), or over a regular file (keeping its mode); `-` is
    /// standard output, and anything else (a symlink, a device, a FIFO) is refused.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the values each decoded frame holds across its await (its locals, named as in the
    /// source): numbers, text, collections' lengths and first items, Option/Result, Box/Arc/Rc with
    /// their counts, durations, instants as ages, socket addresses; other types by name and address.
    #[arg(short = 'v', long = "values")]
    pub values: bool,
    /// Print only these locals of each decoded frame (implies --values).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub fields: Vec<String>,
    /// Do not say what each leaf waits for (a sleep's deadline, a lock's queue): no read of the
    /// process after its chains.
    #[arg(long)]
    pub no_targets: bool,
    /// List every thread of the process: what it is blocked in (a lock, a sleep, a socket), the
    /// task it polls, and its native stack, the program's own frames first. Without it, only the
    /// threads inside a running task's poll are read.
    #[arg(long)]
    pub threads: bool,
}

impl DumpOptions {
    /// What to read after the chains: the locals `--fields` names, every one with `--values`, or
    /// none; and what leaves wait for, unless `--no-targets`.
    pub fn reading(&self) -> Reading {
        reading(&self.fields, self.values, self.no_targets, self.threads)
    }
}

#[derive(Args, Clone)]
pub struct WatchOptions {
    #[command(flatten)]
    pub attach: Attach,
    /// Also append every update to this new recording file (its format is in the user guide, docs/).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Show tasks suspended at least this long as stuck (e.g. 500ms, 30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "10s")]
    pub stuck_after: u64,
    /// Time between snapshots (e.g. 250ms, 1s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "250ms")]
    pub interval: u64,
    /// Do not say what each leaf waits for, nor who holds it: no read of the process after each
    /// update's chains.
    #[arg(long)]
    pub no_targets: bool,
    /// Show the values each decoded frame holds across its await in the selected task's section,
    /// read again at every update (as `dump --values`).
    #[arg(short = 'v', long = "values")]
    pub values: bool,
    /// Show only these locals of each decoded frame (implies --values).
    #[arg(long, value_name = "NAME,…", value_delimiter = ',')]
    pub fields: Vec<String>,
}

impl WatchOptions {
    /// What to read after each update's chains, as [`DumpOptions::reading`] says.
    pub fn reading(&self) -> Reading {
        reading(&self.fields, self.values, self.no_targets, false)
    }
}

/// The locals `fields` names, every one with `values`, or none; and what leaves wait for, unless
/// `no_targets`.
fn reading(fields: &[String], values: bool, no_targets: bool, threads: bool) -> Reading {
    let locals = match (fields.is_empty(), values) {
        (false, _) => Wanted::Named(fields.to_vec()),
        (true, true) => Wanted::All,
        (true, false) => Wanted::None,
    };
    Reading {
        locals,
        targets: !no_targets,
        threads,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Folded,
}

/// What `--group` lists the tasks by.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// Who keeps each task's waker.
    Waker,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WeightArg {
    Tasks,
    Suspended,
}

impl From<WeightArg> for view::folded::Weight {
    fn from(w: WeightArg) -> Self {
        match w {
            WeightArg::Tasks => view::folded::Weight::Tasks,
            WeightArg::Suspended => view::folded::Weight::Suspended,
        }
    }
}

/// Parses `250us`, `500ms`, `2s`, `1.5s`, `3m`, `1h` into nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; write e.g. 500ms, 2s or 1m"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "" => return Err(format!("{s:?} needs a unit: ns, us, ms, s, m or h")),
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}; use ns, us, ms, s, m or h"
            ));
        }
    };
    Ok((value * scale) as u64)
}

/// A timeout: a duration longer than zero.
pub fn parse_timeout_ns(s: &str) -> Result<u64, String> {
    match parse_duration_ns(s)? {
        0 => Err(format!(
            "{s:?}: a timeout must be longer than 0; write e.g. 500ms or 15s"
        )),
        ns => Ok(ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert!(parse_duration_ns("5").unwrap_err().contains("needs a unit"));
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert_eq!(
            parse_duration_ns("0s"),
            Ok(0),
            "a zero age is a fine filter"
        );
        assert!(
            parse_timeout_ns("0s")
                .unwrap_err()
                .contains("longer than 0")
        );
        assert_eq!(parse_timeout_ns("1ns"), Ok(1));
    }

    #[test]
    fn the_attach_options_are_one_set_for_dump_and_watch() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let names = |sub: &str| -> Vec<String> {
            let mut v: Vec<String> = (cli.find_subcommand(sub).unwrap().get_arguments())
                .filter_map(|a| a.get_long().map(str::to_owned))
                .filter(|l| {
                    ["all", "binary", "no-decode", "no-cache", "timeout"].contains(&l.as_str())
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(names("dump"), names("watch"));
        assert_eq!(names("dump").len(), 5);
        assert_eq!(names("ps"), ["timeout"]);
    }
}
