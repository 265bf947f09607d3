//! Connection slots: at most [`MAX_CLIENTS`] connections are served at once, and no client can keep the
//! others out by asking without pause.
//!
//! Each connection holds a [`Lease`] and is charged the time the agent spends answering it, and so is
//! the process at its other end (SO_PEERCRED's pid). A process is greedy while its answers took at
//! least [`GREEDY_SHARE`] of the agent's time over the last [`WINDOW`] or so, and for [`COOLDOWN`] after
//! one of its connections was dropped. When every slot is taken, a newcomer from a process that is not
//! greedy takes the slot of the connection with the greatest share of the agent's time, if that share
//! is at least `GREEDY_SHARE`: that client is told so at its next request and closed. A greedy newcomer
//! is told `Busy` and must wait for a slot to come free. Each eviction needs its own greedy connection,
//! so the agent never serves more than twice `MAX_CLIENTS`. Clients that ask for little (a `dump`, a
//! `watch` at its usual interval) are never evicted, and at most [`MAX_SUBSCRIPTIONS`] slots may hold
//! subscriptions, so one is always left for a plain request.
//!
//! A same-uid client that forks a new process for every connection defeats the accounting by pid; it
//! could as well kill the host, and is outside what this guards against (buggy scripts and tools in a
//! loop are inside).
//!
//! Answers are worked out one at a time, and at most half of one core: a rested agent may work
//! [`BURST`] in a row, so that the few requests of one `dump` are answered without pause, and after
//! that, work that took `t` is followed by a rest of `t` (see [`Lease::work`]). Admitting or refusing a connection
//! takes a turn the same way ([`paced`]), and what a connection's thread spends outside its turns
//! (reading, writing) lengthens the rest ([`Lease::spent_outside`]): all of the agent's work counts. Of the connections waiting, the one
//! whose process had the smallest share of the agent's time lately goes first, so a `dump` beside
//! clients asking in a loop waits for at most one of their answers at each of its requests.
//!
//! The table and the gate are mutexes taken only by the agent's own threads, once per connection and
//! per request, never by the application.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::sys::FastMap;

/// Most connections served at once.
pub const MAX_CLIENTS: usize = 4;

/// Subscriptions served at once, at most: one slot less than [`MAX_CLIENTS`].
pub const MAX_SUBSCRIPTIONS: usize = MAX_CLIENTS - 1;
/// A client whose answers took this share of the agent's time, or more, is greedy.
pub const GREEDY_SHARE: f64 = 0.05;
/// How far back a process's share is reckoned (between one and two of these).
pub const WINDOW: Duration = Duration::from_secs(2);
/// How long a process whose connection was dropped counts as greedy.
pub const COOLDOWN: Duration = Duration::from_secs(5);
/// Processes remembered, at most; the least recently seen are forgotten first.
const MAX_PEERS: usize = 256;
/// Shares are reckoned over at least this long, so that a new connection's first answer does not
/// count as all of its time.
const LEAST_SPAN: Duration = Duration::from_millis(250);

struct Slot {
    peer: u32,
    opened: Instant,
    /// Time spent answering this connection, in nanoseconds.
    busy_ns: AtomicU64,
    evicted: AtomicBool,
    subscribed: AtomicBool,
}

impl Slot {
    fn share(&self) -> f64 {
        let span = self.opened.elapsed().max(LEAST_SPAN);
        self.busy_ns.load(Relaxed) as f64 / span.as_nanos() as f64
    }
}

/// What one client process cost lately.
struct Peer {
    /// The current window's start, and the time charged in it and in the one before.
    window: Instant,
    busy: Duration,
    before: Duration,
    seen: Instant,
    dropped: Option<Instant>,
}

impl Peer {
    fn new(now: Instant) -> Peer {
        Peer {
            window: now,
            busy: Duration::ZERO,
            before: Duration::ZERO,
            seen: now,
            dropped: None,
        }
    }

    fn roll(&mut self, now: Instant) {
        let age = now.duration_since(self.window);
        if age >= WINDOW * 2 {
            (self.before, self.busy, self.window) = (Duration::ZERO, Duration::ZERO, now);
        } else if age >= WINDOW {
            (self.before, self.busy, self.window) =
                (self.busy, Duration::ZERO, self.window + WINDOW);
        }
    }

    /// Its share of the agent's time lately (over one to two [`WINDOW`]s).
    fn share(&mut self, now: Instant) -> f64 {
        self.roll(now);
        let span = WINDOW + now.duration_since(self.window);
        (self.before + self.busy).as_secs_f64() / span.as_secs_f64()
    }

    fn greedy(&mut self, now: Instant) -> bool {
        self.share(now) >= GREEDY_SHARE
            || self
                .dropped
                .is_some_and(|at| now.duration_since(at) < COOLDOWN)
    }
}

#[derive(Default)]
struct Table {
    /// The process these slots are of: a forked child inherits its parent's, which are not its own.
    pid: u32,
    slots: Vec<Arc<Slot>>,
    peers: FastMap<u32, Peer>,
}

impl Table {
    fn peer(&mut self, pid: u32, now: Instant) -> &mut Peer {
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(&pid) {
            let oldest = self
                .peers
                .iter()
                .min_by_key(|(_, p)| p.seen)
                .map(|(&k, _)| k);
            if let Some(oldest) = oldest {
                self.peers.remove(&oldest);
            }
        }
        let peer = self.peers.entry(pid).or_insert_with(|| Peer::new(now));
        peer.seen = now;
        peer
    }
}

fn table() -> std::sync::MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    // The table holds plain counters, consistent after any panic: a poisoned lock is simply taken.
    let table = TABLE.get_or_init(Default::default);
    let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if table.pid != pid {
        *table = Table {
            pid,
            ..Table::default()
        };
    }
    table
}

/// A connection's slot, given back on drop.
pub(crate) struct Lease(Arc<Slot>);

/// Takes a slot for a new connection from process `peer`, evicting a greedy client if need be; `Err`
/// says why not.
pub(crate) fn admit(peer: u32) -> Result<Lease, String> {
    let now = Instant::now();
    let mut table = table();
    if table
        .slots
        .iter()
        .filter(|s| !s.evicted.load(Relaxed))
        .count()
        >= MAX_CLIENTS
    {
        if table.peer(peer, now).greedy(now) {
            return Err(format!(
                "agent busy: {MAX_CLIENTS} clients connected, and this process asked much lately; retry"
            ));
        }
        let greediest = table
            .slots
            .iter()
            .filter(|s| !s.evicted.load(Relaxed))
            .max_by(|a, b| a.share().total_cmp(&b.share()))
            .filter(|s| s.share() >= GREEDY_SHARE)
            .cloned();
        let Some(slot) = greediest else {
            return Err(format!(
                "agent busy: {MAX_CLIENTS} clients connected; retry"
            ));
        };
        slot.evicted.store(true, Relaxed);
        table.peer(slot.peer, now).dropped = Some(now);
        // It may be waiting for its turn, which it no longer needs.
        gate().changed.notify_all();
    }
    let slot = Arc::new(Slot {
        peer,
        opened: now,
        busy_ns: AtomicU64::new(0),
        evicted: AtomicBool::new(false),
        subscribed: AtomicBool::new(false),
    });
    table.slots.push(slot.clone());
    Ok(Lease(slot))
}

impl Lease {
    /// Runs `f`, the agent's work for one answer to this connection (capture and encoding, not the
    /// writing), in its turn at the gate, and charges the time it took. `Err` says why not: a
    /// newcomer took this connection's slot while it waited. Never called from inside `f`.
    pub(crate) fn work<T>(&self, f: impl FnOnce() -> T) -> Result<T, String> {
        let Some(turn) = gate().enter(self.priority(), &self.0.evicted) else {
            return Err(self.evicted().unwrap_or_default());
        };
        let start = Instant::now();
        let out = f();
        drop(turn);
        self.charge(start.elapsed());
        Ok(out)
    }

    /// Charges CPU time this connection's thread spent outside the gate (reading its requests,
    /// writing its answers): the gate rests that much longer, so that all of the agent's work, not
    /// only what it does in its turns, stays within half a core.
    pub(crate) fn spent_outside(&self, cpu: Duration) {
        // Twice: once for the time the work took, which went by beside the turns and rests of
        // others instead of in a turn of its own, and once for the rest it earned.
        gate().rest_longer(cpu * 2);
        self.charge(cpu);
    }

    /// Its place among those waiting for a turn (the lowest goes first): its process's share of the
    /// agent's time lately, not this connection's. A `dump` asks a few things in a row, the first
    /// of them (a snapshot) the costly one; a client in a loop that reconnects starts each
    /// connection afresh. By connection, every new connection of the loop would go before the
    /// dump's next request.
    fn priority(&self) -> f64 {
        let now = Instant::now();
        table().peer(self.0.peer, now).share(now)
    }

    /// Adds `took` to the time spent answering this connection.
    fn charge(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0.busy_ns.fetch_add(ns, Relaxed);
        let now = Instant::now();
        let mut table = table();
        let peer = table.peer(self.0.peer, now);
        peer.roll(now);
        peer.busy += took;
    }

    /// Why this connection must end, once a newcomer took its slot.
    pub(crate) fn evicted(&self) -> Option<String> {
        self.0.evicted.load(Relaxed).then(|| {
            format!(
                "dropped: this client took {:.0}% of the agent's time while another waited for a slot; ask less often",
                self.0.share() * 100.0
            )
        })
    }

    /// Marks this connection as subscribed, unless [`MAX_SUBSCRIPTIONS`] are served already.
    pub(crate) fn subscribe(&self) -> Result<Subscribed<'_>, String> {
        let table = table();
        let others = table
            .slots
            .iter()
            .filter(|s| !Arc::ptr_eq(s, &self.0) && s.subscribed.load(Relaxed))
            .count();
        if others >= MAX_SUBSCRIPTIONS {
            return Err(format!(
                "agent busy: {MAX_SUBSCRIPTIONS} subscriptions served already; retry"
            ));
        }
        self.0.subscribed.store(true, Relaxed);
        Ok(Subscribed(self))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        table().slots.retain(|s| !Arc::ptr_eq(s, &self.0));
    }
}

/// The longest rest after one answer's work, so that one huge snapshot does not hold up the next
/// client for as long as it took.
const REST_MAX: Duration = Duration::from_millis(200);

/// Work a rested agent may do in a row before it rests: a `dump -v` asks four things one after the
/// other, and would otherwise wait out a rest before each. Over any span the agent works at most
/// half of it plus this (and one turn, as a turn longer than [`REST_MAX`] rests only that long).
pub(crate) const BURST: Duration = Duration::from_millis(100);

/// Who is working, who waits, and until when the agent rests.
#[derive(Default)]
struct GateState {
    working: bool,
    /// When all work so far is paid for, at half a core (each turn's `t` of work pays `2t` of the
    /// clock from its start); `None` if never. A turn may start while this is at most [`BURST`]
    /// ahead.
    paid_until: Option<Instant>,
    /// Each waiter's ticket and its connection's share when it came: the smallest share goes first,
    /// and of equal shares the earliest ticket.
    waiting: Vec<(u64, f64)>,
    next_ticket: u64,
}

struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

fn gate() -> &'static Gate {
    static GATE: OnceLock<Gate> = OnceLock::new();
    GATE.get_or_init(Gate::new)
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    // Only flags, times and tickets are kept under the lock, each written whole: a poisoned one is
    // as good as any.
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for this caller's turn: nobody working, the rest over, and no waiter before it; `None`
    /// once `evicted` is set.
    fn enter(&self, share: f64, evicted: &AtomicBool) -> Option<Turn<'_>> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push((ticket, share));
        loop {
            if evicted.load(Relaxed) {
                state.waiting.retain(|&(t, _)| t != ticket);
                drop(state);
                // Whoever is next may have been waiting behind this caller.
                self.changed.notify_all();
                return None;
            }
            let first = state
                .waiting
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
                .is_some_and(|&(t, _)| t == ticket);
            let rest = state.rest(Instant::now());
            state = match (first && !state.working, rest.is_zero()) {
                (true, true) => break,
                (true, false) => {
                    self.changed
                        .wait_timeout(state, rest)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                (false, _) => self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
        state.waiting.retain(|&(t, _)| t != ticket);
        state.working = true;
        Some(Turn {
            gate: self,
            started: Instant::now(),
        })
    }
}

impl Gate {
    /// Makes the current rest (or one from now) `extra` longer. Not capped as a turn's rest is:
    /// connections' threads do this work side by side, and each of them must be paid for.
    fn rest_longer(&self, extra: Duration) {
        let now = Instant::now();
        let mut state = self.lock();
        let from = state.paid_until.map_or(now, |u| u.max(now));
        state.paid_until = Some(from + extra);
    }
}

impl GateState {
    /// How long a turn asked for at `now` must wait for the rest to be over.
    fn rest(&self, now: Instant) -> Duration {
        self.paid_until
            .map_or(Duration::ZERO, |u| u.saturating_duration_since(now + BURST))
    }

    /// Charges a turn that started at `started` and ended at `now`: its work pays twice its length
    /// of the clock from when it started (or from when earlier work is paid for, if later), so
    /// that once [`BURST`] is spent, work that took `t` is followed by a rest of `t`, never longer
    /// than [`REST_MAX`].
    fn turn_done(&mut self, started: Instant, now: Instant) {
        let took = now.saturating_duration_since(started);
        let from = self.paid_until.map_or(started, |u| u.max(started));
        self.paid_until = Some((from + took * 2).min(now + BURST + REST_MAX));
    }
}

/// Runs `f`, agent work that answers no connection (admitting one, refusing one), in a turn at the
/// gate, in line with the answers of connections that have asked nothing yet, and rests as long as
/// it took: a flood of connections costs the agent no more than its answers may.
pub(crate) fn paced<T>(f: impl FnOnce() -> T) -> T {
    static NEVER: AtomicBool = AtomicBool::new(false);
    let turn = gate().enter(0.0, &NEVER);
    let out = f();
    drop(turn);
    out
}

/// The right to work, given back on drop (also when the work panics), with the rest it earned.
struct Turn<'a> {
    gate: &'a Gate,
    started: Instant,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.working = false;
        state.turn_done(self.started, Instant::now());
        drop(state);
        self.gate.changed.notify_all();
    }
}

/// A subscription's hold on its slot's mark; cleared on drop.
pub(crate) struct Subscribed<'a>(&'a Lease);

impl Drop for Subscribed<'_> {
    fn drop(&mut self) {
        self.0.0.subscribed.store(false, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One spec, as the table is process-wide: these steps must not interleave with another test's.
    #[test]
    fn a_greedy_client_gives_its_slot_up_to_a_modest_one_and_not_to_its_like() {
        let (greedy, modest, other) = (1001, 1002, 1003);
        let mut leases: Vec<Lease> = (0..MAX_CLIENTS).map(|_| admit(greedy).unwrap()).collect();
        assert!(admit(modest).is_err(), "full, and nobody greedy");
        leases[2].charge(Duration::from_millis(125));
        assert!(admit(greedy).is_err(), "a greedy process waits its turn");
        let newcomer = admit(modest).expect("the greedy connection's slot");
        assert!(leases[2].evicted().is_some_and(|m| m.contains("50%")));
        assert!(leases[0].evicted().is_none());
        assert!(admit(other).is_err(), "no other connection is greedy");
        drop(leases.remove(2));
        assert!(admit(greedy).is_err(), "full again");
        let subs: Vec<_> = leases.iter().map(|l| l.subscribe()).collect();
        assert!(subs.iter().all(|s| s.is_ok()), "three subscriptions");
        assert!(newcomer.subscribe().is_err(), "a fourth is refused");
        drop(subs);
        assert!(newcomer.subscribe().is_ok());
    }

    #[test]
    fn of_the_waiting_the_one_that_asked_least_works_first() {
        let gate = Gate::new();
        let order = Mutex::new(Vec::new());
        let waiting = |n| {
            while gate.lock().waiting.len() < n {
                std::thread::yield_now();
            }
        };
        let no = AtomicBool::new(false);
        let busy = gate.enter(0.3, &no);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _turn = gate.enter(0.5, &no);
                order.lock().unwrap().push("greedy, came first");
            });
            waiting(1);
            s.spawn(|| {
                let _turn = gate.enter(0.0, &no);
                order.lock().unwrap().push("modest, came second");
            });
            waiting(2);
            drop(busy);
        });
        let order = order.into_inner().unwrap();
        assert_eq!(order, ["modest, came second", "greedy, came first"]);
    }

    #[test]
    fn a_turn_goes_by_what_the_process_asked_lately_not_the_connection() {
        let lease = |peer| {
            Lease(Arc::new(Slot {
                peer,
                opened: Instant::now(),
                busy_ns: AtomicU64::new(0),
                evicted: AtomicBool::new(false),
                subscribed: AtomicBool::new(false),
            }))
        };
        // A dump's connection, just answered a snapshot; a loop's connections, old and new.
        let (dump, looping) = (2001, 2002);
        let snapshot = lease(dump);
        snapshot.charge(Duration::from_millis(30));
        let old = lease(looping);
        old.charge(Duration::from_millis(900));
        let fresh = lease(looping);
        assert!(
            fresh.0.share() < snapshot.0.share(),
            "by connection the loop would go first"
        );
        assert!(
            snapshot.priority() < fresh.priority(),
            "by process the dump goes first"
        );
    }

    /// A gate's state after turns of `work` each, every one started as soon as the rest allowed,
    /// from a rested gate at `t0`; returns the state and when the last turn ended.
    fn turns(work: &[Duration], t0: Instant) -> (GateState, Instant) {
        let mut state = GateState::default();
        let mut now = t0;
        for &w in work {
            now += state.rest(now);
            state.turn_done(now, now + w);
            now += w;
        }
        (state, now)
    }

    #[test]
    fn a_rested_gate_answers_a_burst_of_requests_without_rest() {
        let t0 = Instant::now();
        // A dump's snapshot and three reads, within the burst.
        let ms = Duration::from_millis;
        let (state, end) = turns(&[ms(40), ms(20), ms(20), ms(15)], t0);
        assert_eq!(end - t0, ms(95), "no rest between them");
        assert_eq!(state.rest(end), Duration::ZERO, "95 ms of 100 spent");
        let (state, end) = turns(&[ms(40), ms(20), ms(20), ms(20), ms(30)], t0);
        assert_eq!(end - t0, ms(130), "the burst ran out during the last turn");
        assert_eq!(
            state.rest(end),
            ms(30),
            "which then rests as long as it took"
        );
    }

    #[test]
    fn once_the_burst_is_spent_work_that_took_t_is_followed_by_a_rest_of_t() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let (mut state, end) = turns(&[BURST], t0);
        assert_eq!(state.rest(end), Duration::ZERO, "exactly the burst");
        state.turn_done(end, end + ms(30));
        assert_eq!(state.rest(end + ms(30)), ms(30));
        // A huge turn rests at most REST_MAX.
        state.turn_done(end + ms(60), end + ms(2060));
        assert_eq!(state.rest(end + ms(2060)), REST_MAX);
    }

    #[test]
    fn over_any_span_work_takes_at_most_half_of_it_plus_the_burst() {
        let t0 = Instant::now();
        // Turns longer than REST_MAX rest REST_MAX (the spec above).
        for each in [1, 7, 30, 150, 200].map(Duration::from_millis) {
            let work = vec![each; 20_000 / each.as_millis() as usize];
            let (_, end) = turns(&work, t0);
            let worked: Duration = work.iter().sum();
            let span = end - t0;
            assert!(
                worked <= span / 2 + BURST + each,
                "{each:?} turns: {worked:?} of work in {span:?}"
            );
            assert!(
                worked * 2 >= span - REST_MAX.min(each),
                "{each:?} turns: no rest longer than earned ({worked:?} in {span:?})"
            );
        }
    }

    #[test]
    fn after_work_the_gate_rests_as_long_as_the_work_took() {
        let gate = Gate::new();
        let no = AtomicBool::new(false);
        drop(gate.enter(0.0, &no));
        // Spend the burst, as a client asking in a loop does.
        let spent = Instant::now();
        gate.lock().turn_done(spent - BURST, spent);
        let turn = gate.enter(0.0, &no);
        std::thread::sleep(Duration::from_millis(30));
        drop(turn);
        let asked = Instant::now();
        // The 30 ms turn is paid for by 60 ms of the clock from when the burst was spent; what of
        // them is left is the rest (30 ms, less whatever a loaded machine took between the steps).
        let due = (spent + Duration::from_millis(60)).saturating_duration_since(asked);
        drop(gate.enter(0.0, &no));
        assert!(
            asked.elapsed() >= due,
            "waited {:?}, due {due:?}",
            asked.elapsed()
        );
    }
}
