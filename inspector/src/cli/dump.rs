//! `dump`: one snapshot of a process (or a snapshot file), filtered, then printed as text, JSON or
//! folded stacks, written to `-o FILE`, or drawn as a flame graph.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use asyncdump::attach::target::Target;
use asyncdump::model::{Dump, Filter, coalesce, progress};
use asyncdump::session::{Session, SessionOptions};
use asyncdump::{Error, file, view};

use super::args::{DumpOptions, Format, GroupBy};
use super::written;

/// Writes the dump of `target` to `out` as it renders; with `samples` above one, the first of
/// that many snapshots `interval` apart, each task marked by what the later ones saw of it.
pub fn live(
    target: &Target,
    o: &DumpOptions,
    (samples, interval): (u32, Duration),
    out: &mut dyn Write,
) -> Result<(), Error> {
    // One dump: --timeout bounds every answer together (each sample's).
    let options = SessionOptions {
        whole: true,
        reading: o.reading(),
        ..o.attach.session()
    };
    let mut session = Session::attach(target, &options)?;
    let mut dump = session.snapshot(o.attach.all)?;
    if samples > 1 {
        let (later, ended) = sample(&mut session, &dump, (samples, interval), o.attach.all);
        progress::mark(&mut dump, &later, samples, ended);
    }
    dump.judge();
    show(dump, o, out)
}

/// The samples after `first`, each with its time after it (on the snapshots' own clock): until
/// `samples` in all, or one fails (the process exited), which ends sampling with what was seen
/// and says why.
fn sample(
    session: &mut Session,
    first: &Dump,
    (samples, interval): (u32, Duration),
    all: bool,
) -> (Vec<(u64, progress::Seen)>, Option<String>) {
    let mut later = Vec::with_capacity(samples as usize - 1);
    for _ in 1..samples {
        std::thread::sleep(interval);
        match session.snapshot(all) {
            Ok(d) => {
                let after = d.snapshot.now_ns.saturating_sub(first.snapshot.now_ns);
                later.push((after, progress::seen(&d)));
            }
            Err(e) => return (later, Some(e.to_string())),
        }
    }
    (later, None)
}

/// Prints a snapshot file, or the last state of a recording, as `dump` prints a live process.
pub fn from_file(path: &Path, o: &DumpOptions, out: &mut dyn Write) -> Result<(), Error> {
    let dump = match file::open(path)? {
        file::Opened::Snapshot(dump) => *dump,
        file::Opened::Recording(mut replay) => replay.seek(usize::MAX),
    };
    // A document keeps the verdicts it was written with: what they rest on (tokio's reference
    // counts) is not in it. One written before there were verdicts gets them from what it has.
    let mut dump = dump;
    if dump.tasks.iter().all(|t| t.verdict.is_none()) {
        dump.judge();
    }
    show(dump, o, out)
}

/// Prints a core file as `dump` prints a live process read without its agent.
pub fn from_core(path: &Path, o: &DumpOptions, out: &mut dyn Write) -> Result<(), Error> {
    let options = asyncdump::session::core::CoreOptions {
        exe: o.attach.binary.clone(),
        debug_file: o.attach.debug_file.clone(),
        cache: !o.attach.no_cache,
        reading: o.reading(),
    };
    let mut dump = asyncdump::session::core::dump(path, &options)?;
    dump.judge();
    show(dump, o, out)
}

/// Filters `dump` as asked, then prints it, or writes it to `-o FILE`.
fn show(dump: Dump, o: &DumpOptions, out: &mut dyn Write) -> Result<(), Error> {
    let filter = Filter {
        all: o.attach.all,
        type_substr: o.type_substr.clone(),
        min_age_ns: o.min_age.unwrap_or(0),
    };
    let dump = dump.filter(&filter);
    let style = view::text::Style {
        full_paths: o.full_paths,
        threads: o.threads,
        detail: o.values,
        width: terminal_width(o),
    };
    if let Some(path) = &o.svg {
        return flame_graph(&dump, path, o.weight.into(), style);
    }
    if o.stats {
        return stats(&dump, o, out);
    }
    if o.format == Format::Folded {
        view::folded::write(out, &dump, o.weight.into(), style);
        return Ok(());
    }
    let mut dump = dump;
    if o.group == Some(GroupBy::Waker) {
        dump.waker_groups = asyncdump::model::wakers::groups(&dump);
        if !(o.json || o.format == Format::Json || o.output.is_some()) {
            view::text::write_waker_groups(out, &dump);
            return Ok(());
        }
    }
    let groups = o.coalesce.then(|| coalesce(&dump.tasks));
    let to_file = o.output.as_deref().filter(|p| *p != Path::new("-"));
    if let Some(path) = to_file {
        let doc = view::json::render(&dump, groups.as_deref());
        file::write_atomically(path, doc.as_bytes(), file::SNAPSHOT_MODE)?;
        eprintln!(
            "asyncdump: wrote {} of pid {} to {}",
            tasks(&dump.tasks),
            dump.process.pid,
            path.display()
        );
    } else if o.json || o.format == Format::Json || o.output.is_some() {
        view::json::write(out, &dump, groups.as_deref()).map_err(|_| written())?;
    } else {
        view::text::write(out, &dump, groups.as_deref(), style);
    }
    // The process ends next, and the kernel takes its memory back at once: freeing a dump of
    // 100,000 tasks allocation by allocation would be work for nothing.
    std::mem::forget((dump, groups));
    Ok(())
}

/// `--stats`: the overview, as text, JSON, or a JSON file.
fn stats(dump: &Dump, o: &DumpOptions, out: &mut dyn Write) -> Result<(), Error> {
    let st = asyncdump::model::stats::of_dump(dump);
    let to_file = o.output.as_deref().filter(|p| *p != Path::new("-"));
    if let Some(path) = to_file {
        file::write_atomically(
            path,
            view::stats::json(dump, &st).as_bytes(),
            file::SNAPSHOT_MODE,
        )?;
        eprintln!(
            "asyncdump: wrote the stats of pid {} to {}",
            dump.process.pid,
            path.display()
        );
    } else if o.json || o.format == Format::Json || o.output.is_some() {
        out.write_str(&view::stats::json(dump, &st))
            .map_err(|_| written())?;
    } else {
        view::stats::write(out, dump, &st);
    }
    Ok(())
}

/// Writes `dump`'s flame graph to `path`, whole or not at all.
fn flame_graph(
    dump: &Dump,
    path: &Path,
    weight: view::folded::Weight,
    style: view::text::Style,
) -> Result<(), Error> {
    let mut svg = Vec::new();
    view::folded::svg(&mut svg, dump, weight, style)?;
    // A picture to share: a new one is as readable as the umask lets files be.
    file::write_atomically(path, &svg, 0o666)?;
    eprintln!(
        "asyncdump: drew the chains of {} of pid {} to {}",
        tasks(&dump.tasks),
        dump.process.pid,
        path.display()
    );
    Ok(())
}

/// `1 task`, `2 tasks`.
/// `3 tasks`, and the threads' own futures (their `block_on`'s) among `tasks` after them.
fn tasks(tasks: &[asyncdump::model::TaskView]) -> String {
    let threads = tasks.iter().filter(|t| t.block_on.is_some()).count();
    let counted = match tasks.len() - threads {
        1 => "1 task".to_owned(),
        n => format!("{n} tasks"),
    };
    match threads {
        0 => counted,
        1 => format!("{counted} and 1 thread's own future"),
        n => format!("{counted} and {n} threads' own futures"),
    }
}

/// The width of the terminal the text goes to, if it goes to one: a file or a pipe gets every
/// line as long as it is.
fn terminal_width(o: &DumpOptions) -> Option<usize> {
    let to_stdout = o.output.as_deref().is_none_or(|p| p == Path::new("-"));
    let text = !o.json && matches!(o.format, Format::Text);
    if !(to_stdout && text && std::io::IsTerminal::is_terminal(&std::io::stdout())) {
        return None;
    }
    crossterm::terminal::size()
        .ok()
        .map(|(w, _)| usize::from(w))
        .filter(|&w| w > 0)
}
