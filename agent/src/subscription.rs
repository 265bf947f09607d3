//! Serving one subscription ([`Request::Subscribe`]) on a connection thread.
//!
//! The first update is every task; each later one captures only the tasks the journal marked since
//! (see `changes`), so a tick costs what changed, not how many tasks there are: an unpolled task's state
//! machine has not moved, and neither its frames nor its walk need reading again. Names are interned
//! once per subscription. Registered runtimes are listed on the first update and then at most once a
//! second, and no more than a twentieth of the time, because the tasks nobody spawned through the
//! agent cannot be marked as they change: a listing costs what the runtime's tasks number.
//!
//! Between ticks the thread waits for the client with a peek, so a request (which ends the subscription)
//! or a closed connection is noticed at once. A client that stops reading fills its socket buffer; the
//! write then times out after [`STALLED_WRITE`] and the subscription ends. Meanwhile, and whenever the
//! client reads slowly, changes pile up in the journal as one entry per task, never as a queue of
//! updates: memory stays bounded by the number of tasks, and the host never waits.
//!
//! [`Request::Subscribe`]: asyncdump_protocol::Request::Subscribe

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use asyncdump_protocol::{
    CensusReport, MIN_INTERVAL_MS, Reply, RuntimeReport, Snapshot, SubscribeRequest, TaskState,
    Update, encode,
};

use crate::capture::Interner;
use crate::slots::Lease;
use crate::sys;
use crate::task::Subscriber;
use crate::task::{TaskCell, registry};

/// How long a write to a subscriber may make no progress before the subscriber is dropped.
pub const STALLED_WRITE: Duration = Duration::from_secs(2);
/// Least time between two listings of the registered runtimes.
const RUNTIME_EVERY: Duration = Duration::from_secs(1);
/// A listing of the runtimes may take at most one part in this many of the agent's time: listing
/// 100,000 tasks takes a third of a second.
const RUNTIME_SHARE: u32 = 20;

/// Why a subscription ended.
pub(crate) enum End {
    /// The client sent this frame: the connection goes on with it.
    Spoke,
    /// The connection closed or failed.
    Closed,
}

/// What one subscription has sent so far.
struct Sent {
    interner: Interner,
    /// Tasks the client holds (sent and not reported gone).
    known: rustc_hash::FxHashSet<u64>,
    metas: u32,
    sites: u32,
    /// The last listing of the runtimes: when it started, what it took, what it found.
    runtimes: Option<(Instant, Duration, Vec<RuntimeReport>)>,
}

/// Sends updates until the client speaks (its frame is left unread) or goes away.
pub(crate) fn serve(stream: &mut UnixStream, req: &SubscribeRequest, lease: &Lease) -> End {
    let subscriber = Subscriber::join();
    let interval = Duration::from_millis(req.interval_ms.max(MIN_INTERVAL_MS).into());
    let mut sent = Sent {
        interner: Interner::default(),
        known: Default::default(),
        metas: 0,
        sites: 0,
        runtimes: None,
    };
    if stream.set_write_timeout(Some(STALLED_WRITE)).is_err() {
        return End::Closed;
    }
    let mut full = true;
    loop {
        let tick = Instant::now();
        let cells = if full {
            // Whatever the journal holds is in the full state already.
            drop(subscriber.take());
            registry().collect(req.include_completed)
        } else {
            subscriber.take()
        };
        let encoded = match lease.work(|| encode(&Reply::Update(sent.update(&cells, req, full)))) {
            Ok(encoded) => encoded,
            Err(evicted) => {
                crate::wire::refuse(stream, asyncdump_protocol::ErrorKind::Busy, evicted);
                return End::Closed;
            }
        };
        full = false;
        let Ok(bytes) = encoded else {
            return End::Closed;
        };
        if crate::wire::write_answer(stream, bytes).is_err() {
            return End::Closed;
        }
        if let Some(why) = lease.evicted() {
            crate::wire::refuse(stream, asyncdump_protocol::ErrorKind::Busy, why);
            return End::Closed;
        }
        match wait(stream, interval.saturating_sub(tick.elapsed())) {
            Ok(false) => {}
            Ok(true) => return End::Spoke,
            Err(_) => return End::Closed,
        }
    }
}

/// Waits up to `timeout` for the client; `Ok(true)` when it sent something.
fn wait(stream: &UnixStream, timeout: Duration) -> io::Result<bool> {
    match sys::peek_wait(stream, timeout)? {
        None => Ok(false),
        Some(0) => Err(io::ErrorKind::UnexpectedEof.into()),
        Some(_) => Ok(true),
    }
}

impl Sent {
    fn update(&mut self, cells: &[Arc<TaskCell>], req: &SubscribeRequest, full: bool) -> Update {
        let start = sys::now_ns();
        let mut gone = Vec::new();
        // Tasks the client never saw that ended meanwhile are not worth a word.
        let cells: Vec<Arc<TaskCell>> = cells
            .iter()
            .filter(|c| {
                let ended = c.is_completed() && !req.include_completed;
                if ended && self.known.remove(&c.id) {
                    gone.push(c.id);
                }
                !ended
            })
            .cloned()
            .collect();
        let snap = crate::capture::with_capturer(|c| {
            let snap = c.capture_cells(&cells, req.walk.as_ref(), &mut self.interner);
            crate::containment::inject(crate::containment::Site::Update);
            snap
        });
        if full {
            self.known.clear();
        }
        for t in &snap.tasks {
            // A completed task is sent once, as completed, and then forgotten here: a million tasks
            // coming and going must not leave a million ids behind.
            if matches!(t.state, TaskState::Completed { .. }) {
                self.known.remove(&t.id);
            } else {
                self.known.insert(t.id);
            }
        }
        let runtimes = self.runtimes(req, full);
        self.finish(snap, gone, runtimes, full, start)
    }

    /// The runtimes' listing and its census, when one is due and the listing differs from the last
    /// one sent.
    fn runtimes(
        &mut self,
        req: &SubscribeRequest,
        full: bool,
    ) -> Option<(Vec<RuntimeReport>, Option<CensusReport>)> {
        let due = |(at, took, _): &(Instant, Duration, _)| {
            at.elapsed() >= RUNTIME_EVERY.max(*took * RUNTIME_SHARE)
        };
        if !full && self.runtimes.as_ref().is_some_and(|r| !due(r)) {
            return None;
        }
        let start = Instant::now();
        let listing = crate::capture::with_capturer(|c| c.list_runtimes(req.walk.as_ref()));
        let listed = listing.reports;
        let same = !full
            && self
                .runtimes
                .as_ref()
                .is_some_and(|(_, _, last)| *last == listed);
        self.runtimes = Some((start, start.elapsed(), listed.clone()));
        (!same).then_some((listed, listing.census))
    }

    fn finish(
        &mut self,
        snap: Snapshot,
        gone: Vec<u64>,
        runtimes: Option<(Vec<RuntimeReport>, Option<CensusReport>)>,
        full: bool,
        start: u64,
    ) -> Update {
        let (runtimes, census) = runtimes.map_or((None, None), |(r, c)| (Some(r), c));
        let (metas_before, sites_before) = (self.metas, self.sites);
        self.metas += snap.frame_metas.len() as u32;
        self.sites += snap.spawn_sites.len() as u32;
        Update {
            full,
            now_ns: snap.now_ns,
            capture_ns: sys::now_ns().saturating_sub(start),
            uptime_ns: snap.uptime_ns,
            metas_before,
            frame_metas: snap.frame_metas,
            sites_before,
            spawn_sites: snap.spawn_sites,
            tasks: snap.tasks,
            gone,
            stats: snap.stats,
            runtimes,
            census,
        }
    }
}

/// Ids of `tasks`, for tests.
#[cfg(test)]
fn ids(u: &Update) -> Vec<u64> {
    u.tasks.iter().map(|t| t.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameExt, instrument};
    use std::future::Future;
    use std::task::{Context, Waker};

    fn poll(f: std::pin::Pin<&mut impl Future>) {
        let _ = f.poll(&mut Context::from_waker(Waker::noop()));
    }

    fn req(include_completed: bool) -> SubscribeRequest {
        SubscribeRequest {
            interval_ms: 0,
            include_completed,
            walk: None,
        }
    }

    fn sent() -> Sent {
        Sent {
            interner: Interner::default(),
            known: Default::default(),
            metas: 0,
            sites: 0,
            runtimes: None,
        }
    }

    /// Other tests in this binary spawn tasks too: look only at ours.
    fn ours(u: &Update, mine: &[u64]) -> Vec<u64> {
        ids(u).into_iter().filter(|id| mine.contains(id)).collect()
    }

    #[test]
    fn after_the_full_state_an_update_carries_only_the_tasks_that_changed() {
        let req = req(false);
        let sub = Subscriber::join();
        let mut a = Box::pin(instrument(std::future::pending::<()>().frame("a")));
        let mut b = Box::pin(instrument(std::future::pending::<()>().frame("b")));
        poll(a.as_mut());
        poll(b.as_mut());
        let mine = [a.task_id(), b.task_id()];
        let mut s = sent();
        drop(sub.take());
        let first = s.update(&registry().collect(false), &req, true);
        assert_eq!(ours(&first, &mine), mine);
        assert_eq!(first.metas_before, 0);
        assert!(first.frame_metas.iter().any(|m| m.name == "a"));

        poll(b.as_mut());
        let second = s.update(&sub.take(), &req, false);
        assert_eq!(ours(&second, &mine), [b.task_id()], "only b was polled");
        assert_eq!(
            second
                .tasks
                .iter()
                .find(|t| t.id == b.task_id())
                .unwrap()
                .polls,
            2
        );
        assert!(
            second.frame_metas.iter().all(|m| m.name != "b"),
            "b's name was sent already"
        );
        assert_eq!(
            second.metas_before,
            s.metas - second.frame_metas.len() as u32
        );

        let quiet = s.update(&sub.take(), &req, false);
        assert!(ours(&quiet, &mine).is_empty(), "nothing happened");

        let b_id = b.task_id();
        drop(b);
        let ended = s.update(&sub.take(), &req, false);
        let gone: Vec<u64> = ended
            .gone
            .iter()
            .copied()
            .filter(|id| mine.contains(id))
            .collect();
        assert_eq!(gone, [b_id]);
        assert!(ours(&ended, &mine).is_empty());
    }

    #[test]
    fn a_task_born_and_ended_between_two_updates_is_never_mentioned() {
        let req = req(false);
        let sub = Subscriber::join();
        let mut s = sent();
        drop(sub.take());
        let _ = s.update(&registry().collect(false), &req, true);
        let mut brief = Box::pin(instrument(async {}));
        let id = brief.task_id();
        poll(brief.as_mut());
        drop(brief);
        let next = s.update(&sub.take(), &req, false);
        assert!(!ids(&next).contains(&id) && !next.gone.contains(&id));
    }

    #[test]
    fn completed_tasks_are_sent_as_completed_when_asked_for() {
        let req = req(true);
        let sub = Subscriber::join();
        let mut s = sent();
        let mut done = Box::pin(instrument(async {}));
        let id = done.task_id();
        drop(sub.take());
        let _ = s.update(&registry().collect(true), &req, true);
        poll(done.as_mut());
        let next = s.update(&sub.take(), &req, false);
        let t = next.tasks.iter().find(|t| t.id == id).expect("reported");
        assert!(matches!(t.state, TaskState::Completed { .. }));
        assert!(next.gone.is_empty());
        assert!(
            !s.known.contains(&id),
            "sent once as completed, then forgotten"
        );
    }

    #[test]
    fn every_subscriber_sees_every_change_however_their_ticks_interleave() {
        let (one, two) = (Subscriber::join(), Subscriber::join());
        let mut t = Box::pin(instrument(std::future::pending::<()>()));
        let id = t.task_id();
        poll(t.as_mut());
        assert!(one.take().iter().any(|c| c.id == id));
        poll(t.as_mut());
        assert!(two.take().iter().any(|c| c.id == id), "two saw both polls");
        assert!(one.take().iter().any(|c| c.id == id), "one saw the second");
        assert!(!one.take().iter().any(|c| c.id == id), "and nothing since");
    }
}
