//! `asyncdump demo`: starts the bundled `demo_service` fixture, waits for its `ready` line, dumps it, and
//! stops it again.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use asyncdump::Error;
use asyncdump::attach::target::{dirs_for, euid};

/// Kills the fixture however the demo ends, and removes the socket it could not remove itself.
struct Fixture(Child);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let name = asyncdump_protocol::paths::socket_file_name(self.0.id());
        for dir in dirs_for(euid()) {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
}

/// The fixture binary: next to this executable, as cargo builds them into one target directory.
fn fixture_path(name: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Local(format!("cannot locate the asyncdump executable: {e}")))?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        return Err(Error::Local(format!(
            "demo fixture not found at {}: build it first with `cargo build --workspace` (the README's demo command does)",
            path.display()
        )));
    }
    Ok(path)
}

/// Starts the fixture and returns it with its pid once it printed `ready`.
pub fn start(lifetime: std::time::Duration) -> Result<(impl Drop, u32), Error> {
    let path = fixture_path("demo_service")?;
    let mut child = Command::new(&path)
        .env("ASYNCDUMP_FIXTURE_TIMEOUT", lifetime.as_secs().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Local(format!("cannot start {}: {e}", path.display())))?;
    let Some(stdout) = child.stdout.take() else {
        return Err(Error::Local(
            "the demo fixture's output is not piped".into(),
        ));
    };
    let pid = child.id();
    let fixture = Fixture(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(line) if line.trim() == "ready" => Ok((fixture, pid)),
        Ok(line) => Err(Error::Local(format!(
            "demo fixture exited before it was ready (said {:?})",
            line.trim()
        ))),
        Err(_) => Err(Error::Local(
            "demo fixture did not get ready within 30s".into(),
        )),
    }
}
