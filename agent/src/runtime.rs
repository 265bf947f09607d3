//! Every task of a registered tokio runtime, including those spawned with plain `tokio::spawn`.
//!
//! **Registration.** [`register_runtime`] (and [`crate::init`], for the runtime it is called in) keeps a
//! clone of the runtime's `Handle` for the life of the process, at a stable address the agent reports
//! to the inspector. Nothing is added to any poll path: the runtime does not know it is watched.
//!
//! **Listing.** The inspector sends a [`RuntimePlan`] built from the binary's DWARF (this module knows
//! nothing of tokio's private layout): from the handle to the runtime's sharded owned-task list, and
//! per task header where its state, vtable, id, list link and join waker are. The agent follows the
//! lists with `process_vm_readv` on its own pid, never taking tokio's locks, so a runtime whose every
//! worker is blocked (or whose list lock is held) is still listed. A list read while tokio changes it
//! may lead into a task being freed: every header must name this runtime's list as its owner and point
//! at a vtable whose poll function the plan knows, a shard's walk stops at the first header that does
//! not, and such stops are counted as skipped. The lists are bounded by [`RuntimePlan::max_tasks`] and
//! every header is visited once.
//!
//! **Chains.** An idle task's future (its stage) is walked with the same [`Walker`] as annotated
//! tasks. tokio may start polling it during the walk: the state word is read again afterwards, and a
//! walk across a change of the running, complete or notified bits is dropped ([`Walk::Busy`]).

use asyncdump_protocol::{
    RawWaker, RuntimePlan, RuntimeReport, RuntimeTask, SetWakerLayout, Shards, Walk, WalkPlan,
};

use crate::sys::{self, FastMap};
use crate::walk::Walker;

/// Most runtimes registered at once; later registrations are refused.
pub const MAX_RUNTIMES: usize = 16;
/// Most tasks listed per runtime, whatever the plan asks for.
pub const MAX_RUNTIME_TASKS: u32 = 1_000_000;
/// Most shards of one owned-task list (tokio uses a few per worker thread).
const MAX_SHARDS: u64 = 1 << 16;
/// Tasks whose futures are walked together, sharing read syscalls (as for annotated tasks).
const WALK_BATCH: usize = 64;

#[cfg(feature = "tokio")]
mod registry {
    use std::sync::{Mutex, PoisonError};

    use super::MAX_RUNTIMES;

    /// Leaked, so that each handle's address stays valid and fixed for the process's life.
    static RUNTIMES: Mutex<Vec<&'static tokio::runtime::Handle>> = Mutex::new(Vec::new());

    /// The bytes of a handle: two handles of one runtime hold the same pointer.
    fn bytes_of(handle: &tokio::runtime::Handle) -> Vec<u8> {
        let addr = handle as *const tokio::runtime::Handle as usize;
        super::read(addr, size_of::<tokio::runtime::Handle>()).unwrap_or_default()
    }

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

    /// Each registered handle's address, with tokio's count of the runtime's live tasks when its
    /// public metrics give one.
    pub(super) fn registered() -> Vec<(u64, Option<u64>)> {
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

    const UNKNOWN: usize = usize::MAX;

    // tokio has public metrics from 1.35 and a count of live tasks in them from 1.39; the agent builds
    // on older tokio too. Method resolution prefers an inherent method to a trait's, so these defaults
    // are only called where tokio lacks the method (and are unused on a current tokio).
    #[allow(dead_code)]
    trait BeforeMetrics {
        fn metrics(&self) -> NoMetrics {
            NoMetrics
        }
    }
    impl BeforeMetrics for tokio::runtime::Handle {}
    #[allow(dead_code)]
    struct NoMetrics;
    #[allow(dead_code)]
    trait BeforeAliveCount {
        fn num_alive_tasks(&self) -> usize {
            UNKNOWN
        }
    }
    impl<T> BeforeAliveCount for T {}
}

#[cfg(not(feature = "tokio"))]
mod registry {
    pub(super) fn registered() -> Vec<(u64, Option<u64>)> {
        Vec::new()
    }
}

/// Lists the tasks of `handle`'s runtime from now on, in every snapshot. Returns `false` if
/// [`MAX_RUNTIMES`] runtimes are registered already. Registering a runtime twice is harmless.
/// [`crate::init`] registers the runtime it is called in; call this for others (or when `init` runs
/// outside a runtime).
#[cfg(feature = "tokio")]
pub fn register_runtime(handle: &tokio::runtime::Handle) -> bool {
    registry::register(handle)
}

/// Where each registered runtime's handle lives, for the inspector's plan.
pub(crate) fn handles() -> Vec<u64> {
    registry::registered().into_iter().map(|(h, _)| h).collect()
}

/// One report per registered runtime; tasks listed only when `plan` carries a runtime plan.
pub(crate) fn list_all(plan: Option<&WalkPlan>, walker: &mut Walker) -> Vec<RuntimeReport> {
    registry::registered()
        .into_iter()
        .map(|(handle, alive)| {
            let mut report = RuntimeReport {
                handle,
                flavor: None,
                alive,
                tasks: Vec::new(),
                skipped: 0,
                error: None,
            };
            if let Some((plan, rp)) = plan.and_then(|p| Some((p, p.runtime.as_deref()?))) {
                if let Err(e) = list(rp, handle as usize, &mut report) {
                    report.error = Some(e);
                }
                walk_tasks(plan, rp, &mut report.tasks, walker);
            }
            report
        })
        .collect()
}

/// Reads `len` bytes at `addr`, or `None` if any of them is not mapped.
fn read(addr: usize, len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let mut r = [sys::Read {
        addr,
        len,
        failed: false,
        dst: out.as_mut_ptr(),
    }];
    match sys::read_own_many(&mut r) {
        Ok(()) if !r[0].failed => Some(out),
        _ => None,
    }
}

/// The native-endian `u64` at `offset` in `bytes` (0 past the end: a plan that lies reads zeros).
fn word(bytes: &[u8], offset: u32) -> u64 {
    sized(bytes, offset, 8)
}

/// The native-endian value of `size` (at most 8) bytes at `offset` in `bytes`; 0 past the end.
fn sized(bytes: &[u8], offset: u32, size: u8) -> u64 {
    let at = offset as usize;
    match bytes.get(at..at + size as usize) {
        Some(b) => {
            let mut w = [0u8; 8];
            let n = b.len().min(8);
            w[..n].copy_from_slice(&b[..n]);
            u64::from_ne_bytes(w)
        }
        None => 0,
    }
}

/// The vtable fields a listing needs, checked for sense.
#[derive(Clone, Copy)]
struct Vtable {
    poll: u64,
    trailer_offset: u64,
    id_offset: u64,
}

/// Follows the runtime's lists from its handle into `report`.
fn list(rp: &RuntimePlan, handle: usize, report: &mut RuntimeReport) -> Result<(), String> {
    let unreadable = |what: &str, at: u64| format!("cannot read the runtime's {what} at {at:#x}");
    let handle_len = rp
        .flavors
        .iter()
        .map(|f| f.arc_offset as usize + 8)
        .chain(rp.handle_discr.map(|d| (d.offset + d.size as u32) as usize))
        .max()
        .ok_or("the plan names no runtime flavor")?;
    let hb = read(handle, handle_len).ok_or_else(|| unreadable("handle", handle as u64))?;
    let discr = rp.handle_discr.map(|d| sized(&hb, d.offset, d.size));
    let flavor = rp
        .flavors
        .iter()
        .find(|f| f.value.is_some() && f.value == discr)
        .or_else(|| rp.flavors.iter().find(|f| f.value.is_none()))
        .ok_or_else(|| format!("unknown runtime flavor {discr:?}"))?;
    report.flavor = Some(flavor.flavor);
    let owned = word(&hb, flavor.arc_offset).wrapping_add(flavor.owned_offset as u64);
    let o = rp.owned;
    let fields = match o.shards {
        Shards::Boxed { ptr, len, .. } => vec![o.id, o.count, ptr, len],
        Shards::Inline { head } => vec![o.id, o.count, head],
    };
    let owned_len = fields.into_iter().max().unwrap_or(0) as usize + 8;
    let ob = read(owned as usize, owned_len).ok_or_else(|| unreadable("task list", owned))?;
    report.alive = report.alive.or(Some(word(&ob, o.count)));
    let list_id = word(&ob, o.id);
    // Where each list's head pointer is.
    let heads: Vec<u64> = match o.shards {
        Shards::Boxed {
            ptr,
            len,
            stride,
            head,
        } => {
            let (shards, shard_count) = (word(&ob, ptr), word(&ob, len));
            if shard_count == 0 || shard_count > MAX_SHARDS {
                return Err(format!(
                    "the runtime's task list does not look like one ({shard_count} shards)"
                ));
            }
            (0..shard_count)
                .map(|i| shards.wrapping_add(i * stride as u64 + head as u64))
                .collect()
        }
        Shards::Inline { head } => vec![owned.wrapping_add(head as u64)],
    };
    if list_id == 0 {
        return Err("the runtime's task list has no id".into());
    }
    let max = rp.max_tasks.min(MAX_RUNTIME_TASKS) as usize;
    let mut vtables: FastMap<u64, Option<Vtable>> = FastMap::default();
    let mut seen: FastMap<u64, ()> = FastMap::default();
    for head_at in heads {
        let head = read(head_at as usize, 8).ok_or_else(|| unreadable("list shard", head_at))?;
        let mut node = word(&head, 0);
        while node != 0 {
            if report.tasks.len() >= max {
                report.skipped += 1;
                break;
            }
            if seen.insert(node, ()).is_some() {
                report.skipped += 1; // a loop: the list changed under the read
                break;
            }
            match task_at(rp, node, list_id, &mut vtables) {
                Some((task, next)) => {
                    report.tasks.push(task);
                    node = next;
                }
                None => {
                    report.skipped += 1;
                    break;
                }
            }
        }
    }
    let mut sets: FastMap<u64, Option<SetWakerLayout>> = FastMap::default();
    for task in &mut report.tasks {
        task.set_waker = task.join_waker.and_then(|w| set_waker(rp, w, &mut sets));
    }
    // What tokio counts beyond what the lists gave (tasks added or removed meanwhile balance out).
    let listed = report.tasks.len() as u64 + report.skipped;
    report.skipped += report.alive.unwrap_or(0).saturating_sub(listed);
    Ok(())
}

/// Reads the task whose header is at `node`, if it validates: it belongs to list `list_id` and its
/// vtable is one the plan knows. Returns it with the next header in its shard.
fn task_at(
    rp: &RuntimePlan,
    node: u64,
    list_id: u64,
    vtables: &mut FastMap<u64, Option<Vtable>>,
) -> Option<(RuntimeTask, u64)> {
    let h = rp.header;
    let hb = read(node as usize, h.size as usize)?;
    if word(&hb, h.owner_id) != list_id {
        return None;
    }
    let vt_addr = word(&hb, h.vtable);
    let vt = *vtables
        .entry(vt_addr)
        .or_insert_with(|| vtable_at(rp, vt_addr));
    let vt = vt?;
    let t = rp.trailer;
    let mut id = [0u8; 8];
    let mut trailer = vec![0u8; t.size as usize];
    let mut reads = [
        sys::Read {
            addr: node.wrapping_add(vt.id_offset) as usize,
            len: 8,
            failed: false,
            dst: id.as_mut_ptr(),
        },
        sys::Read {
            addr: node.wrapping_add(vt.trailer_offset) as usize,
            len: trailer.len(),
            failed: false,
            dst: trailer.as_mut_ptr(),
        },
    ];
    sys::read_own_many(&mut reads).ok()?;
    if reads.iter().any(|r| r.failed) {
        return None;
    }
    let state = word(&hb, h.state);
    let waker_vtable = word(&trailer, t.waker_vtable);
    let join_waker =
        (state & rp.state_bits.join_waker != 0 && waker_vtable != 0).then(|| RawWaker {
            data: word(&trailer, t.waker_data),
            vtable: waker_vtable,
        });
    let task = RuntimeTask {
        id: u64::from_ne_bytes(id),
        header: node,
        state,
        poll_fn: vt.poll,
        join_waker,
        set_waker: None,
        walk: None,
    };
    Some((task, word(&trailer, t.next)))
}

/// When `join` is a `JoinSet` entry's waker (its vtable's `clone` is one the plan names, cached per
/// vtable in `sets`): the waker of the task polling the set, if one waits. Every pointer is read with
/// the fault-safe reader; an entry freed meanwhile reads as garbage that matches no task, never a crash.
fn set_waker(
    rp: &RuntimePlan,
    join: RawWaker,
    sets: &mut FastMap<u64, Option<SetWakerLayout>>,
) -> Option<RawWaker> {
    if rp.set_wakers.is_empty() {
        return None;
    }
    let layout = *sets.entry(join.vtable).or_insert_with(|| {
        let clone = word(&read(join.vtable as usize, 8)?, 0);
        rp.set_wakers
            .binary_search_by_key(&clone, |s| s.clone_fn)
            .ok()
            .map(|i| rp.set_wakers[i])
    });
    let l = layout?;
    let parent = word(
        &read(join.data.wrapping_add(l.parent as u64) as usize, 8)?,
        0,
    );
    let data = word(
        &read(parent.wrapping_add(l.waker_data as u64) as usize, 8)?,
        0,
    );
    let vtable = word(
        &read(parent.wrapping_add(l.waker_vtable as u64) as usize, 8)?,
        0,
    );
    (vtable != 0).then_some(RawWaker { data, vtable })
}

/// The vtable at `addr`, if it is one of a task type the plan knows and its offsets make sense.
fn vtable_at(rp: &RuntimePlan, addr: u64) -> Option<Vtable> {
    let l = rp.vtable;
    let b = read(addr as usize, l.size as usize)?;
    let vt = Vtable {
        poll: word(&b, l.poll),
        trailer_offset: word(&b, l.trailer_offset),
        id_offset: word(&b, l.id_offset),
    };
    let known = rp
        .tasks
        .binary_search_by_key(&vt.poll, |t| t.poll_fn)
        .is_ok();
    let sane = vt.trailer_offset >= rp.header.size as u64
        && vt.trailer_offset < 1 << 24
        && vt.id_offset >= rp.header.size as u64
        && vt.id_offset < vt.trailer_offset;
    (known && sane).then_some(vt)
}

/// Walks the futures of the idle tasks, in batches; drops a walk that a change of state may have torn.
fn walk_tasks(plan: &WalkPlan, rp: &RuntimePlan, tasks: &mut [RuntimeTask], walker: &mut Walker) {
    let bits = rp.state_bits;
    let mut batch: Vec<(usize, u32, usize)> = Vec::with_capacity(WALK_BATCH);
    let mut flush = |batch: &mut Vec<(usize, u32, usize)>, tasks: &mut [RuntimeTask]| {
        if batch.is_empty() {
            return;
        }
        let starts: Vec<(u32, usize)> = batch.iter().map(|&(_, ty, at)| (ty, at)).collect();
        let walks = walker.walk_many(plan, &starts);
        let mut after = vec![0u64; batch.len()];
        let mut reads: Vec<sys::Read> = batch
            .iter()
            .zip(after.iter_mut())
            .map(|(&(i, _, _), dst)| sys::Read {
                addr: tasks[i].header.wrapping_add(rp.header.state as u64) as usize,
                len: 8,
                failed: false,
                dst: (dst as *mut u64).cast(),
            })
            .collect();
        let reread = sys::read_own_many(&mut reads).is_ok();
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        drop(reads);
        let watched = bits.running | bits.complete | bits.notified;
        for ((&(i, _, _), walk), (now, failed)) in
            batch.iter().zip(walks).zip(after.iter().zip(failed))
        {
            let task = &mut tasks[i];
            let moved = !reread || failed || (task.state ^ now) & watched != 0;
            if moved {
                task.state = if reread && !failed {
                    *now
                } else {
                    task.state | bits.running
                };
                task.walk = Some(Walk::Busy);
            } else {
                task.walk = Some(walk);
            }
        }
        batch.clear();
    };
    for i in 0..tasks.len() {
        let t = &tasks[i];
        if t.state & bits.complete != 0 {
            continue;
        }
        if t.state & bits.running != 0 {
            tasks[i].walk = Some(Walk::Busy);
            continue;
        }
        let Ok(k) = rp.tasks.binary_search_by_key(&t.poll_fn, |l| l.poll_fn) else {
            tasks[i].walk = Some(Walk::UnknownRoot);
            continue;
        };
        let layout = rp.tasks[k];
        batch.push((
            i,
            layout.stage_ty,
            t.header.wrapping_add(layout.stage_offset as u64) as usize,
        ));
        if batch.len() >= WALK_BATCH {
            flush(&mut batch, tasks);
        }
    }
    flush(&mut batch, tasks);
}
