//! `asyncdump diff A B`: two dumps of one process compared, from snapshot files and a recording's
//! updates: the tasks new, gone, again at their await, and unchanged, alike ones told once.

use std::time::Duration;

use crate::support::{Fixture, asyncdump, asyncdump_ok};

/// The lines of one part of a text diff (after its title line, up to the blank line).
fn part<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    (text.split("\n\n"))
        .find(|p| p.lines().next().is_some_and(|l| l.starts_with(title)))
        .map(|p| p.lines().skip(1).collect())
        .unwrap_or_default()
}

#[test]
fn two_snapshots_say_which_tasks_came_went_ran_and_stayed() {
    // Three tasks held forever, two ticking every ~100 ms, twenty short ones a second.
    let fx = Fixture::start(
        "mass",
        &["--tasks", "3", "--changing", "2", "--churn", "20"],
    );
    let dir = crate::support::tempdir();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let pid = fx.pid.to_string();
    // The first dump once short-lived tasks run (the churn starts after the fixture is ready).
    for _ in 0..50 {
        asyncdump_ok(&["dump", &pid, "-o", a.to_str().unwrap()]);
        if std::fs::read_to_string(&a).unwrap().contains("\"brief\"") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(700));
    asyncdump_ok(&["dump", &pid, "-o", b.to_str().unwrap()]);
    let text = asyncdump_ok(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let header = text.lines().next().unwrap();
    assert!(header.starts_with(&format!("pid {pid}: ")), "{header}");
    assert!(header.contains(" later): "), "{header}");
    // The short-lived ones (each ends within 300 ms) came and went.
    let (new, gone) = (part(&text, "new"), part(&text, "gone"));
    assert!(
        new.iter()
            .any(|l| l.contains("\"brief\"") || l.contains("mass::brief")),
        "{text}"
    );
    assert!(gone.iter().any(|l| l.contains("mass::brief")), "{text}");
    // The ticking ones ran: back at their await for their next tick (or, caught woken on a busy
    // machine, in another state).
    let ran: Vec<&str> = [part(&text, "again at the same await"), part(&text, "moved")].concat();
    assert!(ran.iter().any(|l| l.contains("\"ticking\"")), "{text}");
    // The held ones are one line, with the time between the dumps.
    let unchanged = part(&text, "unchanged for ≥ ");
    let held = (unchanged.iter())
        .find(|l| l.contains("\"held\""))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        held.starts_with("  ×3 tasks ") && held.contains("mass::wait at "),
        "{held}"
    );
    // JSON has every task, in the same parts.
    let out = asyncdump_ok(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["format"], "asyncdump-diff");
    assert!(doc["between_ns"].as_i64().unwrap() >= 600_000_000, "{doc}");
    let held = (doc["unchanged"].as_array().unwrap().iter())
        .filter(|t| t["name"] == "held")
        .count();
    assert_eq!(held, 3, "{doc}");
    let ran = |name: &str| {
        let again = doc["again"].as_array().unwrap().iter();
        let moved = doc["moved"].as_array().unwrap().iter().map(|m| &m["to"]);
        again.chain(moved).filter(|t| t["name"] == name).count()
    };
    assert_eq!((ran("ticking"), ran("churn")), (2, 1), "{doc}");
    // A snapshot is one moment: `@N` is refused; two processes are not compared.
    let other = Fixture::start("mass", &["--tasks", "1", "--changing", "0"]);
    let c = dir.join("c.json");
    asyncdump_ok(&["dump", &other.pid.to_string(), "-o", c.to_str().unwrap()]);
    let out = asyncdump(&["diff", a.to_str().unwrap(), c.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("one process"),
        "{err}"
    );
    let at = format!("{}@1", a.display());
    let out = asyncdump(&["diff", &at, b.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("a snapshot file"),
        "{err}"
    );
}

#[test]
fn a_recordings_updates_compare_as_dumps_do() {
    let fx = Fixture::start("deadlock", &[]);
    let dir = crate::support::tempdir();
    let rec = dir.join("deadlock.jsonl");
    crate::watch::record_deadlock(fx.pid, &rec, 500);
    let first = format!("{}@0", rec.display());
    let text = asyncdump_ok(&["diff", &first, rec.to_str().unwrap()]);
    let header = text.lines().next().unwrap();
    assert!(header.contains(": 0 new, 0 gone, 0 moved, "), "{text}");
    // The two tasks awaiting each other stayed as they were.
    let unchanged = part(&text, "unchanged");
    assert!(unchanged.iter().any(|l| l.contains("\"left\"")), "{text}");
    assert!(unchanged.iter().any(|l| l.contains("\"right\"")), "{text}");
}
