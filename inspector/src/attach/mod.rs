//! The attach stage: finding a target and talking to its agent. [`target`] resolves `PID|SOCKET` to a
//! checked socket, [`client`] speaks the protocol over it, [`ps`] lists every agent of this user, and
//! [`procfs`] is the one place that reads `/proc`
//! ([`unix_sockets`] asks the kernel what `/proc` does not say of Unix sockets).

pub mod client;
pub mod memory;
pub mod procfs;
pub mod ps;
pub mod target;
pub mod unix_sockets;
