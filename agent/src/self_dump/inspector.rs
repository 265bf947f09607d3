//! Running the installed `asyncdump` inspector on this process's own agent socket, its text into the
//! chosen output. The inspector decodes the chains from the binary's DWARF, which the agent never
//! parses; it reads the process through the agent's server thread, which answers whatever the
//! runtime's workers are doing.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::containment;

/// The environment variable naming the inspector to run (else `asyncdump` on `PATH`).
pub const INSPECTOR_ENV: &str = "ASYNCDUMP_INSPECTOR";

/// Longest a dump may take before the inspector is stopped: a dump of 100,000 tasks takes seconds.
const DUMP_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a dump goes: the process's stderr, or a file it is appended to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    Stderr,
    File(PathBuf),
}

/// Writes one dump, headed by `why`, of the process whose agent serves at `socket`. A failure is one
/// line on stderr; the program goes on.
pub(crate) fn dump(why: &str, socket: &Path, output: &Output) {
    let Some(inspector) = find() else {
        containment::log(&format!(
            "{why}: no dump: the `asyncdump` inspector is not on PATH; install it (`cargo install --locked --path inspector` in asyncdump's source) or set {INSPECTOR_ENV} to its path"
        ));
        return;
    };
    let out = match open(output) {
        Ok(out) => out,
        Err(e) => {
            containment::log(&format!("{why}: no dump: {e}; the program goes on"));
            return;
        }
    };
    let header = format!(
        "asyncdump agent: {why}: every task's chain, as `asyncdump dump --all {}` prints it\n",
        std::process::id()
    );
    let _ = (&out).write_all(header.as_bytes());
    // Every task, the running ones too: a task stuck inside its poll is what a hang is about.
    let child = Command::new(&inspector)
        .args(["dump", "--all"])
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .spawn();
    match child {
        Ok(child) => wait(child, why, &inspector),
        Err(e) => containment::log(&format!(
            "{why}: no dump: cannot run {}: {e}",
            inspector.display()
        )),
    }
}

/// The inspector: `$ASYNCDUMP_INSPECTOR`, else `asyncdump` on `PATH`.
fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(INSPECTOR_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("asyncdump"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The dump's destination, as a file the child writes to: a copy of stderr, or the file opened to
/// append (made 0600: a dump shows what the program holds).
fn open(output: &Output) -> Result<std::fs::File, String> {
    match output {
        Output::Stderr => (std::io::stderr().as_fd().try_clone_to_owned())
            .map(std::fs::File::from)
            .map_err(|e| format!("cannot write to stderr: {e}")),
        Output::File(path) => OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("cannot write the dump to {}: {e}", path.display())),
    }
}

/// Waits for the inspector, at most [`DUMP_TIMEOUT`]; one that fails or hangs is said on stderr.
fn wait(mut child: std::process::Child, why: &str, inspector: &Path) {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                containment::log(&format!(
                    "{why}: {} failed ({status}); its message is above",
                    inspector.display()
                ));
                return;
            }
            Ok(None) if start.elapsed() > DUMP_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                containment::log(&format!(
                    "{why}: {} took over {}s and was stopped",
                    inspector.display(),
                    DUMP_TIMEOUT.as_secs()
                ));
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                containment::log(&format!("{why}: cannot wait for the inspector: {e}"));
                return;
            }
        }
    }
}
