//! `asyncdump watch` in a real terminal: tmux runs it against a live fixture, the test types keys and
//! reads the screen with `capture-pane`, then checks the terminal was given back.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::Fixture;

/// A tmux session, killed on drop.
struct Tmux(String);

impl Tmux {
    fn start(command: &str) -> Tmux {
        let name = format!("asyncdump-watch-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "120",
                "-y",
                "40",
                command,
            ])
            .status()
            .expect("tmux is installed");
        assert!(status.success());
        Tmux(name)
    }

    fn keys(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.0, keys])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types `text` as it is (`send-keys -l`: "right" is not the arrow key).
    fn text(&self, text: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-l", "-t", &self.0, text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once `done` holds for it; panics with the screen after 10 s.
    fn until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
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
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

#[test]
fn watch_follows_the_deadlock_edge_and_back_searches_and_quits_leaving_the_terminal_as_it_was() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::errors::tempdir();
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
            .any(|l| l.starts_with("  2 ") && l.contains(" right ") && l.contains(" idle ")),
        "{first}"
    );
    assert!(first.contains("connected · 2 tasks: 2 idle"), "{first}");
    tmux.keys("Enter");
    tmux.until("Enter follows task 1's edge to task 2", |s| {
        s.contains("▶ 2") && s.contains("task 2 \"right\" · idle")
    });
    tmux.keys("BSpace");
    tmux.until("Backspace returns to task 1", |s| {
        s.contains("▶ 1") && s.contains("task 1 \"left\" · idle")
    });
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
    assert_eq!(doc["tasks"].as_array().map(Vec::len), Some(2));
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
