//! The runtimes and `LocalSet`s whose tasks every snapshot lists.
//!
//! A runtime is kept as a leaked clone of its `Handle`, at an address fixed for the life of the process.
//! A `LocalSet` cannot be cloned or kept: it is registered by address for as long as the
//! [`LocalSetRegistration`] that borrows it lives, so the borrow checker keeps it from moving or being
//! dropped meanwhile. A listing that races with the registration's end reads memory that may be reused;
//! reads are fault-safe and every task header is validated, so at worst a task is skipped.

use std::sync::{Mutex, PoisonError};

#[cfg(feature = "tokio")]
use super::MAX_RUNTIMES;

/// Leaked, so that each handle's address stays valid and fixed for the process's life.
#[cfg(feature = "tokio")]
static RUNTIMES: Mutex<Vec<&'static tokio::runtime::Handle>> = Mutex::new(Vec::new());

/// Registered `LocalSet`s: a registration's token and the set's address.
static LOCAL_SETS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// The bytes of a handle: two handles of one runtime hold the same pointer.
#[cfg(feature = "tokio")]
fn bytes_of(handle: &tokio::runtime::Handle) -> Vec<u8> {
    use asyncdump_walker::{Memory, ProcessMemory};
    let addr = handle as *const tokio::runtime::Handle as u64;
    ProcessMemory::own()
        .read_vec(addr, size_of::<tokio::runtime::Handle>())
        .unwrap_or_default()
}

#[cfg(feature = "tokio")]
pub(super) fn register(handle: &tokio::runtime::Handle) -> bool {
    let mut list = RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes = bytes_of(handle);
    if !bytes.is_empty() && list.iter().any(|h| bytes_of(h) == bytes) {
        return true;
    }
    if list.len() >= MAX_RUNTIMES {
        return false;
    }
    list.push(Box::leak(Box::new(handle.clone())));
    true
}

/// The registered handles.
#[cfg(feature = "tokio")]
pub(super) fn handles() -> Vec<&'static tokio::runtime::Handle> {
    RUNTIMES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Each registered handle's address, with tokio's count of the runtime's live tasks when its public
/// metrics give one.
#[cfg(feature = "tokio")]
pub(super) fn runtimes() -> Vec<(u64, Option<u64>)> {
    let list = RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner);
    list.iter()
        .map(|h| {
            // Through `Handle` itself (not `&Handle`), so that its inherent `metrics` comes first.
            let alive = (**h).metrics().num_alive_tasks();
            let alive = (alive != UNKNOWN).then_some(alive as u64);
            (*h as *const tokio::runtime::Handle as u64, alive)
        })
        .collect()
}

#[cfg(not(feature = "tokio"))]
pub(super) fn runtimes() -> Vec<(u64, Option<u64>)> {
    Vec::new()
}

/// The address of each registered `LocalSet`.
pub(super) fn local_sets() -> Vec<u64> {
    let list = LOCAL_SETS.lock().unwrap_or_else(PoisonError::into_inner);
    list.iter().map(|&(_, addr)| addr).collect()
}

/// Lists the tasks of a `LocalSet` while it lives: see [`register_local_set`].
#[cfg(feature = "tokio")]
#[must_use = "the LocalSet is listed only while its registration lives"]
pub struct LocalSetRegistration<'a> {
    /// 0 when the set could not be registered (too many at once).
    token: u64,
    _set: std::marker::PhantomData<&'a tokio::task::LocalSet>,
}

#[cfg(feature = "tokio")]
impl LocalSetRegistration<'_> {
    /// Whether the set is listed (`false` if [`MAX_RUNTIMES`] sets were registered already).
    pub fn is_listed(&self) -> bool {
        self.token != 0
    }
}

#[cfg(feature = "tokio")]
impl Drop for LocalSetRegistration<'_> {
    fn drop(&mut self) {
        let mut list = LOCAL_SETS.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|&(token, _)| token != self.token);
    }
}

/// Lists the tasks of `set` (`spawn_local` tasks, their chains and edges) in every snapshot for as long
/// as the returned registration lives; it borrows `set`, which therefore stays in place. A `LocalSet`'s
/// tasks are on no runtime's list, so [`crate::init`] cannot find them by itself.
///
/// ```no_run
/// let local = tokio::task::LocalSet::new();
/// let _listed = asyncdump_agent::register_local_set(&local);
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(local.run_until(async { /* spawn_local ... */ }));
/// ```
#[cfg(feature = "tokio")]
pub fn register_local_set(set: &tokio::task::LocalSet) -> LocalSetRegistration<'_> {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut list = LOCAL_SETS.lock().unwrap_or_else(PoisonError::into_inner);
    let token = if list.len() < MAX_RUNTIMES {
        let token = NEXT.fetch_add(1, Relaxed);
        list.push((token, set as *const tokio::task::LocalSet as u64));
        token
    } else {
        0
    };
    LocalSetRegistration {
        token,
        _set: std::marker::PhantomData,
    }
}

#[cfg(feature = "tokio")]
const UNKNOWN: usize = usize::MAX;

// tokio has public metrics from 1.35 and a count of live tasks in them from 1.39; the agent builds on
// older tokio too. Method resolution prefers an inherent method to a trait's, so these defaults are only
// called where tokio lacks the method (and are unused on a current tokio).
#[cfg(feature = "tokio")]
#[allow(dead_code)]
trait BeforeMetrics {
    fn metrics(&self) -> NoMetrics {
        NoMetrics
    }
}
#[cfg(feature = "tokio")]
impl BeforeMetrics for tokio::runtime::Handle {}
#[cfg(feature = "tokio")]
#[allow(dead_code)]
struct NoMetrics;
#[cfg(feature = "tokio")]
#[allow(dead_code)]
trait BeforeAliveCount {
    fn num_alive_tasks(&self) -> usize {
        UNKNOWN
    }
}
#[cfg(feature = "tokio")]
impl<T> BeforeAliveCount for T {}
