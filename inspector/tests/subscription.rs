//! Subscriptions against a live `mass` fixture: a full state, then updates carrying only what changed;
//! the state they build is the agent's; a subscriber that stops reading is dropped without the host
//! noticing.

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use asyncdump::attach::target::Target;
use asyncdump::session::{Session, SessionOptions};
use asyncdump_protocol::{
    ClientHello, Handshake, MAX_REPLY_BYTES, Request, SubscribeRequest, encode, read_frame,
    write_frame,
};

use crate::support::{Fixture, asyncdump_ok, dump_json};

const TASKS: usize = 3000;

fn mass(extra: &[&str]) -> Fixture {
    let n = TASKS.to_string();
    let mut args = vec!["--tasks", &n, "--changing", "5"];
    args.extend_from_slice(extra);
    Fixture::start("mass", &args)
}

fn attach(fx: &Fixture) -> Session {
    let options = SessionOptions::default();
    Session::attach(&Target::Pid(fx.pid), &options).expect("attached")
}

#[test]
fn after_the_full_state_updates_carry_only_the_tasks_that_changed() {
    let fx = mass(&["--churn", "20"]);
    let mut session = attach(&fx);
    session.subscribe(100, false).expect("subscribed");
    let (mut first, mut applied) = session.next_update().expect("first update");
    assert!(applied.full);
    // A short-lived task of a root type no task had when the session planned (at attach) makes the
    // session plan it and subscribe again, once: a second full state.
    for _ in 0..2 {
        let (dump, a) = session.next_update().expect("update");
        if !a.full {
            break;
        }
        (first, applied) = (dump, a);
    }
    assert!(applied.new > TASKS, "every task: {applied:?}");
    let held = |d: &asyncdump::model::Dump| {
        d.tasks
            .iter()
            .filter(|t| t.name.as_deref() == Some("held"))
            .count()
    };
    assert_eq!(held(&first), TASKS);
    let mut carried = Vec::new();
    let mut ended = 0;
    for _ in 0..10 {
        let (dump, a) = session.next_update().expect("update");
        assert!(!a.full);
        carried.push(a.new + a.changed + a.completed);
        ended += a.gone;
        assert_eq!(held(&dump), TASKS, "idle tasks stay in the state");
        let ticking = dump
            .tasks
            .iter()
            .find(|t| t.name.as_deref() == Some("ticking"))
            .expect("a ticking task");
        assert!(
            ticking.frames[0].meta.name.ends_with("mass::tick"),
            "{:?}",
            ticking.frames
        );
    }
    let most = carried.iter().max().copied().unwrap_or(0);
    // 5 ticking tasks woken every ~100 ms, 20 brief ones a second, the churn task: never the 3000.
    assert!(most < 100, "updates carried {carried:?} tasks");
    assert!(carried.iter().sum::<usize>() > 0, "and something changed");
    assert!(ended > 0, "brief tasks ended and were reported gone");
}

#[test]
fn the_state_updates_build_is_the_one_a_snapshot_shows() {
    let fx = mass(&[]);
    let mut session = attach(&fx);
    session.subscribe(50, false).expect("subscribed");
    for _ in 0..5 {
        session.next_update().expect("update");
    }
    let (live, _) = session.next_update().expect("update");
    let snap = dump_json(fx.pid, &[]);
    let ids = |tasks: Vec<u64>| {
        let mut t = tasks;
        t.sort_unstable();
        t
    };
    let live_ids = ids(live.tasks.iter().map(|t| t.id).collect());
    let snap_ids = ids(snap["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect());
    assert_eq!(live_ids, snap_ids);
    let chain = |name: &str| {
        let t = live
            .tasks
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .unwrap();
        let mut out = String::new();
        asyncdump::view::text::write_task(&mut out, &live, t, Default::default());
        out
    };
    assert!(chain("held").contains("mass::wait"), "{}", chain("held"));
}

fn raw_subscriber(fx: &Fixture) -> UnixStream {
    let mut s = UnixStream::connect(fx.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Handshake::from_bytes(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    write_frame(&mut s, &ClientHello::new("stalls").to_bytes()).unwrap();
    let req = Request::Subscribe(SubscribeRequest {
        interval_ms: 20,
        include_completed: false,
        walk: None,
    });
    write_frame(&mut s, &encode(&req).unwrap()).unwrap();
    s
}

#[test]
fn subscribers_that_stop_reading_are_dropped_and_the_host_never_waits() {
    let fx = mass(&[]);
    let polls = |fx: &Fixture| -> u64 {
        dump_json(fx.pid, &[])["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] == "ticking")
            .map(|t| t["polls"].as_u64().unwrap())
            .sum()
    };
    let before = polls(&fx);
    // As many as the agent serves at once, none reading: the full state alone overflows a socket's
    // buffer, so each agent thread is stuck writing until it gives up.
    let stalled: Vec<UnixStream> = (0..4).map(|_| raw_subscriber(&fx)).collect();
    let start = Instant::now();
    let mut answered = None;
    while start.elapsed() < Duration::from_secs(15) {
        let out = crate::support::asyncdump(&["dump", &fx.pid.to_string()]);
        if out.status.success() {
            answered = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let answered = answered.expect("a dump is answered once the stalled subscribers are dropped");
    assert!(answered < Duration::from_secs(10), "took {answered:?}");
    assert!(
        polls(&fx) > before,
        "the ticking tasks kept running meanwhile"
    );
    drop(stalled);
    assert!(asyncdump_ok(&["dump", &fx.pid.to_string()]).contains("held"));
}
