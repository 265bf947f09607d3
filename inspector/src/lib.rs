//! The asyncdump inspector as a library: attach to a live Rust process that links asyncdump-agent, take
//! snapshots of its suspended async chains, and render them. The `asyncdump` binary is a thin
//! command-line front over it.
//!
//! Modules, in the order a snapshot passes through them: [`target`] resolves `PID|SOCKET`, [`client`]
//! speaks the protocol, [`session`] keeps one attached target (its connection and DWARF plan) across
//! snapshots, [`dwarf`] reads a binary's debug info and [`decode`] turns it into walk plans for the agent
//! and the agent's walks back into frames (zero-annotation chains), [`model`] rebuilds chains from a
//! snapshot, and [`view`] renders them as text or JSON. Beside them, [`ps`] lists agents and [`demo`]
//! runs a bundled fixture. Errors about the target are typed ([`error::TargetError`]); exit codes are
//! in [`error`].

pub mod client;
pub mod decode;
pub mod demo;
pub mod dwarf;
pub mod error;
pub mod file;
pub mod model;
pub mod ps;
pub mod session;
pub mod source_path;
pub mod target;
pub mod view;
pub mod watch;

#[cfg(test)]
mod hostile_input;
