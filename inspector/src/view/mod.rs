//! Rendering a [`crate::model::Dump`]: [`text`] (dumpasync-style, for people) and [`json`] (for tools).

pub mod folded;
pub mod json;
pub mod names;
pub mod text;

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
    // Printable ASCII, nearly all of any dump, is checked a byte at a time (the loop vectorises).
    let plain_ascii = s.bytes().all(|b| (0x20..0x7f).contains(&b) || b == b'\n');
    if plain_ascii || !s.chars().any(unsafe_char) {
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

/// A human duration with three significant digits: `870ns`, `12.3µs`, `4.56ms`, `1.23s`, `2m05s`, `3h04m`.
pub fn duration(ns: u64) -> String {
    Dur(ns).to_string()
}

/// [`duration`] as a `Display`, to write into a buffer without an intermediate `String`.
pub struct Dur(pub u64);

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.0;
        let x = ns as f64;
        match ns {
            0..1_000 => write!(f, "{ns}ns"),
            1_000..1_000_000 => write!(f, "{:.1}µs", x / 1e3),
            1_000_000..1_000_000_000 => write!(f, "{:.2}ms", x / 1e6),
            1_000_000_000..60_000_000_000 => write!(f, "{:.2}s", x / 1e9),
            60_000_000_000..3_600_000_000_000 => {
                write!(f, "{}m{:02}s", ns / 60_000_000_000, ns / 1_000_000_000 % 60)
            }
            _ => write!(
                f,
                "{}h{:02}m",
                ns / 3_600_000_000_000,
                ns / 60_000_000_000 % 60
            ),
        }
    }
}

/// Task ids as compact ranges: `1–4, 7, 9–10`.
pub fn id_ranges(ids: &[u64]) -> String {
    use crate::model::TOKIO_ONLY;
    let (tokio, agent): (Vec<u64>, Vec<u64>) = ids.iter().partition(|&&id| id & TOKIO_ONLY != 0);
    let tokio: Vec<u64> = tokio.into_iter().map(|id| id & !TOKIO_ONLY).collect();
    match (ranges(&agent), ranges(&tokio)) {
        (a, t) if t.is_empty() => a,
        (a, t) if a.is_empty() => format!("tokio {t}"),
        (a, t) => format!("{a}, tokio {t}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn durations_read_naturally() {
        assert_eq!(duration(870), "870ns");
        assert_eq!(duration(12_345), "12.3µs");
        assert_eq!(duration(4_560_000), "4.56ms");
        assert_eq!(duration(1_234_000_000), "1.23s");
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
    }
}
