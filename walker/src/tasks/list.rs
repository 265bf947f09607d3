//! Following a task list: from a runtime's handle or a `LocalSet` to its `OwnedTasks`, then shard by
//! shard through the task headers, each validated (owner id, a vtable the plan knows, visited once).

use rustc_hash::FxHashMap as FastMap;

use super::census::{FoundList, MAX_REFS};
use crate::bounds::{MAX_LAYOUT_BYTES, MAX_RUNTIME_TASKS, MAX_SHARDS};
use crate::bytes::{uint, word};
use crate::memory::{Memory, Read};
use crate::plan::{
    OwnedLayout, RawWaker, RuntimePlan, RuntimeReport, RuntimeTask, SetWakerLayout, Shards,
};

/// The vtable fields a listing needs, checked for sense.
#[derive(Clone, Copy)]
struct Vtable {
    poll: u64,
    trailer_offset: u64,
    id_offset: u64,
}

/// Follows the lists of the runtime whose `Handle` is at `handle` into `report`: its flavor, its
/// tasks and tokio's own count of them; the address of its task list. `Err` says in one line why the
/// runtime could not be listed.
pub fn list_runtime(
    mem: &impl Memory,
    rp: &RuntimePlan,
    handle: u64,
    report: &mut RuntimeReport,
) -> Result<u64, String> {
    let handle_len = rp
        .flavors
        .iter()
        .map(|f| f.arc_offset as usize + 8)
        .chain(rp.handle_discr.map(|d| (d.offset + d.size as u32) as usize))
        .max()
        .ok_or("the plan names no runtime flavor")?;
    let hb = mem
        .read_vec(handle, handle_len)
        .ok_or_else(|| unreadable("handle", handle))?;
    let discr = rp
        .handle_discr
        .map(|d| uint(&hb, d.offset, d.size).unwrap_or(0));
    let flavor = rp
        .flavors
        .iter()
        .find(|f| f.value.is_some() && f.value == discr)
        .or_else(|| rp.flavors.iter().find(|f| f.value.is_none()))
        .ok_or_else(|| format!("unknown runtime flavor {discr:?}"))?;
    report.flavor = Some(flavor.flavor);
    let owned = word(&hb, flavor.arc_offset).wrapping_add(flavor.owned_offset as u64);
    list_owned(mem, rp, owned, &rp.owned, None, report).map(|()| owned)
}

/// Follows the list of the `LocalSet` at `set`, from the set through its context and shared state;
/// the address of its task list.
pub fn list_local_set(
    mem: &impl Memory,
    rp: &RuntimePlan,
    set: u64,
    report: &mut RuntimeReport,
) -> Result<u64, String> {
    let l = rp
        .local_set
        .ok_or("the binary's DWARF has no LocalSet layout")?;
    let at = |base: u64, off: u32, what: &str| -> Result<u64, String> {
        mem.read_word(base.wrapping_add(off as u64))
            .ok_or_else(|| unreadable(what, base))
    };
    let context = at(set, l.context, "LocalSet")?;
    let shared = at(context, l.shared, "LocalSet context")?;
    let owned = shared.wrapping_add(l.owned_offset as u64);
    list_owned(mem, rp, owned, &l.owned, None, report).map(|()| owned)
}

fn unreadable(what: &str, at: u64) -> String {
    format!("cannot read the runtime's {what} at {at:#x}")
}

/// Follows the task list `o` at `owned` into `report`; with `id`, only if the list carries it.
fn list_owned(
    mem: &impl Memory,
    rp: &RuntimePlan,
    owned: u64,
    o: &OwnedLayout,
    id: Option<u64>,
    report: &mut RuntimeReport,
) -> Result<(), String> {
    let mut open = vec![open_list(mem, rp, owned, o, id, report)?];
    walk_lists(mem, rp, &mut open, std::slice::from_mut(report));
    finish_list(mem, rp, report);
    Ok(())
}

/// Follows the lists a census found (see [`super::census`]) into one report each (`reports[i]` for
/// `found[i]`), walking all their shards together: many runtimes cost no more reads than one with as
/// many tasks. A list that no longer carries the id it was found with (its runtime dropped, its
/// memory reused) is an `Err`.
pub fn list_found(
    mem: &impl Memory,
    rp: &RuntimePlan,
    found: &[FoundList],
    reports: &mut [RuntimeReport],
) -> Vec<Result<(), String>> {
    let mut open = Vec::with_capacity(found.len());
    let mut results = Vec::with_capacity(found.len());
    for (i, (list, report)) in found.iter().zip(reports.iter_mut()).enumerate() {
        report.flavor = Some(list.flavor);
        let opened = list
            .layout(rp)
            .ok_or_else(|| "the plan has no layout for this task list".to_owned())
            .and_then(|o| open_list(mem, rp, list.owned, o, Some(list.id), report));
        match opened {
            Ok(mut o) => {
                o.report = i;
                open.push(o);
                results.push(Ok(()));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    walk_lists(mem, rp, &mut open, reports);
    for o in &open {
        finish_list(mem, rp, &mut reports[o.report]);
    }
    results
}

/// The blocking-pool tasks at `headers` (from a census) into `report`, each header read and checked
/// again: owned by no list, a vtable of a blocking task type the plan knows, not complete. Those
/// that no longer pass are left out.
pub fn read_blocking(
    mem: &impl Memory,
    rp: &RuntimePlan,
    headers: &[u64],
    report: &mut RuntimeReport,
) {
    let Some(census) = rp.census.as_ref() else {
        return;
    };
    let h = rp.header;
    if !(1..=MAX_LAYOUT_BYTES).contains(&h.size)
        || !(1..=MAX_LAYOUT_BYTES).contains(&rp.trailer.size)
    {
        return;
    }
    report.flavor = Some(crate::plan::RuntimeFlavor::Blocking);
    for batch in headers.chunks(256) {
        let mut bytes = vec![0u8; h.size as usize * batch.len()];
        let read = mem.read_each(batch.iter().copied(), bytes.chunks_mut(h.size as usize));
        let mut valid: Vec<(u64, &[u8], Vtable)> = Vec::new();
        for ((&at, hb), ok) in batch.iter().zip(bytes.chunks(h.size as usize)).zip(read) {
            let vtable = word(hb, h.vtable);
            let blocking = census
                .blocking
                .binary_search_by_key(&vtable, |v| v.addr)
                .is_ok();
            let state = word(hb, h.state);
            let refs = state / census.ref_one.max(1);
            let live = state & rp.state_bits.complete == 0 && (1..=MAX_REFS).contains(&refs);
            if !(ok && blocking && live && word(hb, h.owner_id) == 0) {
                continue;
            }
            if let Some(vt) = vtable_at(mem, rp, vtable) {
                valid.push((at, hb, vt));
            }
        }
        let at: Vec<(u64, Vtable)> = valid.iter().map(|&(a, _, vt)| (a, vt)).collect();
        for ((node, hb, vt), rest) in valid.into_iter().zip(ids_and_trailers(mem, rp, &at)) {
            if let Some((id, tb)) = rest {
                report.tasks.push(task_from(rp, node, hb, vt, id, &tb).0);
            }
        }
    }
}

/// A task list being walked: its id, the next header of each of its shards (0 when done), and the
/// report its tasks go to.
struct OpenList {
    id: u64,
    cursors: Vec<u64>,
    report: usize,
}

/// Reads the `OwnedTasks` at `owned` (with `id`: only if it carries it): tokio's count of its tasks
/// into `report`, and the first header of each shard.
fn open_list(
    mem: &impl Memory,
    rp: &RuntimePlan,
    owned: u64,
    o: &OwnedLayout,
    id: Option<u64>,
    report: &mut RuntimeReport,
) -> Result<OpenList, String> {
    let sized = |size: u32| (1..=MAX_LAYOUT_BYTES).contains(&size);
    if !sized(rp.header.size) || !sized(rp.trailer.size) {
        return Err(format!(
            "the runtime plan's task header or trailer has no size, or over {MAX_LAYOUT_BYTES} bytes"
        ));
    }
    let fields = match o.shards {
        Shards::Boxed { ptr, len, .. } => vec![o.id, ptr, len],
        Shards::Inline { head } => vec![o.id, head],
    };
    let owned_len = fields.into_iter().chain(o.count).max().unwrap_or(0) as usize + 8;
    let ob = mem
        .read_vec(owned, owned_len)
        .ok_or_else(|| unreadable("task list", owned))?;
    let list_id = word(&ob, o.id);
    if id.is_some_and(|id| id != list_id) {
        return Err(format!(
            "the task list at {owned:#x} is no longer list {id:?}"
        ));
    }
    if list_id == 0 {
        return Err("the runtime's task list has no id".into());
    }
    report.alive = report.alive.or(o.count.map(|c| word(&ob, c)));
    let heads = shard_heads(owned, &ob, o.shards)?;
    let mut firsts = vec![[0u8; 8]; heads.len()];
    let read = mem.read_each(heads.iter().copied(), firsts.iter_mut().map(|b| &mut b[..]));
    if let Some(i) = read.iter().position(|&ok| !ok) {
        return Err(unreadable("list shard", heads[i]));
    }
    Ok(OpenList {
        id: list_id,
        cursors: firsts.iter().map(|b| u64::from_ne_bytes(*b)).collect(),
        report: 0,
    })
}

/// Where each shard's head pointer is, from the `OwnedTasks` bytes `ob` read at `owned`.
fn shard_heads(owned: u64, ob: &[u8], shards: Shards) -> Result<Vec<u64>, String> {
    match shards {
        Shards::Boxed {
            ptr,
            len,
            stride,
            head,
        } => {
            let (shards, shard_count) = (word(ob, ptr), word(ob, len));
            if shard_count == 0 || shard_count > MAX_SHARDS {
                return Err(format!(
                    "the runtime's task list does not look like one ({shard_count} shards)"
                ));
            }
            Ok((0..shard_count)
                .map(|i| shards.wrapping_add(i * stride as u64 + head as u64))
                .collect())
        }
        Shards::Inline { head } => Ok(vec![owned.wrapping_add(head as u64)]),
    }
}

/// After a list's walk: the set wakers of its tasks, and what tokio counts beyond what it gave.
fn finish_list(mem: &impl Memory, rp: &RuntimePlan, report: &mut RuntimeReport) {
    let mut sets: FastMap<u64, Option<SetWakerLayout>> = FastMap::default();
    for task in &mut report.tasks {
        task.set_waker = task
            .join_waker
            .and_then(|w| set_waker(mem, rp, w, &mut sets));
    }
    // Tasks added or removed meanwhile balance out.
    let listed = report.tasks.len() as u64 + report.skipped;
    report.skipped += report.alive.unwrap_or(0).saturating_sub(listed);
}

/// Follows every shard of every list at once, from the first header of each: each round reads the
/// next header of every shard in one `process_vm_readv`, then their ids and trailers in another, so
/// 16 shards (of one runtime or of several) cost two system calls per 16 tasks, not two per task. A
/// shard whose next header does not validate (the list changed under the read) ends there, counted
/// as skipped.
fn walk_lists(
    mem: &impl Memory,
    rp: &RuntimePlan,
    lists: &mut [OpenList],
    reports: &mut [RuntimeReport],
) {
    let max = rp.max_tasks.min(MAX_RUNTIME_TASKS) as usize;
    let mut vtables: FastMap<u64, Option<Vtable>> = FastMap::default();
    let mut seen: FastMap<u64, ()> = FastMap::default();
    let h = rp.header;
    // Every shard of every list: (list, shard).
    let shards: Vec<(usize, usize)> = (lists.iter().enumerate())
        .flat_map(|(l, o)| (0..o.cursors.len()).map(move |s| (l, s)))
        .collect();
    loop {
        for &(l, s) in &shards {
            let (node, report) = (lists[l].cursors[s], &mut reports[lists[l].report]);
            // A loop means the list changed under the read.
            if node != 0 && (report.tasks.len() >= max || seen.insert(node, ()).is_some()) {
                report.skipped += 1;
                lists[l].cursors[s] = 0;
            }
        }
        let active: Vec<(usize, usize)> = (shards.iter().copied())
            .filter(|&(l, s)| lists[l].cursors[s] != 0)
            .collect();
        if active.is_empty() {
            return;
        }
        let mut headers = vec![0u8; h.size as usize * active.len()];
        let header_ok = mem.read_each(
            active.iter().map(|&(l, s)| lists[l].cursors[s]),
            headers.chunks_mut(h.size as usize),
        );
        // The headers that validate, with their vtable.
        let mut valid: Vec<((usize, usize), &[u8], Vtable)> = Vec::with_capacity(active.len());
        for ((&(l, s), hb), ok) in active
            .iter()
            .zip(headers.chunks(h.size as usize))
            .zip(header_ok)
        {
            let vt = (ok && word(hb, h.owner_id) == lists[l].id)
                .then(|| word(hb, h.vtable))
                .and_then(|at| *vtables.entry(at).or_insert_with(|| vtable_at(mem, rp, at)));
            match vt {
                Some(vt) => valid.push(((l, s), hb, vt)),
                None => {
                    reports[lists[l].report].skipped += 1;
                    lists[l].cursors[s] = 0;
                }
            }
        }
        let at: Vec<(u64, Vtable)> = (valid.iter())
            .map(|&((l, s), _, vt)| (lists[l].cursors[s], vt))
            .collect();
        for (((l, s), hb, vt), rest) in valid.into_iter().zip(ids_and_trailers(mem, rp, &at)) {
            let list = &mut lists[l];
            let report = &mut reports[list.report];
            // The round read up to one task per shard: the limit holds exactly all the same.
            match rest {
                Some((id, tb)) if report.tasks.len() < max => {
                    let (task, next) = task_from(rp, list.cursors[s], hb, vt, id, &tb);
                    report.tasks.push(task);
                    list.cursors[s] = next;
                }
                _ => {
                    report.skipped += 1;
                    list.cursors[s] = 0;
                }
            }
        }
    }
}

/// The id and trailer of the task at each header of `at` (with its vtable, which says where they
/// are), read in one batch; `None` where a read failed.
fn ids_and_trailers(
    mem: &impl Memory,
    rp: &RuntimePlan,
    at: &[(u64, Vtable)],
) -> Vec<Option<([u8; 8], Vec<u8>)>> {
    let size = rp.trailer.size as usize;
    let mut ids = vec![[0u8; 8]; at.len()];
    let mut trailers = vec![0u8; size * at.len()];
    let mut reads: Vec<Read<'_>> = Vec::with_capacity(2 * at.len());
    for ((&(node, vt), id), tb) in at.iter().zip(ids.iter_mut()).zip(trailers.chunks_mut(size)) {
        reads.push(Read::new(node.wrapping_add(vt.id_offset), id));
        reads.push(Read::new(node.wrapping_add(vt.trailer_offset), tb));
    }
    let read = mem.read_many(&mut reads).is_ok();
    let ok: Vec<bool> = reads
        .chunks(2)
        .map(|r| read && !r[0].failed && !r[1].failed)
        .collect();
    drop(reads);
    (ids.into_iter().zip(trailers.chunks(size)).zip(ok))
        .map(|((id, tb), ok)| ok.then(|| (id, tb.to_vec())))
        .collect()
}

/// The task whose header at `node` validated (`hb`, vtable `vt`), from its id and trailer bytes, with
/// the next header in its shard.
fn task_from(
    rp: &RuntimePlan,
    node: u64,
    hb: &[u8],
    vt: Vtable,
    id: [u8; 8],
    trailer: &[u8],
) -> (RuntimeTask, u64) {
    let (h, t) = (rp.header, rp.trailer);
    let state = word(hb, h.state);
    let waker_vtable = word(trailer, t.waker_vtable);
    let join_waker =
        (state & rp.state_bits.join_waker != 0 && waker_vtable != 0).then(|| RawWaker {
            data: word(trailer, t.waker_data),
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
        unchanged_since_ns: None,
    };
    (task, word(trailer, t.next))
}

/// When `join` is a `JoinSet` entry's waker (its vtable's `clone` is one the plan names, cached per
/// vtable in `sets`): the waker of the task polling the set, if one waits. Every pointer is read with
/// the fault-safe reader; an entry freed meanwhile reads as garbage that matches no task, never a crash.
fn set_waker(
    mem: &impl Memory,
    rp: &RuntimePlan,
    join: RawWaker,
    sets: &mut FastMap<u64, Option<SetWakerLayout>>,
) -> Option<RawWaker> {
    if rp.set_wakers.is_empty() {
        return None;
    }
    let layout = *sets.entry(join.vtable).or_insert_with(|| {
        let clone = mem.read_word(join.vtable)?;
        rp.set_wakers
            .binary_search_by_key(&clone, |s| s.clone_fn)
            .ok()
            .map(|i| rp.set_wakers[i])
    });
    let l = layout?;
    let parent = mem.read_word(join.data.wrapping_add(l.parent as u64))?;
    let data = mem.read_word(parent.wrapping_add(l.waker_data as u64))?;
    let vtable = mem.read_word(parent.wrapping_add(l.waker_vtable as u64))?;
    (vtable != 0).then_some(RawWaker { data, vtable })
}

/// The vtable at `addr`, if it is one of a task type the plan knows and its offsets make sense.
fn vtable_at(mem: &impl Memory, rp: &RuntimePlan, addr: u64) -> Option<Vtable> {
    let l = rp.vtable;
    let b = mem.read_vec(addr, l.size as usize)?;
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
