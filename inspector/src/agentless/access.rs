//! Whether this inspector may read another process's memory, and when not, why in one line with
//! the fix.
//!
//! Reading another process (`/proc/PID/maps`, `process_vm_readv`) passes the kernel's ptrace access
//! check: the same uid (or CAP_SYS_PTRACE), a dumpable target, and Yama's leave
//! (`/proc/sys/kernel/yama/ptrace_scope`: 0 classic, 1 only a parent, 2 only CAP_SYS_PTRACE, 3
//! never). The kernel answers EPERM or EACCES whatever the cause; [`explain`] tells the causes apart
//! from what `/proc` says, so the message names the one that applies. The agent's socket needs none
//! of this, which every message that cannot be fixed otherwise says.

use std::os::unix::fs::MetadataExt;

use crate::attach::procfs;

/// Bit of CAP_SYS_PTRACE in the capability sets of `/proc/PID/status`.
const CAP_SYS_PTRACE: u32 = 19;

/// What decides whether this process may read the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub pid: u32,
    /// The target's real uid, when `/proc` says it.
    pub target_uid: Option<u32>,
    /// The owner of `/proc/PID`: root for a process that is not dumpable.
    pub proc_owner: Option<u32>,
    pub our_euid: u32,
    pub cap_sys_ptrace: bool,
    /// Yama's `ptrace_scope`, when Yama is there.
    pub yama_scope: Option<u32>,
}

impl Facts {
    /// What `/proc` says now about reading `pid` from this process.
    pub fn of(pid: u32) -> Facts {
        let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok();
        Facts {
            pid,
            target_uid: procfs::uid(pid),
            proc_owner: std::fs::metadata(format!("/proc/{pid}"))
                .ok()
                .map(|m| m.uid()),
            our_euid: nix::unistd::geteuid().as_raw(),
            cap_sys_ptrace: own_capability(CAP_SYS_PTRACE),
            yama_scope: yama.and_then(|s| s.trim().parse().ok()),
        }
    }
}

/// Whether this process has capability `cap` in its effective set.
fn own_capability(cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:"));
    eff.and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|set| set & (1 << cap) != 0)
}

/// How to run asyncdump with the capability that reads any process of its user.
const SETCAP: &str = "sudo setcap cap_sys_ptrace=ep \"$(command -v asyncdump)\"";

/// Why the kernel refused, and what to do: one line (see the module docs).
pub fn explain(f: &Facts) -> String {
    let privileged = f.our_euid == 0 || f.cap_sys_ptrace;
    let agent = "or link asyncdump-agent into the program (its socket needs no ptrace access)";
    if let Some(uid) = f.target_uid.filter(|&u| u != f.our_euid && !privileged) {
        return format!(
            "it runs as uid {uid} and this asyncdump as uid {}; run asyncdump as that user or with sudo",
            f.our_euid
        );
    }
    let not_dumpable = f.proc_owner == Some(0) && f.target_uid.is_some_and(|u| u != 0);
    if not_dumpable && !privileged {
        return "it is not dumpable (a set-uid program, or it called prctl(PR_SET_DUMPABLE, 0)); run asyncdump with sudo".into();
    }
    match f.yama_scope {
        Some(3) => format!(
            "Yama's kernel.yama.ptrace_scope is 3: no process may read another's memory until the machine restarts; {agent}"
        ),
        Some(2) if !f.cap_sys_ptrace => format!(
            "Yama's kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may read another's; run asyncdump with sudo, give it the capability ({SETCAP}), {agent}"
        ),
        Some(1) if !privileged => format!(
            "Yama's kernel.yama.ptrace_scope is 1: a process may read only its own children; run asyncdump with sudo, give it the capability ({SETCAP}), allow it for this user's processes (sudo sysctl kernel.yama.ptrace_scope=0), {agent}"
        ),
        _ => format!(
            "the kernel refused (a security module, seccomp, or another user namespace); run asyncdump with sudo, {agent}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_user(yama: Option<u32>) -> Facts {
        Facts {
            pid: 42,
            target_uid: Some(1000),
            proc_owner: Some(1000),
            our_euid: 1000,
            cap_sys_ptrace: false,
            yama_scope: yama,
        }
    }

    #[test]
    fn another_users_process_says_whose_it_is() {
        let f = Facts {
            target_uid: Some(0),
            proc_owner: Some(0),
            ..same_user(Some(1))
        };
        let why = explain(&f);
        assert!(
            why.contains("runs as uid 0 and this asyncdump as uid 1000"),
            "{why}"
        );
        assert!(why.contains("sudo"), "{why}");
    }

    #[test]
    fn each_yama_scope_names_itself_and_its_fix() {
        let one = explain(&same_user(Some(1)));
        assert!(one.contains("ptrace_scope is 1"), "{one}");
        assert!(one.contains("setcap cap_sys_ptrace"), "{one}");
        assert!(one.contains("sysctl kernel.yama.ptrace_scope=0"), "{one}");
        assert!(one.contains("asyncdump-agent"), "{one}");
        let two = explain(&same_user(Some(2)));
        assert!(two.contains("ptrace_scope is 2"), "{two}");
        assert!(two.contains("setcap") && !two.contains("sysctl"), "{two}");
        let three = explain(&same_user(Some(3)));
        assert!(three.contains("ptrace_scope is 3"), "{three}");
        assert!(
            !three.contains("sudo"),
            "nothing but the agent helps: {three}"
        );
    }

    #[test]
    fn a_capability_or_root_passes_scope_one_and_another_cause_is_named() {
        for f in [
            Facts {
                cap_sys_ptrace: true,
                ..same_user(Some(1))
            },
            Facts {
                our_euid: 0,
                ..same_user(Some(1))
            },
        ] {
            let why = explain(&f);
            assert!(!why.contains("ptrace_scope"), "{why}");
            assert!(why.contains("security module"), "{why}");
        }
        let root_at_two = explain(&Facts {
            our_euid: 0,
            target_uid: Some(0),
            proc_owner: Some(0),
            ..same_user(Some(2))
        });
        assert!(root_at_two.contains("ptrace_scope is 2"), "{root_at_two}");
    }

    #[test]
    fn a_process_that_is_not_dumpable_says_so() {
        let why = explain(&Facts {
            proc_owner: Some(0),
            ..same_user(Some(0))
        });
        assert!(why.contains("not dumpable"), "{why}");
    }

    #[test]
    fn this_machine_is_described_without_a_panic() {
        let f = Facts::of(std::process::id());
        assert_eq!(f.target_uid, Some(nix::unistd::getuid().as_raw()));
        assert!(!explain(&f).is_empty());
    }
}
