//! `asyncdump index BINARY`: async state machines read from a real fixture binary's DWARF.

use crate::support::{asyncdump, asyncdump_ok, bin, site};

fn line_of(fixture: &str, needle: &str) -> u64 {
    let at = site(fixture, needle, &needle[..1]);
    at.split(':').nth(1).unwrap().parse().unwrap()
}

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
    let stripped = crate::errors::tempdir().join("plain_chain-stripped");
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
