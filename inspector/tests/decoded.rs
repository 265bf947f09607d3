//! Zero-annotation chains: `asyncdump dump` decodes real fixture processes through their DWARF. Only each
//! task's root is registered with the agent; every frame below it comes from the state machines.

use std::path::Path;
use std::process::Command;

use crate::support::run_tool as run;
use crate::support::{Fixture, asyncdump_ok, at_line, bin, dump_json, line_of, section, site};

/// The chain lines of a section: everything after the `spawned` line, before the delegate line.
fn chain_lines(section: &[String]) -> Vec<String> {
    section
        .iter()
        .skip_while(|l| !l.starts_with("  spawned "))
        .skip(1)
        .filter(|l| !l.starts_with("  awaited by ") && !l.starts_with("  delegate"))
        // What a leaf waits for is said under it, and is not part of the chain.
        .filter(|l| !l.trim_start().starts_with("↳ "))
        .cloned()
        .collect()
}

fn indent(depth: usize, line: &str) -> String {
    format!("{}{line}", "  ".repeat(depth))
}

/// A decoded frame of `plain_combinators` at `depth`: `plain_combinators::NAME at FILE:LINE [decoded]`,
/// LINE being the first line of the fixture's source that contains `needle`.
fn frame(depth: usize, name: &str, needle: &str) -> String {
    let at = at_line("plain_combinators", needle);
    indent(
        depth,
        &format!("plain_combinators::{name} at {at} [decoded]"),
    )
}

fn dump(pid: u32, extra: &[&str]) -> String {
    let pid = pid.to_string();
    let mut args = vec!["dump", pid.as_str()];
    args.extend_from_slice(extra);
    asyncdump_ok(&args)
}

#[test]
fn plain_chain_10_gives_ten_decoded_frames_each_at_its_await_then_the_leaf() {
    let fx = Fixture::start("plain_chain", &["--depth", "10"]);
    let text = dump(fx.pid, &[]);
    assert!(text.contains("chains decoded from DWARF in "), "{text}");
    let s = section(&text, "task 1 \"plain-chain\"");
    let recurse = at_line("plain_chain", "Box::pin(descend(");
    let leaf_await = at_line("plain_chain", "rx.await");
    let mut expected: Vec<String> = (1..=9)
        .map(|d| indent(d, &format!("plain_chain::descend at {recurse} [decoded]")))
        .collect();
    expected.push(indent(
        10,
        &format!("plain_chain::descend at {leaf_await} [decoded]"),
    ));
    expected.push(indent(11, "awaiting tokio::sync::oneshot::Receiver<u32>"));
    assert_eq!(chain_lines(&s), expected);
    // The root type comes from DWARF too, exact where `type_name` says `{{closure}}`.
    assert!(s[1].ends_with(" · root plain_chain::descend"), "{}", s[1]);
}

#[test]
fn the_depth_decoded_is_the_depth_asked_for() {
    let fx = Fixture::start("plain_chain", &["--depth", "3"]);
    let doc = dump_json(fx.pid, &[]);
    let mut level = &doc["tasks"][0]["frames"];
    let mut sources = Vec::new();
    while let Some(f) = level.as_array().and_then(|a| a.first()) {
        sources.push(f["source"].as_str().unwrap().to_owned());
        level = &f["children"];
    }
    assert_eq!(sources, ["decoded", "decoded", "decoded", "awaitee"]);
    let top = &doc["tasks"][0]["frames"][0];
    let header: u64 = line_of("plain_chain", "async fn descend");
    assert_eq!(top["location"]["line"], header, "location is the fn itself");
    assert_eq!(
        top["suspended_at"]["file"],
        "fixtures/src/bin/plain_chain.rs"
    );
}

#[test]
fn without_decoding_an_unannotated_task_shows_no_frames() {
    let fx = Fixture::start("plain_chain", &["--depth", "4"]);
    let text = dump(fx.pid, &["--no-decode"]);
    assert!(
        text.contains("note: chains not decoded (--no-decode)"),
        "{text}"
    );
    assert_eq!(
        chain_lines(&section(&text, "task 1 \"plain-chain\"")),
        Vec::<String>::new()
    );
}

fn combinators() -> (Fixture, String) {
    let fx = Fixture::start("plain_combinators", &[]);
    let text = dump(fx.pid, &[]);
    (fx, text)
}

/// `join!` and `select!` lines point into the macro's source (tokio's or futures'; that is where DWARF
/// puts their awaits); the branches below them are the fixture's own.
fn macro_await(text: &str, name: &str, header: &str, macro_file: &str) {
    let prefix = format!("  {name} at {header} · await inside a macro, at ");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{prefix} in {text}"));
    assert!(
        line.contains(&format!("{macro_file}:")) && line.ends_with(" [decoded]"),
        "{line}"
    );
}

#[test]
fn join_and_select_are_trees_with_every_pending_branch() {
    let (_fx, text) = combinators();
    let (left, right) = (
        at_line("plain_combinators", "rx.await.unwrap_or(0)"),
        at_line("plain_combinators", "rx.await.unwrap_or(1)"),
    );
    for (id, task, fn_name, label, file) in [
        (1, "join", "joined", "tokio::join!", "/src/macros/join.rs"),
        (
            2,
            "select",
            "selected",
            "tokio::select!",
            "/src/macros/select.rs",
        ),
        (
            12,
            "futures-join",
            "joined_futures",
            "futures::join!",
            "/src/async_await/join_mod.rs",
        ),
        (
            13,
            "futures-select",
            "selected_futures",
            "futures::select!",
            "/src/async_await/select_mod.rs",
        ),
    ] {
        let s = section(&text, &format!("task {id} \"{task}\""));
        let lines = chain_lines(&s);
        let header = at_line("plain_combinators", &format!("async fn {fn_name}("));
        macro_await(
            &text,
            &format!("plain_combinators::{fn_name}"),
            &header,
            file,
        );
        assert_eq!(
            lines[1..],
            [
                indent(2, &format!("{label} [decoded]")),
                indent(3, &format!("plain_combinators::left at {left} [decoded]")),
                indent(4, "awaiting tokio::sync::oneshot::Receiver<u32>"),
                indent(3, &format!("plain_combinators::right at {right} [decoded]")),
                indent(4, "awaiting tokio::sync::oneshot::Receiver<u32>"),
            ],
            "{s:#?}"
        );
    }
}

#[test]
fn a_select_branch_disabled_by_its_precondition_is_not_shown() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 8 \"select-one\"");
    let lines = chain_lines(&s);
    assert_eq!(
        lines[1..],
        [
            indent(2, "tokio::select! [decoded]"),
            frame(3, "left", "rx.await.unwrap_or(0)"),
            indent(4, "awaiting tokio::sync::oneshot::Receiver<u32>"),
        ],
        "{s:#?}"
    );
    // The disabled branch's receiver was never polled: it says nothing about the waker.
    let delegates: Vec<&String> = s
        .iter()
        .filter(|l| l.contains("delegate (decoded)"))
        .collect();
    assert_eq!(delegates.len(), 1, "{s:#?}");
}

#[test]
fn a_oneshot_receiver_shows_whose_waker_it_holds() {
    let (_fx, text) = combinators();
    // Identical receivers (a join's two branches) are one line with a count.
    for (id, name, count) in [(1, "join", "×2 "), (3, "boxed-dyn", ""), (7, "mapped", "")] {
        let s = section(&text, &format!("task {id} \"{name}\""));
        let decoded: Vec<&String> = s
            .iter()
            .filter(|l| l.contains("delegate (decoded)"))
            .collect();
        let expected = format!(
            "  delegate (decoded): tokio::sync::oneshot::Receiver<u32> {count}holds this task's waker"
        );
        assert_eq!(decoded, [&expected], "{s:#?}");
    }
    // A JoinHandle is no oneshot: nothing decoded about its waker.
    let joiner = section(&text, "task 5 \"joiner\"");
    assert!(!joiner.iter().any(|l| l.contains("delegate (decoded)")));
}

#[test]
fn a_boxed_dyn_future_is_followed_through_its_vtable() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 3 \"boxed-dyn\"");
    assert_eq!(
        chain_lines(&s),
        [
            frame(1, "boxed_dyn", "fut.await"),
            frame(2, "behind_box", "rx.await.unwrap_or(2)"),
            indent(3, "awaiting tokio::sync::oneshot::Receiver<u32>"),
        ]
    );
}

#[test]
fn a_join_handle_is_a_cross_task_edge_to_the_task_it_joins() {
    let (_fx, text) = combinators();
    let joiner = section(&text, "task 5 \"joiner\"");
    assert_eq!(
        chain_lines(&joiner),
        [
            frame(1, "join_child", "handle.await"),
            indent(2, "awaiting asyncdump_agent::JoinHandle<u32>"),
            indent(3, "→ awaits task 4 \"joined\""),
        ]
    );
    let joined = section(&text, "task 4 \"joined\"");
    assert!(
        joined.contains(&"  awaited by task 5 \"joiner\"".to_owned()),
        "{joined:?}"
    );
}

#[test]
fn a_timeout_around_a_channel_receive_shows_both() {
    let (fx, text) = combinators();
    let s = section(&text, "task 6 \"timeout\"");
    let lines = chain_lines(&s);
    assert_eq!(
        lines[..2],
        [
            frame(1, "with_timeout", "recv.await"),
            indent(2, "tokio::time::timeout [decoded]"),
        ]
    );
    // Inside: tokio's own `Receiver::recv` (its impl block named, not `{impl#0}`, its file from the
    // crate's directory on), down to its poll_fn, named by where its closure was written.
    assert!(
        lines[2].starts_with(&indent(
            3,
            "tokio::sync::mpsc::bounded::Receiver::recv<u32> at tokio-1.54.1/src/sync/mpsc/bounded.rs:"
        )),
        "{lines:#?}"
    );
    let full = dump(fx.pid, &["--full-paths"]);
    let full_recv = chain_lines(&section(&full, "task 6 \"timeout\""))[2].clone();
    assert!(
        full_recv.contains(" at /") && full_recv.contains("/registry/src/"),
        "--full-paths keeps the path DWARF has: {full_recv}"
    );
    assert!(
        lines[3].starts_with(&indent(
            4,
            "awaiting poll_fn in tokio::sync::mpsc::bounded::Receiver::recv"
        )),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 4);
}

#[test]
fn a_futures_map_is_seen_through() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 7 \"mapped\"");
    assert_eq!(
        chain_lines(&s),
        [
            frame(1, "mapped", "left(rx).map("),
            frame(2, "left", "rx.await.unwrap_or(0)"),
            indent(3, "awaiting tokio::sync::oneshot::Receiver<u32>"),
        ]
    );
}

#[test]
fn join_all_is_a_tree_of_every_pending_future_in_its_boxed_slice() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 11 \"join-all\"");
    let left = frame(3, "left", "rx.await.unwrap_or(0)");
    let leaf = indent(4, "awaiting tokio::sync::oneshot::Receiver<u32>");
    let all = at_line("plain_combinators", "futures::future::join_all(");
    // The await is on the `.await` line right below the `join_all(` call.
    let (file, line) = all.rsplit_once(':').unwrap();
    let await_line = format!("{file}:{}", line.parse::<u32>().unwrap() + 1);
    assert_eq!(
        chain_lines(&s),
        [
            indent(
                1,
                &format!("plain_combinators::joined_all at {await_line} [decoded]")
            ),
            indent(2, "futures::future::join_all [decoded]"),
            left.clone(),
            leaf.clone(),
            left.clone(),
            leaf.clone(),
            left,
            leaf,
        ],
        "{s:#?}"
    );
    let delegate =
        "  delegate (decoded): tokio::sync::oneshot::Receiver<u32> ×3 holds this task's waker";
    assert!(s.contains(&delegate.to_owned()), "{s:#?}");
}

#[test]
fn a_futures_then_is_seen_through_to_its_pending_first_future() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 9 \"then\"");
    assert_eq!(
        chain_lines(&s),
        [
            frame(1, "chained", "left(rx).then("),
            frame(2, "left", "rx.await.unwrap_or(0)"),
            indent(3, "awaiting tokio::sync::oneshot::Receiver<u32>"),
        ]
    );
}

#[test]
fn a_sleep_is_a_leaf_named_by_its_type() {
    let (_fx, text) = combinators();
    let s = section(&text, "task 10 \"sleeping\"");
    assert_eq!(
        chain_lines(&s),
        [
            frame(1, "sleeping", "tokio::time::sleep("),
            indent(2, "awaiting tokio::time::sleep::Sleep"),
        ]
    );
    // And what it waits for, under it: an hour-long sleep begun a moment ago.
    assert!(
        s.iter()
            .any(|l| l.starts_with("      ↳ deadline in 59m")
                || l.starts_with("      ↳ deadline in 1h")),
        "{s:?}"
    );
}

#[test]
fn annotated_frames_that_are_also_decoded_show_once_with_their_await_line() {
    let fx = Fixture::start("depth_chain", &["--depth", "3"]);
    let text = dump(fx.pid, &[]);
    let s = section(&text, "task 1 \"depth-chain\"");
    let descend = site("depth_chain", "async fn descend", "descend");
    let recurse = line_of("depth_chain", "Box::pin(descend(");
    let leaf_await = line_of("depth_chain", "rx.frame(");
    let leaf = site("depth_chain", "rx.frame(\"oneshot::Receiver\")", "frame");
    assert_eq!(
        chain_lines(&s),
        [
            indent(
                1,
                &format!("depth_chain::descend at {descend} · await at line {recurse}")
            ),
            indent(
                2,
                &format!("depth_chain::descend at {descend} · await at line {recurse}")
            ),
            indent(
                3,
                &format!("depth_chain::descend at {descend} · await at line {leaf_await}")
            ),
            indent(
                4,
                &format!(
                    "oneshot::Receiver at {leaf} · awaiting tokio::sync::oneshot::Receiver<u32>"
                )
            ),
        ]
    );
}

#[test]
fn a_decoded_join_handle_edge_is_shown_once_in_a_deadlock() {
    let fx = Fixture::start("deadlock", &[]);
    let text = dump(fx.pid, &[]);
    assert!(
        text.contains("DEADLOCK cycle: task 1 → task 2 → task 1\n"),
        "{text}"
    );
    let s = section(&text, "task 1 \"left\"");
    let awaits: Vec<&String> = s.iter().filter(|l| l.contains("→ awaits")).collect();
    assert_eq!(awaits, [&indent(4, "→ awaits task 2 \"right\"")], "{s:#?}");
    assert!(
        s.contains(&indent(3, "awaiting asyncdump_agent::JoinHandle<()>")),
        "{s:#?}"
    );
}

fn copy_of(fixture: &str, dir: &Path) -> std::path::PathBuf {
    let to = dir.join(fixture);
    std::fs::copy(bin(fixture), &to).unwrap();
    to
}

#[test]
fn a_stripped_process_gets_a_note_and_keeps_its_annotated_frames() {
    let dir = crate::support::tempdir();
    let exe = copy_of("depth_chain", &dir);
    run("strip", &[exe.to_str().unwrap()]);
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    // The plan cache may hold the unstripped build's plan, which serves (see plan_cache.rs).
    let text = dump(fx.pid, &["--no-cache"]);
    let note = text
        .lines()
        .find(|l| l.starts_with("note: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        note.starts_with("note: chains not decoded: ")
            && note.contains("has no type debug info")
            && note.contains("debug = \"full\""),
        "{note}"
    );
    let s = section(&text, "task 1 \"depth-chain\"");
    assert_eq!(
        chain_lines(&s).len(),
        3,
        "annotated frames still shown: {s:#?}"
    );
    assert!(!text.contains("[decoded]"));
}

#[test]
fn a_separate_debug_file_is_found_through_gnu_debuglink() {
    let dir = crate::support::tempdir();
    let exe = copy_of("plain_chain", &dir);
    let debug = dir.join("plain_chain.debug");
    let (exe_s, debug_s) = (exe.to_str().unwrap(), debug.to_str().unwrap());
    run("objcopy", &["--only-keep-debug", exe_s, debug_s]);
    run("strip", &["--strip-debug", exe_s]);
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={debug_s}"), exe_s],
    );
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    let doc = dump_json(fx.pid, &["--no-cache"]);
    assert_eq!(doc["decoding"]["enabled"], true, "{}", doc["decoding"]);
    assert_eq!(doc["decoding"]["debug_file"], debug_s);
    let top = &doc["tasks"][0]["frames"][0];
    assert_eq!(top["name"], "plain_chain::descend");
    assert_eq!(top["children"][0]["name"], "plain_chain::descend");
}

#[test]
fn a_binary_that_is_not_the_running_one_is_refused_by_build_id() {
    let fx = Fixture::start("plain_chain", &["--depth", "2"]);
    let other = bin("depth_chain");
    let text = dump(fx.pid, &["--binary", other.to_str().unwrap()]);
    let note = text
        .lines()
        .find(|l| l.starts_with("note: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        note.contains(&format!("is not the binary process {} runs", fx.pid))
            && note.contains("build-id"),
        "{note}"
    );
    assert!(!text.contains("[decoded]"));
    // The right one, given explicitly, decodes.
    let same = bin("plain_chain");
    let text = dump(fx.pid, &["--binary", same.to_str().unwrap()]);
    assert!(text.contains("plain_chain::descend at "), "{text}");
}

#[test]
fn a_binary_replaced_on_disk_is_caught_by_the_build_id_the_agent_reports() {
    let dir = crate::support::tempdir();
    let exe = copy_of("plain_chain", &dir);
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    // A new build lands where the running one was (a rename: the running inode lives on).
    let other = copy_of("depth_chain", &dir);
    std::fs::rename(&other, &exe).unwrap();
    let text = dump(fx.pid, &["--binary", exe.to_str().unwrap()]);
    assert!(
        text.contains(&format!("is not the binary process {} runs", fx.pid)),
        "{text}"
    );
    // The process's own executable (`/proc/PID/exe`) is still the running image: it decodes.
    let doc = dump_json(fx.pid, &[]);
    assert_eq!(doc["decoding"]["enabled"], true, "{}", doc["decoding"]);
    assert_eq!(doc["tasks"][0]["frames"][0]["name"], "plain_chain::descend");
}

#[test]
fn a_decoded_chain_is_complete_without_any_delegate() {
    let fx = Fixture::start("custom_notifier", &[]);
    let text = dump(fx.pid, &[]);
    let s = section(&text, "task 2 \"silent\"");
    let silent = site("custom_notifier", "Silent.frame(\"Silent\")", "frame");
    let await_line = line_of("custom_notifier", "Silent.frame(\"Silent\")");
    let wait = site("custom_notifier", "async fn wait_silently", "wait_silently");
    assert_eq!(
        chain_lines(&s),
        [
            indent(
                1,
                &format!("custom_notifier::wait_silently at {wait} · await at line {await_line}")
            ),
            indent(
                2,
                &format!("Silent at {silent} · awaiting custom_notifier::Silent")
            ),
        ]
    );
    // The leaf never touched the waker: no delegate of either kind, and nothing missing for it.
    assert!(s.contains(&"  delegate: none".to_owned()), "{s:#?}");
    assert!(!s.iter().any(|l| l.contains("delegate (decoded)")));
}

#[test]
fn a_separate_debug_file_is_found_by_build_id() {
    let dir = crate::support::tempdir();
    let exe = copy_of("plain_chain", &dir);
    let notes = Command::new("readelf")
        .args(["-n", exe.to_str().unwrap()])
        .output()
        .expect("readelf (binutils)");
    let notes = String::from_utf8(notes.stdout).unwrap();
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("the fixture has a build-id")
        .to_owned();
    let debug_root = dir.join("debug");
    let debug = debug_root.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    let (exe_s, debug_s) = (exe.to_str().unwrap(), debug.to_str().unwrap());
    run("objcopy", &["--only-keep-debug", exe_s, debug_s]);
    run("strip", &["--strip-debug", exe_s]);
    let fx = Fixture::start_path(&exe, &["--depth", "2"], &[]);
    let pid = fx.pid.to_string();
    let args = ["dump", pid.as_str(), "--json", "--no-cache"];
    let doc = |env: &[(&str, &Path)]| -> serde_json::Value {
        let out = crate::support::asyncdump_with(&args, env);
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let found = doc(&[("ASYNCDUMP_DEBUG_DIR", &debug_root)]);
    assert_eq!(
        found["decoding"]["debug_file"], debug_s,
        "{}",
        found["decoding"]
    );
    assert_eq!(
        found["tasks"][0]["frames"][0]["name"],
        "plain_chain::descend"
    );
    // Elsewhere than where it was put, it is not found, and the note says how to get type info.
    let missing = doc(&[("ASYNCDUMP_DEBUG_DIR", &dir.join("nowhere"))]);
    let note = missing["decoding"]["note"].as_str().unwrap();
    assert!(note.contains("has no type debug info"), "{note}");
}

#[test]
fn a_leaf_wrapped_in_tokio_s_budget_is_named_by_the_future_it_wraps() {
    // `broadcast::Receiver::recv` awaits `Coop<Recv<()>>`: the task waits on the `Recv`.
    let fx = Fixture::start("plain_chain", &["--depth", "1", "--broadcast", "1"]);
    let text = dump(fx.pid, &[]);
    let s = section(&text, "task 2 \"plain-broadcast\"");
    let chain = chain_lines(&s);
    assert_eq!(
        chain[0],
        format!(
            "  plain_chain::listen at {} [decoded]",
            at_line("plain_chain", "rx.recv().await")
        )
    );
    assert!(
        chain[1].starts_with("    tokio::sync::broadcast::Receiver::recv<()> at tokio-1."),
        "{chain:#?}"
    );
    assert_eq!(chain[2], "      awaiting tokio::sync::broadcast::Recv<()>");
    assert_eq!(chain.len(), 3, "{chain:#?}");
}

#[test]
fn the_task_holding_a_oneshot_s_sender_is_named_as_the_one_that_can_wake_the_receiver() {
    let fx = Fixture::start("plain_chain", &["--depth", "2", "--sender", "1"]);
    let text = dump(fx.pid, &[]);
    let s = section(&text, "task 1 \"plain-chain\"");
    assert!(
        s.contains(&"  delegate (decoded): tokio::sync::oneshot::Receiver<u32> holds this task's waker · its sender is held by task 2 \"plain-sender\"".to_owned()),
        "{s:#?}"
    );
    let doc = dump_json(fx.pid, &[]);
    let chain = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "plain-chain")
        .unwrap();
    assert_eq!(chain["decoded_delegates"][0]["sender_held_by"], 2);

    // A sender nobody holds across an await (this one is forgotten) names nobody.
    let alone = Fixture::start("plain_chain", &["--depth", "2"]);
    let text = dump(alone.pid, &[]);
    assert!(!text.contains("its sender is held by"), "{text}");
}
