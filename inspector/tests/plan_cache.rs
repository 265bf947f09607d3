//! The plan cache: a dump of a binary planned before reads no DWARF, and decodes the same chains as a
//! plan made afresh, in another process of that binary loaded at another address.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::tempdir;
use crate::support::{Fixture, asyncdump_with};

fn dump(pid: u32, cache: &Path, extra: &[&str]) -> Value {
    let pid = pid.to_string();
    let mut args = vec!["dump", pid.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = asyncdump_with(&args, &[("XDG_CACHE_HOME", cache)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each task's root type and frames (no times): what decoding made of it.
fn chains(doc: &Value) -> Vec<(Value, Value)> {
    let mut out: Vec<(Value, Value)> = doc["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["root_type"].clone(), t["frames"].clone()))
        .collect();
    out.sort_by_key(|c| c.0.to_string() + &c.1.to_string());
    out
}

/// Where the process's executable is mapped.
fn load_address(pid: u32) -> String {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.split('-').next().unwrap().to_owned()
}

fn plans(cache: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(cache.join("asyncdump/plans"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_plan_made_for_one_process_decodes_another_of_the_same_binary_as_a_fresh_plan_does() {
    let cache = tempdir();
    let first = Fixture::start("plain_chain", &["--depth", "3"]);
    let made = dump(first.pid, &cache, &[]);
    assert_eq!(made["decoding"]["plan_cached"], false);
    assert_eq!(plans(&cache).len(), 1, "one plan kept");

    let second = Fixture::start("plain_chain", &["--depth", "3"]);
    let cached = dump(second.pid, &cache, &[]);
    assert_eq!(cached["decoding"]["plan_cached"], true);
    assert_eq!(
        cached["decoding"]["plan_types"],
        made["decoding"]["plan_types"]
    );
    let fresh = dump(second.pid, &cache, &["--no-cache"]);
    assert_eq!(fresh["decoding"]["plan_cached"], false);
    assert!(fresh["decoding"].get("cache_note").is_none(), "asked for");

    let decoded = chains(&fresh);
    assert!(
        decoded
            .iter()
            .any(|c| c.1.to_string().contains("plain_chain::descend")),
        "{decoded:?}"
    );
    assert_eq!(chains(&cached), decoded);
    // With address space randomisation the two processes' executables sit apart, so the cached plan
    // was moved to the second one's addresses.
    let randomised = std::fs::read_to_string("/proc/sys/kernel/randomize_va_space")
        .is_ok_and(|v| v.trim() != "0");
    if randomised {
        assert_ne!(load_address(first.pid), load_address(second.pid));
    }
}

#[test]
fn a_damaged_cached_plan_is_ignored_with_a_note_and_replaced() {
    let cache = tempdir();
    let fx = Fixture::start("plain_chain", &["--depth", "2"]);
    dump(fx.pid, &cache, &[]);
    let [plan] = &plans(&cache)[..] else {
        panic!("one plan kept")
    };
    std::fs::write(plan, b"not a plan at all").unwrap();

    let pid = fx.pid.to_string();
    let out = asyncdump_with(&["dump", &pid], &[("XDG_CACHE_HOME", &cache)]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let note = format!(
        "note: ignored the cached plan {}: not a plan file; planned again",
        plan.display()
    );
    assert!(text.contains(&note), "{text}");
    assert!(
        text.contains("plain_chain::descend at"),
        "still decoded: {text}"
    );

    let again = dump(fx.pid, &cache, &[]);
    assert_eq!(again["decoding"]["plan_cached"], true, "replaced");
    assert!(again["decoding"].get("cache_note").is_none());
}

#[test]
fn a_stripped_build_is_decoded_from_the_plan_of_its_unstripped_twin() {
    // `strip` keeps the build-id: the code, and so the plan, are the same.
    let cache = tempdir();
    let dir = tempdir();
    let stripped = dir.join("plain_chain");
    std::fs::copy(crate::support::bin("plain_chain"), &stripped).unwrap();
    let status = std::process::Command::new("strip")
        .arg(&stripped)
        .status()
        .expect("strip (binutils)");
    assert!(status.success());
    let twin = Fixture::start("plain_chain", &["--depth", "2"]);
    dump(twin.pid, &cache, &[]);

    let fx = Fixture::start_path(&stripped, &["--depth", "2"], &[]);
    let doc = dump(fx.pid, &cache, &[]);
    assert_eq!(doc["decoding"]["plan_cached"], true);
    assert_eq!(
        doc["decoding"]["debug_file"],
        crate::support::bin("plain_chain").to_str().unwrap(),
        "names the file the plan was made from"
    );
    assert_eq!(doc["tasks"][0]["frames"][0]["name"], "plain_chain::descend");
}
