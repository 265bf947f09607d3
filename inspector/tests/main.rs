//! End-to-end specs: real fixture processes, the real `asyncdump` binary, exact chains.

mod support;

mod access;
pub mod agentless;
mod axum_service;
mod block_on;
mod collections;
mod containment;
pub mod cores;
mod decoded;
mod deep_chains;
mod dump_json;
mod dump_text;
mod dwarf;
mod errors;
mod files;
mod flame;
mod fork;
mod install;
mod old_tokio;
mod plan_cache;
mod protocol_abuse;
mod ps;
mod runtime_tasks;
mod samples;
mod self_dumps;
mod session;
mod stopping;
mod subscription;
mod thread_locks;
mod threads;
mod tonic_service;
mod untrusted_files;
mod values;
mod wait_graph;
mod wait_targets;
mod watch;
