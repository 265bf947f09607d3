//! What varies inside a group of chains alike, in one line: the lines its tasks would print at
//! one place of the chain (a wait target, a hold, a local), merged where they say the same thing
//! but for their quantities, which are then shown as the range or the few values they take
//! (`this task 1st–2nd of 2 waiting`, `deadline in 59m58s–59m59s`, `fd 19/21`).
//!
//! Lines are compared word by word: a line's *shape* is its words with every quantity (a count,
//! an ordinal, a duration, an address) left blank. Lines of one shape merge into one; lines of
//! different shapes (`locked, held by …` and `not locked`) stay apart, each with how many tasks
//! print it.

use std::borrow::Cow;

use serde::Serialize;

use crate::model::FrameNode;

/// What a frame's lines say across a group's variants, merged: each a line with the number of
/// tasks that print it.
#[derive(Debug, Default, Serialize)]
pub struct Parts {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waits_on: Vec<Merged>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<Merged>,
    /// Each local, by its place among the frame's locals.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locals: Vec<Vec<Merged>>,
    /// The tasks awaited there, each once, ascending.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub awaits_tasks: Vec<u64>,
    /// Whether the variants' lines differ here at all.
    #[serde(skip)]
    pub differs: bool,
}

/// A line and how many of a group's tasks print it.
#[derive(Debug, PartialEq, Serialize)]
pub struct Merged {
    pub text: String,
    pub tasks: usize,
}

/// The parts of one frame as `those` (the frame in each variant, with its count of tasks) say
/// them, merged kind by kind.
pub fn parts(those: &[(&FrameNode, usize)]) -> Parts {
    let differs = std::cell::Cell::new(false);
    let merge_all = |lines: Vec<(Cow<'_, str>, usize)>| -> Vec<Merged> {
        if lines.iter().any(|(l, _)| *l != lines[0].0) {
            differs.set(true);
        }
        let merged = merge(&lines).into_iter();
        merged.map(|(text, tasks)| Merged { text, tasks }).collect()
    };
    let waits = (those.iter()).filter_map(|&(n, k)| {
        let w = n.waits_on.as_deref()?;
        super::values::wait_text(w).map(|t| (Cow::Owned(t), k))
    });
    let holds = those.iter().flat_map(|&(n, k)| {
        shown_holds(n).map(move |h| {
            let mut text = String::new();
            super::values::held_into(&mut text, h);
            (Cow::Owned(text), k)
        })
    });
    let most = those.iter().map(|(n, _)| n.locals.len()).max().unwrap_or(0);
    let locals = (0..most).map(|i| {
        let each = (those.iter()).filter_map(|&(n, k)| {
            let mut text = String::new();
            super::values::local_into(&mut text, n.locals.get(i)?);
            Some((Cow::Owned(text), k))
        });
        merge_all(each.collect())
    });
    let mut awaits_tasks: Vec<u64> = (those.iter())
        .flat_map(|(n, _)| n.awaits_tasks.iter().copied())
        .collect();
    awaits_tasks.sort_unstable();
    awaits_tasks.dedup();
    let (waits_on, holds) = (merge_all(waits.collect()), merge_all(holds.collect()));
    let locals = locals.collect();
    let first = &those[0].0.awaits_tasks;
    let awaits_differ = those.iter().any(|(n, _)| n.awaits_tasks != *first);
    Parts {
        waits_on,
        holds,
        locals,
        awaits_tasks,
        differs: differs.get() || awaits_differ,
    }
}

/// The holds a frame's lines name: a channel's ends are named where a wait is for them, not on
/// every frame holding one.
pub fn shown_holds(n: &FrameNode) -> impl Iterator<Item = &crate::model::waits::Held> {
    n.holds.iter().filter(|h| !h.lock.starts_with("channel "))
}

/// `lines` (each with how many tasks print it) merged: one line per shape, with the number of
/// tasks it stands for, the shape of the most tasks first (ties: the first seen).
pub fn merge(lines: &[(Cow<'_, str>, usize)]) -> Vec<(String, usize)> {
    // Each shape: its lines' words, and how many tasks.
    let mut shapes: Vec<(Vec<Vec<&str>>, usize)> = Vec::new();
    for (line, count) in lines {
        let words = words(line);
        match shapes
            .iter_mut()
            .find(|(seen, _)| same_shape(&seen[0], &words))
        {
            Some((seen, n)) => {
                seen.push(words);
                *n += count;
            }
            None => shapes.push((vec![words], *count)),
        }
    }
    // Stable: the first seen stays first among shapes of as many tasks.
    shapes.sort_by_key(|s| std::cmp::Reverse(s.1));
    shapes
        .into_iter()
        .map(|(lines, n)| (merged(&lines), n))
        .collect()
}

/// The line `lines` (of one shape) merge into: each word that differs among them replaced by the
/// range or the values it takes.
fn merged(lines: &[Vec<&str>]) -> String {
    let mut out = String::new();
    for (i, first) in lines[0].iter().enumerate() {
        let mut seen: Vec<&str> = lines.iter().map(|l| l[i]).collect();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() == 1 {
            out.push_str(first);
            continue;
        }
        out.push_str(&spread(quantity(first).unwrap_or(Quantity::Id), &seen));
    }
    out
}

/// How the values of one word are shown: by how they compare.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Quantity {
    /// A place in a queue, a duration: a range, least to most.
    Ordered,
    /// A count, an id, an address: the values, up to [`FEW`], else how many there are.
    Id,
}

/// Values shown one by one, at most.
const FEW: usize = 3;

/// The distinct values `seen` of one word, as `kind` shows them.
fn spread(kind: Quantity, seen: &[&str]) -> String {
    let mut seen = seen.to_vec();
    match kind {
        Quantity::Ordered => {
            seen.sort_by(|a, b| magnitude(a).total_cmp(&magnitude(b)));
            format!("{}–{}", seen[0], seen[seen.len() - 1])
        }
        Quantity::Id if seen.len() <= FEW => {
            seen.sort_by(|a, b| magnitude(a).total_cmp(&magnitude(b)).then(a.cmp(b)));
            seen.join("/")
        }
        Quantity::Id => format!("({} values)", seen.len()),
    }
}

/// `line` in words and the runs between them: a word is a run of letters, digits, `.`, `_` and
/// `µ` (`59m58s`, `2.08s`, `0x5f3a`, `1st`, `127.0.0.1`); every other character is a run of its own.
fn words(line: &str) -> Vec<&str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '.' || c == '_';
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_word = false;
    for (i, c) in line.char_indices() {
        let w = is_word(c);
        if i > start && !(w && in_word) {
            out.push(&line[start..i]);
            start = i;
        }
        in_word = w;
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// Whether two lines' words are of one shape: the same words but for quantities, which may
/// differ where both are quantities of one kind.
fn same_shape(a: &[&str], b: &[&str]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x == y || matches!((quantity(x), quantity(y)), (Some(p), Some(q)) if p == q)
        })
}

/// What kind of quantity `word` is, if it is one.
fn quantity(word: &str) -> Option<Quantity> {
    if ordinal(word).is_some() || duration_ns(word).is_some() {
        return Some(Quantity::Ordered);
    }
    let hex = word
        .strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    let number = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && word.bytes().next().is_some_and(|b| b.is_ascii_digit());
    (hex || number).then_some(Quantity::Id)
}

/// The value a quantity word stands for, to order by.
fn magnitude(word: &str) -> f64 {
    if let Some(n) = ordinal(word) {
        return n as f64;
    }
    if let Some(ns) = duration_ns(word) {
        return ns;
    }
    if let Some(h) = word.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).map_or(f64::NAN, |v| v as f64);
    }
    word.parse().unwrap_or(f64::NAN)
}

/// `1st`, `2nd`, `3rd`, `11th`: the number.
fn ordinal(word: &str) -> Option<u64> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    let n: u64 = digits.parse().ok()?;
    matches!(suffix, "st" | "nd" | "rd" | "th").then_some(n)
}

/// A duration as the dump writes one (`780.9µs`, `2.08s`, `59m58s`, `1h02m`): nanoseconds.
fn duration_ns(word: &str) -> Option<f64> {
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1.0),
        ("µs", 1e3),
        ("us", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
        ("m", 60e9),
        ("h", 3600e9),
    ];
    let mut rest = word;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, scale) = UNITS.iter().find(|(u, _)| {
            // `m` is minutes only where no `s` follows (`ms`).
            rest.starts_with(u) && !(*u == "m" && rest.starts_with("ms"))
        })?;
        total += value * scale;
        rest = &rest[unit.len()..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merge_of(lines: &[(&str, usize)]) -> Vec<(String, usize)> {
        let lines: Vec<(Cow<'_, str>, usize)> =
            lines.iter().map(|&(l, n)| (Cow::Borrowed(l), n)).collect();
        merge(&lines)
    }

    #[test]
    fn places_in_one_queue_read_as_a_range() {
        let merged = merge_of(&[
            (
                "Notify @ 0x5f10: not notified, this task 2nd of 8 waiting",
                1,
            ),
            (
                "Notify @ 0x5f10: not notified, this task 1st of 8 waiting",
                2,
            ),
            (
                "Notify @ 0x5f10: not notified, this task 7th of 8 waiting",
                1,
            ),
        ]);
        assert_eq!(
            merged,
            [(
                "Notify @ 0x5f10: not notified, this task 1st–7th of 8 waiting".into(),
                4
            )]
        );
    }

    #[test]
    fn deadlines_read_as_a_range_ordered_by_time_not_by_text() {
        let merged = merge_of(&[
            ("deadline in 59m58s", 1),
            ("deadline in 1h00m", 1),
            ("deadline in 9.50s", 1),
        ]);
        assert_eq!(merged, [("deadline in 9.50s–1h00m".into(), 3)]);
    }

    #[test]
    fn counts_ids_and_addresses_read_as_their_few_values_or_how_many() {
        let few = merge_of(&[
            ("reading fd 21, tcp 127.0.0.1:50944", 1),
            ("reading fd 19, tcp 127.0.0.1:50950", 1),
        ]);
        assert_eq!(
            few,
            [("reading fd 19/21, tcp 127.0.0.1:50944/50950".into(), 2)]
        );
        let many: Vec<String> = (0..5).map(|i| format!("Mutex @ 0x{:x}0", i + 10)).collect();
        let many: Vec<(&str, usize)> = many.iter().map(|l| (l.as_str(), 1)).collect();
        assert_eq!(merge_of(&many), [("Mutex @ (5 values)".into(), 5)]);
    }

    #[test]
    fn lines_that_say_different_things_stay_apart_most_tasks_first() {
        let merged = merge_of(&[
            ("Mutex @ 0x10: not locked", 1),
            (
                "Mutex @ 0x10: locked, held by task 4, this task 1st of 2 waiting",
                1,
            ),
            (
                "Mutex @ 0x10: locked, held by task 4, this task 2nd of 2 waiting",
                1,
            ),
        ]);
        assert_eq!(
            merged,
            [
                (
                    "Mutex @ 0x10: locked, held by task 4, this task 1st–2nd of 2 waiting".into(),
                    2
                ),
                ("Mutex @ 0x10: not locked".into(), 1),
            ]
        );
    }

    #[test]
    fn words_of_different_kinds_are_different_shapes() {
        // An ordinal and a count at one place: not one thing varying.
        assert!(merge_of(&[("waits 1st", 1), ("waits 12", 1)]).len() == 2);
        assert_eq!(duration_ns("2.08s"), Some(2.08e9));
        assert_eq!(duration_ns("5.55ms"), Some(5.55e6));
        assert_eq!(duration_ns("1h02m"), Some(3600e9 + 120e9));
        assert_eq!(duration_ns("main"), None);
        assert_eq!(duration_ns("12"), None);
    }
}
