//! Rendering a [`crate::model::Dump`]: [`text`] (dumpasync-style, for people) and [`json`] (for tools).

mod deadlocks;
pub mod diff;
pub mod folded;
pub mod json;
mod labels;
mod spread;
pub mod stats;
pub mod text;
mod threads;
pub mod values;
mod verdicts;

/// How text is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// Source paths as DWARF has them, instead of from the crate's directory (see [`crate::names::short_path`]).
    pub full_paths: bool,
    /// A section listing every thread (`--threads`).
    pub threads: bool,
    /// The header's detail too (`-v`, `--stats`): what the census skipped, and why.
    pub detail: bool,
    /// The terminal's width, where the text goes to one: a local's line is cut to it.
    pub width: Option<usize>,
}

impl Style {
    /// `file` as printed: shortened unless [`Style::full_paths`], its line breaks escaped.
    pub fn path<'a>(&self, file: &'a str) -> std::borrow::Cow<'a, str> {
        no_breaks(if self.full_paths {
            file
        } else {
            crate::names::short_path(file)
        })
    }
}

/// Text renderers write to any `fmt::Write`; this one passes it on to an `io::Write` (standard output,
/// a file) as it goes, instead of building the whole text first. The first I/O error is kept for
/// [`IoWriter::finish`], and later writes fail at once.
pub struct IoWriter<W: std::io::Write> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> IoWriter<W> {
    pub fn new(inner: W) -> Self {
        IoWriter { inner, error: None }
    }

    /// Flushes, and returns the first error any write met.
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.error.take() {
            Some(e) => Err(e),
            None => self.inner.flush(),
        }
    }
}

impl<W: std::io::Write> std::fmt::Write for IoWriter<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.inner.write_all(printable(s).as_bytes()).map_err(|e| {
            self.error = Some(e);
            std::fmt::Error
        })
    }
}

/// `s` safe to print on a terminal: every control character but the line break written as its
/// escape (`\u{1b}`), so that a task name or a file from the target cannot move the cursor, retitle
/// the window or hide a line. Borrowed when there is nothing to escape.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n';
    if !has_control(s.as_bytes()) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` with its line breaks escaped (`\n`): for one field from the target inside a text whose own
/// lines stay lines (a task or frame name in a dump), which could otherwise forge a line of its own.
/// The other control characters are left to [`printable`], which the output passes through.
/// Borrowed, after one fast scan, when there is none.
pub fn no_breaks(s: &str) -> std::borrow::Cow<'_, str> {
    // A fold without early exit, which vectorises: names are short, and `memchr`'s set-up cost more
    // than the scan at 100,000 tasks.
    if !s
        .as_bytes()
        .iter()
        .fold(false, |found, &b| found | (b == b'\n'))
    {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.replace('\n', "\\n"))
}

/// `s` as one line safe to print on a terminal: like [`printable`], with line breaks escaped too
/// (`\n`). For what must stay one line whatever it holds, such as an error whose text came from the
/// target: a line break there would forge a line of its own.
pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\n') {
        return printable(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether UTF-8 `b` holds a control character other than the line break: C0 (below 0x20), DEL, or
/// C1 (U+0080 to U+009F, `C2 80` to `C2 9F`). A whole-slice fold with no early exit, so that it
/// vectorises: every byte of a dump's text passes through here (70 MB for 100,000 tasks).
fn has_control(b: &[u8]) -> bool {
    let c0 = b.iter().fold(0u8, |odd, &x| {
        odd | u8::from(x < 0x20 && x != b'\n') | u8::from(x == 0x7f)
    });
    let c1 = b.iter().zip(b.iter().skip(1)).fold(0u8, |odd, (&x, &y)| {
        odd | u8::from(x == 0xc2 && (0x80..=0x9f).contains(&y))
    });
    (c0 | c1) != 0
}

/// A human duration with three significant digits: `870ns`, `12.3µs`, `4.56ms`, `1.23s`, `2m05s`, `3h04m`.
pub fn duration(ns: u64) -> String {
    Dur(ns).to_string()
}

/// [`duration`] as a `Display`, to write into a buffer without an intermediate `String`.
pub struct Dur(pub u64);

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.digits().as_str())
    }
}

impl Dur {
    /// Writes the duration straight into `out`, without the formatting machinery.
    pub fn write_to<W: std::fmt::Write + ?Sized>(&self, out: &mut W) -> std::fmt::Result {
        out.write_str(self.digits().as_str())
    }

    fn digits(&self) -> Digits {
        let ns = self.0;
        // In whole numbers (rounded half up), gathered on the stack and written once: a dump of
        // 100,000 tasks formats half a million durations, and float formatting, then the formatting
        // machinery, was a tenth of its time.
        let mut text = Digits::default();
        let mut fixed = |unit: u64, places: usize, suffix: &str| {
            let scale = 10u64.pow(places as u32);
            // `ns` is below a minute here and `scale` at most 100: no overflow.
            let v = (ns * scale + unit / 2) / unit;
            text.number(v / scale, 1);
            text.push(".");
            text.number(v % scale, places);
            text.push(suffix);
        };
        match ns {
            0..1_000 => {
                text.number(ns, 1);
                text.push("ns");
            }
            1_000..1_000_000 => fixed(1_000, 1, "µs"),
            1_000_000..1_000_000_000 => fixed(1_000_000, 2, "ms"),
            1_000_000_000..60_000_000_000 => fixed(1_000_000_000, 2, "s"),
            60_000_000_000..3_600_000_000_000 => {
                text.number(ns / 60_000_000_000, 1);
                text.push("m");
                text.number(ns / 1_000_000_000 % 60, 2);
                text.push("s");
            }
            _ => {
                text.number(ns / 3_600_000_000_000, 1);
                text.push("h");
                text.number(ns / 60_000_000_000 % 60, 2);
                text.push("m");
            }
        }
        text
    }
}

/// Writes `v` in decimal without the formatting machinery (the text dump writes a million numbers
/// for 100,000 tasks).
pub fn write_number<W: std::fmt::Write + ?Sized>(out: &mut W, v: u64) -> std::fmt::Result {
    let mut text = Digits::default();
    text.number(v, 1);
    out.write_str(text.as_str())
}

/// A short text built on the stack.
#[derive(Default)]
struct Digits {
    bytes: [u8; 32],
    len: usize,
}

impl Digits {
    fn push(&mut self, s: &str) {
        let end = (self.len + s.len()).min(self.bytes.len());
        self.bytes[self.len..end].copy_from_slice(&s.as_bytes()[..end - self.len]);
        self.len = end;
    }

    /// `v` in decimal, with leading zeros to at least `width` digits, written in place.
    fn number(&mut self, mut v: u64, width: usize) {
        let mut n = 1;
        let mut rest = v;
        while rest >= 10 {
            rest /= 10;
            n += 1;
        }
        let end = (self.len + n.max(width)).min(self.bytes.len());
        for at in (self.len..end).rev() {
            self.bytes[at] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        self.len = end;
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

/// Task ids as compact ranges: `1–4, 7, 9–10`.
pub fn id_ranges(ids: &[u64]) -> String {
    use crate::model::{THREAD, TOKIO_ONLY};
    let of = |kind: u64| -> Vec<u64> {
        let key = |id: u64| id & (TOKIO_ONLY | THREAD);
        let ids = ids.iter().filter(|&&id| key(id) == kind);
        ids.map(|id| id & !(TOKIO_ONLY | THREAD)).collect()
    };
    // A thread's future (its `block_on`'s) is keyed by its thread's id.
    let kinds = [(0, ""), (TOKIO_ONLY, "tokio "), (THREAD, "thread ")];
    let parts: Vec<String> = (kinds.iter())
        .map(|&(kind, word)| (ranges(&of(kind)), word))
        .filter(|(r, _)| !r.is_empty())
        .map(|(r, word)| format!("{word}{r}"))
        .collect();
    parts.join(", ")
}

fn ranges(ids: &[u64]) -> String {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}–{}", sorted[i], sorted[j])
        } else {
            sorted[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// A task's key as people read it: `task 3` (the agent's id) or `tokio task 7` (tokio's id, for a task
/// the agent has no record of).
pub(crate) struct TaskId(pub(crate) u64);

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.write_to(f)
    }
}

impl TaskId {
    pub(crate) fn write_to<W: std::fmt::Write + ?Sized>(&self, out: &mut W) -> std::fmt::Result {
        use crate::model::{THREAD, TOKIO_ONLY};
        match (self.0 & TOKIO_ONLY, self.0 & THREAD) {
            (0, 0) => out.write_str("task ")?,
            (0, _) => out.write_str("thread ")?,
            _ => out.write_str("tokio task ")?,
        }
        write_number(out, self.0 & !(TOKIO_ONLY | THREAD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_check_finds_exactly_the_characters_that_are_escaped() {
        for c in (0..0x800).filter_map(char::from_u32) {
            let s = format!("a·{c}→b");
            let escaped = c.is_control() && c != '\n';
            assert_eq!(has_control(s.as_bytes()), escaped, "{:#x}", c as u32);
        }
    }

    #[test]
    fn only_control_characters_are_escaped_and_lines_stay_lines() {
        assert!(matches!(
            printable("plain école ✓"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(printable("a\x1b[2Jb\tc\rd\ne"), "a\\u{1b}[2Jb\\tc\\rd\ne");
        assert_eq!(printable("\u{9b}x"), "\\u{9b}x", "C1 controls too");
    }

    #[test]
    fn no_breaks_escapes_line_breaks_only() {
        assert!(matches!(no_breaks("a\x1bb"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(no_breaks("a\nb\n"), "a\\nb\\n");
    }

    #[test]
    fn one_line_escapes_line_breaks_as_well() {
        assert!(matches!(
            one_line("plain école"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(one_line("a\x1bb"), "a\\u{1b}b");
        assert_eq!(one_line("a\nb\x1b"), "a\\nb\\u{1b}");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(870), "870ns");
        assert_eq!(duration(12_345), "12.3µs");
        assert_eq!(duration(4_560_000), "4.56ms");
        assert_eq!(duration(1_234_000_000), "1.23s");
        // Rounded half up, and into the next digit.
        assert_eq!(duration(1_850), "1.9µs");
        assert_eq!(duration(4_105_000_000), "4.11s");
        assert_eq!(duration(999_960), "1000.0µs");
        assert_eq!(duration(59_999_000_000), "60.00s");
        assert_eq!(duration(0), "0ns");
        assert_eq!(duration(1_000), "1.0µs");
        assert_eq!(duration(61_000_000_000), "1m01s");
        assert_eq!(duration(u64::MAX), "5124095h34m");
        assert_eq!(duration(125_000_000_000), "2m05s");
        assert_eq!(
            duration(3 * 3_600_000_000_000 + 4 * 60_000_000_000),
            "3h04m"
        );
    }

    #[test]
    fn ids_compress_into_ranges() {
        assert_eq!(id_ranges(&[4, 1, 2, 3, 7, 9, 10]), "1–4, 7, 9–10");
        assert_eq!(id_ranges(&[5]), "5");
        let thread = crate::model::THREAD | 21210;
        let tokio = crate::model::TOKIO_ONLY | 3;
        assert_eq!(id_ranges(&[thread, tokio, 2]), "2, tokio 3, thread 21210");
    }
}
