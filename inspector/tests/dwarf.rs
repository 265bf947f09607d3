//! `asyncdump index BINARY`: async state machines read from a real fixture binary's DWARF.

use crate::support::{Fixture, asyncdump, asyncdump_ok, bin, line_of};

#[test]
fn an_unannotated_async_fn_shows_each_await_with_its_line_and_awaited_type() {
    let binary = bin("plain_chain");
    let doc: serde_json::Value = serde_json::from_str(&asyncdump_ok(&[
        "index",
        binary.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert!(doc["debug_info_bytes"].as_u64().unwrap() > 100_000);
    let descend = doc["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "plain_chain::descend::{async_fn_env#0}")
        .expect("descend's state machine");
    assert!(descend["state_offset"].as_u64().unwrap() < descend["size"].as_u64().unwrap());
    let state = |name: &str| {
        descend["states"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(
        state("Unresumed")["line"],
        line_of("plain_chain", "async fn descend")
    );
    let leaf = state("Suspend0");
    assert_eq!(leaf["file"], "fixtures/src/bin/plain_chain.rs");
    assert_eq!(leaf["line"], line_of("plain_chain", "rx.await"));
    assert_eq!(
        leaf["awaitee"]["type_name"],
        "tokio::sync::oneshot::Receiver<u32>"
    );
    let recurse = state("Suspend1");
    assert_eq!(recurse["line"], line_of("plain_chain", "Box::pin(descend("));
    let ty = recurse["awaitee"]["type_name"].as_str().unwrap();
    assert!(
        ty.starts_with("core::pin::Pin<alloc::boxed::Box<plain_chain::descend::{async_fn_env#0}"),
        "{ty}"
    );
}

#[test]
fn a_stripped_binary_says_how_to_build_one_that_can_be_decoded() {
    let stripped_dir = crate::support::tempdir();
    let stripped = stripped_dir.join("plain_chain-stripped");
    std::fs::copy(bin("plain_chain"), &stripped).unwrap();
    let status = std::process::Command::new("strip")
        .arg(&stripped)
        .status()
        .expect("strip (binutils)");
    assert!(status.success());
    let out = asyncdump(&["index", stripped.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has no type debug info") && err.contains("debug = \"full\""),
        "{err}"
    );
}

fn resolved(fixture: &Fixture) -> serde_json::Value {
    let pid = fixture.pid.to_string();
    serde_json::from_str(&asyncdump_ok(&["index", "--pid", &pid, "--json"])).unwrap()
}

fn task_named<'a>(doc: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .expect("task")
}

#[test]
fn a_live_task_resolves_to_the_exact_dwarf_type_of_its_root_future() {
    let fx = Fixture::start("plain_chain", &[]);
    let doc = resolved(&fx);
    let t = task_named(&doc, "plain-chain");
    assert_eq!(t["root_type"], "plain_chain::descend::{async_fn_env#0}");
    let die = t["root_die"].as_u64().unwrap();
    let machine = doc["machines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["die"] == die);
    assert_eq!(
        machine.map(|m| m["name"].clone()),
        Some("plain_chain::descend::{async_fn_env#0}".into())
    );
}

#[test]
fn async_blocks_that_share_a_type_name_resolve_to_different_types() {
    let fx = Fixture::start("two_blocks", &[]);
    // What the agent can say by itself is the same for both...
    let dump = crate::support::dump_json(fx.pid, &["--no-decode"]);
    let roots: Vec<_> = dump["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["root_type"].clone())
        .collect();
    assert_eq!(roots.len(), 2);
    assert_eq!(
        roots[0], roots[1],
        "type_name cannot tell the two blocks apart"
    );
    // ...the DWARF types differ.
    let doc = resolved(&fx);
    let (a, b) = (task_named(&doc, "a"), task_named(&doc, "b"));
    assert_ne!(a["root_die"], b["root_die"]);
    for t in [a, b] {
        let ty = t["root_type"].as_str().unwrap();
        assert!(
            ty.starts_with("two_blocks::main::") && ty.contains("{async_block_env#"),
            "{ty}"
        );
    }
    assert_ne!(a["root_type"], b["root_type"]);
}

#[test]
fn a_dependency_s_file_reads_from_its_crate_and_never_as_the_program_s_own() {
    let binary = bin("demo_service");
    let text = asyncdump_ok(&["index", binary.to_str().unwrap()]);
    let files: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  Suspend"))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    let listener = files
        .iter()
        .find(|f| f.contains("/src/net/tcp/listener.rs:"))
        .expect("tokio's TcpListener::accept");
    assert!(listener.starts_with("tokio-1."), "{listener}");
    // A file relative to its crate was a dependency's: the program's own are under fixtures/.
    let bare: Vec<&&str> = files.iter().filter(|f| f.starts_with("src/")).collect();
    assert!(bare.is_empty(), "{bare:?}");
    let whole = asyncdump_ok(&["index", binary.to_str().unwrap(), "--full-paths"]);
    assert!(
        whole.contains("/registry/src/") && whole.contains("/tokio-1."),
        "whole paths"
    );
}
