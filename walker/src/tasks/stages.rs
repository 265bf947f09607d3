//! Walking the futures of listed tasks: idle ones only, in batches, with the walk dropped when the
//! task's state word moved during it; from outside, such a walk is tried again, then called torn.

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

/// [`walk_tasks`], then each walk a poll tore walked again while its task is idle, up to `retries`
/// times; a task whose every walk was torn gets [`Walk::Torn`], never a walk shown as if consistent.
/// For a reader outside the process, who cannot wait for the task under its lock.
pub fn walk_tasks_retrying(
    mem: &impl Memory,
    plan: &WalkPlan,
    rp: &RuntimePlan,
    tasks: &mut [&mut RuntimeTask],
    walker: &mut Walker,
    retries: u32,
) {
    let bits = rp.state_bits;
    let torn = |t: &RuntimeTask| {
        matches!(t.walk, Some(Walk::Busy)) && t.state & (bits.running | bits.complete) == 0
    };
    walk_tasks(mem, plan, rp, tasks, walker);
    for _ in 0..retries {
        let mut again: Vec<&mut RuntimeTask> = (tasks.iter_mut())
            .map(|t| &mut **t)
            .filter(|t| torn(t))
            .collect();
        if again.is_empty() {
            return;
        }
        again.iter_mut().for_each(|t| t.walk = None);
        walk_tasks(mem, plan, rp, &mut again, walker);
    }
    for t in tasks.iter_mut().filter(|t| torn(t)) {
        t.walk = Some(Walk::Torn {
            tries: retries.saturating_add(1),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::memory::ImageMemory;
    use crate::plan::{HeaderLayout, TaskLayout, TypePlan};

    const HEADER: u64 = 0x3000;
    const NOTIFIED: u64 = 4;

    /// A task's memory whose state word reads as each of `states` in turn (the last one from then
    /// on): a task a running program polls while it is read.
    struct Polled {
        image: ImageMemory,
        states: Vec<u64>,
        reads: Cell<usize>,
    }

    impl Memory for Polled {
        fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), crate::Unreadable> {
            self.image.read_many(reads)?;
            for r in reads.iter_mut().filter(|r| r.addr == HEADER) {
                let n = self.reads.get();
                self.reads.set(n + 1);
                let state = self.states[n.min(self.states.len() - 1)];
                r.dst.copy_from_slice(&state.to_ne_bytes());
            }
            Ok(())
        }
    }

    /// One idle task (state 0 when listed) of a one-type plan, over memory that reads as `states`.
    fn setup(states: &[u64]) -> (Polled, WalkPlan, RuntimePlan, RuntimeTask) {
        let mut image = ImageMemory::new();
        assert!(image.insert(HEADER, vec![0; 64]));
        let mut rp = crate::tasks::tests::plan(
            HeaderLayout {
                size: 24,
                ..HeaderLayout::default()
            },
            crate::plan::TrailerLayout::default(),
        );
        rp.state_bits.notified = NOTIFIED;
        rp.state_bits.running = 1;
        rp.state_bits.complete = 2;
        rp.tasks = vec![TaskLayout {
            poll_fn: 0x99,
            stage_offset: 32,
            stage_ty: 0,
            scheduler: None,
        }];
        let plan = WalkPlan {
            types: vec![TypePlan {
                size: 8,
                ..TypePlan::default()
            }],
            max_nodes: 10,
            max_bytes: 1024,
            ..WalkPlan::default()
        };
        let task = RuntimeTask {
            id: 1,
            header: HEADER,
            state: 0,
            poll_fn: 0x99,
            join_waker: None,
            set_waker: None,
            walk: None,
            unchanged_since_ns: None,
        };
        let polled = Polled {
            image,
            states: states.to_vec(),
            reads: Cell::new(0),
        };
        (polled, plan, rp, task)
    }

    /// The task after a walk with `retries` over memory whose state reads as `states`, and how many
    /// times its state was read.
    fn walked(states: &[u64], retries: u32) -> (RuntimeTask, usize) {
        let (mem, plan, rp, mut task) = setup(states);
        let mut walker = Walker::default();
        walk_tasks_retrying(&mem, &plan, &rp, &mut [&mut task], &mut walker, retries);
        (task, mem.reads.get())
    }

    #[test]
    fn a_walk_torn_at_every_try_is_reported_torn_after_the_retries() {
        // Woken, polled, woken again: the state moves during every walk.
        let (task, reads) = walked(&[NOTIFIED, 0, NOTIFIED, 0], 3);
        assert_eq!(task.walk, Some(Walk::Torn { tries: 4 }));
        assert_eq!(reads, 4, "one look at the state after each try");
        let (task, _) = walked(&[NOTIFIED], 0);
        assert_eq!(task.walk, Some(Walk::Torn { tries: 1 }), "no retry asked");
    }

    #[test]
    fn a_walk_torn_once_is_read_again_and_kept_whole() {
        // Woken during the first walk, then still.
        let (task, reads) = walked(&[NOTIFIED, NOTIFIED], 3);
        assert!(
            matches!(task.walk, Some(Walk::Nodes { .. })),
            "{:?}",
            task.walk
        );
        assert_eq!(reads, 2);
    }

    #[test]
    fn a_task_found_running_is_running_not_torn() {
        let (task, _) = walked(&[1], 3);
        assert_eq!(task.walk, Some(Walk::Busy));
        assert_eq!(task.state, 1, "its state as last read: running");
    }
}
