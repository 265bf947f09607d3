//! The asyncdump inspector as a library: attach to a live Rust process that links asyncdump-agent, take
//! snapshots of its suspended async chains, and render them. The `asyncdump` binary is a thin
//! command-line front over it.
//!
//! Stages, in the order a snapshot passes through them (data flows one way; ARCHITECTURE.md at the
//! top of the repository has the map):
//! - attach: [`target`] resolves `PID|SOCKET`, [`client`] speaks the protocol;
//! - [`plan`]: [`dwarf`] reads a binary's debug info, and the plan stage turns it into walk plans (with
//!   the plan cache and the planner that chooses between them);
//! - [`decode`]: walks merged with annotated frames into frame trees, by what the plan says;
//! - [`assemble`]: a protocol snapshot and its decoded chains into a [`model::Dump`];
//! - [`model`]: what a dump shows, and its queries (filter, search, coalesce, cycles);
//! - [`view`] renders a dump as text, JSON or folded stacks, and [`watch`] is the live view.
//!
//! [`session`] drives the stages for one attached target across snapshots. Beside them: [`names`]
//! (every name shortening), [`file`](mod@file) (snapshot and recording files), [`ps`] (lists agents) and
//! [`demo`] (runs a bundled fixture). Errors about the target are typed ([`error::TargetError`]);
//! exit codes are in [`error`].

pub mod assemble;
pub mod client;
pub mod decode;
pub mod demo;
pub mod dwarf;
pub mod error;
pub mod file;
pub mod model;
pub mod names;
pub mod plan;
pub mod ps;
pub mod session;
pub mod target;
pub mod view;
pub mod watch;

#[cfg(test)]
mod hostile_input;
#[cfg(test)]
mod testing;
