//! Dumps the process asks for itself, where hangs happen: on a signal an operator sends (`kill
//! -QUIT`, as the JVM and Go print every thread and goroutine), and when a watchdog sees a runtime
//! stop running the work it is given. Both are opt-in ([`crate::Builder::dump_on_signal`],
//! [`crate::Builder::watchdog`], or `ASYNCDUMP_ON_SIGNAL` and `ASYNCDUMP_WATCHDOG`); otherwise nothing
//! here runs and no signal's behaviour changes.
//!
//! - `signal`: the handler, which only counts the signal and wakes the dump thread.
//! - `watchdog`: whether each registered runtime still runs new work.
//! - `inspector`: the dump itself, by the installed `asyncdump` run on this process's agent socket
//!   (it decodes chains from DWARF, which the agent never parses).
//!
//! All of it runs on one thread of its own, so it works while every runtime worker is blocked. At
//! most one dump is in flight: signals that come meanwhile are dropped, and counted on stderr.

pub(crate) mod inspector;
mod signal;
mod watchdog;

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use inspector::INSPECTOR_ENV;
pub use signal::DumpSignal;
pub use watchdog::parse_period;

use crate::containment;
use inspector::Output;

/// The environment variable that names the signal asking for a dump (`QUIT`, `USR1`, `USR2`).
pub const ON_SIGNAL_ENV: &str = "ASYNCDUMP_ON_SIGNAL";
/// The environment variable naming a file dumps are appended to, instead of stderr.
pub const DUMP_FILE_ENV: &str = "ASYNCDUMP_DUMP_FILE";
/// The environment variable that turns the watchdog on, with its period (`30s`, `2m`).
pub const WATCHDOG_ENV: &str = "ASYNCDUMP_WATCHDOG";

/// What the program asked for (the builder's word first, then the environment's).
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub(crate) signal: Option<DumpSignal>,
    pub(crate) file: Option<PathBuf>,
    pub(crate) watchdog: Option<Duration>,
}

impl Config {
    /// This config, completed from the environment where the builder said nothing; a value that
    /// does not parse is one line on stderr and ignored.
    pub(crate) fn with_env(mut self) -> Config {
        let var = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if self.signal.is_none()
            && let Some(v) = var(ON_SIGNAL_ENV)
        {
            self.signal = DumpSignal::parse(&v);
            if self.signal.is_none() {
                containment::log(&format!(
                    "{ON_SIGNAL_ENV}={v:?} is not QUIT, USR1 or USR2; no dump on a signal"
                ));
            }
        }
        if self.file.is_none() {
            self.file = var(DUMP_FILE_ENV).map(PathBuf::from);
        }
        if self.watchdog.is_none()
            && let Some(v) = var(WATCHDOG_ENV)
        {
            self.watchdog = parse_period(&v);
            if self.watchdog.is_none() {
                containment::log(&format!(
                    "{WATCHDOG_ENV}={v:?} is not a period (30s, 500ms, 2m); no watchdog"
                ));
            }
        }
        self
    }
}

/// Starts the dump thread, if `config` asks for anything, for the agent serving at `socket`.
pub(crate) fn start(config: Config, socket: &Path) {
    if config.signal.is_none() && config.watchdog.is_none() {
        return;
    }
    let wake = match config.signal.map(signal::install).transpose() {
        Ok(wake) => wake,
        Err(e) => {
            containment::log(&format!("cannot handle a signal for dumps: {e}"));
            None
        }
    };
    let output = config.file.clone().map_or(Output::Stderr, Output::File);
    let socket = socket.to_owned();
    let started = std::thread::Builder::new()
        .name("asyncdump-dumps".into())
        .spawn(move || {
            containment::contain("the agent's dump thread", || {
                serve(&config, wake.as_ref(), &socket, &output)
            });
        });
    if let Err(e) = started {
        containment::log(&format!("cannot start the dump thread: {e}"));
    }
}

/// The dump thread: waits for a signal or the watchdog's next tick, and dumps when either asks.
fn serve(config: &Config, wake: Option<&OwnedFd>, socket: &Path, output: &Output) {
    let mut dog = watchdog::Watchdog::default();
    let tick = config.watchdog.map(watchdog::tick_every);
    loop {
        wait(wake, tick);
        let received = signal::take();
        if let Some(s) = config.signal.filter(|_| received > 0) {
            inspector::dump(s.name(), socket, output);
            // The ones that came while a dump was in flight, or together with the first.
            drain(wake);
            let dropped = received - 1 + signal::take();
            if dropped > 0 {
                containment::log(&format!(
                    "{dropped} more {} dropped while a dump was in flight",
                    s.name()
                ));
            }
        }
        if let Some(after) = config.watchdog
            && let Some((runtime, waited)) = dog.tick(after)
        {
            let why = format!(
                "watchdog: runtime {runtime} ran no new work for {:.1}s",
                waited.as_secs_f64()
            );
            inspector::dump(&why, socket, output);
        }
    }
}

/// Waits until the signal pipe is readable, or `tick` passes; without either, forever.
fn wait(wake: Option<&OwnedFd>, tick: Option<Duration>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // A tick is at most 2 s: well within a `u16` of milliseconds.
    let timeout = tick.map_or(PollTimeout::NONE, |t| {
        PollTimeout::from(t.as_millis().min(u128::from(u16::MAX)) as u16)
    });
    match wake {
        Some(fd) => {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, timeout);
            drain(Some(fd));
        }
        None => std::thread::sleep(tick.unwrap_or(Duration::from_secs(3600))),
    }
}

/// Empties the signal pipe (its bytes only wake; the count is kept apart).
fn drain(wake: Option<&OwnedFd>) {
    let Some(fd) = wake else { return };
    let mut buf = [0u8; 256];
    while nix::unistd::read(fd, &mut buf).is_ok_and(|n| n > 0) {}
}
