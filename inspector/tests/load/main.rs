//! Greedy and broken clients against a live `mass` fixture with a probe: the agent sheds them within
//! bounded threads, descriptors and memory; a legitimate `asyncdump dump` still answers within a second;
//! and the probe task's worst wake-to-poll delay stays near its delay at rest. Figures are printed
//! (`cargo test --test load -- --nocapture`; this binary runs alone, as cargo runs test binaries one
//! after another, and its specs one at a time, see [`alone`]).

#[path = "../support.rs"]
#[allow(dead_code)]
mod support;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use asyncdump_protocol::{
    ClientHello, Handshake, MAX_REPLY_BYTES, Reply, Request, SnapshotRequest, decode, encode,
    read_frame, write_frame,
};

use support::{Fixture, asyncdump};

struct Probed {
    fx: Fixture,
    probe: PathBuf,
    /// Holds the probe's file; removed when the spec ends.
    _dir: support::Scratch,
}

/// Held by each spec for its whole run: they measure delays and CPU shares, which another spec's
/// load beside them would distort.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `mass` with 2,000 idle tasks (so a snapshot costs something) and the probe writing to a file.
fn probed() -> Probed {
    let dir = support::tempdir();
    let probe = dir.join("probe");
    let fx = Fixture::start(
        "mass",
        &[
            "--tasks",
            "2000",
            "--changing",
            "5",
            "--probe",
            probe.to_str().unwrap(),
        ],
    );
    Probed {
        fx,
        probe,
        _dir: dir,
    }
}

impl Probed {
    /// The probe's worst wake-to-poll delay over the windows it wrote from `since` (ms since its start).
    fn worst_since(&self, since: u64) -> (Duration, u64) {
        let text = std::fs::read_to_string(&self.probe).unwrap();
        let mut worst = Duration::ZERO;
        let mut last = 0;
        for line in text.lines() {
            let f: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
            if let [at, us, _] = f[..]
                && at >= since
            {
                worst = worst.max(Duration::from_micros(us));
                last = at;
            }
        }
        (worst, last)
    }

    /// The host at rest: after 2 s to settle, the probe's worst delay over the next 2 s and the
    /// share of a core the host used meanwhile.
    fn at_rest(&self) -> (Duration, f64) {
        std::thread::sleep(Duration::from_secs(2));
        let from = self.now();
        let cpu = (cpu_time(self.fx.pid), Instant::now());
        std::thread::sleep(Duration::from_secs(2));
        (self.worst_since(from).0, core_share(self.fx.pid, cpu))
    }

    /// Where the probe's clock is now (its last window).
    fn now(&self) -> u64 {
        self.worst_since(0).1
    }

    fn resources(&self) -> (usize, usize, u64) {
        let count = |what: &str| {
            std::fs::read_dir(format!("/proc/{}/{what}", self.fx.pid))
                .map(|d| d.count())
                .unwrap_or(0)
        };
        (count("fd"), count("task"), rss_kb(self.fx.pid))
    }
}

/// CPU time process `pid` has used so far, all its threads (utime + stime of `/proc/PID/stat`).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<u64> = (stat.rsplit_once(')').map_or("", |(_, rest)| rest))
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(fields.iter().sum::<u64>() * 1000 / hz)
}

/// The share of one core `pid` used from `since` (its CPU time then, and when) to now.
fn core_share(pid: u32, (cpu, at): (Duration, Instant)) -> f64 {
    (cpu_time(pid) - cpu).as_secs_f64() / at.elapsed().as_secs_f64()
}

fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS:")
}

/// A `kB` figure of `/proc/PID/status`, 0 if it cannot be read.
fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}

/// Times one real `asyncdump dump` of the fixture, with `extra` arguments.
fn timed_dump(pid: u32, extra: &[&str]) -> Duration {
    let start = Instant::now();
    let pid = pid.to_string();
    let mut args = vec!["dump", &pid];
    args.extend_from_slice(extra);
    let out = asyncdump(&args);
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "a legitimate dump failed after {took:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("mass::hold"));
    took
}

/// A client that connects and asks for snapshots as fast as it is answered, reconnecting whenever
/// refused, until `stop`; counts the snapshots it got.
fn greedy(socket: &Path, stop: &AtomicBool, served: &AtomicU64) {
    while !stop.load(Relaxed) {
        let Ok(mut s) = UnixStream::connect(socket) else {
            continue;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let hello = read_frame(&mut s, MAX_REPLY_BYTES)
            .ok()
            .and_then(|b| Handshake::from_bytes(&b).ok());
        if hello.is_none() || write_frame(&mut s, &ClientHello::new("greedy").to_bytes()).is_err() {
            continue;
        }
        let request = encode(&Request::Snapshot(SnapshotRequest::default())).unwrap();
        while !stop.load(Relaxed) {
            if write_frame(&mut s, &request).is_err() {
                break;
            }
            // Only small replies are decoded, to tell an error: decoding every snapshot would load
            // this machine's two cores and measure the test, not the agent.
            match read_frame(&mut s, MAX_REPLY_BYTES) {
                Ok(b) if b.len() > 4096 => served.fetch_add(1, Relaxed),
                Ok(b) if matches!(decode::<Reply>(&b), Ok(Reply::Snapshot(_))) => {
                    served.fetch_add(1, Relaxed)
                }
                _ => break,
            };
        }
    }
}

#[test]
fn eight_clients_asking_for_snapshots_in_a_tight_loop_leave_room_for_a_dump_and_the_host() {
    let _alone = alone();
    let host = probed();
    let (at_rest, share_at_rest) = host.at_rest();
    let before = host.resources();
    let decoded_at_rest = timed_dump(host.fx.pid, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let socket = host.fx.socket();
    let loops: Vec<_> = (0..8)
        .map(|_| {
            let (socket, stop, served) = (socket.clone(), stop.clone(), served.clone());
            std::thread::spawn(move || greedy(&socket, &stop, &served))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let load_from = host.now();
    let load_cpu = (cpu_time(host.fx.pid), Instant::now());
    let (mut dumps, mut decoded, mut peak) = (Vec::new(), Vec::new(), before);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        dumps.push(timed_dump(host.fx.pid, &["--no-decode"]));
        decoded.push(timed_dump(host.fx.pid, &[]));
        let now = host.resources();
        peak = (peak.0.max(now.0), peak.1.max(now.1), peak.2.max(now.2));
        std::thread::sleep(Duration::from_secs(1));
    }
    let (under_load, _) = host.worst_since(load_from);
    let share_under_load = core_share(host.fx.pid, load_cpu);
    stop.store(true, Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let slowest = dumps.iter().max().copied().unwrap_or_default();
    let slowest_decoded = decoded.iter().max().copied().unwrap_or_default();
    eprintln!(
        "8 snapshot loops for 30 s: {} snapshots served to them; {} dumps, slowest {slowest:?} \
         (decoded: {slowest_decoded:?}, at rest {decoded_at_rest:?}); \
         probe worst delay {at_rest:?} at rest, {under_load:?} under load; \
         fds {} -> {}, threads {} -> {}, RSS {} -> {} kB (peaks); \
         host CPU {:.0}% of a core at rest, {:.0}% under load",
        served.load(Relaxed),
        dumps.len(),
        before.0,
        peak.0,
        before.1,
        peak.1,
        before.2,
        peak.2,
        share_at_rest * 100.0,
        share_under_load * 100.0,
    );
    // The agent's work, all of it (answers, admitting and refusing connections, reading and
    // writing), is at most half a core; the host's own share at rest comes on top. Before the
    // listener and the connections' reading and writing were paced too, this was 89 %. Room is left
    // for this machine's noise: the figure printed is the one that counts.
    let agent_share = share_under_load - share_at_rest;
    assert!(
        agent_share < 0.6,
        "the agent used {:.0}% of a core",
        agent_share * 100.0
    );
    // Both answer within a second: the decoded dumps read the plan the dump at rest cached.
    assert!(slowest < Duration::from_secs(1), "slowest dump {slowest:?}");
    assert!(
        slowest_decoded < Duration::from_secs(1),
        "slowest decoded dump {slowest_decoded:?}"
    );
    assert!(peak.0 <= before.0 + 8, "fds {} -> {}", before.0, peak.0);
    assert!(peak.1 <= before.1 + 6, "threads {} -> {}", before.1, peak.1);
    // Generous, as other specs share the machine: the figure printed is the one that counts.
    assert!(
        under_load < at_rest + Duration::from_millis(20),
        "probe {at_rest:?} at rest, {under_load:?} under load"
    );
}

/// Connects and exchanges greetings, as any client must before a request.
fn greeted(socket: &Path) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    Handshake::from_bytes(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    write_frame(&mut s, &ClientHello::new("broken").to_bytes()).unwrap();
    s
}

/// Waits for the agent to end the connection; how long that took.
fn closed_after(mut s: UnixStream) -> Duration {
    use std::io::Read;
    let start = Instant::now();
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    start.elapsed()
}

#[test]
fn a_thousand_idle_connections_cost_bounded_threads_and_files_and_a_dump_still_answers() {
    let _alone = alone();
    let host = probed();
    let before = host.resources();
    // Connected, and then silent: no hello, ever.
    let idle: Vec<UnixStream> = (0..1000)
        .filter_map(|_| UnixStream::connect(host.fx.socket()).ok())
        .collect();
    assert!(idle.len() >= 900, "{} connected", idle.len());
    let held = host.resources();
    let answered = timed_dump(host.fx.pid, &["--no-decode"]);
    eprintln!(
        "1000 idle connections: fds {} -> {}, threads {} -> {}, RSS {} -> {} kB; a dump answered in {answered:?}",
        before.0, held.0, before.1, held.1, before.2, held.2
    );
    assert!(held.0 <= before.0 + 8, "fds {} -> {}", before.0, held.0);
    assert!(held.1 <= before.1 + 5, "threads {} -> {}", before.1, held.1);
    // The four that got a slot lose it half a second after connecting, having sent no hello.
    assert!(answered < Duration::from_secs(1), "{answered:?}");
}

#[test]
fn broken_clients_are_shed_within_bounded_time_and_memory() {
    let _alone = alone();
    let host = probed();
    let before = host.resources();
    // A 4 GiB length prefix: refused before anything is allocated.
    let mut s = greeted(&host.fx.socket());
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let reply = decode::<Reply>(&read_frame(&mut s, MAX_REPLY_BYTES).unwrap()).unwrap();
    assert!(
        matches!(&reply, Reply::Error(e) if e.message.contains("exceeds")),
        "{reply:?}"
    );
    let huge = closed_after(s);
    let after_huge = host.resources();
    // Half a request, then silence: dropped when the request's deadline passes.
    let mut s = greeted(&host.fx.socket());
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(&[0; 50]).unwrap();
    let half = closed_after(s);
    // Asks for a snapshot and never reads it: the agent's write times out and the reply is dropped.
    let s = greeted(&host.fx.socket());
    let request = encode(&Request::Snapshot(SnapshotRequest::default())).unwrap();
    let mut writer = &s;
    write_frame(&mut writer, &request).unwrap();
    // The reply is bigger than the socket's buffers only with many tasks: ask again and again to fill
    // them, as a client that never reads would.
    let start = Instant::now();
    let mut peak = host.resources();
    while write_frame(&mut writer, &request).is_ok() && start.elapsed() < Duration::from_secs(30) {
        let now = host.resources();
        peak = (peak.0.max(now.0), peak.1.max(now.1), peak.2.max(now.2));
        std::thread::sleep(Duration::from_millis(100));
    }
    let never_read = start.elapsed();
    let answered = timed_dump(host.fx.pid, &["--no-decode"]);
    eprintln!(
        "4 GiB prefix: refused and closed in {huge:?}, RSS {} -> {} kB; half a request: closed after \
         {half:?}; a client that never reads: its requests refused after {never_read:?}, RSS at most \
         {} kB, threads at most {}; a dump then answered in {answered:?}",
        before.2, after_huge.2, peak.2, peak.1
    );
    assert!(huge < Duration::from_secs(1), "{huge:?}");
    assert!(after_huge.2 < before.2 + 10_000, "no 4 GiB buffer");
    assert!(half < Duration::from_secs(12), "{half:?}");
    assert!(
        never_read < Duration::from_secs(30),
        "the agent gave up on it: {never_read:?}"
    );
    assert!(
        peak.2 < before.2 + 50_000,
        "RSS {} -> {} kB",
        before.2,
        peak.2
    );
    assert!(answered < Duration::from_secs(1), "{answered:?}");
}

#[test]
fn a_big_decoded_dump_leaves_the_hosts_memory_where_it_was() {
    let _alone = alone();
    let fx = Fixture::start("mass", &["--tasks", "30000", "--changing", "0"]);
    let (rest, peak_before) = (rss_kb(fx.pid), hwm_kb(fx.pid));
    let text = asyncdump_with_timeout(fx.pid);
    assert!(text.contains("mass::wait"), "decoded");
    let (after, peak) = (rss_kb(fx.pid), hwm_kb(fx.pid));
    eprintln!(
        "30,000 tasks, a decoded dump: host RSS {rest} kB at rest, {after} kB after; \
         peak {peak_before} -> {peak} kB during it"
    );
    // The agent hands what the answer took back to the OS.
    // Without that, glibc kept about 9 MB of it here (and 82 MB at 100,000 tasks).
    assert!(after < rest + 4_000, "RSS {rest} -> {after} kB");
    // The answer is encoded as it is written, never held whole: the peak is the snapshot itself.
    // Holding the encoding too, it rose by 30.9 MB here when streaming rose by 23.8 MB; streaming
    // now rises by 26.8 to 27.8 MB (the same at the commit before the census moved into the walker),
    // so holding it would be about 34 MB.
    assert!(
        peak < peak_before + 30_500,
        "peak {peak_before} -> {peak} kB"
    );
}

fn hwm_kb(pid: u32) -> u64 {
    status_kb(pid, "VmHWM:")
}

fn asyncdump_with_timeout(pid: u32) -> String {
    let out = asyncdump(&["dump", &pid.to_string(), "--timeout", "60s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asks `req` on `s` and gives the reply.
fn ask(s: &mut UnixStream, req: &Request) -> Reply {
    write_frame(s, &encode(req).unwrap()).unwrap();
    decode::<Reply>(&read_frame(s, MAX_REPLY_BYTES).unwrap()).unwrap()
}

/// A walk plan asking for endless work, asked again and again for 10 s (each answer cut at the
/// agent's 2 s deadline): the host's own tasks keep their poll latency (the issue measured 1.08 s
/// before requests had a deadline).
#[test]
fn endless_walk_plans_leave_the_host_its_poll_latency() {
    let _alone = alone();
    let host = probed();
    let (at_rest, _) = host.at_rest();
    let mut s = greeted(&host.fx.socket());
    let Reply::WalkInfo(info) = ask(&mut s, &Request::WalkInfo) else {
        panic!("no walk info")
    };
    let plan = support::endless_plan(info.root_anchors);
    let load_from = host.now();
    let start = Instant::now();
    let mut answers = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        let asked = Instant::now();
        let req = Request::Snapshot(SnapshotRequest {
            include_completed: false,
            walk: Some(plan.clone()),
        });
        assert!(matches!(ask(&mut s, &req), Reply::Snapshot(_)));
        answers.push(asked.elapsed());
    }
    let (under_load, _) = host.worst_since(load_from);
    let slowest = answers.iter().max().copied().unwrap_or_default();
    eprintln!(
        "endless walk plans for 10 s: {} answers, slowest {slowest:?}; probe worst delay \
         {at_rest:?} at rest, {under_load:?} under them",
        answers.len()
    );
    assert!(slowest < Duration::from_secs(4), "{slowest:?}");
    assert!(
        under_load < at_rest + Duration::from_millis(50),
        "probe {at_rest:?} at rest, {under_load:?} under load"
    );
}
