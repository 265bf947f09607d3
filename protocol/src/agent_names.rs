//! Names of the agent's own items that the inspector recognises in a target's DWARF and symbols.
//!
//! The inspector finds a task's root future type, annotated frames inside decoded chains, the agent's
//! `JoinHandle` and its wakers by these names. They live here, beside the wire types, because renaming
//! one in the agent silently breaks decoding; the agent's tests check each against the real item (a
//! field destructured by the name given here, a type's `type_name`, a static's module path), so such a
//! rename breaks a test instead.

/// `asyncdump_agent::Framed<F>`, an annotated frame: its future, and the frame node the agent links.
pub const FRAMED: &str = "asyncdump_agent::task::frame::Framed";
pub const FRAMED_INNER: &str = "inner";
pub const FRAMED_NODE: &str = "node";

/// `asyncdump_agent::JoinHandle<T>`: the joined task's cell, an `Arc<TaskCell>`.
pub const JOIN_HANDLE: &str = "asyncdump_agent::tokio_support::JoinHandle";
pub const JOIN_HANDLE_TASK: &str = "task";

/// `asyncdump_agent::Instrumented<F>`, a task root: its task's cell (`Arc<TaskCell>`).
pub const INSTRUMENTED: &str = "asyncdump_agent::task::instrument::Instrumented";
pub const INSTRUMENTED_TASK: &str = "task";
/// Its `ManuallyDrop<F>` around the task's future.
pub const INSTRUMENTED_INNER: &str = "inner";

/// The vtable of the wakers the agent hands out to leaves: such a waker's data is an `Arc<TaskCell>`.
pub const OWNED_WAKER_VTABLE: &str = "asyncdump_agent::task::waker::OWNED_VTABLE";

/// The root anchor, `<Instrumented<F> as Future>::poll`, monomorphized per root future type `F`: a
/// task reports its address, and the subprogram at that address names `F`. Matched on the demangled
/// linkage name, which reads the same under legacy and v0 symbol mangling up to the generic arguments
/// (legacy spells the impl's parameter, `Instrumented<F>`; v0 the concrete type).
pub const ANCHOR_SUFFIX: &str = "> as core::future::future::Future>::poll";

/// Whether `demangled` (a linkage name demangled without its hash) is a root anchor.
pub fn is_anchor(demangled: &str) -> bool {
    let Some(rest) = demangled.strip_prefix('<') else {
        return false;
    };
    spellings(INSTRUMENTED).any(|path| {
        rest.strip_prefix(path)
            .is_some_and(|generic| generic.starts_with('<'))
    }) && demangled.ends_with(ANCHOR_SUFFIX)
}

/// Where earlier agents defined the items above (before the poll path moved into its own folder):
/// binaries built with them carry these paths in their DWARF and symbols, and still decode.
const EARLIER: &[(&str, &str)] = &[
    (FRAMED, "asyncdump_agent::frame::Framed"),
    (INSTRUMENTED, "asyncdump_agent::instrument::Instrumented"),
    (OWNED_WAKER_VTABLE, "asyncdump_agent::waker::OWNED_VTABLE"),
];

/// `path`, one of the items above, and every path an earlier agent gave the same item.
pub fn spellings(path: &'static str) -> impl Iterator<Item = &'static str> {
    let earlier = EARLIER.iter().filter(move |(now, _)| *now == path);
    std::iter::once(path).chain(earlier.map(|(_, then)| *then))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_anchor_reads_the_same_under_both_manglings() {
        assert!(is_anchor(
            "<asyncdump_agent::instrument::Instrumented<F> as core::future::future::Future>::poll"
        ));
        assert!(is_anchor(
            "<asyncdump_agent::task::instrument::Instrumented<svc::main::{closure#0}> as core::future::future::Future>::poll"
        ));
        assert!(!is_anchor(
            "<asyncdump_agent::task::frame::Framed<F> as core::future::future::Future>::poll"
        ));
        assert!(!is_anchor(
            "<asyncdump_agent::task::instrument::Instrumented<F> as core::ops::drop::Drop>::drop"
        ));
        assert!(!is_anchor(
            "<asyncdump_agent::task::instrument::InstrumentedX<F> as core::future::future::Future>::poll"
        ));
    }

    #[test]
    fn binaries_built_with_an_earlier_agent_are_still_recognised() {
        assert!(is_anchor(
            "<asyncdump_agent::instrument::Instrumented<F> as core::future::future::Future>::poll"
        ));
        assert_eq!(
            spellings(FRAMED).collect::<Vec<_>>(),
            [FRAMED, "asyncdump_agent::frame::Framed"]
        );
        assert_eq!(spellings(JOIN_HANDLE).collect::<Vec<_>>(), [JOIN_HANDLE]);
    }
}
