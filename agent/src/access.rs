//! Who may have the agent read memory for them.
//!
//! A walk plan tells the agent which bytes to copy out of the process and send back: a client that
//! writes its own plan can read any mapped byte (the plan's pointers are followed wherever they lead,
//! and a future's state reaches the heap at large, so no region could be called "task memory" and
//! fenced off). The agent must therefore not let a client read what the kernel would not let it read
//! itself. By default it follows the kernel's own rule for `process_vm_readv` and `ptrace`, Yama's
//! `ptrace_scope`:
//!
//! - 0 (or no Yama): any client of this uid (the agent refuses other uids but root anyway);
//! - 1: a client with `CAP_SYS_PTRACE`, or one this process descends from;
//! - 2: a client with `CAP_SYS_PTRACE`;
//! - 3: nobody.
//!
//! The host can choose otherwise with `ASYNCDUMP_WALKS` in its environment: `same-uid` (any client
//! the agent serves, whatever Yama says, as `PR_SET_PTRACER_ANY` would), `root` (only clients with
//! `CAP_SYS_PTRACE`) or `off` (none). A client refused walks still gets every task and every annotated
//! frame; only the chains decoded from DWARF, and the runtime's own task list, need walks.

use std::sync::OnceLock;

/// The environment variable that sets who may walk (see the module's overview).
pub const WALKS_ENV: &str = "ASYNCDUMP_WALKS";

/// `CAP_SYS_PTRACE`'s bit in a capability set.
const CAP_SYS_PTRACE: u32 = 19;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Kernel,
    SameUid,
    Root,
    Off,
}

fn rule() -> Result<Rule, &'static str> {
    static RULE: OnceLock<Result<Rule, &'static str>> = OnceLock::new();
    *RULE.get_or_init(|| match std::env::var(WALKS_ENV).as_deref() {
        Err(_) | Ok("") | Ok("kernel") => Ok(Rule::Kernel),
        Ok("same-uid") => Ok(Rule::SameUid),
        Ok("root") => Ok(Rule::Root),
        Ok("off") => Ok(Rule::Off),
        Ok(_) => Err("unknown value"),
    })
}

/// Whether the client process `peer` may walk; `Err` says why not, in words for its user.
pub(crate) fn may_walk(peer: u32) -> Result<(), String> {
    let pid = std::process::id();
    let rule = rule().map_err(|_| {
        format!("process {pid} has {WALKS_ENV} set to a value that is not kernel, same-uid, root or off, so it allows no walks")
    })?;
    let needs_cap = match rule {
        Rule::SameUid => return Ok(()),
        Rule::Off => {
            return Err(format!(
                "process {pid} allows no memory walks ({WALKS_ENV}=off)"
            ));
        }
        Rule::Root => Some(format!(
            "process {pid} allows memory walks only to clients with CAP_SYS_PTRACE ({WALKS_ENV}=root)"
        )),
        Rule::Kernel => match ptrace_scope() {
            0 => return Ok(()),
            1 if descends_from(peer) => return Ok(()),
            scope @ (1 | 2) => Some(format!(
                "this kernel's Yama ptrace_scope is {scope}: only a client with CAP_SYS_PTRACE{} may read process {pid}'s memory (run asyncdump as root, or start the process with {WALKS_ENV}=same-uid)",
                if scope == 1 { " or an ancestor" } else { "" }
            )),
            _ => None,
        },
    };
    match needs_cap {
        Some(_) if has_cap_sys_ptrace(peer) => Ok(()),
        Some(why) => Err(why),
        None => Err(format!(
            "this kernel's Yama ptrace_scope is 3: nobody may read process {pid}'s memory (start it with {WALKS_ENV}=same-uid to allow it)"
        )),
    }
}

/// Yama's `ptrace_scope`, 0 when there is no Yama.
fn ptrace_scope() -> u8 {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether `pid` has `CAP_SYS_PTRACE` in its effective set.
fn has_cap_sys_ptrace(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// Whether this process descends from `ancestor`.
fn descends_from(ancestor: u32) -> bool {
    let mut pid = std::process::id();
    for _ in 0..64 {
        match parent_of(pid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) may contain spaces and parentheses: the fields after it start at the last ')'.
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_descends_from_its_parent_and_not_from_a_sibling() {
        let parent = parent_of(std::process::id()).expect("a parent");
        assert!(descends_from(parent));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(!descends_from(child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }
}
