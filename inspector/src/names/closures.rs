//! Futures made from closures, named as they were written: `poll_fn`, `map`, `then`, `inspect`,
//! `spawn_blocking`'s task and the rest carry a closure type among their generic arguments, and the
//! type's own name says only "a closure". The closure's path says where it was written, which is what
//! tells one such future from another: `PollFn<…::Receiver<T>::recv::{async_fn#0}::{closure_env#0}<u64>>`
//! is `poll_fn in tokio::sync::mpsc::bounded::Receiver::recv`.

use super::types::{base_name, display_name};

/// `ADAPTER in DEFINING_FN` for a type whose generic arguments (the outermost list) include a closure;
/// `None` for any other type. The adapter is the type's last path segment in snake case, as the
/// function that makes it is spelled (`PollFn` → `poll_fn`, `AndThen` → `and_then`).
pub fn closure_named(qualified: &str) -> Option<String> {
    // One search turns away the many names that hold no closure (a dump asks for every task's root).
    if !qualified.contains("{closure_env#") {
        return None;
    }
    let open = qualified.find('<')?;
    let own = base_name(qualified);
    let own = own.rsplit("::").next().unwrap_or(own);
    let args = qualified[open + 1..].strip_suffix('>')?;
    let closure = top_level_args(args).find_map(|arg| {
        let (defined_in, n) = base_name(arg).rsplit_once("::{closure_env#")?;
        let n = n.strip_suffix('}')?;
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(defined_in)
    })?;
    // A closure in an async block is in its `{async_block#N}` namespace.
    let defined_in = display_name(closure).replace("{async_block#", "{async block#");
    let defined_in = without_generics(&defined_in);
    Some(format!("{} in {defined_in}", snake_case(own)))
}

/// The arguments of one generic list, split at its own commas (not those nested inside).
fn top_level_args(args: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut out = Vec::new();
    let bytes = args.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' if i > 0 && bytes[i - 1] == b'-' => {}
            b'>' | b')' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(args[start..].trim());
    out.into_iter()
}

/// `PollFn` → `poll_fn`, `AndThen` → `and_then`.
fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// A path without generic arguments (`a::Receiver<T>::recv<u64>` → `a::Receiver::recv`); a qualified
/// impl (`<F as Handler>::call`) keeps its own brackets.
fn without_generics(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    // Per open `<`: whether it (and all inside it) is kept.
    let mut open: Vec<bool> = Vec::new();
    let mut prev = ' ';
    for ch in path.chars() {
        let dropping = open.last() == Some(&false);
        match ch {
            '<' => {
                let generic = prev.is_alphanumeric() || matches!(prev, '_' | '}' | '>');
                let keep = !dropping && !generic;
                open.push(keep);
                if keep {
                    out.push(ch);
                }
            }
            '>' if prev != '-' => out.extend(open.pop().filter(|&kept| kept).map(|_| ch)),
            _ if !dropping => out.push(ch),
            _ => {}
        }
        prev = ch;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::closure_named;

    #[test]
    fn a_poll_fn_is_named_by_the_function_its_closure_is_written_in() {
        assert_eq!(
            closure_named(
                "core::future::poll_fn::PollFn<tokio::sync::mpsc::bounded::Receiver<u64>::recv::{async_fn#0}::{closure_env#0}<u64>>"
            )
            .as_deref(),
            Some("poll_fn in tokio::sync::mpsc::bounded::Receiver::recv")
        );
    }

    #[test]
    fn an_adapter_is_named_in_snake_case_by_the_closure_among_its_arguments() {
        assert_eq!(
            closure_named(
                "futures_util::future::future::Map<crawler::fetch::{async_fn_env#0}, crawler::main::{async_block#0}::{closure_env#1}>"
            )
            .as_deref(),
            Some("map in crawler::main::{async block#0}")
        );
        assert_eq!(
            closure_named(
                "tokio::runtime::blocking::task::BlockingTask<blocking::await_blocking::{closure_env#0}>"
            )
            .as_deref(),
            Some("blocking_task in blocking::await_blocking")
        );
    }

    #[test]
    fn a_qualified_impl_keeps_its_brackets_and_loses_only_generics() {
        assert_eq!(
            closure_named(
                "futures_util::future::try_future::AndThen<F, <a::Svc<T> as tower::Service<R>>::call::{closure_env#2}>"
            )
            .as_deref(),
            Some("and_then in <a::Svc as tower::Service>::call")
        );
    }

    #[test]
    fn a_closure_nested_in_another_argument_or_none_at_all_names_nothing() {
        assert_eq!(
            closure_named(
                "hyper_util::server::conn::auto::UpgradeableConnection<I, hyper_util::service::glue::TowerToHyperService<a::{closure_env#0}>, E>"
            ),
            None
        );
        assert_eq!(closure_named("tokio::time::sleep::Sleep"), None);
        assert_eq!(closure_named("a::b::{closure_env#0}"), None);
    }
}
