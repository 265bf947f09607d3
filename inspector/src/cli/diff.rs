//! `diff A B`: two dumps of one process compared, each a snapshot file or a recording's state.

use std::fmt::Write;
use std::path::Path;

use asyncdump::model::Dump;
use asyncdump::model::diff::diff;
use asyncdump::{Error, file, view};

use super::written;

/// Compares the dumps `a` and `b` name and prints what changed.
pub fn run((a, b): (&str, &str), json: bool, out: &mut dyn Write) -> Result<(), Error> {
    let (first, second) = (load(a)?, load(b)?);
    if first.process.pid != second.process.pid {
        return Err(Error::Local(format!(
            "{a} is of pid {} and {b} of pid {}: diff compares two dumps of one process",
            first.process.pid, second.process.pid
        )));
    }
    let d = diff(&first, &second);
    if json {
        let doc = serde_json::to_string_pretty(&d).map_err(|_| written())?;
        return writeln!(out, "{doc}").map_err(|_| written());
    }
    view::diff::write(out, &d, (a, b));
    Ok(())
}

/// The dump `name` names: a snapshot file, a recording's last state, or with `@N` its state after
/// update N (where the whole name is no file).
fn load(name: &str) -> Result<Dump, Error> {
    let (path, update) = match name.rsplit_once('@') {
        Some((path, n)) if !Path::new(name).exists() => match n.parse::<usize>() {
            Ok(n) => (path, Some(n)),
            Err(_) => (name, None),
        },
        _ => (name, None),
    };
    match (file::open(Path::new(path))?, update) {
        (file::Opened::Snapshot(dump), None) => Ok(*dump),
        (file::Opened::Snapshot(_), Some(_)) => Err(Error::Local(format!(
            "{path} is a snapshot file, one moment: `@N` names a recording's update"
        ))),
        (file::Opened::Recording(mut replay), at) => Ok(replay.seek(at.unwrap_or(usize::MAX))),
    }
}
