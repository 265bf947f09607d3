//! Starting fixtures and running `asyncdump` against them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

/// The target directory's profile folder (`target/debug`), where cargo put `asyncdump`.
fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_asyncdump")).parent().unwrap()
}

/// Builds the fixture binaries once per test run, into the same target directory as `asyncdump`.
fn fixtures_built() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "asyncdump-fixtures", "--bins"]);
        if bin_dir().ends_with("release") {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(workspace())
            .status()
            .expect("run cargo build for fixtures");
        assert!(status.success(), "building the fixtures failed");
    });
}

/// A fixture binary, built if needed.
pub fn bin(name: &str) -> PathBuf {
    fixtures_built();
    bin_dir().join(name)
}

/// How a fixture's symbols are mangled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mangling {
    Legacy,
    V0,
}

/// The `old_tokio` fixture, built once per test run and mangling from its own workspace and lockfile
/// (which pin an older tokio than the main workspace's), into a folder of the same target directory.
pub fn old_tokio_bin(mangling: Mangling) -> PathBuf {
    static LEGACY: OnceLock<PathBuf> = OnceLock::new();
    static V0: OnceLock<PathBuf> = OnceLock::new();
    let (cell, dir, rustflags) = match mangling {
        Mangling::Legacy => (&LEGACY, "old_tokio", None),
        Mangling::V0 => (&V0, "old_tokio_v0", Some("-C symbol-mangling-version=v0")),
    };
    cell.get_or_init(|| {
        separate_workspace_bin("old_tokio", dir, rustflags, "asyncdump-fixture-old-tokio")
    })
    .clone()
}

/// Fixture `name` built as optimised code (the `optimised-fixtures` profile: its locals in registers
/// and location lists), once per test run.
pub fn optimised_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = bin_dir()
        .parent()
        .unwrap()
        .join("optimised-fixtures")
        .join(name);
    if !built.iter().any(|b| b == name) {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "--profile", "optimised-fixtures"])
            .args(["-p", "asyncdump-fixtures", "--bin", name])
            .current_dir(workspace())
            .status()
            .expect("run cargo build for an optimised fixture");
        assert!(
            status.success(),
            "building the optimised {name} fixture failed"
        );
        built.push(name.to_owned());
    }
    path
}

/// The fixture whose tokio has no multi-thread scheduler (its own workspace), built once.
pub fn current_thread_only_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let name = "asyncdump-fixture-current-thread-only";
        separate_workspace_bin("current_thread_only", "current_thread_only", None, name)
    })
    .clone()
}

/// The actix-web service fixture (its own workspace, as a user's would be), built once.
pub fn actix_service_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let name = "asyncdump-fixture-actix-service";
        separate_workspace_bin("actix_service", "actix_service", None, name)
    })
    .clone()
}

/// The fixtures' test binary `name` (`fixtures/tests/NAME.rs`: tests that hang, ignored by
/// `cargo test`), built once per test run; cargo names it with a hash, which its build says.
pub fn fixture_test_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(n, _)| n == name) {
        return path.clone();
    }
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["test", "-q", "--no-run", "--message-format=json"])
        .args(["-p", "asyncdump-fixtures", "--test", name]);
    if bin_dir().ends_with("release") {
        cmd.arg("--release");
    }
    let out = cmd
        .current_dir(workspace())
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo test --no-run for the fixtures' tests");
    assert!(
        out.status.success(),
        "building fixtures/tests/{name}.rs failed"
    );
    let path = (String::from_utf8_lossy(&out.stdout).lines())
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|m| {
            let of_it = m["target"]["name"] == name && m["target"]["kind"][0] == "test";
            of_it
                .then(|| m["executable"].as_str().map(PathBuf::from))
                .flatten()
        })
        .unwrap_or_else(|| panic!("cargo named no executable for fixtures/tests/{name}.rs"));
    built.push((name.to_owned(), path.clone()));
    path
}

/// Builds `fixtures/CRATE`, a workspace of its own, into the target directory's `DIR`.
fn separate_workspace_bin(krate: &str, dir: &str, rustflags: Option<&str>, bin: &str) -> PathBuf {
    let target = bin_dir().parent().unwrap().join(dir);
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-q", "--locked", "--target-dir"])
        .arg(&target)
        .current_dir(workspace().join("fixtures").join(krate));
    if let Some(flags) = rustflags {
        cmd.env("RUSTFLAGS", flags);
    }
    let status = cmd.status().expect("run cargo build for a fixture");
    assert!(status.success(), "building the {krate} fixture failed");
    target.join("debug").join(bin)
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A running fixture; killed, and its socket removed, on drop.
pub struct Fixture {
    child: Child,
    pub pid: u32,
    socket: Option<PathBuf>,
    /// What the fixture printed before `ready` (facts about itself the spec checks against).
    pub said: Vec<String>,
}

impl Fixture {
    pub fn start(name: &str, args: &[&str]) -> Fixture {
        Fixture::start_with(name, args, &[])
    }

    /// Like [`Fixture::start`], with extra environment variables.
    pub fn start_with(name: &str, args: &[&str], env: &[(&str, &Path)]) -> Fixture {
        fixtures_built();
        Fixture::start_path(&bin_dir().join(name), args, env)
    }

    /// Starts the fixture executable at `path` (e.g. a stripped copy).
    pub fn start_path(path: &Path, args: &[&str], env: &[(&str, &Path)]) -> Fixture {
        Fixture::start_io(path, args, env, Stdio::inherit())
    }

    /// Like [`Fixture::start_with`], with the fixture's stderr going to `stderr` (a file to read later).
    pub fn start_logging(
        name: &str,
        args: &[&str],
        env: &[(&str, &Path)],
        stderr: &Path,
    ) -> Fixture {
        fixtures_built();
        let file = std::fs::File::create(stderr).expect("create the fixture's stderr file");
        Fixture::start_io(&bin_dir().join(name), args, env, file.into())
    }

    fn start_io(path: &Path, args: &[&str], env: &[(&str, &Path)], stderr: Stdio) -> Fixture {
        let name = path.display();
        let mut command = Command::new(path);
        // The caller's environment chooses no socket path; the spec's may.
        command.env_remove("ASYNCDUMP_SOCKET");
        command
            .args(args)
            .envs(env.iter().copied())
            .env("ASYNCDUMP_FIXTURE_TIMEOUT", "120")
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = spawn_when_not_busy(&mut command)
            .unwrap_or_else(|e| panic!("start fixture {name}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // The lines up to `ready`: what the fixture says about itself, then that it is ready.
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let ready = line.trim() == "ready";
                lines.push(line);
                if ready {
                    break;
                }
            }
            let _ = tx.send(lines);
        });
        let pid = child.id();
        let mut fixture = Fixture {
            child,
            pid,
            socket: None,
            said: Vec::new(),
        };
        let mut lines = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("fixture printed nothing within 30s");
        let last = lines.pop();
        assert_eq!(
            last.as_deref().map(str::trim),
            Some("ready"),
            "fixture {name} did not get ready"
        );
        fixture.said = lines;
        // An empty value means unset, as the agent reads it.
        let var = |name: &str| {
            let value = env.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
            value.filter(|v| !v.as_os_str().is_empty())
        };
        fixture.socket = match (var("ASYNCDUMP_SOCKET"), var("XDG_RUNTIME_DIR")) {
            (Some(socket), _) => Some(socket.to_owned()),
            (None, Some(xdg)) => Some(xdg.join("asyncdump").join(format!("{pid}.sock"))),
            (None, None) => socket_of(pid),
        };
        fixture
    }

    pub fn socket(&self) -> PathBuf {
        self.socket.clone().expect("fixture socket exists")
    }

    pub fn is_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// Runs `cmd` (a binutils tool: strip, objcopy) and expects success.
pub fn run_tool(cmd: &str, args: &[&str]) {
    let status = Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd} (binutils): {e}"));
    assert!(status.success(), "{cmd} {args:?}");
}

/// The axum service fixture, on a port the system picked (`--port 0`), with `args`; and that port.
pub fn axum_service(args: &[&str]) -> (Fixture, u16) {
    let mut all = vec!["--port", "0"];
    all.extend_from_slice(args);
    let fx = Fixture::start("axum_service", &all);
    let port = fx
        .said
        .iter()
        .find_map(|l| l.strip_prefix("port ")?.parse().ok())
        .expect("the fixture says its port");
    (fx, port)
}

/// The tonic service fixture on a port the system picked, and its client (the same program, in
/// a process of its own) once every call it makes is on its way.
pub fn tonic_service() -> (Fixture, Fixture) {
    let service = Fixture::start("tonic_service", &[]);
    let port = service
        .said
        .iter()
        .find_map(|l| l.strip_prefix("port "))
        .expect("the fixture says its port")
        .to_owned();
    let client = Fixture::start("tonic_service", &["--client", &port]);
    (service, client)
}

/// The lines of `dump PID --stats` that count the suspended tasks by the leaf that matters.
pub fn stats_by_leaf(pid: u32) -> Vec<String> {
    let stats = asyncdump_ok(&["dump", &pid.to_string(), "--stats"]);
    stats
        .lines()
        .skip_while(|l| !l.contains("by what each waits on"))
        .take_while(|l| !l.is_empty())
        .map(|l| l.trim_start().to_owned())
        .collect()
}

/// Where an agent of ours with this pid put its socket.
pub fn socket_of(pid: u32) -> Option<PathBuf> {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    asyncdump_protocol::paths::search_dirs(xdg.as_deref(), uid)
        .into_iter()
        .map(|d| d.join(asyncdump_protocol::paths::socket_file_name(pid)))
        .find(|p| p.exists())
}

pub fn asyncdump(args: &[&str]) -> Output {
    asyncdump_with(args, &[])
}

/// Runs `asyncdump` with extra environment variables. Its plan cache is this test run's own (unless
/// `env` names one), never the developer's.
pub fn asyncdump_with(args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_asyncdump"))
        .args(args)
        .env("XDG_CACHE_HOME", plan_cache_of_this_run())
        .envs(env.iter().copied())
        .output()
        .expect("run asyncdump")
}

/// `asyncdump` with `args` and extra environment variables, its own plan cache as
/// [`asyncdump_with`] gives it, its standard output and error piped, not yet started.
pub fn asyncdump_command(args: &[&str], env: &[(&str, &Path)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_asyncdump"));
    command
        .args(args)
        .env("XDG_CACHE_HOME", plan_cache_of_this_run())
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `command` to its end, if it ends within `within`; else kills it (and its process group, if
/// it leads one) and panics, saying `what_then()` (the state of the target, say). Its output is
/// drained as it comes: a command with more to say than a pipe holds is not taken for hung.
pub fn output_within(
    mut command: Command,
    within: Duration,
    what_then: impl FnOnce() -> String,
) -> Output {
    use std::io::Read;
    let mut child = command.spawn().expect("start the command");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = std::time::Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let then = what_then();
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            if nix::unistd::getpgid(Some(pid)) == Ok(pid) {
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} hung ({then}); its stderr: {}",
                String::from_utf8_lossy(&stderr.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Runs `asyncdump` and expects success; returns stdout.
pub fn asyncdump_ok(args: &[&str]) -> String {
    succeeded(asyncdump(args), args)
}

/// The stdout of a run of asyncdump (with `args`) that must have succeeded.
pub fn succeeded(out: Output, args: &[&str]) -> String {
    assert!(
        out.status.success(),
        "asyncdump {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The tasks of a JSON dump, without the threads' own futures (their `block_on`'s) it also lists.
pub fn tasks_of(doc: &serde_json::Value) -> Vec<&serde_json::Value> {
    (doc["tasks"].as_array().expect("a list of tasks").iter())
        .filter(|t| t.get("block_on").is_none())
        .collect()
}

pub fn dump_json(pid: u32, extra: &[&str]) -> serde_json::Value {
    let pid = pid.to_string();
    let mut args = vec!["dump", pid.as_str(), "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&asyncdump_ok(&args)).expect("dump --json is JSON")
}

/// A dump of `pid` (with `args`) once `done` holds of it: a fixture's tasks may still be on their
/// way to their awaits when it says it is ready. Tries 50 times, 20 ms apart.
pub fn dump_until(pid: u32, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let pid = pid.to_string();
    let mut all = vec!["dump", pid.as_str()];
    all.extend_from_slice(args);
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&all);
        if done(&text) {
            return text;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the dump never showed what was waited for:\n{text}");
}

/// `file:line:column` of the first occurrence of `needle` in a fixture source, pointing at `needle`'s
/// `at` part (the identifier a `#[track_caller]` location names).
pub fn site(fixture: &str, needle: &str, at: &str) -> String {
    let rel = format!("fixtures/src/bin/{fixture}.rs");
    let src = std::fs::read_to_string(workspace().join(&rel)).unwrap();
    let (n, line) = src
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .expect("needle in fixture");
    let col = line.find(needle).unwrap() + needle.find(at).expect("at within needle") + 1;
    format!("{rel}:{}:{col}", n + 1)
}

/// The lines of the dump section whose first line starts with `header_prefix` (up to the blank line),
/// but for its verdict line (the verdicts' specs read it).
pub fn section(text: &str, header_prefix: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with(header_prefix))
        .take_while(|l| !l.is_empty())
        .filter(|l| !is_verdict(l))
        .map(str::to_owned)
        .collect()
}

/// `text` without its tasks' verdict lines, for specs of what the lines around them say.
pub fn without_verdicts(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !is_verdict(l)).collect();
    lines.join("\n") + "\n"
}

/// Whether `line` is a task's verdict line, under its title.
pub fn is_verdict(line: &str) -> bool {
    line.starts_with("  verdict: ")
}

/// `fixtures/src/bin/FIXTURE.rs:LINE` of the first line containing `needle` (what a decoded frame shows:
/// DWARF has no column).
pub fn at_line(fixture: &str, needle: &str) -> String {
    let at = site(fixture, needle, &needle[..1]);
    let (file_line, _column) = at.rsplit_once(':').unwrap();
    file_line.to_owned()
}

/// The line number of the first line of a fixture's source containing `needle`.
pub fn line_of(fixture: &str, needle: &str) -> u64 {
    let at = at_line(fixture, needle);
    at.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// A plan cache for this test binary's run: the first dump of each fixture plans, later ones read
/// the cache, so both paths run.
pub fn plan_cache_of_this_run() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("plan-cache-{}", std::process::id()))
}

/// Spawns `command`, trying again for up to a second while its file is "busy": an executable a spec
/// has just copied stays open for writing in any child another test thread forks before that child's
/// exec closes it, and exec refuses such a file (`ETXTBSY`).
fn spawn_when_not_busy(command: &mut Command) -> std::io::Result<Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A fresh private directory under the system temp dir, removed with everything in it when this is
/// dropped: keep it alive as long as what is in it is used.
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.path().as_os_str()
    }
}

impl Scratch {
    pub fn as_path(&self) -> &Path {
        self.0.path()
    }
}

pub fn tempdir() -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix("asyncdump-test-")
        .tempdir()
        .expect("a temporary directory");
    Scratch(dir)
}

/// Sends, as a fake agent named `name` claiming process `pid`, the handshake a real agent sends first.
pub fn fake_handshake(
    conn: &mut std::os::unix::net::UnixStream,
    name: &str,
    pid: u32,
) -> std::io::Result<()> {
    use asyncdump_protocol::{Handshake, PROTOCOL_VERSION, write_frame};
    let hs = Handshake {
        protocol_version: PROTOCOL_VERSION,
        agent_version: name.into(),
        pid,
        program: name.into(),
        start_time_unix_ms: 0,
    };
    write_frame(conn, &hs.to_bytes())
}

/// An idle task as a fake agent describes it: polled once, nothing else known.
pub fn crafted_task(id: u64) -> asyncdump_protocol::Task {
    asyncdump_protocol::Task {
        id,
        name: None,
        spawn_site: 0,
        root_anchor: 0,
        cell: 0,
        poll_waker_data: 0,
        state: asyncdump_protocol::TaskState::Idle,
        created_ns: 0,
        polls: 1,
        busy_ns: 0,
        last_poll_end_ns: None,
        wakes: 0,
        last_wake_ns: None,
        frames: Vec::new(),
        capture: asyncdump_protocol::Capture::Fresh,
        awaited_by: None,
        delegate: None,
        walk: None,
    }
}

/// A fake agent at `path`, named `program`, serving one client: it answers `Stats` and `Snapshot`
/// from `snap`, and `WalkInfo` with walks refused (so that a dump shows annotated frames only).
pub fn serve_fake_agent(
    path: &Path,
    program: &str,
    snap: asyncdump_protocol::Snapshot,
) -> std::thread::JoinHandle<()> {
    serve_fake_agent_slowly(path, program, snap, std::time::Duration::ZERO)
}

/// [`serve_fake_agent`], answering each request `delay` after it came.
pub fn serve_fake_agent_slowly(
    path: &Path,
    program: &str,
    snap: asyncdump_protocol::Snapshot,
    delay: std::time::Duration,
) -> std::thread::JoinHandle<()> {
    use asyncdump_protocol::{
        ClientHello, MAX_REQUEST_BYTES, Reply, Request, WalkInfo, decode, encode, read_frame,
        write_frame,
    };
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let program = program.to_owned();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        fake_handshake(&mut conn, &program, std::process::id()).unwrap();
        let Ok(hello) = read_frame(&mut conn, MAX_REQUEST_BYTES) else {
            return;
        };
        ClientHello::from_bytes(&hello).unwrap();
        while let Ok(req) = read_frame(&mut conn, MAX_REQUEST_BYTES) {
            let reply = match decode(&req).unwrap() {
                Request::Stats => Reply::Stats(snap.stats),
                Request::WalkInfo => Reply::WalkInfo(WalkInfo {
                    walks_refused: Some(format!("{program} refuses walks")),
                    ..WalkInfo::default()
                }),
                _ => Reply::Snapshot(snap.clone()),
            };
            std::thread::sleep(delay);
            if write_frame(&mut conn, &encode(&reply).unwrap()).is_err() {
                return;
            }
        }
    })
}

/// A walk plan that holds together but asks for endless work: each task's root is a 16-byte
/// future whose 4,096 cases are searched at every future, and whose default case holds itself
/// again, 4,096 futures deep (the most a walk visits).
pub fn endless_plan(anchors: Vec<u64>) -> asyncdump_protocol::WalkPlan {
    use asyncdump_protocol::{Case, Discr, Edge, EdgeTarget, TypePlan, WalkPlan};
    let mut cases: Vec<Case> = (1..4096)
        .map(|v| Case {
            value: Some(v),
            edges: vec![],
        })
        .collect();
    cases.push(Case {
        value: None,
        edges: vec![Edge {
            offset: 0,
            to: EdgeTarget::Inline(0),
        }],
    });
    let endless = TypePlan {
        size: 16,
        discr: Some(Discr { offset: 8, size: 8 }),
        always: vec![],
        cases,
    };
    WalkPlan {
        types: vec![endless],
        roots: anchors.into_iter().map(|a| (a, 0)).collect(),
        vtables: vec![],
        max_nodes: u32::MAX,
        max_bytes: u32::MAX,
        runtime: None,
    }
}

/// Whether a section of a text dump has the root line of `root`: `  spawned … · root ROOT` for a
/// task spawned through the agent, `  root ROOT · defined at FILE:LINE` (or without where) for others.
pub fn has_root(section: &str, root: &str) -> bool {
    let line = format!("  root {root}");
    let spawned = format!(" · root {root}");
    section.lines().any(|l| {
        l == line
            || (l.starts_with("  spawned ") && l.ends_with(&spawned))
            || l.strip_prefix(&line)
                .is_some_and(|r| r.starts_with(" · defined at "))
    })
}
