//! `asyncdump watch` in a real terminal: tmux runs it against a live fixture, the test types keys and
//! reads the screen with `capture-pane`, then checks the terminal was given back.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::Fixture;

/// A tmux session on a server of its own, killed on drop. Sessions never share a server: tmux
/// ends its server when the last session goes, and a `new-session` that reaches a server in that
/// moment fails ("server exited unexpectedly") when specs run side by side.
/// The server's socket lives in a scratch directory of its own, so nothing is left behind.
pub struct Tmux {
    name: String,
    socket: std::path::PathBuf,
    _dir: crate::support::Scratch,
}

impl Tmux {
    pub fn start(command: &str) -> Tmux {
        Tmux::sized(command, 120, 40)
    }

    /// A terminal of `width` columns and `height` rows.
    pub fn sized(command: &str, width: u16, height: u16) -> Tmux {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("asyncdump-watch-{}-{n}", std::process::id());
        let dir = crate::support::tempdir();
        let socket = dir.join("tmux.sock");
        let status = tmux(&socket)
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                command,
            ])
            .status()
            .expect("tmux is installed");
        assert!(status.success());
        Tmux {
            name,
            socket,
            _dir: dir,
        }
    }

    pub fn keys(&self, keys: &str) {
        let status = tmux(&self.socket)
            .args(["send-keys", "-t", &self.name, keys])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types `text` as it is (`send-keys -l`: "right" is not the arrow key).
    pub fn text(&self, text: &str) {
        let status = tmux(&self.socket)
            .args(["send-keys", "-l", "-t", &self.name, text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn screen(&self) -> String {
        let out = tmux(&self.socket)
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Everything written to the terminal since it started, its scrollback too, each line whole
    /// (`-J`: a line the terminal wrapped is joined again).
    pub fn history(&self) -> String {
        let out = tmux(&self.socket)
            .args(["capture-pane", "-p", "-J", "-S", "-", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once `done` holds for it; panics with the screen after 10 s.
    pub fn until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.until_within(Duration::from_secs(10), what, done)
    }

    pub fn until_within(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "{what}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux(&self.socket).arg("kill-server").status();
    }
}

/// `tmux` on the server at `socket`, with no user configuration.
fn tmux(socket: &std::path::Path) -> Command {
    let mut command = Command::new("tmux");
    command.arg("-S").arg(socket).args(["-f", "/dev/null"]);
    command
}

#[test]
fn watch_follows_the_deadlock_edge_and_back_searches_and_quits_leaving_the_terminal_as_it_was() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::support::tempdir();
    let tmux = Tmux::start(&format!(
        "cd {} && {} watch {}; echo watch-exited-$?; sleep 60",
        dir.display(),
        env!("CARGO_BIN_EXE_asyncdump"),
        fx.pid
    ));
    let first = tmux.until("the table and the first task's detail", |s| {
        s.contains("▶ 1") && s.contains("task 1 \"left\" · idle")
    });
    assert!(
        first
            .lines()
            .any(|l| l.starts_with("  2 ") && l.contains(" right ") && l.contains(" DEADLOCK ")),
        "{first}"
    );
    assert!(
        first.contains("connected · DEADLOCK: 2 tasks in 1 wait cycle · 2 tasks: 2 idle"),
        "{first}"
    );
    assert!(
        first.contains("DEADLOCK: in the wait cycle task 1 → task 2 → task 1"),
        "{first}"
    );
    tmux.keys("Enter");
    tmux.until("Enter follows task 1's edge to task 2", |s| {
        s.contains("▶ 2") && s.contains("task 2 \"right\" · idle")
    });
    tmux.keys("BSpace");
    tmux.until("Backspace returns to task 1", |s| {
        s.contains("▶ 1") && s.contains("task 1 \"left\" · idle")
    });
    tmux.keys("o");
    let by_name = tmux.until("o sorts by the next column, name", |s| s.contains("name ▼"));
    let deadlocked = |screen: &str| -> Vec<String> {
        (screen.lines())
            .filter(|l| l.contains(" DEADLOCK "))
            .map(str::to_owned)
            .collect()
    };
    let rows = deadlocked(&by_name);
    assert!(
        rows[0].contains(" left ") && rows[1].contains(" right "),
        "{by_name}"
    );
    tmux.keys("r");
    let reversed = tmux.until("r reverses it", |s| s.contains("name ▲"));
    let rows = deadlocked(&reversed);
    assert!(
        rows[0].contains(" right ") && rows[1].contains(" left "),
        "{reversed}"
    );
    tmux.keys("Space");
    tmux.until("space pauses the screen", |s| {
        s.contains("PAUSED (space resumes)")
    });
    tmux.keys("Space");
    tmux.until("and space resumes", |s| !s.contains("PAUSED"));
    tmux.text("/right");
    tmux.keys("Enter");
    tmux.until("/ keeps the task named right", |s| {
        s.contains("search \"right\": 1 shown")
            && s.contains("▶ 2")
            && !s.lines().any(|l| l.starts_with("  1 "))
    });
    tmux.keys("c");
    tmux.until("c groups the chains the search keeps", |s| {
        s.contains("1 group (c lists tasks)") && s.contains("▶ ×1")
    });
    tmux.keys("c");
    // `s` saves what is shown as the `dump --json` document, in the current directory.
    tmux.keys("s");
    tmux.until("s saves a snapshot", |s| s.contains("saved asyncdump-"));
    let saved: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(saved.len(), 1);
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(saved[0].path()).unwrap()).unwrap();
    assert_eq!(doc["format"], "asyncdump-dump");
    assert_eq!(crate::support::tasks_of(&doc).len(), 2);
    assert_eq!(doc["deadlocks"], serde_json::json!([[1, 2]]));
    tmux.keys("?");
    tmux.until("? lists the keys", |s| s.contains("keys (any key closes)"));
    tmux.keys("q");
    tmux.keys("q");
    let after = tmux.until("q quits with status 0", |s| s.contains("watch-exited-0"));
    assert!(
        !after.contains("▶ "),
        "the alternate screen is gone, the shell's own screen is back:\n{after}"
    );
}

/// Records `watch` of the `deadlock` fixture's `pid` into `rec` for about `ms` once it shows the
/// deadlock, updates every 50 ms.
pub fn record_deadlock(pid: u32, rec: &std::path::Path, ms: u64) {
    let bin = env!("CARGO_BIN_EXE_asyncdump");
    let live = Tmux::start(&format!(
        "{bin} watch {pid} --interval 50ms --record {}; echo watch-exited-$?; sleep 60",
        rec.display()
    ));
    live.until("updates come", |s| s.contains("connected · DEADLOCK"));
    std::thread::sleep(Duration::from_millis(ms));
    live.keys("q");
    live.until("q quits", |s| s.contains("watch-exited-0"));
}

#[test]
fn a_recording_replays_update_by_update_and_a_snapshot_file_opens_as_it_was_saved() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::support::tempdir();
    let rec = dir.join("deadlock.jsonl");
    let bin = env!("CARGO_BIN_EXE_asyncdump");
    record_deadlock(fx.pid, &rec, 800);
    let text = std::fs::read_to_string(&rec).unwrap();
    let updates = text.lines().count() - 1;
    assert!(updates >= 5, "{updates} updates recorded");

    let replay = Tmux::start(&format!("{bin} watch --from {}; sleep 60", rec.display()));
    replay.until("the first update, and where it is", |s| {
        s.contains(&format!("update 1/{updates} at 0")) && s.contains("▶ 1")
    });
    replay.keys("Right");
    replay.until("→ steps to the next update", |s| {
        s.contains(&format!("update 2/{updates}"))
    });
    replay.keys("S-Right");
    replay.until("Shift-→ steps ten, at most to the last", |s| {
        s.contains(&format!("update {}/{updates}", updates.min(12)))
    });
    replay.keys("Left");
    replay.until("← steps back", |s| {
        s.contains(&format!("update {}/{updates}", updates.min(12) - 1))
    });
    replay.keys("Enter");
    replay.until("the edge is followed as live", |s| {
        s.contains("▶ 2") && s.contains("task 2 \"right\" · idle")
    });
    replay.keys("q");

    let snapshot = dir.join("one.json");
    let out = crate::support::asyncdump(&[
        "dump",
        &fx.pid.to_string(),
        "-o",
        snapshot.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let file = Tmux::start(&format!(
        "{bin} watch --from {}; sleep 60",
        snapshot.display()
    ));
    file.until("a snapshot file opens as saved", |s| {
        s.contains("file one.json") && s.contains("2 tasks: 2 idle")
    });
}

#[test]
fn a_target_that_stops_answering_shows_disconnected_with_its_last_state_and_comes_back() {
    let fx = Fixture::start("deadlock", &[]);
    let tmux = Tmux::start(&format!(
        "{} watch {}; sleep 60",
        env!("CARGO_BIN_EXE_asyncdump"),
        fx.pid
    ));
    tmux.until("connected", |s| s.contains("connected · DEADLOCK"));
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &fx.pid.to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    let lost = tmux.until_within(Duration::from_secs(30), "a stopped agent is lost", |s| {
        s.contains("DISCONNECTED")
    });
    assert!(
        lost.contains("▶ 1") && lost.contains("right"),
        "the last state stays:\n{lost}"
    );
    signal("-CONT");
    tmux.until_within(Duration::from_secs(30), "attached again", |s| {
        s.contains("connected · DEADLOCK") && !s.contains("DISCONNECTED")
    });
}

/// `kill` ends a watch as it ends any program, and the terminal is given back first: the shell after
/// it is out of raw mode and off the alternate screen. A closed terminal ends it too.
#[test]
fn a_signal_ends_watch_and_the_terminal_is_given_back_first() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::support::tempdir();
    let pid_file = dir.join("watch.pid");
    // watch in tmux, its table shown, with its pid; `then` runs in the shell once watch ends.
    let watch = |then: &str| {
        let tmux = Tmux::start(&format!(
            "sh -c 'echo $$ > {}; exec {} watch {}'{then}",
            pid_file.display(),
            env!("CARGO_BIN_EXE_asyncdump"),
            fx.pid
        ));
        tmux.until("the table", |s| s.contains("▶ 1"));
        (tmux, std::fs::read_to_string(&pid_file).unwrap())
    };
    for (signal, status) in [("TERM", 143), ("HUP", 129), ("INT", 130)] {
        let (tmux, pid) = watch("; echo watch-exited-$?; stty -a; sleep 60");
        let kill = Command::new("kill")
            .args([&format!("-{signal}"), pid.trim()])
            .status()
            .unwrap();
        assert!(kill.success());
        let after = tmux.until("the signal ends watch", |s| {
            s.contains(&format!("watch-exited-{status}")) && s.contains("icanon")
        });
        assert!(!after.contains("▶ "), "off the alternate screen:\n{after}");
        assert!(
            after.contains(" icanon") && after.contains(" echo") && !after.contains("-icanon"),
            "out of raw mode:\n{after}"
        );
    }
    // A closed window: the terminal hangs up under watch, which ends rather than spin on it.
    let (tmux, pid) = watch("");
    drop(tmux);
    let proc = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while proc.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!proc.exists(), "watch {} outlived its terminal", pid.trim());
}

#[test]
fn watch_shows_who_holds_what_follows_a_lock_wait_to_its_holder_and_finds_waiters_and_holders() {
    let fx = Fixture::start("lock_cycle", &["--agent"]);
    let tmux = Tmux::sized(
        &format!(
            "{} watch {}; echo watch-exited-$?; sleep 60",
            env!("CARGO_BIN_EXE_asyncdump"),
            fx.pid
        ),
        200,
        40,
    );
    let first = tmux.until("the lock cycle, with the holder in the detail pane", |s| {
        s.contains("▶ tokio 3")
            && s.contains("↳ holds Mutex @ ")
            && s.contains("held by tokio task 4")
    });
    assert!(
        first.contains("DEADLOCK: in the wait cycle tokio task 3 → tokio task 4 → tokio task 3"),
        "{first}"
    );
    // Task 3 awaits no JoinHandle: Enter goes to the holder of the mutex it waits for.
    tmux.keys("Enter");
    tmux.until("Enter follows the lock wait to its holder", |s| {
        s.contains("▶ tokio 4") && s.contains("held by tokio task 3")
    });
    tmux.keys("BSpace");
    // The mutex task 3 holds is the one task 4 waits on.
    let held = (first.lines())
        .find_map(|l| l.split("↳ holds Mutex @ ").nth(1))
        .and_then(|r| r.split(' ').next())
        .expect("the held mutex's address")
        .to_owned();
    tmux.text(&format!("/on:mutex @ {held}"));
    tmux.keys("Enter");
    tmux.until("/on: keeps the task waiting on it", |s| {
        s.contains("1 shown")
            && s.contains("▶ tokio 4")
            && !s.lines().any(|l| l.starts_with("  tokio 3"))
    });
    tmux.keys("/");
    for _ in 0..format!("on:mutex @ {held}").len() {
        tmux.keys("BSpace");
    }
    tmux.text(&format!("holds:{held}"));
    tmux.keys("Enter");
    tmux.until("/holds: keeps the task holding it", |s| {
        s.contains("1 shown")
            && s.contains("▶ tokio 3")
            && !s.lines().any(|l| l.starts_with("  tokio 4"))
    });
    tmux.keys("q");
    tmux.until("q quits with status 0", |s| s.contains("watch-exited-0"));
}

#[test]
fn watch_keeps_updating_while_it_reads_what_leaves_wait_for() {
    // The demo's queue consumer waits on a channel receive, which each update reads, on a
    // connection of its own: the subscribed one carries updates only.
    let fx = Fixture::start("demo_service", &[]);
    let tmux = Tmux::sized(
        &format!("{} watch {}", env!("CARGO_BIN_EXE_asyncdump"), fx.pid),
        200,
        40,
    );
    let rate = |s: &str| -> f64 {
        (s.split(" updates/s").next())
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or(0.0)
    };
    std::thread::sleep(Duration::from_secs(3));
    tmux.until_within(
        Duration::from_secs(15),
        "four updates a second, or near",
        |s| rate(s) >= 2.0,
    );
    tmux.keys("q");
}

#[test]
fn watch_shows_the_values_asked_for_in_the_detail_pane_and_only_those() {
    for args in [&[][..], &["--agent"][..]] {
        let fx = Fixture::start("locals", args);
        let command = |flags: &str| {
            format!(
                "{} watch {flags} {}",
                env!("CARGO_BIN_EXE_asyncdump"),
                fx.pid
            )
        };
        let tmux = Tmux::sized(&command("--fields user,ratio"), 200, 40);
        let screen = tmux.until("the handler's chosen locals in the detail pane", |s| {
            s.contains(r#"user: String = "user-42""#) && s.contains("ratio: f64 = 0.25")
        });
        assert!(!screen.contains("letter: char"), "{args:?}\n{screen}");
        tmux.keys("q");
        drop(tmux);
        let tmux = Tmux::sized(&command("-v"), 200, 40);
        tmux.until("every local with -v", |s| {
            s.contains("letter: char = 'λ'") && s.contains("ratio: f64 = 0.25")
        });
        tmux.keys("q");
        drop(tmux);
        let tmux = Tmux::sized(&command(""), 200, 40);
        let plain = tmux.until("no locals without", |s| s.contains("locals::handle"));
        assert!(!plain.contains("ratio: f64"), "{args:?}\n{plain}");
        tmux.keys("q");
    }
}

#[test]
fn watch_marks_a_starved_runtime_and_shows_what_a_running_tasks_thread_is_blocked_in() {
    let fx = Fixture::start("blocked_workers", &[]);
    let tmux = Tmux::sized(
        &format!("{} watch {}", env!("CARGO_BIN_EXE_asyncdump"), fx.pid),
        240,
        50,
    );
    tmux.until_within(
        Duration::from_secs(20),
        "the header says the runtime is starved",
        |s| {
            // Timed by the heartbeat's timer, overdue since the workers blocked.
            (s.lines()).any(|l| {
                l.split_once("STARVED: 4 of 4 workers blocked for ≥ ")
                    .is_some_and(|(_, rest)| rest.contains(", 5 ready"))
            })
        },
    );
    // Select the report's task (`/` searches) and read its detail pane.
    tmux.keys("/");
    tmux.text("render_pdf");
    tmux.keys("Enter");
    tmux.until("the detail pane names the blocking call", |s| {
        s.contains("blocked in std::thread::sleep (asked for ")
    });
    tmux.keys("q");
}

#[test]
fn watch_lists_the_futures_threads_block_on_with_their_chains() {
    let fx = Fixture::start("block_on_main", &[]);
    let tmux = Tmux::sized(
        &format!("{} watch {}", env!("CARGO_BIN_EXE_asyncdump"), fx.pid),
        240,
        50,
    );
    tmux.until_within(
        Duration::from_secs(20),
        "main's future is listed as its thread's",
        |s| s.contains(&format!("thread {}", fx.pid)),
    );
    // Select it (`/` searches) and read its chain in the detail pane.
    tmux.keys("/");
    tmux.text("supervise");
    tmux.keys("Enter");
    tmux.until(
        "the detail pane shows main's chain to the JoinHandle",
        |s| s.contains("block_on_main::supervise") && s.contains("JoinHandle<u32>"),
    );
    tmux.keys("q");
}

#[test]
fn watch_says_why_each_task_waits_and_marks_what_changed_since_the_last_screen() {
    let fx = Fixture::start("verdicts", &[]);
    let bin = env!("CARGO_BIN_EXE_asyncdump");
    let tmux = Tmux::sized(&format!("{bin} watch {}", fx.pid), 200, 50);
    tmux.until("the first update", |s| s.contains(" · connected · "));
    tmux.text("/deaf");
    tmux.keys("Enter");
    // Read live, what was read ready after the task's state is told as such.
    tmux.until("the notification read ready under the task's title", |s| {
        s.contains("(verdicts::deaf) · idle")
            && s.contains("verdict: unknown: waits on tokio::sync::notify::Notified, read ready (it was notified)")
    });
    tmux.keys("q");
    // Two tasks tick every 100 ms, ten short ones start each second: marked as they come and go.
    let fx = Fixture::start(
        "mass",
        &["--tasks", "3", "--changing", "2", "--churn", "10"],
    );
    let tmux = Tmux::sized(&format!("{bin} watch {}", fx.pid), 200, 50);
    let screen = tmux.until_within(Duration::from_secs(15), "ticks and new tasks marked", |s| {
        let rows = |mark: char| {
            (s.lines())
                .filter(|l| {
                    l.contains(&format!(" {mark}idle ")) || l.contains(&format!(" {mark}STUCK"))
                })
                .count()
        };
        rows('↻') + rows('→') >= 1 && s.contains(" new →") && s.contains(" gone")
    });
    let tick = (screen.lines())
        .find(|l| l.contains("↻") || l.contains("→idle"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        tick.contains("tick"),
        "a ticking task is the one that ran: {tick}\n{screen}"
    );
    // Its detail pane keeps the awaits it was seen at.
    tmux.text("/tick");
    tmux.keys("Enter");
    tmux.until("the ticking task's timeline", |s| {
        s.contains("seen at, in this view (process uptime, oldest first):")
    });
    tmux.keys("q");
}
