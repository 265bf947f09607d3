//! Keeping the agent's own failures inside the agent.
//!
//! Every agent thread runs its work under [`contain`]: a panic there (a bug in the agent) is caught,
//! reported in one line on the host's stderr, and turned into a value the caller can act on, so the host
//! never sees it. This works only when the host is built with `panic = "unwind"` (the default); with
//! `panic = "abort"` there is nothing to catch, and the agent is as dangerous as any other code in the
//! process.
//!
//! With the `fault-injection` feature, tests arm panics at named [`Site`]s through the
//! `ASYNCDUMP_FAULT` environment variable (`accept=2,snapshot=1`: panic in the first two accepted
//! connections and the first snapshot), to prove each is contained. Without the feature [`inject`] is
//! empty and the variable is ignored.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site {
    /// The listener thread, as it takes a new connection.
    Accept,
    /// A snapshot, midway, with the capturer's lock held.
    Snapshot,
    /// A subscription update, midway, with the capturer's lock held.
    Update,
}

/// Runs `f`; a panic in it is reported as `what` on stderr and comes back as `None`.
pub(crate) fn contain<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".into());
            log(&format!(
                "{what} failed ({why}); contained, the host is unaffected; please report this bug"
            ));
            None
        }
    }
}

/// One line on the host's stderr, marked as the agent's. Never fails.
pub(crate) fn log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "asyncdump agent: {line}");
}

/// Panics when a fault is armed at `site` (only with the `fault-injection` feature).
#[inline]
pub(crate) fn inject(site: Site) {
    #[cfg(feature = "fault-injection")]
    armed::hit(site);
    #[cfg(not(feature = "fault-injection"))]
    let _ = site;
}

#[cfg(feature = "fault-injection")]
mod armed {
    use super::Site;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    const SITES: [(Site, &str); 3] = [
        (Site::Accept, "accept"),
        (Site::Snapshot, "snapshot"),
        (Site::Update, "update"),
    ];

    /// How many more times each site panics, in the order of [`SITES`].
    fn left() -> &'static [AtomicU32; 3] {
        static LEFT: OnceLock<[AtomicU32; 3]> = OnceLock::new();
        LEFT.get_or_init(|| {
            let spec = std::env::var("ASYNCDUMP_FAULT").unwrap_or_default();
            let count = |name: &str| {
                spec.split(',')
                    .filter_map(|item| item.split_once('='))
                    .find(|(n, _)| n.trim() == name)
                    .and_then(|(_, c)| c.trim().parse().ok())
                    .unwrap_or(0)
            };
            SITES.map(|(_, name)| AtomicU32::new(count(name)))
        })
    }

    pub(super) fn hit(site: Site) {
        let Some(i) = SITES.iter().position(|(s, _)| *s == site) else {
            return;
        };
        let armed = left()[i].fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        if armed.is_ok() {
            panic!("fault injected at {}", SITES[i].1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_caught_and_becomes_none() {
        assert_eq!(contain("a test", || 7), Some(7));
        let caught: Option<()> = contain("a test", || panic!("boom"));
        assert_eq!(caught, None);
    }
}
