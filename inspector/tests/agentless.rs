//! Dumps without the agent: a process that links none is read from its memory, with the same chains
//! an agent would give, and the target is left exactly as it was.

use std::collections::BTreeMap;
use std::process::Command;

use crate::support::{Fixture, asyncdump, asyncdump_ok, dump_json, has_root, succeeded};

/// The dump's task sections, each its lines, by their title's `tokio task N`.
pub fn tasks_by_tokio_id(text: &str) -> BTreeMap<u64, Vec<String>> {
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let Some(title) = block.lines().next() else {
            continue;
        };
        let Some(rest) = title.strip_prefix("tokio task ") else {
            continue;
        };
        let id = rest.split([' ', '(']).next().unwrap().parse().unwrap();
        out.insert(id, block.lines().map(str::to_owned).collect());
    }
    out
}

/// A section's chain: its frame and leaf lines, as decoding gives them whoever reads the memory.
pub fn chain(section: &[String]) -> Vec<String> {
    section
        .iter()
        .filter(|l| l.contains("[decoded]") || l.contains("awaiting "))
        .cloned()
        .collect()
}

/// Dumps until every task of `pid` is suspended at a decoded chain, or panics after 50 tries.
pub fn dump_settled(pid: u32, args: &[&str], tasks: usize) -> String {
    crate::support::dump_until(pid, args, |text| {
        let found = tasks_by_tokio_id(text);
        found.len() == tasks && found.values().all(|s| !chain(s).is_empty())
    })
}

#[test]
fn a_process_without_the_agent_is_dumped_from_its_memory_with_every_chain() {
    let fx = Fixture::start("no_agent", &[]);
    let text = dump_settled(fx.pid, &[], 5);
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("read from live memory, no agent"),
        "{header}"
    );
    assert!(text.contains("runtime multi_thread (found by census): 3 alive, 3 listed"));
    assert!(text.contains("runtime current_thread (found by census): 1 alive, 1 listed"));
    assert!(text.contains("LocalSet (found by census): 1 listed"));
    assert!(text.contains("without the agent: no given names"));
    let tasks = tasks_by_tokio_id(&text);
    let find = |root: &str| {
        let s = tasks.values().find(|s| has_root(&s.join("\n"), root));
        chain(s.unwrap_or_else(|| panic!("no task rooted at {root}:\n{text}")))
    };
    let request = find("no_agent::handle_request");
    let frames: Vec<&str> = request
        .iter()
        .map(|l| l.trim_start().split(" at ").next().unwrap())
        .collect();
    assert_eq!(
        frames,
        [
            "no_agent::handle_request",
            "no_agent::load_user",
            "no_agent::query_database",
            "awaiting tokio::sync::oneshot::Receiver<u64>"
        ]
    );
    let lock = find("no_agent::wait_for_lock");
    assert!(
        lock.last()
            .unwrap()
            .ends_with("awaiting tokio::sync::batch_semaphore::Acquire")
    );
    assert!(
        find("no_agent::local_wait")
            .last()
            .unwrap()
            .ends_with("tokio::sync::notify::Notified")
    );
    assert!(
        find("no_agent::tick_forever")
            .last()
            .unwrap()
            .ends_with("tokio::time::sleep::Sleep")
    );
    // The blocking pool's closure runs: shown with `--all`, from the census too.
    let all = asyncdump_ok(&["dump", &fx.pid.to_string(), "--all"]);
    assert!(
        all.contains("blocking pool (found by census): 1 listed"),
        "{all}"
    );
}

#[test]
fn the_json_document_says_where_it_was_read_and_leaves_out_what_only_the_agent_knows() {
    let fx = Fixture::start("no_agent", &[]);
    dump_settled(fx.pid, &[], 5);
    let doc = dump_json(fx.pid, &[]);
    let process = doc["process"].as_object().unwrap();
    assert_eq!(process["read_from"], "live_memory");
    assert_eq!(process["program"], "no_agent");
    assert!(!process.contains_key("agent_version") && !process.contains_key("protocol_version"));
    assert!(process["uptime_ns"].as_u64().unwrap() > 0);
    let tasks = crate::support::tasks_of(&doc);
    assert_eq!(tasks.len(), 5);
    for t in tasks {
        let t = t.as_object().unwrap();
        for agent_only in [
            "agent_id",
            "name",
            "polls",
            "busy_ns",
            "wakes",
            "spawned_at",
        ] {
            assert!(!t.contains_key(agent_only), "{agent_only} in {t:?}");
        }
        assert!(
            t["derived_name"]
                .as_str()
                .unwrap()
                .starts_with("no_agent::")
        );
    }
}

/// The same process dumped through its agent and from its memory: the same tasks, the same chains;
/// only what the agent alone knows differs.
#[test]
fn an_agents_process_read_without_it_shows_the_same_chains() {
    let fx = Fixture::start("plain_tasks", &[]);
    let through_agent = dump_settled(fx.pid, &[], 13);
    let from_memory = dump_settled(fx.pid, &["--no-agent"], 13);
    assert!(through_agent.lines().next().unwrap().contains(" · agent "));
    assert!(
        from_memory
            .lines()
            .next()
            .unwrap()
            .contains("read from live memory")
    );
    let (a, m) = (
        tasks_by_tokio_id(&through_agent),
        tasks_by_tokio_id(&from_memory),
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
    for (id, section) in &a {
        assert_eq!(chain(section), chain(&m[id]), "tokio task {id}");
    }
    assert!(from_memory.contains("DEADLOCK cycle"));
    // The agent still answers after being read around.
    assert!(asyncdump_ok(&["dump", &fx.pid.to_string()]).contains(" · agent "));
}

#[test]
fn the_target_is_left_running_untraced_and_a_stopped_one_stays_stopped() {
    let fx = Fixture::start("no_agent", &[]);
    let pid = fx.pid.to_string();
    dump_settled(fx.pid, &[], 5);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    let state = |pid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(')').unwrap().1.trim_start().chars().next()
    };
    assert!(matches!(state(&pid), Some('S' | 'R')), "{:?}", state(&pid));
    // A stopped process is read as it is, and left stopped.
    let kill = |sig: &str| Command::new("kill").args([sig, &pid]).status().unwrap();
    assert!(kill("-STOP").success());
    while state(&pid) != Some('T') {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stopped = asyncdump_ok(&["dump", &pid]);
    assert!(has_root(&stopped, "no_agent::handle_request"), "{stopped}");
    assert_eq!(state(&pid), Some('T'));
    assert!(kill("-CONT").success());
}

#[test]
fn reading_another_users_process_is_refused_with_the_cause_and_status_5() {
    let fx = Fixture::start("no_agent", &[]);
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    // As root, the inspector drops to nobody to read root's fixture; as anyone else, it reads init.
    let (out, owner) = if root {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_asyncdump"))
            .args(["dump", &fx.pid.to_string()])
            .env("XDG_CACHE_HOME", "/nonexistent")
            .output()
            .unwrap();
        (out, "it runs as uid 0 and this asyncdump as uid 65534")
    } else {
        (asyncdump(&["dump", "1"]), "it runs as uid 0")
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("cannot read the memory of process"),
        "{stderr}"
    );
    assert!(stderr.contains(owner), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

/// Runs asyncdump (with `args`) as a user who may read a process but not its executable's file:
/// root without the capabilities that pass over file modes, or anyone else as they are.
fn asyncdump_without_file_rights(args: &[&str], cache: &std::path::Path) -> std::process::Output {
    let mut cmd = Command::new("setpriv");
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["--inh-caps=-dac_override,-dac_read_search"]);
        cmd.args(["--bounding-set=-dac_override,-dac_read_search"]);
    }
    cmd.arg(env!("CARGO_BIN_EXE_asyncdump")).args(args);
    cmd.env("XDG_CACHE_HOME", cache).output().unwrap()
}

#[test]
fn an_execute_only_program_is_read_from_its_image_given_a_readable_copy_of_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = crate::support::tempdir();
    let (exe_only, copy) = (dir.as_path().join("no_agent"), dir.as_path().join("copy"));
    std::fs::copy(crate::support::bin("no_agent"), &exe_only).unwrap();
    std::fs::copy(&exe_only, &copy).unwrap();
    std::fs::set_permissions(&exe_only, std::fs::Permissions::from_mode(0o111)).unwrap();
    let fx = Fixture::start_path(&exe_only, &[], &[]);
    let pid = fx.pid.to_string();
    // An empty plan cache each time: a plan cached for its build-id would need no file at all.
    let cache = crate::support::tempdir();
    let out = asyncdump_without_file_rights(&["dump", &pid], cache.as_path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot read /proc/{pid}/exe: Permission denied"))
            && stderr.contains("give a readable copy of the program with --binary PATH"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let cache = crate::support::tempdir();
    let given = ["dump", &pid, "--binary", copy.to_str().unwrap()];
    let text = succeeded(
        asyncdump_without_file_rights(&given, cache.as_path()),
        &given,
    );
    assert!(
        text.contains(&format!("chains decoded from DWARF in {}", copy.display())),
        "{text}"
    );
    assert!(has_root(&text, "no_agent::handle_request"), "{text}");
    // `index` reads the file alone, and says what to give it.
    let out = asyncdump_without_file_rights(&["index", "--pid", &pid], cache.as_path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("Permission denied")
            && stderr.contains("give a readable copy of the program as BINARY"),
        "{stderr}"
    );
    // `ps` knows it by its workers' names, its file unread.
    let out = asyncdump_without_file_rights(&["ps"], cache.as_path());
    let ps = String::from_utf8_lossy(&out.stdout);
    let without = ps
        .split_once("tokio processes without an agent")
        .map(|(_, w)| w);
    let listed = without.is_some_and(|w| w.lines().any(|l| l.trim_start().starts_with(&pid)));
    assert!(listed, "{ps}");
}

#[test]
fn a_process_that_cannot_be_walked_says_why_with_status_6_and_a_socket_with_no_agent_is_usage() {
    // A C program and a shell: said to be what they are, not told to rebuild with debug info.
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let shell = (Command::new("bash").args(["-c", "sleep 30; exit 0"]))
        .spawn()
        .unwrap();
    for (mut child, program) in [(sleeper, "sleep"), (shell, "bash")] {
        let out = asyncdump(&["dump", &child.id().to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{stderr}");
        assert!(
            stderr.contains(&format!(
                " ({program}) has no asyncdump agent, and cannot be read without one: "
            )) && stderr.contains(&format!("/{program} is not a Rust program (")),
            "{stderr}"
        );
        assert!(!stderr.contains("debug = \"full\""), "{stderr}");
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let out = asyncdump(&["dump", "/tmp/some.sock", "--no-agent"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give its pid"));
}

#[test]
fn ps_lists_tokio_processes_without_an_agent_beside_the_agents() {
    let plain = Fixture::start("no_agent", &[]);
    let with_agent = Fixture::start("plain_tasks", &[]);
    let text = asyncdump_ok(&["ps"]);
    let (agents, without) = text
        .split_once("tokio processes without an agent")
        .unwrap_or_else(|| panic!("{text}"));
    let listed = |part: &str, pid: u32| {
        part.lines()
            .any(|l| l.split_whitespace().next() == Some(&pid.to_string()))
    };
    assert!(
        listed(agents, with_agent.pid) && !listed(agents, plain.pid),
        "{text}"
    );
    assert!(
        listed(without, plain.pid) && !listed(without, with_agent.pid),
        "{text}"
    );
    let doc: serde_json::Value = serde_json::from_str(&asyncdump_ok(&["ps", "--json"])).unwrap();
    let pids: Vec<u64> = doc["without_agent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert!(pids.contains(&u64::from(plain.pid)), "{doc}");
}

/// Each thread's state letter in `/proc/PID/task/*/stat`.
fn thread_states(pid: u32) -> Vec<char> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            stat.rsplit_once(')')?.1.trim_start().chars().next()
        })
        .collect()
}

fn tracer_of(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn stop_reads_one_consistent_snapshot_with_every_thread_held_then_let_go() {
    let fx = Fixture::start("no_agent", &[]);
    let running = dump_settled(fx.pid, &[], 5);
    let stopped = dump_settled(fx.pid, &["--stop"], 5);
    let threads = thread_states(fx.pid).len();
    assert!(
        stopped.contains(&format!("· {threads} threads stopped for ")),
        "{stopped}"
    );
    let (r, s) = (tasks_by_tokio_id(&running), tasks_by_tokio_id(&stopped));
    assert_eq!(r.keys().collect::<Vec<_>>(), s.keys().collect::<Vec<_>>());
    for (id, section) in &r {
        assert_eq!(chain(section), chain(&s[id]), "tokio task {id}");
    }
    assert_eq!(tracer_of(fx.pid), "0");
    assert!(
        !thread_states(fx.pid).contains(&'t'),
        "no thread left stopped"
    );
    let doc = dump_json(fx.pid, &["--stop"]);
    assert_eq!(doc["snapshot"]["stopped"]["threads"], threads);
    assert!(doc["snapshot"]["stopped"]["held_ns"].as_u64().unwrap() > 0);
}

/// The inspector killed while it holds every thread stopped: the kernel lets them go, and the
/// service answers at once.
#[test]
fn a_killed_inspector_leaves_the_service_running_and_serving() {
    use std::io::{Read, Write};
    let (fx, port) = crate::support::axum_service(&[]);
    let mut inspector = Command::new(env!("CARGO_BIN_EXE_asyncdump"))
        .args(["dump", &fx.pid.to_string(), "--stop"])
        .env("XDG_CACHE_HOME", crate::support::plan_cache_of_this_run())
        .env("ASYNCDUMP_HOLD_STOPPED_MS", "30000")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !thread_states(fx.pid).iter().all(|&s| s == 't') {
        assert!(std::time::Instant::now() < deadline, "never all stopped");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The tracer is a thread of the inspector's.
    let tracer = tracer_of(fx.pid);
    let status = std::fs::read_to_string(format!("/proc/{tracer}/status")).unwrap();
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .unwrap();
    assert_eq!(tgid.trim(), inspector.id().to_string());
    inspector.kill().unwrap();
    inspector.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while thread_states(fx.pid).contains(&'t') || tracer_of(fx.pid) != "0" {
        assert!(std::time::Instant::now() < deadline, "threads left stopped");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(c, "GET /no-such-route HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut reply = [0u8; 64];
    let n = c.read(&mut reply).unwrap();
    let reply = String::from_utf8_lossy(&reply[..n]);
    assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
}

#[test]
fn stop_refuses_a_process_another_tracer_holds_and_leaves_it_alone() {
    let fx = Fixture::start("no_agent", &[]);
    // This test's thread attaches as a debugger would (PTRACE_SEIZE stops nothing).
    // SAFETY: PTRACE_SEIZE of the fixture's main thread with no options passes no memory.
    let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, fx.pid as libc::pid_t, 0, 0) };
    assert_eq!(seized, 0, "{}", std::io::Error::last_os_error());
    // Named by its process, whichever of its threads traces.
    let me = std::process::id();
    let out = asyncdump(&["dump", &fx.pid.to_string(), "--stop"]);
    // SAFETY: detaching the thread this thread seized, with no signal.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, fx.pid as libc::pid_t, 0, 0) };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("is traced by process {me}")),
        "{stderr}"
    );
    assert!(stderr.contains("without --stop"), "{stderr}");
    // Without --stop, a traced process reads as any other.
    assert!(has_root(
        &dump_settled(fx.pid, &[], 5),
        "no_agent::handle_request"
    ));
}

/// `watch` without the agent: a whole snapshot at each update, said on screen, and ages that grow
/// from the second snapshot on.
#[test]
fn watch_reads_a_process_without_the_agent_snapshot_by_snapshot() {
    let fx = Fixture::start("no_agent", &[]);
    dump_settled(fx.pid, &[], 5);
    let tmux = crate::watch::Tmux::sized(
        &format!(
            "{} watch {}; sleep 60",
            env!("CARGO_BIN_EXE_asyncdump"),
            fx.pid
        ),
        220,
        40,
    );
    let screen = tmux.until("the status bar says how it reads", |s| {
        s.contains("no agent: its memory read every ≥500") && s.contains("query_database")
    });
    assert!(screen.contains("6 tasks: 5 idle"), "{screen}");
    // The second snapshot on, a task that did not change has been so for at least the interval.
    tmux.until("ages from the second snapshot", |s| {
        s.lines()
            .any(|l| l.contains("query_database") && l.contains('≥'))
    });
    tmux.keys("q");
}

/// Every task's chain in a dump, whatever the task's title (the agent's `task N` or `tokio task N`),
/// sorted: what two readings of one process must agree on.
fn all_chains(text: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = text
        .split("\n\n")
        .filter(|s| s.starts_with("task ") || s.starts_with("tokio task "))
        .map(|s| chain(&s.lines().map(str::to_owned).collect::<Vec<_>>()))
        .collect();
    out.sort();
    out
}

/// A chain 300 futures deep, in a task spawned through the agent: read without it, the agent's
/// task root is followed into the future it wraps, and the chain is the agent's, frame for frame.
#[test]
fn a_deep_chain_reads_the_same_without_the_agent() {
    let fx = Fixture::start("plain_chain", &["--depth", "300"]);
    let pid = fx.pid.to_string();
    let through_agent = asyncdump_ok(&["dump", &pid]);
    let from_memory = asyncdump_ok(&["dump", &pid, "--no-agent"]);
    let chains = all_chains(&from_memory);
    assert!(chains.iter().any(|c| c.len() == 301), "{from_memory}");
    assert_eq!(all_chains(&through_agent), chains);
}

/// A real service: axum's connection tasks, each through hyper, tower and axum's middleware down to
/// its handler's leaf, the same read from memory as through the agent.
#[test]
fn an_axum_service_reads_the_same_without_the_agent() {
    use std::io::Write;
    let (fx, port) = crate::support::axum_service(&[]);
    let _connections: Vec<std::net::TcpStream> = ["/mutex", "/sleep", "/mpsc", "/oneshot", "/peer"]
        .iter()
        .map(|path| {
            let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
            c
        })
        .collect();
    let pid = fx.pid.to_string();
    let leaves = [
        "batch_semaphore::Acquire",
        "sleep::Sleep",
        "oneshot::Receiver<u32>",
        "TcpStream>",
    ];
    let mut through_agent = String::new();
    for _ in 0..50 {
        through_agent = asyncdump_ok(&["dump", &pid]);
        if leaves.iter().all(|l| through_agent.contains(l)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let from_memory = asyncdump_ok(&["dump", &pid, "--no-agent"]);
    let chains = all_chains(&from_memory);
    assert!(chains.len() >= 6, "{from_memory}");
    assert_eq!(all_chains(&through_agent), chains);
}

/// A process that exits while it is read: every dump either shows it or says it is gone, in one
/// line with status 1, never a panic or a half-made dump.
#[test]
fn a_process_exiting_under_repeated_dumps_is_shown_or_gone() {
    let mut fx = Command::new(crate::support::bin("no_agent"))
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = fx.id().to_string();
    let (mut shown, mut gone) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let out = asyncdump(&["dump", &pid, "--no-cache"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => shown += 1,
            Some(1) => {
                assert!(
                    stderr.contains("exited during the dump") || stderr.contains("no such process"),
                    "{stderr}"
                );
                assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
                gone += 1;
                if stderr.contains("no such process") {
                    break;
                }
            }
            other => panic!("status {other:?}: {stderr}"),
        }
        // Reaped once it exits, so that the pid is gone for good.
        if fx.try_wait().unwrap().is_some() && gone > 0 {
            break;
        }
    }
    let _ = fx.kill();
    let _ = fx.wait();
    assert!(shown > 0 && gone > 0, "shown {shown}, gone {gone}");
}

/// Dumps `pid` through its agent until `settled` holds, then without it: the two readings.
fn both_readings(pid: u32, settled: impl Fn(&str) -> bool) -> (String, String) {
    let pid = pid.to_string();
    let mut through_agent = String::new();
    for _ in 0..50 {
        through_agent = asyncdump_ok(&["dump", &pid]);
        if settled(&through_agent) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(settled(&through_agent), "never settled:\n{through_agent}");
    (through_agent, asyncdump_ok(&["dump", &pid, "--no-agent"]))
}

/// Programs nobody here wrote, and tokio versions other than the workspace's: actix-web's hanging
/// handlers, tokio 1.32 in both manglings, a tokio built without the multi-thread scheduler. Each
/// reads the same from its memory as through its agent.
#[test]
fn other_runtimes_and_versions_read_the_same_without_the_agent() {
    use crate::support::{Mangling, actix_service_bin, current_thread_only_bin, old_tokio_bin};
    use std::io::Write;
    let actix = Fixture::start_path(&actix_service_bin(), &[], &[]);
    let port: u16 = actix.said[0]
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .expect("the fixture says its port");
    let _requests: Vec<std::net::TcpStream> = ["sleep", "lock", "reply", "upstream"]
        .iter()
        .map(|path| {
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(conn, "GET /{path} HTTP/1.1\r\nhost: fixture\r\n\r\n").unwrap();
            conn
        })
        .collect();
    let (a, m) = both_readings(actix.pid, |t| {
        [
            "sleep::Sleep",
            "batch_semaphore::Acquire",
            "oneshot::Receiver<u32>",
        ]
        .iter()
        .all(|l| t.contains(l))
    });
    assert!(all_chains(&m).len() >= 4, "{m}");
    assert_eq!(all_chains(&a), all_chains(&m), "actix-web");
    // `main`'s future awaits the server's commands; its signal future is `None` (signals off),
    // which is no future to go into.
    let main = format!("\nthread {} \"", actix.pid);
    let start = 1 + m
        .find(&main)
        .unwrap_or_else(|| panic!("no future of main's thread:\n{m}"));
    let future = &m[start..m[start..].find("\n\n").map_or(m.len(), |e| start + e)];
    assert!(
        future.contains("actix_server::server::ServerInner::run at ")
            && future.ends_with("awaiting actix_server::server::ServerEventMultiplexer")
            && !future.contains("cut at the walk limit"),
        "{future}"
    );
    for (name, bin) in [
        (
            "tokio 1.32, legacy mangling",
            old_tokio_bin(Mangling::Legacy),
        ),
        ("tokio 1.32, v0 mangling", old_tokio_bin(Mangling::V0)),
        (
            "tokio without the multi-thread scheduler",
            current_thread_only_bin(),
        ),
    ] {
        let fx = Fixture::start_path(&bin, &[], &[]);
        let (a, m) = both_readings(fx.pid, |t| !t.contains("(not started;"));
        assert!(all_chains(&m).iter().any(|c| c.len() >= 2), "{name}: {m}");
        assert_eq!(all_chains(&a), all_chains(&m), "{name}");
    }
}
