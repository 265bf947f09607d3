//! `dump --samples N --interval T`: the first of N snapshots shown, each task marked stuck or
//! progressing by what the later ones saw, the stuck first, and the evidence said.

use crate::support::{Fixture, asyncdump_ok, dump_json};

/// The titles of a text dump's tasks, in order.
fn titles(text: &str) -> Vec<&str> {
    (text.split("\n\n").skip(1))
        .filter_map(|s| s.lines().next())
        .filter(|l| l.starts_with("task ") || l.starts_with("tokio task "))
        .collect()
}

#[test]
fn tasks_the_agent_saw_polled_progress_and_the_others_are_stuck_first() {
    // Three tasks wait on receivers nobody sends on; two tick every ~100 ms.
    let fx = Fixture::start("mass", &["--tasks", "3", "--changing", "2"]);
    let pid = fx.pid.to_string();
    let text = asyncdump_ok(&["dump", &pid, "--samples", "3", "--interval", "300ms"]);
    let header = (text.lines())
        .find(|l| l.starts_with("sampled 3 times over "))
        .unwrap_or_else(|| panic!("the sampling line:\n{text}"));
    assert!(header.contains(": 4 stuck ("), "{header}");
    assert!(header.ends_with(", 2 progressing"), "{header}");
    let titles = titles(&text);
    let first_progressing = (titles.iter())
        .position(|t| t.contains(" · progressing"))
        .unwrap_or_else(|| panic!("{text}"));
    for (i, t) in titles.iter().enumerate() {
        let held = t.contains("\"held\"");
        if held {
            assert!(t.contains(" · STUCK (not polled) · "), "{t}");
        }
        if t.contains("\"ticking\"") {
            assert!(t.contains(" · progressing · "), "{t}");
        }
        assert_eq!(
            i < first_progressing,
            t.contains(" · STUCK"),
            "stuck first: {titles:#?}"
        );
    }
    // JSON carries the verdict and what it rests on, and how the dump was sampled.
    let doc = dump_json(fx.pid, &["--samples", "2", "--interval", "200ms"]);
    let sampling = &doc["snapshot"]["sampling"];
    assert_eq!(
        (sampling["samples"].as_u64(), sampling["asked"].as_u64()),
        (Some(2), Some(2))
    );
    assert!(
        sampling["over_ns"].as_u64().unwrap() >= 150_000_000,
        "{sampling}"
    );
    let held = (doc["tasks"].as_array().unwrap().iter())
        .find(|t| t["name"] == "held")
        .unwrap();
    assert_eq!(
        held["progress"],
        serde_json::json!({"verdict": "stuck", "by": "polls"})
    );
}

#[test]
fn a_process_that_exits_while_sampled_is_shown_as_first_seen_and_the_dump_says_so() {
    let fx = Fixture::start("mass", &["--tasks", "3", "--changing", "1"]);
    let pid = fx.pid;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(2000));
        // SAFETY: kill has no memory effects; the pid is the fixture's, still our child.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let text = asyncdump_ok(&[
        "dump",
        &pid.to_string(),
        "--samples",
        "40",
        "--interval",
        "200ms",
    ]);
    killer.join().unwrap();
    let header = (text.lines())
        .find(|l| l.starts_with("sampled "))
        .unwrap_or_else(|| panic!("the sampling line:\n{text}"));
    assert!(header.contains(" · sampling ended after "), "{header}");
    assert!(header.contains(" of 40: "), "{header}");
    assert!(
        text.contains("task 1 \"held\" · idle · STUCK (not polled)"),
        "{text}"
    );
}

#[test]
fn samples_are_of_a_live_process_only() {
    let out = crate::support::asyncdump(&["dump", "--core", "/nonexistent", "--samples", "2"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--samples") && err.contains("--core"), "{err}");
}

#[test]
fn without_the_agent_a_task_that_looks_otherwise_in_a_later_sample_progressed() {
    let fx = Fixture::start("mass", &["--tasks", "3", "--changing", "2"]);
    let pid = fx.pid.to_string();
    let text = asyncdump_ok(&[
        "dump",
        &pid,
        "--no-agent",
        "--samples",
        "3",
        "--interval",
        "300ms",
    ]);
    let titles = titles(&text);
    let ticking: Vec<&&str> = titles.iter().filter(|t| t.contains("mass::tick")).collect();
    let waiting: Vec<&&str> = titles
        .iter()
        .filter(|t| t.contains("(mass::wait)"))
        .collect();
    assert_eq!((ticking.len(), waiting.len()), (2, 3), "{text}");
    // An interval's next tick is its wait line: each tick moves it on.
    for t in ticking {
        assert!(t.ends_with(" · progressing"), "{t}");
    }
    for t in waiting {
        assert!(t.ends_with(" · STUCK (looked the same)"), "{t}");
    }
    let tick = (text.split("\n\n"))
        .find(|s| s.contains("mass::tick"))
        .unwrap();
    assert!(
        tick.contains(
            "awaiting poll_fn in tokio::time::interval::Interval::tick\n        ↳ deadline in "
        ),
        "{tick}"
    );
}
