//! `--json`: the model serialised as is (see `model`, and the user guide in docs/ for the documented shape).

use serde::Serialize;

use crate::model::{Dump, Group, Process, SnapshotInfo};

/// With `--coalesce`, `groups` replaces `tasks`.
#[derive(Serialize)]
struct Coalesced<'a> {
    format: &'a str,
    version: u32,
    process: &'a Process,
    snapshot: &'a SnapshotInfo,
    deadlocks: &'a [Vec<u64>],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    waits: &'a [crate::model::waits::WaitEdge],
    groups: Vec<GroupOut<'a>>,
}

/// A group as written: the model's, and where its tasks' chains read differently, what varies
/// at each frame, merged as the text shows it.
#[derive(Serialize)]
struct GroupOut<'a> {
    #[serde(flatten)]
    group: &'a Group,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    varies: Vec<Varies>,
}

/// One frame whose lines vary inside its group: where it is (the index of each frame from the
/// roots down, as in `frames`) and its lines, merged.
#[derive(Serialize)]
struct Varies {
    frame: Vec<usize>,
    #[serde(flatten)]
    parts: super::spread::Parts,
}

/// The frames of `g` whose lines its variants read differently. Iterative: chains may be deep;
/// each frame's counterparts in the variants go down with it.
fn varies(g: &Group) -> Vec<Varies> {
    type Those<'a> = Vec<(&'a crate::model::FrameNode, usize)>;
    let mut out = Vec::new();
    if g.variants.len() < 2 {
        return out;
    }
    let root = |i: usize| -> Those<'_> { g.variants.iter().map(|(f, k)| (&f[i], *k)).collect() };
    let mut stack: Vec<(Vec<usize>, Those<'_>)> = (0..g.frames.len())
        .rev()
        .map(|i| (vec![i], root(i)))
        .collect();
    while let Some((path, those)) = stack.pop() {
        let parts = super::spread::parts(&those);
        for i in (0..those[0].0.children.len()).rev() {
            let mut child = path.clone();
            child.push(i);
            let down = those.iter().map(|&(n, k)| (&n.children[i], k)).collect();
            stack.push((child, down));
        }
        if parts.differs {
            out.push(Varies { frame: path, parts });
        }
    }
    out
}

/// The document, whole, with its closing line break.
pub fn render(dump: &Dump, groups: Option<&[Group]>) -> String {
    let mut out = String::new();
    write(&mut out, dump, groups).expect("a String takes any text");
    out
}

/// Writes the document to `out` as it is serialised, never holding it whole: a dump of 100,000 tasks
/// is 100 MB of JSON.
pub fn write<W: std::fmt::Write + ?Sized>(
    out: &mut W,
    dump: &Dump,
    groups: Option<&[Group]>,
) -> std::fmt::Result {
    // Compact: a dump of 100,000 tasks is twice as big, and twice as slow to write, when pretty-printed;
    // pipe it through `jq` to read it.
    let mut to = Text::new(out);
    let written = match groups {
        None => serde_json::to_writer(&mut to, dump),
        Some(groups) => serde_json::to_writer(
            &mut to,
            &Coalesced {
                format: &dump.format,
                version: dump.version,
                process: &dump.process,
                snapshot: &dump.snapshot,
                deadlocks: &dump.deadlocks,
                waits: &dump.waits,
                groups: (groups.iter())
                    .map(|group| GroupOut {
                        group,
                        varies: varies(group),
                    })
                    .collect(),
            },
        ),
    };
    // Only a failed write can fail here: the model always serialises.
    written.map_err(|_| std::fmt::Error)?;
    to.pass_on(true).map_err(|_| std::fmt::Error)?;
    to.out.write_char('\n')
}

/// How much JSON is gathered before it is passed on: `serde_json` writes a few bytes at a time.
const CHUNK: usize = 64 * 1024;

/// `serde_json`'s bytes passed on to a `fmt::Write` as text, a chunk at a time. They are UTF-8; a
/// character split at a chunk's end waits for the next.
struct Text<'a, W: std::fmt::Write + ?Sized> {
    out: &'a mut W,
    pending: Vec<u8>,
}

impl<'a, W: std::fmt::Write + ?Sized> Text<'a, W> {
    fn new(out: &'a mut W) -> Self {
        Text {
            out,
            pending: Vec::with_capacity(CHUNK),
        }
    }

    /// Passes on the whole characters gathered; with `last`, all of it must be whole.
    fn pass_on(&mut self, last: bool) -> std::io::Result<()> {
        let invalid = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8");
        // Checked once; only a chunk that ends inside a character has its whole part checked again.
        let (text, valid) = match std::str::from_utf8(&self.pending) {
            Ok(text) => (text, self.pending.len()),
            Err(e) if e.error_len().is_none() && !last => {
                let valid = e.valid_up_to();
                let text = std::str::from_utf8(&self.pending[..valid]).map_err(|_| invalid())?;
                (text, valid)
            }
            Err(_) => return Err(invalid()),
        };
        self.out
            .write_str(text)
            .map_err(|_| std::io::Error::other("the output failed"))?;
        self.pending.drain(..valid);
        Ok(())
    }
}

impl<W: std::fmt::Write + ?Sized> std::io::Write for Text<'_, W> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    // What `serde_json` calls, a few bytes at a time: kept as cheap as a `Vec`'s.
    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= CHUNK {
            self.pass_on(false)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_character_split_between_writes_arrives_whole() {
        let mut out = String::new();
        let mut to = Text::new(&mut out);
        // A chunk's worth of text that ends inside a character.
        let text = format!("{}·→b", "a".repeat(CHUNK - 1));
        for b in text.as_bytes() {
            to.write_all(std::slice::from_ref(b)).unwrap();
        }
        to.pass_on(true).unwrap();
        assert!(to.pending.is_empty());
        assert_eq!(out, text);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let mut out = String::new();
        let mut to = Text::new(&mut out);
        to.write_all(&[b'a', 0xff, b'b']).unwrap();
        assert!(to.pass_on(true).is_err());
    }
}
