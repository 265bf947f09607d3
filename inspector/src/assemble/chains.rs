//! Chains kept from one dump to the next, for a live view: a task's chain is rebuilt only when it can
//! have changed.
//!
//! A chain (frames, edges hung on them, decoded delegates) is a function of the task's frames and walk,
//! the JoinHandle edges into it, and the plan. The frames and walk change only when the task is polled,
//! and every poll counts in `polls`; a task seen running shows frames from an earlier capture, and its
//! capture says so. So `(polls, capture, edges)` decides whether a kept chain is still the task's. A new
//! plan clears the cache ([`ChainCache::clear`]).

use asyncdump_protocol::Capture;

use crate::model::values::Reading;
use crate::model::{DecodedDelegate, FastMap, FrameNode};

/// What a chain was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChainKey {
    pub polls: u64,
    pub capture: Capture,
    pub edges: Vec<(Option<u64>, u64)>,
}

/// A task's chain as `task_view` builds it, frame ids assigned.
#[derive(Debug, Clone)]
pub(super) struct Chain {
    pub frames: std::sync::Arc<Vec<FrameNode>>,
    pub awaits_tasks: Vec<u64>,
    pub decoded_delegates: std::sync::Arc<Vec<DecodedDelegate>>,
    pub decode_note: Option<std::sync::Arc<str>>,
    /// The task's name: it never changes, so it is kept with the chain rather than copied each time.
    pub name: Option<std::sync::Arc<str>>,
    /// What a search looks in (see `TaskView::search_text`).
    pub searched: std::sync::Arc<str>,
}

/// Chains by agent task id, kept from one dump to the next of a live view.
#[derive(Debug, Default)]
pub struct ChainCache {
    chains: FastMap<u64, (ChainKey, Chain)>,
    /// Ids seen by the last dump built with this cache: the others are dropped after it.
    seen: Vec<u64>,
    /// A one-off dump's: keeps nothing, and its tasks get what only a live view uses (the text its `/`
    /// searches, frame ids that keep a selection) left out.
    one_off: bool,
    /// What decoded frames carry unread: locals (`-v`, `--fields`), wait targets.
    pub(super) reading: Reading,
}

impl ChainCache {
    /// For a dump that is built once and printed: nothing is kept, and neither the text a live view
    /// searches (its search falls back to reading the chain) nor frame ids (all 0: identical chains
    /// still compare equal) are made.
    pub fn one_off() -> ChainCache {
        ChainCache {
            one_off: true,
            ..ChainCache::default()
        }
    }

    /// Decoded frames built with this cache carry what `reading` asks for (locals, and leaves what
    /// they wait for), unread: whoever builds with it reads them (`crate::values`).
    pub fn reading(mut self, reading: Reading) -> ChainCache {
        self.reading = reading;
        self
    }

    /// Whether chains built with this cache are for a live view: kept for later dumps, searchable, and
    /// with stable frame ids.
    pub(crate) fn live(&self) -> bool {
        !self.one_off
    }

    /// Forgets every chain: after a new plan, kept chains were decoded with the old one.
    pub fn clear(&mut self) {
        self.chains.clear();
    }

    pub(super) fn get(&self, id: u64, key: &ChainKey) -> Option<&Chain> {
        self.chains
            .get(&id)
            .filter(|(k, _)| k == key)
            .map(|(_, c)| c)
    }

    pub(super) fn put(&mut self, id: u64, key: ChainKey, chain: Chain) {
        self.chains.insert(id, (key, chain));
    }

    pub(super) fn saw(&mut self, id: u64) {
        if !self.one_off {
            self.seen.push(id);
        }
    }

    /// Drops the chains of tasks the last dump did not have.
    pub(super) fn sweep(&mut self) {
        if self.chains.len() > self.seen.len() {
            let seen: rustc_hash::FxHashSet<u64> = self.seen.iter().copied().collect();
            self.chains.retain(|id, _| seen.contains(id));
        }
        self.seen.clear();
    }
}
