//! `asyncdump`: the command line over the inspector library (`asyncdump::…`). Arguments are in
//! `cli::args`, one function per subcommand in `cli`; this file only runs one, writes what it prints,
//! and exits with the status its error says (`asyncdump::Error::exit_code`): 0 ok, 1 target problem,
//! 2 usage, 3 local problem, 4 a snapshot file or recording that cannot be read, 5 this user may not
//! read the process's memory, 6 the process cannot be read without an agent.

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

use std::process::ExitCode;

use clap::Parser;

use asyncdump::view;

mod cli;

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = cli::args::Cli::parse();
    lower_priority();
    // Written as it renders: a dump of 100,000 tasks need not be held whole before the first line.
    let mut out = view::IoWriter::new(std::io::BufWriter::new(std::io::stdout().lock()));
    let ran = cli::run(cli, &mut out);
    // A write that failed shows in `run` as a bare formatting error: the I/O error behind it says more.
    let result = match (ran, out.finish()) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) => Err(e),
        (_, Err(io)) => Err(asyncdump::Error::Io(io)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `asyncdump dump 1 | head`: the reader left; nothing to report.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            // One line, escaped: an error's text may come from the target.
            eprintln!("asyncdump: {}", view::one_line(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Decoding and printing a large snapshot is CPU work; on a busy machine the target must win, not us.
fn lower_priority() {
    // SAFETY: setpriority on our own process (who = 0) passes no memory; failure leaves the priority
    // as it is. (nix has no setpriority.)
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
}

/// A dump reads and builds in stages, each allocating megabytes that the stage before it freed:
/// glibc hands blocks that large back to the kernel (`munmap`, or trimming its heap), and the next
/// stage takes a page fault for each page to have them again. Kept instead, for the next stage:
/// never more than the process already held at its peak.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // SAFETY: mallopt only sets two thresholds of the allocator (no memory is passed), before any
    // thread is started; a value it refused would leave the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}
