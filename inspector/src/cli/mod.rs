//! The command line over the inspector library: one function per subcommand, each writing what it
//! prints to `out` and failing with the library's [`Error`], whose exit status `main` uses.

pub mod args;
mod demo;
mod diff;
mod dump;
mod index;

use std::fmt::Write;
use std::time::Duration;

use asyncdump::attach::ps;
use asyncdump::attach::target::Target;
use asyncdump::session::SessionOptions;
use asyncdump::watch::WatchOptions as Watching;
use asyncdump::{Error, view};

use args::{Cli, Command, DumpOptions, WatchOptions};

/// Runs one command, writing what it prints to `out`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<(), Error> {
    match cli.command {
        Command::Ps { json, wait } => list(json, Duration::from_nanos(wait.timeout), out),
        Command::Dump {
            from: Some(path),
            options,
            ..
        } => dump::from_file(&path, &options, out),
        Command::Dump {
            core: Some(path),
            options,
            ..
        } => dump::from_core(&path, &options, out),
        Command::Dump {
            target,
            options,
            samples,
            interval,
            ..
        } => {
            let target = target.ok_or_else(|| usage("a target or --from"))?;
            let sampled = (samples, Duration::from_nanos(interval));
            dump::live(&Target::parse(&target), &options, sampled, out)
        }
        Command::Index {
            binary,
            pid,
            json,
            full_paths,
        } => {
            let style = view::text::Style {
                full_paths,
                threads: false,
                detail: false,
                width: None,
            };
            write_out(out, &index::index(binary, pid, json, style)?)
        }
        Command::Watch {
            from: Some(path),
            options,
            ..
        } => {
            let stuck_after = Duration::from_nanos(options.stuck_after);
            Ok(asyncdump::watch::run_file(&path, stuck_after)?)
        }
        Command::Watch {
            target, options, ..
        } => {
            let target = target.ok_or_else(|| usage("a target or --from"))?;
            watch(&Target::parse(&target), &options)
        }
        Command::Diff { a, b, json } => diff::run((&a, &b), json, out),
        Command::Demo { watch, options } => demo(watch, &options, out),
        Command::Completions { shell } => {
            let mut cli = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cli, "asyncdump", &mut script);
            write_out(out, &String::from_utf8_lossy(&script))
        }
        Command::Man { out_dir: None } => {
            let page = man_page(<Cli as clap::CommandFactory>::command())?;
            write_out(out, &String::from_utf8_lossy(&page))
        }
        Command::Man { out_dir: Some(dir) } => man_pages(&dir, out),
    }
}

/// `ps`: the agents of this user and the tokio processes without one, as a table or JSON.
fn list(json: bool, timeout: Duration, out: &mut dyn Write) -> Result<(), Error> {
    let mut listing = ps::scan(timeout);
    let with_agent: Vec<u32> = listing.agents.iter().map(|a| a.pid).collect();
    listing.without_agent = asyncdump::agentless::processes::tokio_without_agent(&with_agent);
    if json {
        let doc =
            serde_json::to_string_pretty(&listing).map_err(|e| Error::Local(e.to_string()))?;
        write_out(out, &format!("{doc}\n"))
    } else {
        write_out(out, &ps::render(&listing))
    }
}

/// `watch`: the live view of `target`, until the user quits.
fn watch(target: &Target, o: &WatchOptions) -> Result<(), Error> {
    let options = Watching {
        session: SessionOptions {
            reading: o.reading(),
            ..o.attach.session()
        },
        interval: Duration::from_nanos(o.interval.max(10_000_000)),
        all: o.attach.all,
        record: o.record.clone(),
        stuck_after: Duration::from_nanos(o.stuck_after),
    };
    Ok(asyncdump::watch::run(target, &options)?)
}

/// `demo`: the bundled fixture, dumped once or watched.
fn demo(watching: bool, options: &DumpOptions, out: &mut dyn Write) -> Result<(), Error> {
    if watching {
        // As long as someone may watch it; it is killed when the view quits.
        let (fixture, pid) = demo::start(Duration::from_secs(3600))?;
        let stuck_after = asyncdump::watch::state::STUCK_AFTER.as_nanos() as u64;
        let o = WatchOptions {
            attach: options.attach.clone(),
            record: None,
            stuck_after,
            interval: 250_000_000,
            no_targets: options.no_targets,
            values: options.values,
            fields: options.fields.clone(),
        };
        watch(&Target::Pid(pid), &o)?;
        drop(fixture);
        return Ok(());
    }
    let (fixture, pid) = demo::start(Duration::from_secs(120))?;
    if !options.json {
        write_out(
            out,
            &format!(
                "asyncdump demo: started the bundled fixture `demo_service` (pid {pid}); its dump follows.\n\
                 Try it yourself: `asyncdump dump <PID>` on any program that calls asyncdump_agent::init().\n\n"
            ),
        )?;
    }
    dump::live(&Target::Pid(pid), options, (1, Duration::ZERO), out)?;
    drop(fixture);
    Ok(())
}

/// Writes `text` to `out`; a failed write is an I/O error (the writer keeps which).
/// One manual page, rendered (roff).
fn man_page(cmd: clap::Command) -> Result<Vec<u8>, Error> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    Ok(page)
}

/// Writes `asyncdump.1` and one `asyncdump-SUB.1` per subcommand into `dir`, each whole, and says
/// which.
fn man_pages(dir: &std::path::Path, out: &mut dyn Write) -> Result<(), Error> {
    use asyncdump::output::{Existing, write_whole};
    let cli = <Cli as clap::CommandFactory>::command();
    let subs = cli.get_subcommands().cloned().collect::<Vec<_>>();
    let mut pages = vec![("asyncdump".to_owned(), cli)];
    for sub in subs {
        let name = format!("asyncdump-{}", sub.get_name());
        pages.push((name.clone(), sub.name(name).version(args::VERSION)));
    }
    for (name, cmd) in pages {
        let path = dir.join(format!("{name}.1"));
        write_whole(&path, &man_page(cmd)?, 0o644, Existing::Replace)
            .map_err(|e| Error::Local(format!("cannot write {}: {e}", path.display())))?;
        write_out(out, &format!("{}\n", path.display()))?;
    }
    Ok(())
}

fn write_out(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    out.write_str(text).map_err(|_| written())
}

/// A write to standard output that failed; `main` replaces it with the I/O error behind it.
pub fn written() -> Error {
    Error::Io(std::io::Error::other("cannot write the output"))
}

fn usage(what: &str) -> Error {
    Error::Local(format!("the command needs {what}"))
}
