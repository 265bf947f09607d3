//! A service built against tokio 1.32 (its own lockfile): one unsharded task list, no public metrics,
//! and `select!` and `join!` polling through tokio's own `PollFn` rather than core's. With `init()` only,
//! every task is listed and each macro is decoded with its pending branches, as on the current tokio,
//! and the census finds the runtime and `LocalSet` nobody registered.

use crate::support::{
    Fixture, Mangling, asyncdump_ok, has_root, old_tokio_bin, section, workspace,
};

/// The line of the fixture's source that contains `needle`.
fn line_of(needle: &str) -> usize {
    let src = std::fs::read_to_string(workspace().join("fixtures/old_tokio/src/main.rs")).unwrap();
    1 + src
        .lines()
        .position(|l| l.contains(needle))
        .expect("needle in the fixture")
}

/// Dumps until every task has been polled once (each is, within microseconds of `ready`).
fn dump(pid: u32) -> String {
    let pid = pid.to_string();
    let mut text = String::new();
    for _ in 0..50 {
        text = asyncdump_ok(&["dump", &pid]);
        if !text.contains("(not started;") && text.contains("tokio::join!") {
            return text;
        }
    }
    panic!("the dump never showed every chain:\n{text}");
}

/// The frame lines of the section rooted at `old_tokio::NAME`: after the root line, without the delegate.
fn chain(text: &str, name: &str) -> Vec<String> {
    let root = format!("asyncdump_fixture_old_tokio::{name}");
    let all: Vec<&str> = text.split("\n\n").filter(|s| has_root(s, &root)).collect();
    assert_eq!(all.len(), 1, "one task rooted at {name}:\n{text}");
    let lines = section(all[0], all[0].lines().next().unwrap());
    lines
        .into_iter()
        .skip(2)
        .filter(|l| !l.starts_with("  delegate") && !l.trim_start().starts_with("↳ "))
        .collect()
}

#[test]
fn every_task_is_listed_and_select_and_join_decoded_on_tokio_1_32() {
    let fx = Fixture::start_path(&old_tokio_bin(Mangling::Legacy), &[], &[]);
    let text = dump(fx.pid);
    assert!(
        text.contains("\nruntime multi_thread: 3 alive, 3 listed\n"),
        "tokio 1.32 has no public metrics: the list's own counter gives the count\n{text}"
    );
    // Made after `init()` and never registered: found by the census on 1.32 too.
    assert!(
        text.contains("\nruntime current_thread (found by census): 1 alive, 1 listed\n")
            && text.contains("\nLocalSet (found by census): 1 listed\n"),
        "{text}"
    );
    for name in ["on_local_runtime", "on_local_set"] {
        let at = line_of(&format!("async fn {name}(")) + if name == "on_local_set" { 2 } else { 1 };
        assert_eq!(
            chain(&text, name)[0],
            format!("  asyncdump_fixture_old_tokio::{name} at src/main.rs:{at} [decoded]")
        );
    }
    let serve = chain(&text, "serve");
    let at = line_of("async fn serve(");
    assert!(
        serve[0].starts_with(&format!("  asyncdump_fixture_old_tokio::serve at src/main.rs:{at} · await inside a macro, at tokio-1.32.1/src/macros/select.rs:")),
        "{serve:?}"
    );
    assert_eq!(serve[1], "    tokio::select! [decoded]");
    assert!(
        serve[2].starts_with("      tokio::sync::mpsc::bounded::Receiver::recv<u32> at "),
        "{serve:?}"
    );
    assert_eq!(
        serve.last().unwrap(),
        "      awaiting tokio::sync::oneshot::Receiver<()>"
    );

    let gather = chain(&text, "gather");
    assert_eq!(
        gather[1..],
        [
            "    tokio::join! [decoded]",
            "      awaiting tokio::time::sleep::Sleep",
            "      awaiting tokio::sync::notify::Notified",
        ]
    );

    // Spawned through the agent: its own task, with tokio's id, shown once.
    let watchdog = chain(&text, "watchdog");
    assert_eq!(watchdog[1], "    tokio::select! [decoded]");
    assert_eq!(
        watchdog.last().unwrap(),
        "      awaiting tokio::time::sleep::Sleep"
    );
    assert_eq!(
        text.matches("root asyncdump_fixture_old_tokio::watchdog\n")
            .count(),
        1
    );
    assert!(text.contains("5 tasks: 5 idle"), "{text}");
}

#[test]
fn built_with_v0_symbol_mangling_the_same_service_dumps_the_same_chains() {
    // The root anchor and impl names are read from demangled linkage names; v0 spells both otherwise.
    let chains = |mangling| {
        let fx = Fixture::start_path(&old_tokio_bin(mangling), &[], &[]);
        let text = dump(fx.pid);
        ["serve", "gather", "watchdog"].map(|name| chain(&text, name))
    };
    let (legacy, v0) = (chains(Mangling::Legacy), chains(Mangling::V0));
    assert_eq!(v0, legacy);
    assert_eq!(
        v0[2][0].split(" at ").next(),
        Some("  asyncdump_fixture_old_tokio::watchdog"),
        "the agent's task is decoded from its root anchor: {v0:?}"
    );
}
