//! A frame's locals in text: `name: Type = value`, one line each, every value bounded to
//! [`MAX_LINE`] characters and every string escaped as Rust writes it (`"a\nb"`), so that no value
//! from the target can move the cursor or span lines.

use std::fmt::Write;

use crate::model::values::{Field, Local, PointerKind, Value};

/// Longest value shown on a line; the rest is cut with `…`.
pub const MAX_LINE: usize = 200;

/// `name: Type = value`, or `name: Type @ 0x…` for a value shown by its address alone.
pub fn local(l: &Local) -> String {
    let mut out = String::new();
    local_into(&mut out, l);
    out
}

/// [`local`], into `out` (cleared first): a dump writes every local through one buffer.
pub fn local_into(out: &mut String, l: &Local) {
    out.clear();
    let ty = crate::names::short(&l.type_name);
    let _ = write!(out, "{}: {ty}", l.name);
    if let Value::Opaque { addr, .. } = l.value {
        let _ = write!(out, " @ {addr:#x}");
        return;
    }
    out.push_str(" = ");
    let start = out.len();
    value(out, &l.value);
    if let Some((cut, _)) = out[start..].char_indices().nth(MAX_LINE) {
        out.truncate(start + cut);
        out.push('…');
    }
}

/// A value as one bounded line.
pub fn one_line(v: &Value) -> String {
    let mut s = String::new();
    value(&mut s, v);
    bounded(s)
}

fn bounded(s: String) -> String {
    match s.char_indices().nth(MAX_LINE) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

fn value(out: &mut String, v: &Value) {
    // Past the line's length nothing more shows; stop building it too.
    if out.len() > 4 * MAX_LINE {
        return;
    }
    let _ = match v {
        Value::Bool(b) => write!(out, "{b}"),
        Value::Int(i) => write!(out, "{i}"),
        Value::Uint(u) => write!(out, "{u}"),
        Value::Float(f) => write!(out, "{:?}", f.get()),
        Value::Char(c) => write!(out, "{c:?}"),
        Value::Str { text, len } => {
            let _ = write!(out, "{text:?}");
            match (text.len() as u64) < *len {
                true => write!(out, "… ({len} bytes)"),
                false => Ok(()),
            }
        }
        Value::Seq { len, items } => seq(out, *len, items),
        Value::Variant { name, fields } => named(out, name, fields),
        Value::Struct { type_name, fields } => named(out, type_name, fields),
        Value::Pointer {
            kind,
            addr: _,
            strong,
            weak,
            to,
        } => pointer(out, *kind, *strong, *weak, to),
        Value::Duration { secs, nanos } => {
            write!(out, "{:?}", std::time::Duration::new(*secs, *nanos))
        }
        Value::Instant {
            monotonic_ns,
            age_ns,
        } => instant(out, *monotonic_ns, *age_ns),
        Value::SocketAddr(a) => write!(out, "{a}"),
        Value::Opaque { type_name, addr } => write!(out, "{type_name} @ {addr:#x}"),
        Value::Address(a) => write!(out, "{a:#x}"),
        Value::Unreadable => write!(out, "<unreadable>"),
        Value::Changed => write!(out, "<changed>"),
        Value::Cut | Value::Unread { .. } => write!(out, "…"),
    };
}

fn seq(out: &mut String, len: u64, items: &[Value]) -> std::fmt::Result {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        value(out, item);
    }
    let more = len.saturating_sub(items.len() as u64);
    if more > 0 {
        let _ = write!(
            out,
            "{}… {more} more",
            if items.is_empty() { "" } else { ", " }
        );
    }
    out.push(']');
    Ok(())
}

/// `Name`, `Name(a, b)` (fields numbered), `Name { x: a }`; a tuple has no name.
fn named(out: &mut String, name: &str, fields: &[Field]) -> std::fmt::Result {
    out.push_str(name);
    if fields.is_empty() {
        if name.is_empty() {
            out.push_str("()");
        }
        return Ok(());
    }
    let numbered = fields
        .iter()
        .all(|f| f.name.bytes().all(|b| b.is_ascii_digit()));
    out.push_str(if numbered { "(" } else { " { " });
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if !numbered {
            let _ = write!(out, "{}: ", f.name);
        }
        value(out, &f.value);
    }
    out.push_str(if numbered { ")" } else { " }" });
    Ok(())
}

fn pointer(
    out: &mut String,
    kind: PointerKind,
    strong: Option<u64>,
    weak: Option<u64>,
    to: &Value,
) -> std::fmt::Result {
    match kind {
        PointerKind::Ref => out.push('&'),
        PointerKind::Box => out.push_str("Box("),
        PointerKind::Arc => out.push_str("Arc("),
        PointerKind::Rc => out.push_str("Rc("),
    }
    value(out, to);
    if kind != PointerKind::Ref {
        out.push(')');
    }
    match (strong, weak) {
        (Some(s), Some(w)) => write!(out, " [strong {s}, weak {w}]"),
        _ => Ok(()),
    }
}

fn instant(out: &mut String, monotonic_ns: u64, age_ns: Option<i64>) -> std::fmt::Result {
    let d = |ns: i64| std::time::Duration::from_nanos(ns.unsigned_abs());
    match age_ns {
        Some(a) if a >= 0 => write!(out, "Instant({:.1?} ago)", d(a)),
        Some(a) => write!(out, "Instant(in {:.1?})", d(a)),
        None => write!(
            out,
            "Instant(monotonic {:.3?})",
            std::time::Duration::from_nanos(monotonic_ns)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::values::FloatBits;

    fn s(text: &str, len: u64) -> Value {
        Value::Str {
            text: text.into(),
            len,
        }
    }

    #[test]
    fn each_kind_of_value_reads_as_rust_writes_it() {
        let some = Value::Variant {
            name: "Some".into(),
            fields: vec![Field {
                name: "0".into(),
                value: s("alice", 5),
            }],
        };
        assert_eq!(one_line(&some), r#"Some("alice")"#);
        let point = Value::Struct {
            type_name: "Point".into(),
            fields: vec![
                Field {
                    name: "x".into(),
                    value: Value::Int(-3),
                },
                Field {
                    name: "y".into(),
                    value: Value::Float(FloatBits(1.5f64.to_bits())),
                },
            ],
        };
        assert_eq!(one_line(&point), "Point { x: -3, y: 1.5 }");
        let arc = Value::Pointer {
            kind: PointerKind::Arc,
            addr: 0x10,
            strong: Some(2),
            weak: Some(1),
            to: Box::new(Value::Uint(7)),
        };
        assert_eq!(one_line(&arc), "Arc(7) [strong 2, weak 1]");
        let items = Value::Seq {
            len: 100,
            items: vec![Value::Uint(1), Value::Uint(2)],
        };
        assert_eq!(one_line(&items), "[1, 2, … 98 more]");
        let d = Value::Duration {
            secs: 1,
            nanos: 500_000_000,
        };
        assert_eq!(one_line(&d), "1.5s");
        let i = Value::Instant {
            monotonic_ns: 5,
            age_ns: Some(2_000_000_000),
        };
        assert_eq!(one_line(&i), "Instant(2.0s ago)");
        assert_eq!(
            one_line(&Value::Struct {
                type_name: "".into(),
                fields: vec![]
            }),
            "()"
        );
    }

    #[test]
    fn text_from_the_target_cannot_reach_the_terminal_raw_or_run_long() {
        let hostile = s("\u{1b}]0;pwned\u{7}\nnext", 1 << 20);
        let line = one_line(&hostile);
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        assert!(line.ends_with("… (1048576 bytes)"), "{line}");
        let long = s(&"x".repeat(1000), 1000);
        assert_eq!(one_line(&long).chars().count(), MAX_LINE + 1);
    }
}
