//! The futures `block_on`s run, which no runtime lists: `#[tokio::main]`'s future awaiting a task's
//! `JoinHandle`, a `futures::executor::block_on` inside a task (the nested-executor hang), and
//! hanging `#[tokio::test]` bodies of both flavors, each shown as its thread's with its chain down
//! to what it waits for, its edges to tasks and its deadlocks. Live, held stopped and from a core,
//! on programs that link nothing of ours.

use crate::support::{Fixture, asyncdump_ok, at_line, dump_until, fixture_test_bin, tempdir};

/// The section of `text` whose title has `title`, from its line's start to the blank line after it.
fn section<'t>(text: &'t str, title: &str) -> &'t str {
    let at = text
        .find(title)
        .unwrap_or_else(|| panic!("no section {title:?}:\n{text}"));
    let start = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let rest = &text[start..];
    &rest[..rest.find("\n\n").unwrap_or(rest.len())]
}

/// What every reading of `block_on_main` shows: `main`'s future awaiting the job's `JoinHandle`,
/// the job awaited by it, and the bridge's worker parked in futures' executor with its future.
fn assert_block_ons(text: &str, pid: u32) {
    assert_futures(text, pid);
    let bridge = section(text, "· running on thread tokio-rt-worker");
    assert!(
        bridge.contains(&format!(
            "blocked in futures::executor::block_on, waiting for its future (shown as its thread's) ← block_on_main::sync_bridge::lookup_blocking at {}",
            at_line("block_on_main", "futures::executor::block_on(await_lookup(reply))")
        )),
        "{bridge}"
    );
}

/// The two threads' futures of `block_on_main`, and the job `main`'s awaits.
fn assert_futures(text: &str, pid: u32) {
    let main = section(
        text,
        &format!("thread {pid} \"block_on_main\" · block_on · idle"),
    );
    assert!(
        main.contains(
            "run by tokio::runtime::Runtime::block_on · root block_on_main::main::{async block#0}"
        ),
        "{main}"
    );
    let supervise = format!(
        "block_on_main::supervise at {} [decoded]",
        at_line("block_on_main", "job.await.unwrap_or(0)")
    );
    assert!(main.contains(&supervise), "{main}\nwanted: {supervise}");
    assert!(
        main.contains("awaiting tokio::task::JoinHandle<u32>\n        → awaits tokio task "),
        "{main}"
    );
    let job = section(text, "(block_on_main::jobs::wait_for_reply) · idle");
    assert!(
        job.contains(&format!(
            "awaited by thread {pid} \"block_on_main\" at block_on_main::main::{{async block#0}} → block_on_main::supervise"
        )),
        "{job}"
    );
    // The nested executor: its worker's own future, and the task it blocks.
    let nested = section(text, "\"tokio-rt-worker\" · block_on · idle");
    assert!(
        nested.contains(
            "run by futures::executor::block_on · root block_on_main::sync_bridge::await_lookup"
        ),
        "{nested}"
    );
    assert!(
        nested.contains("awaiting tokio::sync::oneshot::Receiver<u32>"),
        "{nested}"
    );
}

#[test]
fn main_and_a_nested_executor_show_the_futures_they_block_on_with_their_chains() {
    let fx = Fixture::start("block_on_main", &[]);
    let text = dump_until(fx.pid, &["--all"], |t| t.contains("· block_on · idle"));
    assert!(
        text.contains("showing 2 of 2 tasks, and 2 threads' futures (their block_on's)"),
        "{text}"
    );
    assert_block_ons(&text, fx.pid);
    let doc: serde_json::Value =
        serde_json::from_str(&asyncdump_ok(&["dump", &fx.pid.to_string(), "--json"])).unwrap();
    let tasks = doc["tasks"].as_array().unwrap();
    let main = (tasks.iter())
        .find(|t| t["block_on"] == "tokio::runtime::Runtime::block_on")
        .expect("main's future in the JSON document");
    assert_eq!(main["name"], "block_on_main");
    assert_eq!(main["state"], "idle");
    let key = main["id"].as_u64().unwrap();
    assert_eq!(key & 0xffff_ffff, u64::from(fx.pid), "keyed by its thread");
    let awaited = (tasks.iter())
        .find(|t| t["awaited_by"]["task"].as_u64() == Some(key))
        .expect("the job, awaited by main's future");
    assert!(awaited["tokio_id"].is_u64(), "{awaited}");
    assert_eq!(doc["snapshot"]["block_ons"], 2);
}

#[test]
fn held_stopped_and_from_a_core_the_same_futures_are_read() {
    let fx = Fixture::start("block_on_main", &[]);
    dump_until(fx.pid, &[], |t| t.contains("· block_on · idle"));
    let stopped = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stop", "--all"]);
    assert!(stopped.contains("threads stopped for"), "{stopped}");
    assert_block_ons(&stopped, fx.pid);
    let dir = tempdir();
    let core = crate::cores::gcore(fx.pid, dir.as_path());
    let text = asyncdump_ok(&["dump", "--core", core.to_str().unwrap(), "--all"]);
    assert!(text.contains("read from core file"), "{text}");
    // A core keeps no thread names: main's future is its thread's by id.
    let main = section(&text, &format!("thread {} · block_on", fx.pid));
    assert!(
        main.contains("run by tokio::runtime::Runtime::block_on"),
        "{main}"
    );
    assert!(main.contains("block_on_main::supervise at "), "{main}");
}

/// Runs test `name` of the fixtures' `hanging` tests, until it says it is ready.
fn hanging(name: &str) -> Fixture {
    let bin = fixture_test_bin("hanging");
    let args = [
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ];
    Fixture::start_path(&bin, &args, &[])
}

fn at_test(needle: &str) -> String {
    let src =
        std::fs::read_to_string(crate::support::workspace().join("fixtures/tests/hanging.rs"))
            .unwrap();
    let line = (src.lines().position(|l| l.contains(needle))).expect("needle in hanging.rs") + 1;
    format!("fixtures/tests/hanging.rs:{line}")
}

#[test]
fn a_hanging_current_thread_test_shows_its_body_and_what_it_awaits() {
    let name = "current_thread_test_waits_for_a_confirmation";
    let fx = hanging(name);
    let text = dump_until(fx.pid, &[], |t| t.contains("· block_on · idle"));
    let body = section(&text, " · block_on · idle");
    // The test's thread is named after it (as far as a thread name goes).
    assert!(body.starts_with("thread "), "{body}");
    assert!(body.contains(&format!("\"{}\"", &name[..15])), "{body}");
    let want = format!(
        "hanging::{name}::{{async block#0}} at {} [decoded]\n    hanging::orders::confirm at {} [decoded]\n      awaiting tokio::sync::oneshot::Receiver<u64>",
        at_test("orders::confirm(reply).await"),
        at_test("reply.await.unwrap_or(0)")
    );
    assert!(body.contains(&want), "{body}\nwanted:\n{want}");
}

#[test]
fn a_hanging_multi_thread_test_is_a_deadlock_of_its_own_thread() {
    let name = "multi_thread_test_waits_for_its_own_lock";
    let fx = hanging(name);
    let text = dump_until(fx.pid, &[], |t| t.contains("DEADLOCK"));
    let body = section(&text, " · block_on · idle");
    let held = format!(
        "in `_held`, acquired at {}",
        at_test("let _held = ledger.lock().await;")
    );
    assert!(
        body.contains("↳ holds Mutex @ 0x") && body.contains(&held),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "hanging::orders::post at {} [decoded]",
            at_test("*ledger.lock().await")
        )),
        "{body}"
    );
    let deadlock = section(&text, "DEADLOCK cycle: thread ");
    assert!(
        deadlock.contains("waits in hanging::orders::post at ")
            && deadlock.contains("held by thread "),
        "{deadlock}"
    );
    let stats = asyncdump_ok(&["dump", &fx.pid.to_string(), "--stats"]);
    assert!(stats.contains("DEADLOCK"), "{stats}");
}

/// Optimised code may keep no `Pin` local for the future a `block_on` pins (tokio's, for `main`'s
/// future, keeps none at `opt-level` 2 or 3): the future is found by the variable it is pinned in,
/// by value. There the task's poll function tail-calls its harness and leaves no frame: the task
/// the bridge's worker polls is told by its address in the harness's frame.
#[test]
fn an_optimised_builds_block_on_futures_are_found_where_no_pin_is_kept() {
    let exe = crate::support::optimised_bin("block_on_main");
    let fx = Fixture::start_path(&exe, &[], &[]);
    let text = dump_until(fx.pid, &["--all"], |t| {
        t.contains("showing 2 of 2 tasks, and 2 threads' futures")
    });
    assert_block_ons(&text, fx.pid);
    let threads = asyncdump_ok(&["dump", &fx.pid.to_string(), "--threads"]);
    assert!(
        !threads.contains("its block_on's future not found"),
        "{threads}"
    );
}
