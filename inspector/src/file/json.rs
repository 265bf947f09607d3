//! JSON reading for the tool's own files, as deep as the tool writes and no deeper.
//!
//! serde_json refuses documents nested deeper than 128 levels to protect the stack, and a chain of
//! about sixty frames is deeper than that in a dump. Here the nesting is measured first, in one
//! pass without recursion, against what a chain of [`MAX_CHAIN_DEPTH`] frames needs; only then is the
//! document parsed, without serde_json's limit, on a thread whose stack holds that depth (see
//! [`on_deep_stack`]).

use serde::de::DeserializeOwned;

use crate::model::MAX_CHAIN_DEPTH;

/// The deepest nesting a document of ours holds: two levels per frame (its object and its
/// children's array) and a few around the chains (a record, its tasks, a task, its frames).
pub const MAX_NESTING: usize = 2 * MAX_CHAIN_DEPTH + 16;

/// A stack that parses a document nested [`MAX_NESTING`] deep with room to spare, in a debug build
/// too; only the pages used are ever touched.
const DEEP_STACK_BYTES: usize = 256 << 20;

/// Parses `text` as one JSON document, refusing one nested deeper than [`MAX_NESTING`].
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    if let Some(at) = too_deep(text.as_bytes()) {
        return Err(serde::de::Error::custom(format_args!(
            "nested deeper than {MAX_NESTING} levels at byte {at}: not a document asyncdump wrote"
        )));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Where `bytes` first nest deeper than [`MAX_NESTING`], if they do. Brackets inside strings do
/// not count; the document need not be valid (the parser says what is wrong with it).
fn too_deep(bytes: &[u8]) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(i);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Runs `f` on a thread with a stack deep enough for [`MAX_NESTING`]: parsing, converting and
/// dropping a document all recurse once per level, and the caller's thread may have little stack.
pub fn on_deep_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("asyncdump-read".into())
            .stack_size(DEEP_STACK_BYTES)
            .spawn_scoped(s, f)
            .expect("spawn a reading thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn documents_as_deep_as_ours_parse_and_deeper_ones_are_refused_at_once() {
        let ok: serde_json::Value = on_deep_stack(|| from_str(&nested(MAX_NESTING)).unwrap());
        on_deep_stack(move || drop(ok));
        let err = from_str::<serde_json::Value>(&nested(MAX_NESTING + 1)).unwrap_err();
        let at = MAX_NESTING;
        assert!(err.to_string().contains(&format!("at byte {at}")), "{err}");
        // A million levels are refused before anything recurses.
        assert!(from_str::<serde_json::Value>(&nested(1_000_000)).is_err());
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!("[{:?}]", "[".repeat(MAX_NESTING * 2) + "\\\"[[");
        assert_eq!(too_deep(text.as_bytes()), None);
        assert!(from_str::<serde_json::Value>(&text).is_ok());
    }
}
