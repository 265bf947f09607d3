//! Walking the futures of listed tasks: idle ones only, in batches, with the walk dropped when the
//! task's state word moved during it.

use super::WALK_BATCH;
use crate::memory::{Memory, Read};
use crate::plan::{RuntimePlan, RuntimeTask, Walk, WalkPlan};
use crate::walk::Walker;

/// Walks the futures of the idle tasks (of one list or of several), in batches, in address order;
/// drops a walk that a change of state may have torn.
pub fn walk_tasks(
    mem: &impl Memory,
    plan: &WalkPlan,
    rp: &RuntimePlan,
    tasks: &mut [&mut RuntimeTask],
    walker: &mut Walker,
) {
    let bits = rp.state_bits;
    let mut batch: Vec<(usize, u32, u64)> = Vec::with_capacity(WALK_BATCH);
    let mut flush = |batch: &mut Vec<(usize, u32, u64)>, tasks: &mut [&mut RuntimeTask]| {
        if batch.is_empty() {
            return;
        }
        let starts: Vec<(u32, u64)> = batch.iter().map(|&(_, ty, at)| (ty, at)).collect();
        let walks = walker.walk_many(mem, plan, &starts);
        let mut after = vec![[0u8; 8]; batch.len()];
        let mut reads: Vec<Read> = batch
            .iter()
            .zip(after.iter_mut())
            .map(|(&(i, _, _), dst)| {
                let addr = tasks[i].header.wrapping_add(rp.header.state as u64);
                Read::new(addr, dst)
            })
            .collect();
        let reread = mem.read_many(&mut reads).is_ok();
        let failed: Vec<bool> = reads.iter().map(|r| r.failed).collect();
        drop(reads);
        let watched = bits.running | bits.complete | bits.notified;
        for ((&(i, _, _), walk), (now, failed)) in
            batch.iter().zip(walks).zip(after.iter().zip(failed))
        {
            let task = &mut *tasks[i];
            let now = u64::from_ne_bytes(*now);
            let moved = !reread || failed || (task.state ^ now) & watched != 0;
            if moved {
                task.state = if reread && !failed {
                    now
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
    // In address order: a batch's reads then fall on few pages, which the kernel pins once each.
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_unstable_by_key(|&i| tasks[i].header);
    for i in order {
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
            t.header.wrapping_add(layout.stage_offset as u64),
        ));
        if batch.len() >= WALK_BATCH {
            flush(&mut batch, tasks);
        }
    }
    flush(&mut batch, tasks);
}
