//! Type and frame names as people read them: state machines named as in the source
//! ([`display_name`]), std paths and the default allocator dropped from leaf types ([`short_type`]),
//! trailing generics dropped for comparing ([`base_name`]), and long generic arguments shortened in
//! text ([`short`]).
//!
//! Framework futures carry their whole service stack in their generic arguments
//! (`handle_connection::{async block#3}<tokio::net::tcp::listener::TcpListener, axum::routing::Router<()>, …>`),
//! which buries the one path that matters. In text, a name longer than [`NAME_MAX`] has every path
//! inside its generic arguments cut to its last segment (`TcpListener`, `Router<()>`; a
//! `{closure_env#0}` keeps the item it is in), and a trailing argument list still longer than
//! [`ARGS_MAX`] reads `<…>`. Shorter names, and the path outside the arguments, are never shortened, and
//! `--json` keeps every name whole.

use std::borrow::Cow;

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

/// A state machine's or closure's path as the source and the frames name it, in one spelling
/// whether it comes from a type (`{async_block_env#1}`) or from the function that polls it
/// (`{async_block#1}`): `a::b::{async_fn_env#0}` → `a::b`; `a::main::{async_fn#0}::{async_block_env#1}`
/// → `a::main::{async block#1}`; `a::main::{async_block#0}::{closure_env#2}` →
/// `a::main::{async block#0}::{closure#2}`.
///
/// A root in the agent's own wrapper reads as what the program wrote: `#[frame] async fn f`'s
/// `asyncdump_agent::task::frame::Framed<app::f::{async_block_env#0}, ()>` (the attribute's block
/// around the body) as `app::f`, and `fut.frame("x")`'s `Framed<F, Label>` as `F`.
pub fn display_name(qualified: &str) -> String {
    if let Some((inner, annotated)) = unframed(qualified) {
        let name = display_name(inner);
        return match annotated {
            true => name
                .strip_suffix("::{async block#0}")
                .map_or(name.clone(), str::to_owned),
            false => name,
        };
    }
    // One pass: a dump names every task's root with it, and five `replace`s each scanning the whole
    // name were a tenth of a 100,000-task dump.
    const RENAMED: [(&str, &str); 3] = [
        ("{async_block_env#", "{async block#"),
        ("{async_block#", "{async block#"),
        ("{closure_env#", "{closure#"),
    ];
    let mut out = String::with_capacity(qualified.len());
    let mut rest = qualified;
    while let Some(i) = rest.find('{') {
        let (head, tail) = rest.split_at(i);
        let dropped = ["{async_fn_env#0}", "{async_fn#0}"]
            .iter()
            .find_map(|p| tail.strip_prefix(p).filter(|_| head.ends_with("::")));
        if let Some(after) = dropped {
            out.push_str(&head[..head.len() - 2]);
            rest = after;
        } else if let Some((after, to)) =
            (RENAMED.iter()).find_map(|(from, to)| Some((tail.strip_prefix(from)?, to)))
        {
            out.push_str(head);
            out.push_str(to);
            rest = after;
        } else {
            out.push_str(head);
            out.push('{');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The future inside the agent's `Framed<F, M>`, and whether `#[frame]` made it (`M` is `()`).
fn unframed(qualified: &str) -> Option<(&str, bool)> {
    const FRAMED: &str = "asyncdump_agent::task::frame::Framed<";
    let args = qualified.strip_prefix(FRAMED)?.strip_suffix('>')?;
    // The comma between the two arguments: the last at depth 0.
    let mut depth = 0i32;
    let mut split = None;
    for (i, b) in args.bytes().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' | b')' | b']' => depth -= 1,
            b',' if depth == 0 => split = Some(i),
            _ => {}
        }
    }
    let at = split?;
    Some((args[..at].trim(), args[at + 1..].trim() == "()"))
}

/// A leaf's type as people write it: the std paths every Rust programmer knows, without the default
/// allocator. (`tokio::sync::oneshot::Receiver<alloc::string::String>` → `…Receiver<String>`.)
pub fn short_type(name: &str) -> String {
    name.replace(", alloc::alloc::Global>", ">")
        .replace("alloc::string::String", "String")
        .replace("alloc::vec::Vec<", "Vec<")
        .replace("alloc::boxed::Box<", "Box<")
        .replace("alloc::sync::Arc<", "Arc<")
        .replace("core::option::Option<", "Option<")
        .replace("core::result::Result<", "Result<")
        .replace("core::pin::Pin<", "Pin<")
}

/// A local's type in a line of its own: every path cut to its last segment and the default allocator
/// dropped (`alloc::sync::Arc<tokio::sync::mutex::Mutex<u64>, alloc::alloc::Global>` →
/// `Arc<Mutex<u64>>`); a segment in braces (`{closure_env#0}`) keeps the one before it.
pub fn brief(name: &str) -> String {
    let name = name.replace(", alloc::alloc::Global>", ">");
    let mut out = String::with_capacity(name.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        // A path that goes on after a qualified segment (`<A as B>::call::Svc`, a type declared
        // inside a trait method) is that segment's last: the qualified part goes.
        if word.starts_with("::") && out.ends_with('>') {
            let mut depth = 0i32;
            let open = out.char_indices().rev().find_map(|(i, c)| {
                depth += match c {
                    '>' => 1,
                    '<' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(i)
            });
            if let Some(open) = open {
                out.truncate(open);
            }
        }
        let segments: Vec<&str> = word.split("::").collect();
        let keep = match segments.as_slice() {
            [.., before, last] if last.starts_with('{') => format!("{before}::{last}"),
            [.., last] => (*last).to_owned(),
            [] => String::new(),
        };
        out.push_str(&keep);
        word.clear();
    };
    let mut braces = 0usize;
    for c in name.chars() {
        match c {
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            _ => {}
        }
        let delimiter = matches!(
            c,
            '<' | '>' | ',' | ' ' | '(' | ')' | '[' | ']' | '&' | '*' | ';'
        );
        if delimiter && braces == 0 {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A path without its trailing generic arguments (`Mutex::lock<()>` → `Mutex::lock`); a qualified
/// impl (`<F as Handler>::call`) keeps its own.
pub fn base_name(name: &str) -> &str {
    if !name.ends_with('>') {
        return name;
    }
    let bytes = name.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().rev() {
        match b {
            // The arrow of a `fn(A) -> B` argument closes nothing.
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' => depth += 1,
            b'<' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return if name[..i].ends_with("::") || i == 0 {
                        name
                    } else {
                        &name[..i]
                    };
                }
            }
            _ => {}
        }
    }
    name
}

/// A function's path without generic arguments: `<T<U> as Trait>::f` is `T::f`, `a::B<T>::f` and
/// `a::f::<T>` are `a::B::f` and `a::f`.
pub fn path_of(function: &str) -> String {
    let mut s = function;
    let mut owned;
    if let Some(inner) = s.strip_prefix('<')
        && let Some(close) = matching_close(inner)
    {
        let (qualified, rest) = (&inner[..close], &inner[close + 1..]);
        let self_type = match top_level_as(qualified) {
            Some(at) => &qualified[..at],
            None => qualified,
        };
        owned = format!("{self_type}{rest}");
        s = &owned;
    }
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    owned = out.replace("::::", "::");
    owned.trim_end_matches("::").to_owned()
}

/// Where ` as ` is in `s` outside any generic arguments.
fn top_level_as(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            ' ' if depth == 0 && s[i..].starts_with(" as ") => return Some(i),
            _ => {}
        }
    }
    None
}

/// The index in `s` of the `>` that closes a `<` opened just before `s`.
pub fn matching_close(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if i > 0 && s[..i].ends_with('-') => {} // `->` in a fn type
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_locals_type_keeps_each_paths_last_segment() {
        use super::brief;
        assert_eq!(
            brief("alloc::sync::Arc<tokio::sync::mutex::Mutex<u64>, alloc::alloc::Global>"),
            "Arc<Mutex<u64>>"
        );
        assert_eq!(brief("&[alloc::string::String]"), "&[String]");
        assert_eq!(
            brief("(u64, core::option::Option<&str>)"),
            "(u64, Option<&str>)"
        );
        assert_eq!(
            brief("app::run::{async block#1}::{closure_env#0}"),
            "{async block#1}::{closure_env#0}"
        );
        // A type declared inside a trait method, as tonic generates one per RPC.
        assert_eq!(
            brief("shop::orders_server::<OrdersServer as Service>::call::PlaceOrderSvc<app::Shop>"),
            "PlaceOrderSvc<Shop>"
        );
        assert_eq!(brief("&mut <a::B<u8> as c::D>::f::Svc"), "&mut Svc");
    }

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

    #[test]
    fn leaf_types_drop_std_paths_and_the_default_allocator() {
        assert_eq!(
            short_type(
                "tokio::sync::oneshot::Receiver<alloc::vec::Vec<alloc::string::String, alloc::alloc::Global>>"
            ),
            "tokio::sync::oneshot::Receiver<Vec<String>>"
        );
    }

    #[test]
    fn state_machine_names_read_like_the_source() {
        assert_eq!(
            display_name("plain_chain::descend::{async_fn_env#0}"),
            "plain_chain::descend"
        );
        assert_eq!(
            display_name("two_blocks::main::{async_fn#0}::{async_block_env#1}"),
            "two_blocks::main::{async block#1}"
        );
        assert_eq!(
            display_name("tokio::sync::mpsc::bounded::{impl#0}::recv::{async_fn_env#0}<u32>"),
            "tokio::sync::mpsc::bounded::{impl#0}::recv<u32>"
        );
        // One spelling, whether from the type or from the function that polls it.
        assert_eq!(
            display_name("app::main::{async_block#0}::{async_block_env#0}"),
            "app::main::{async block#0}::{async block#0}"
        );
        assert_eq!(
            display_name("app::cache::evict::{async_fn#0}"),
            "app::cache::evict"
        );
        assert_eq!(
            display_name("app::main::{async_block#0}::{closure_env#2}"),
            "app::main::{async block#0}::{closure#2}"
        );
    }

    #[test]
    fn a_root_in_the_agents_wrapper_reads_as_what_the_program_wrote() {
        // `#[frame] async fn wait_for_peer`: the attribute's block around the body is the fn.
        assert_eq!(
            display_name(
                "asyncdump_agent::task::frame::Framed<svc::wait_for_peer::{async_block_env#0}, ()>"
            ),
            "svc::wait_for_peer"
        );
        // `async { … }.frame("x")`: the program's own block.
        assert_eq!(
            display_name(
                "asyncdump_agent::task::frame::Framed<svc::main::{async_block_env#1}, asyncdump_agent::task::frame::Label>"
            ),
            "svc::main::{async block#1}"
        );
        assert_eq!(
            display_name("asyncdump_agent::task::frame::Framed<a::F<u8, (u8, u16)>, ()>"),
            "a::F<u8, (u8, u16)>"
        );
    }

    /// The one pass reads as the five replacements it stands for, on paths made of the segments
    /// state machine names are made of.
    #[test]
    fn display_names_are_the_five_replacements_in_one_pass() {
        let segments = [
            "a",
            "b<u32>",
            "{async_fn_env#0}",
            "{async_fn#0}",
            "{async_block_env#1}",
            "{async_block_env#2}<T>",
            "{impl#0}",
            "{async",
            "{closure_env#0}",
            "{async_block#0}",
            "{closure#1}",
            "{",
        ];
        let replaced = |q: &str| {
            q.replace("::{async_fn_env#0}", "")
                .replace("::{async_fn#0}", "")
                .replace("{async_block_env#", "{async block#")
                .replace("{async_block#", "{async block#")
                .replace("{closure_env#", "{closure#")
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let len = 1 + next() % 6;
            let path: Vec<&str> = (0..len)
                .map(|_| segments[(next() % segments.len() as u64) as usize])
                .collect();
            let name = path.join("::");
            assert_eq!(display_name(&name), replaced(&name), "{name}");
        }
    }

    #[test]
    fn base_names_drop_trailing_generics_only() {
        assert_eq!(base_name("a::f<u32, Vec<u8>>"), "a::f");
        assert_eq!(base_name("a::<F as H>::call"), "a::<F as H>::call");
        assert_eq!(base_name("a::f<fn(X) -> Y>"), "a::f");
        assert_eq!(base_name("<F as H>"), "<F as H>");
    }
}
