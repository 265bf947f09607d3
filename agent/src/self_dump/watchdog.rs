//! The watchdog: does each registered runtime still run the work it is given? At each tick, a
//! runtime with no probe outstanding is handed one: a task that does nothing but say it ran. A
//! probe still not polled after the configured time means every worker of that runtime is stuck
//! (in a poll that does not return, or never parked to take new work): the watchdog fires once,
//! and again only after that runtime ran a probe and then stopped again.
//!
//! An idle process runs each probe at once (a parked worker wakes for it), so it never fires, however
//! long its tasks wait on accept, timers or channels by design. Nothing is added to any poll path:
//! the cost is one small task spawned per runtime per tick, while the last one has run.

#[cfg(feature = "tokio")]
use std::sync::Arc;
#[cfg(feature = "tokio")]
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
#[cfg(feature = "tokio")]
use std::time::Instant;

/// One runtime's probe in flight.
#[cfg(feature = "tokio")]
struct Probe {
    sent: Instant,
    ran: Arc<AtomicBool>,
}

/// What the watchdog knows of each registered runtime, by its place in the registry.
#[derive(Default)]
pub(super) struct Watchdog {
    #[cfg(feature = "tokio")]
    probes: Vec<Option<Probe>>,
    /// Runtimes it fired for, not run a probe since.
    #[cfg(feature = "tokio")]
    fired: Vec<bool>,
}

/// Sets its flag when polled, or when dropped unpolled (its runtime shut down: not a hang).
#[cfg(feature = "tokio")]
struct Token(Arc<AtomicBool>);

#[cfg(feature = "tokio")]
impl Drop for Token {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The probe task: polled once, it says so (by dropping its token), and ends. In a dump of a stuck
/// runtime it shows as this fn, scheduled and never polled.
#[cfg(feature = "tokio")]
async fn probe(token: Token) {
    drop(token);
}

impl Watchdog {
    /// Without tokio there is no runtime to probe.
    #[cfg(not(feature = "tokio"))]
    pub(super) fn tick(&mut self, _: Duration) -> Option<(usize, Duration)> {
        None
    }

    /// One tick: `Some(runtime number, how long its probe waited)` when one is found stuck and was
    /// not already reported.
    #[cfg(feature = "tokio")]
    pub(super) fn tick(&mut self, after: Duration) -> Option<(usize, Duration)> {
        let handles = crate::runtime::registered();
        self.probes.resize_with(handles.len(), || None);
        self.fired.resize(handles.len(), false);
        let mut stuck = None;
        for (i, handle) in handles.iter().enumerate() {
            match &self.probes[i] {
                Some(p) if p.ran.load(Ordering::Acquire) => {
                    self.probes[i] = None;
                    self.fired[i] = false;
                }
                Some(p) if p.sent.elapsed() >= after && !self.fired[i] => {
                    self.fired[i] = true;
                    stuck = stuck.or(Some((i, p.sent.elapsed())));
                }
                _ => {}
            }
            if self.probes[i].is_none() {
                let ran = Arc::new(AtomicBool::new(false));
                let token = Token(ran.clone());
                drop(handle.spawn(probe(token)));
                self.probes[i] = Some(Probe {
                    sent: Instant::now(),
                    ran,
                });
            }
        }
        stuck
    }
}

/// How often to look for a watchdog of period `after`: a quarter of it, within [50 ms, 2 s].
pub(super) fn tick_every(after: Duration) -> Duration {
    (after / 4).clamp(Duration::from_millis(50), Duration::from_secs(2))
}

/// `30s`, `500ms`, `2m`, `1h`: the periods `ASYNCDUMP_WATCHDOG` takes.
pub fn parse_period(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().ok()?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_read_with_their_unit_and_nothing_else() {
        assert_eq!(parse_period("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_period(" 500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_period("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_period("1h"), Some(Duration::from_secs(3600)));
        for bad in ["30", "s", "0s", "-1s", "1.5s", "10x", ""] {
            assert_eq!(parse_period(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ticks_are_a_quarter_of_the_period_within_bounds() {
        assert_eq!(tick_every(Duration::from_secs(4)), Duration::from_secs(1));
        assert_eq!(
            tick_every(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
        assert_eq!(tick_every(Duration::from_secs(600)), Duration::from_secs(2));
    }
}
