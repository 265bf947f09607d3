//! Type, frame and file names as people read them in text: generic arguments shortened, and source
//! paths of dependencies and the standard library from their crate's directory on
//! ([`short_path`], from [`crate::source_path`]).
//!
//! Framework futures carry their whole service stack in their generic arguments
//! (`handle_connection::{async block#3}<tokio::net::tcp::listener::TcpListener, axum::routing::Router<()>, …>`),
//! which buries the one path that matters. In text, a name longer than [`NAME_MAX`] has every path
//! inside its generic arguments cut to its last segment (`TcpListener`, `Router<()>`; a
//! `{closure_env#0}` keeps the item it is in), and a trailing argument list still longer than
//! [`ARGS_MAX`] reads `<…>`. Shorter names, and the path outside the arguments, are never shortened, and
//! `--json` keeps every name whole.

use std::borrow::Cow;

pub use crate::source_path::short_path;

/// Longest name shown as it is.
pub const NAME_MAX: usize = 80;

/// Longest argument list, once shortened, that text shows in full.
pub const ARGS_MAX: usize = 40;

/// `name` with its generic arguments shortened (see the module docs).
pub fn short(name: &str) -> Cow<'_, str> {
    // Bytes first: no fewer than chars, and cheap to count (this runs for every frame of a dump).
    if name.len() <= NAME_MAX || !name.contains('<') || name.chars().count() <= NAME_MAX {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let Some(len) = group_len(after) else {
            // Unbalanced: show it as it is.
            out.push_str(after);
            return Cow::Owned(out);
        };
        let qualified = rest[..open].is_empty() || rest[..open].ends_with("::");
        let inner = shorten_paths(&after[1..len - 1]);
        let trailing = after[len..].is_empty();
        if trailing && !qualified && inner.chars().count() > ARGS_MAX {
            out.push_str("<…>");
        } else {
            out.push('<');
            out.push_str(&inner);
            out.push('>');
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Bytes of the `<…>` group `s` starts with, through its closing `>`; `None` if it never closes.
fn group_len(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'>' if i > 0 && bytes[i - 1] == b'-' => {} // `fn(A) -> B`
            b'<' => depth += 1,
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every path in `args` (generic arguments, nested ones included) by its last segment.
fn shorten_paths(args: &str) -> String {
    let mut out = String::with_capacity(args.len());
    let mut segments: Vec<&str> = Vec::new();
    let mut i = 0;
    let bytes = args.as_bytes();
    while i < bytes.len() {
        let start = i;
        match bytes[i] {
            b'{' => {
                // `{closure_env#0}`, `{async block#0}`, `{impl#3}`: one segment, spaces and all.
                let close = args[i..].find('}').map_or(bytes.len(), |j| i + j + 1);
                i = close;
            }
            b if b.is_ascii_alphanumeric() || b == b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            _ => {
                flush(&mut out, &mut segments);
                out.push(bytes[i] as char);
                i += 1;
                continue;
            }
        }
        segments.push(&args[start..i]);
        if args[i..].starts_with("::") {
            i += 2;
        } else {
            flush(&mut out, &mut segments);
        }
    }
    flush(&mut out, &mut segments);
    out
}

/// Writes the path made of `segments` short: its last segment, with the ones before it while the last
/// ones are `{…}` (a closure or block names nothing alone).
fn flush(out: &mut String, segments: &mut Vec<&str>) {
    if segments.is_empty() {
        return;
    }
    let mut keep = segments.len() - 1;
    while keep > 0 && segments[keep].starts_with('{') {
        keep -= 1;
    }
    out.push_str(&segments[keep..].join("::"));
    segments.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_generic_arguments_keep_their_last_segment() {
        assert_eq!(
            short(
                "tokio::io::util::read::Read<tokio::net::tcp::stream::TcpStream<tokio::io::Registration>>"
            ),
            "tokio::io::util::read::Read<TcpStream<Registration>>"
        );
        assert_eq!(
            short(
                "axum::serve::handle_connection::{async block#3}<tokio::net::TcpListener, axum::routing::Router<()>>"
            ),
            "axum::serve::handle_connection::{async block#3}<TcpListener, Router<()>>"
        );
        assert_eq!(
            short(
                "Registration::async_io<(mio::TcpStream, core::SocketAddr), tokio::listener::{impl#0}::accept::{closure_env#0}>"
            ),
            "Registration::async_io<…>"
        );
        assert_eq!(
            short(
                "a::f<(mio::net::tcp::TcpStream, tokio::net::tcp::{impl#0}::accept::{closure_env#0})>"
            ),
            "a::f<(TcpStream, accept::{closure_env#0})>"
        );
    }

    #[test]
    fn long_trailing_arguments_are_elided_but_qualified_impls_are_kept() {
        assert_eq!(
            short(
                "axum::handler::<F as Handler>::call::{async block#0}<fn(axum::extract::State<svc::Deps>) -> svc::locked, svc::locked>"
            ),
            "axum::handler::<F as Handler>::call::{async block#0}<fn(State<Deps>) -> locked, locked>"
        );
        assert_eq!(
            short(
                "axum::handler::<F as Handler>::call::{async block#0}<fn(axum::extract::State<svc::Deps>) -> svc::locked, svc::locked, svc::Deps, &str, axum_core::extract::private::ViaParts>"
            ),
            "axum::handler::<F as Handler>::call::{async block#0}<…>"
        );
        assert_eq!(
            short("axum::middleware::from_fn::<FromFn as Service>::call"),
            "axum::middleware::from_fn::<FromFn as Service>::call"
        );
        assert_eq!(
            short("tokio::sync::mutex::Mutex::lock<()>"),
            "tokio::sync::mutex::Mutex::lock<()>"
        );
    }

    #[test]
    fn short_names_without_arguments_or_unbalanced_ones_are_unchanged() {
        assert_eq!(
            short("asyncdump_agent::frame::Framed<depth_chain::descend::{{closure}}>"),
            "asyncdump_agent::frame::Framed<depth_chain::descend::{{closure}}>"
        );
        assert_eq!(
            short("svc::main::{async block#1}"),
            "svc::main::{async block#1}"
        );
        let unbalanced = format!("a::f<b::C{}", "x".repeat(NAME_MAX));
        assert_eq!(short(&unbalanced), unbalanced);
        assert_eq!(short("fn(a::B) -> c::D"), "fn(a::B) -> c::D");
    }
}
