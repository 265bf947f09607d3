//! `asyncdump`: the command line over the inspector library (`asyncdump::…`): arguments, subcommands,
//! output and exit codes. `anyhow` is used only here at the edge. Exit codes: 0 ok, 1 target problem,
//! 2 usage, 3 local problem, 4 a snapshot file or recording that cannot be read.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};

use asyncdump::error::{EXIT_FILE, EXIT_LOCAL, EXIT_TARGET, TargetError};
use asyncdump::model::{Dump, Filter, coalesce};
use asyncdump::session::{Session, SessionOptions, connect};
use asyncdump::target::Target;
use asyncdump::{demo, dwarf, file, ps, view};

#[derive(Parser)]
#[command(
    name = "asyncdump",
    version,
    about = "Dump the suspended async chains of a live Rust process"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List processes of this user that run an asyncdump agent (and remove stale sockets).
    Ps {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// The longest to wait for each agent's whole answer (they are asked at once).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "15s")]
        timeout: u64,
    },
    /// Print every suspended chain of a process: annotated frames, and chains decoded from its DWARF.
    Dump {
        /// Process id, or the path of an agent socket.
        #[arg(required_unless_present = "from")]
        target: Option<String>,
        /// Print a snapshot file (`dump -o`, `s` in watch) or a recording's last state instead, as if
        /// live.
        #[arg(long, value_name = "FILE", conflicts_with = "target")]
        from: Option<std::path::PathBuf>,
        #[command(flatten)]
        options: DumpOptions,
    },
    /// List the async state machines in a binary's DWARF, with their await points (what `dump` decodes
    /// chains with).
    Index {
        /// The executable to read (default with --pid: the process's own executable).
        #[arg(required_unless_present = "pid")]
        binary: Option<std::path::PathBuf>,
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
    /// Watch a process's tasks and chains live in the terminal (`?` lists the keys).
    Watch {
        /// Process id, or the path of an agent socket.
        #[arg(required_unless_present = "from")]
        target: Option<String>,
        /// Open a snapshot file, or replay a recording (←/→ step through it), instead of a process.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "record"])]
        from: Option<std::path::PathBuf>,
        /// Also append every update to this new recording file (see the README for its format).
        #[arg(long, value_name = "FILE")]
        record: Option<std::path::PathBuf>,
        /// Show tasks suspended at least this long as stuck (e.g. 500ms, 30s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "10s")]
        stuck_after: u64,
        /// The longest to wait for each update, whole, beyond the interval.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "15s")]
        timeout: u64,
        /// Time between snapshots (e.g. 250ms, 1s).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "250ms")]
        interval: u64,
        /// Include running and recently completed tasks, not only suspended ones.
        #[arg(long)]
        all: bool,
        /// Read the DWARF from this file instead of the process's own executable.
        #[arg(long, value_name = "PATH")]
        binary: Option<std::path::PathBuf>,
        /// Show annotated frames only: do not decode unannotated chains from DWARF.
        #[arg(long)]
        no_decode: bool,
        /// Plan from the DWARF and neither read nor write the plan cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Start a bundled fixture program and dump it (or, with --watch, watch it).
    Demo {
        /// Open the demo in the live view instead of printing one dump.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        options: DumpOptions,
    },
}

#[derive(Args, Clone)]
struct DumpOptions {
    /// Print the versioned JSON document (see the README) instead of text (`--format json`).
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// text (for people), json (for tools), or folded: one line per distinct chain, root first,
    /// frames separated by `;`, then its weight, for flame graph tools.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Draw the chains as a flame graph into FILE (SVG) instead of printing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["output", "json", "format"])]
    svg: Option<std::path::PathBuf>,
    /// What a folded line or a flame graph box weighs: tasks (how many) or suspended (for how long
    /// they have been suspended, in microseconds).
    #[arg(long, value_enum, default_value = "tasks")]
    weight: WeightArg,
    /// Group identical chains and print each group once with its count.
    #[arg(long)]
    coalesce: bool,
    /// Include running and recently completed tasks, not only suspended ones.
    #[arg(long)]
    all: bool,
    /// Keep only chains where a frame name (or the root future type) contains SUBSTR.
    #[arg(long = "type", value_name = "SUBSTR")]
    type_substr: Option<String>,
    /// Keep only tasks in their state for at least DURATION (e.g. 500ms, 2s, 1m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    min_age: Option<u64>,
    /// Read the DWARF from this file instead of the process's own executable (it must have the same
    /// build-id; a binary without type info is looked up as a separate debug file).
    #[arg(long, value_name = "PATH")]
    binary: Option<std::path::PathBuf>,
    /// Show annotated frames only: do not decode unannotated chains from DWARF.
    #[arg(long)]
    no_decode: bool,
    /// Plan from the DWARF and neither read nor write the plan cache
    /// ($XDG_CACHE_HOME/asyncdump/plans, by build-id).
    #[arg(long)]
    no_cache: bool,
    /// Print source paths whole (text shows a dependency's from its crate's directory, the standard
    /// library's from `std/`; `--json` always has them whole).
    #[arg(long)]
    full_paths: bool,
    /// Write the JSON document to FILE (a snapshot file `dump --from` and `watch --from` read)
    /// instead of printing.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<std::path::PathBuf>,
    /// The longest to wait for each of the agent's answers, whole.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, default_value = "15s")]
    timeout: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Json,
    Folded,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum WeightArg {
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
fn parse_duration_ns(s: &str) -> Result<u64, String> {
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

/// Writes the dump of `target` to `out` as it renders.
fn dump(target: &Target, o: &DumpOptions, out: &mut dyn std::fmt::Write) -> Result<()> {
    let options = SessionOptions {
        binary: o.binary.clone(),
        decode: !o.no_decode,
        timeout: std::time::Duration::from_nanos(o.timeout),
        cache: !o.no_cache,
    };
    let mut session = Session::attach(target, &options)?;
    let dump = session.snapshot(o.all)?;
    show(dump, o, out)
}

/// Prints a snapshot file, or the last state of a recording, as `dump` prints a live process.
fn dump_from(path: &std::path::Path, o: &DumpOptions, out: &mut dyn std::fmt::Write) -> Result<()> {
    let dump = match file::open(path)? {
        file::Opened::Snapshot(dump) => *dump,
        file::Opened::Recording(mut replay) => replay.seek(usize::MAX),
    };
    show(dump, o, out)
}

/// Filters `dump` as asked, then prints it, or writes it to `-o FILE`.
fn show(dump: Dump, o: &DumpOptions, out: &mut dyn std::fmt::Write) -> Result<()> {
    let filter = Filter {
        all: o.all,
        type_substr: o.type_substr.clone(),
        min_age_ns: o.min_age.unwrap_or(0),
    };
    let dump = dump.filter(&filter);
    let style = view::text::Style {
        full_paths: o.full_paths,
    };
    if let Some(path) = &o.svg {
        return flame_graph(&dump, path, o.weight.into(), style);
    }
    if o.format == Format::Folded {
        view::folded::write(out, &dump, o.weight.into(), style);
        return Ok(());
    }
    let groups = o.coalesce.then(|| coalesce(&dump.tasks));
    if let Some(path) = &o.output {
        let doc = view::json::render(&dump, groups.as_deref());
        file::write_atomically(path, doc.as_bytes())?;
        eprintln!(
            "asyncdump: wrote {} tasks of pid {} to {}",
            dump.tasks.len(),
            dump.process.pid,
            path.display()
        );
    } else if o.json || o.format == Format::Json {
        view::json::write(out, &dump, groups.as_deref())?;
    } else {
        view::text::write(out, &dump, groups.as_deref(), style);
    }
    // The process ends next, and the kernel takes its memory back at once: freeing a dump of
    // 100,000 tasks allocation by allocation would be work for nothing.
    std::mem::forget((dump, groups));
    Ok(())
}

/// Writes `dump`'s flame graph to `path`, whole or not at all.
fn flame_graph(
    dump: &Dump,
    path: &std::path::Path,
    weight: view::folded::Weight,
    style: view::text::Style,
) -> Result<()> {
    let mut svg = Vec::new();
    view::folded::svg(&mut svg, dump, weight, style)?;
    file::write_atomically(path, &svg)?;
    eprintln!(
        "asyncdump: drew the chains of {} tasks of pid {} to {}",
        dump.tasks.len(),
        dump.process.pid,
        path.display()
    );
    Ok(())
}

/// What `watch` was asked, as parsed.
struct WatchArgs {
    interval_ns: u64,
    all: bool,
    binary: Option<std::path::PathBuf>,
    no_decode: bool,
    no_cache: bool,
    record: Option<std::path::PathBuf>,
    stuck_after_ns: u64,
    timeout_ns: u64,
}

fn watch(target: &Target, a: WatchArgs) -> Result<()> {
    let options = asyncdump::watch::WatchOptions {
        session: SessionOptions {
            binary: a.binary,
            decode: !a.no_decode,
            timeout: std::time::Duration::from_nanos(a.timeout_ns),
            cache: !a.no_cache,
        },
        interval: std::time::Duration::from_nanos(a.interval_ns.max(10_000_000)),
        all: a.all,
        record: a.record,
        stuck_after: std::time::Duration::from_nanos(a.stuck_after_ns),
    };
    asyncdump::watch::run(target, &options).map_err(|e| match e {
        asyncdump::watch::WatchError::Target(t) => anyhow::Error::new(t),
        other => anyhow::Error::new(other),
    })
}

/// Runs one command, writing what it prints to `out`.
fn run(cli: Cli, out: &mut dyn std::fmt::Write) -> Result<()> {
    match cli.command {
        Command::Ps { json, timeout } => {
            let listing = ps::scan(std::time::Duration::from_nanos(timeout));
            if json {
                let doc = serde_json::to_string_pretty(&listing).expect("listing serialises");
                writeln!(out, "{doc}")?;
            } else {
                out.write_str(&ps::render(&listing))?;
            }
        }
        Command::Dump {
            from: Some(path),
            options,
            ..
        } => dump_from(&path, &options, out)?,
        Command::Dump {
            target: Some(target),
            options,
            ..
        } => dump(&Target::parse(&target), &options, out)?,
        Command::Dump { .. } => unreachable!("clap requires a target or --from"),
        Command::Index {
            binary,
            pid,
            json,
            full_paths,
        } => {
            let style = view::text::Style { full_paths };
            out.write_str(&index(binary, pid, json, style)?)?
        }
        Command::Watch {
            from: Some(path),
            stuck_after,
            ..
        } => asyncdump::watch::run_file(&path, std::time::Duration::from_nanos(stuck_after))?,
        Command::Watch {
            target: Some(target),
            interval,
            all,
            binary,
            no_decode,
            no_cache,
            record,
            stuck_after,
            timeout,
            ..
        } => watch(
            &Target::parse(&target),
            WatchArgs {
                interval_ns: interval,
                all,
                binary,
                no_decode,
                no_cache,
                record,
                stuck_after_ns: stuck_after,
                timeout_ns: timeout,
            },
        )?,
        Command::Watch { .. } => unreachable!("clap requires a target or --from"),
        Command::Demo {
            watch: true,
            options,
        } => {
            // As long as someone may watch it; it is killed when the view quits.
            let (fixture, pid) = demo::start(std::time::Duration::from_secs(3600))?;
            watch(
                &Target::Pid(pid),
                WatchArgs {
                    interval_ns: 250_000_000,
                    all: options.all,
                    binary: None,
                    no_decode: options.no_decode,
                    no_cache: options.no_cache,
                    record: None,
                    stuck_after_ns: asyncdump::watch::state::STUCK_AFTER.as_nanos() as u64,
                    timeout_ns: options.timeout,
                },
            )?;
            drop(fixture);
        }
        Command::Demo { options, .. } => {
            let (fixture, pid) = demo::start(std::time::Duration::from_secs(120))?;
            if !options.json {
                write!(
                    out,
                    "asyncdump demo: started the bundled fixture `demo_service` (pid {pid}); its dump follows.\n\
                     Try it yourself: `asyncdump dump <PID>` on any program that calls asyncdump_agent::init().\n\n"
                )?;
            }
            dump(&Target::Pid(pid), &options, out)?;
            drop(fixture);
        }
    }
    Ok(())
}

/// A live task and the root future type its `root_anchor` resolves to.
#[derive(serde::Serialize)]
struct ResolvedTask {
    id: u64,
    name: Option<String>,
    root_anchor: u64,
    root_die: Option<u64>,
    root_type: Option<String>,
}

fn index(
    binary: Option<std::path::PathBuf>,
    pid: Option<u32>,
    json: bool,
    style: view::text::Style,
) -> Result<String> {
    let binary = match (binary, pid) {
        (Some(b), _) => b,
        (None, Some(pid)) => std::path::PathBuf::from(format!("/proc/{pid}/exe")),
        (None, None) => unreachable!("clap requires one of them"),
    };
    let start = std::time::Instant::now();
    let debug = dwarf::Debug::load(&binary)?;
    let index = debug.index();
    let took = start.elapsed();
    let tasks = match pid {
        None => Vec::new(),
        Some(pid) => {
            let bias = dwarf::load_bias(pid, debug.vaddr_at_zero)?;
            let mut client = connect(&Target::Pid(pid), asyncdump::client::DEFAULT_TIMEOUT)?;
            let (snap, _) = client.snapshot(false, None)?;
            snap.tasks
                .iter()
                .map(|t| {
                    let root = index.root_of(t.root_anchor, bias);
                    ResolvedTask {
                        id: t.id,
                        name: t.name.clone(),
                        root_anchor: t.root_anchor,
                        root_die: root.map(|r| r.root_die),
                        root_type: root.map(|r| r.root_type.clone()),
                    }
                })
                .collect()
        }
    };
    if json {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            #[serde(flatten)]
            index: &'a dwarf::Index,
            tasks: &'a [ResolvedTask],
        }
        return Ok(serde_json::to_string(&Doc {
            index: &index,
            tasks: &tasks,
        })
        .expect("serialises")
            + "\n");
    }
    let mut out = String::new();
    for t in &tasks {
        let name = t
            .name
            .as_deref()
            .map(|n| format!(" \"{n}\""))
            .unwrap_or_default();
        let root = t
            .root_type
            .as_deref()
            .unwrap_or("not found in this binary's DWARF");
        out.push_str(&format!("task {}{name}: root future {root}\n", t.id));
    }
    if !tasks.is_empty() {
        out.push('\n');
    }
    out.push_str(&render_index(&index, took, style));
    Ok(out)
}

fn render_index(
    index: &dwarf::Index,
    took: std::time::Duration,
    style: view::text::Style,
) -> String {
    use std::fmt::Write;
    // The same type is described again in each codegen unit: print each distinct one once.
    let mut seen = std::collections::HashSet::new();
    let mut body = String::new();
    for m in &index.machines {
        let mut text = format!(
            "{} ({} bytes, state byte at {})\n",
            m.name, m.size, m.state_offset
        );
        for s in m.states.iter().filter(|s| s.name.starts_with("Suspend")) {
            let awaits = s.awaitee.as_ref().map_or("?".to_owned(), |a| {
                format!("{} at +{}", a.type_name, a.offset)
            });
            let file = style.path(&s.file);
            let _ = writeln!(text, "  {} {file}:{} awaits {awaits}", s.name, s.line);
        }
        if seen.insert(text.clone()) {
            body.push_str(&text);
        }
    }
    format!(
        "{} async state machines ({} distinct) in {} bytes of .debug_info, indexed in {}\n{body}",
        index.machines.len(),
        seen.len(),
        index.debug_info_bytes,
        view::duration(took.as_nanos() as u64)
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Decoding and printing a large snapshot is CPU work; on a busy machine the target must win, not us.
    // SAFETY: setpriority on our own process (who = 0) passes no memory; failure leaves the priority as is.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
    // Written as it renders: a dump of 100,000 tasks need not be held whole before the first line.
    let mut out = view::IoWriter::new(std::io::BufWriter::new(std::io::stdout().lock()));
    let ran = run(cli, &mut out);
    // A write that failed shows in `run` as a bare formatting error: the I/O error behind it says more.
    let result = match (ran, out.finish()) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) => Err(e),
        (_, Err(io)) => Err(io.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS; // `asyncdump dump 1 | head`: the reader left; nothing to report
            }
            eprintln!("asyncdump: {e}");
            ExitCode::from(if e.is::<TargetError>() {
                EXIT_TARGET
            } else if e
                .downcast_ref::<file::FileError>()
                .is_some_and(|f| !matches!(f, file::FileError::Write { .. }))
            {
                EXIT_FILE
            } else {
                EXIT_LOCAL
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ns;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert!(parse_duration_ns("5").unwrap_err().contains("needs a unit"));
        assert!(parse_duration_ns("5 parsecs").is_err());
    }
}
