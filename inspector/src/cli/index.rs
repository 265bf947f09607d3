//! `index`: the async state machines of a binary's DWARF with their await points, and, with `--pid`,
//! the root future type each live task of that process resolves to.

use std::path::PathBuf;

use asyncdump::attach::target::Target;
use asyncdump::session::connect;
use asyncdump::{Error, dwarf, view};

/// A live task and the root future type its `root_anchor` resolves to.
#[derive(serde::Serialize)]
struct ResolvedTask {
    id: u64,
    name: Option<String>,
    root_anchor: u64,
    root_die: Option<u64>,
    root_type: Option<String>,
}

/// `index`: the state machines of a binary's DWARF, and with `pid` which root type each live task has.
pub fn index(
    binary: Option<PathBuf>,
    pid: Option<u32>,
    json: bool,
    style: view::text::Style,
) -> Result<String, Error> {
    let binary = match (binary, pid) {
        (Some(b), _) => b,
        (None, Some(pid)) => asyncdump::attach::procfs::exe(pid),
        (None, None) => return Err(Error::Local("index needs a binary or --pid".into())),
    };
    let start = std::time::Instant::now();
    let debug = dwarf::Debug::load(&binary).map_err(|e| match e.is_running_image_refused() {
        true => Error::Local(format!(
            "{e}; give a readable copy of the program as BINARY"
        )),
        false => e.into(),
    })?;
    let index = debug.index();
    let took = start.elapsed();
    let tasks = match pid {
        None => Vec::new(),
        Some(pid) => resolve(&index, pid, debug.vaddr_at_zero)?,
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
    Ok(tasks_text(&tasks) + &render_index(&index, took, style))
}

/// Each live task of `pid` with the root future type its anchor resolves to in `index`.
fn resolve(
    index: &dwarf::Index,
    pid: u32,
    vaddr_at_zero: Option<u64>,
) -> Result<Vec<ResolvedTask>, Error> {
    let bias = dwarf::load_bias(pid, vaddr_at_zero)?;
    let patience =
        asyncdump::attach::client::Patience::whole(asyncdump::attach::client::DEFAULT_TIMEOUT);
    let mut client = connect(&Target::Pid(pid), patience)?;
    let (snap, _) = client.snapshot(false, None)?;
    let resolved = |t: &asyncdump_protocol::Task| {
        let root = index.root_of(t.root_anchor, bias);
        ResolvedTask {
            id: t.id,
            name: t.name.clone(),
            root_anchor: t.root_anchor,
            root_die: root.map(|r| r.root_die),
            root_type: root.map(|r| r.root_type.clone()),
        }
    };
    Ok(snap.tasks.iter().map(resolved).collect())
}

/// `task 3 "name": root future TYPE`, one line per resolved task.
fn tasks_text(tasks: &[ResolvedTask]) -> String {
    let mut out = String::new();
    for t in tasks {
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
    out
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
            view::no_breaks(&m.name),
            m.size,
            m.state_offset
        );
        for s in m.states.iter().filter(|s| s.name.starts_with("Suspend")) {
            let awaits = s.awaitee.as_ref().map_or("?".to_owned(), |a| {
                format!("{} at +{}", view::no_breaks(&a.type_name), a.offset)
            });
            let file = style.path(&s.file);
            let name = view::no_breaks(&s.name);
            let _ = writeln!(text, "  {name} {file}:{} awaits {awaits}", s.line);
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
