//! A starved runtime: every worker blocked (or busy) inside a poll while tasks of its own are ready
//! and not polled, said once atop the dump, with how long at least it has been so.
//!
//! How long is a lower bound, the longest of three, each named: every worker has been inside its
//! poll that long (the polled tasks' ages); a ready task was woken that long ago and not polled; a
//! timer of the runtime's tasks is that far past its deadline and has not fired (tokio's workers
//! fire timers between polls: none came to them since). The first two need the agent's timings or
//! earlier listings; the third, the wait targets of a live process (a core keeps no clock).

use std::cell::Cell;

use super::blocking;
use crate::model::threads::{
    Doing, Starved, StarvedBy, StarvedSince, ThreadRole, ThreadView, runs_on,
};
use crate::model::values::{Value, WaitKind};
use crate::model::{Dump, State, TaskView, any_frame};

/// Runtimes whose workers are all blocked (or, held stopped, busy) inside a poll while tasks of
/// their own are ready and not polled: the multi-thread runtimes' workers counted together (the
/// stacks do not say whose runtime an idle worker serves), and each `current_thread` runtime whose
/// one thread is inside the poll of one of its tasks.
pub(super) fn find(dump: &Dump, views: &[ThreadView]) -> Vec<Starved> {
    let stuck = |v: &ThreadView| {
        matches!(v.doing, Doing::Blocked { .. } | Doing::Stopped)
            && blocking::in_task_poll(&v.frames)
    };
    let mut out = Vec::new();
    let workers: Vec<&ThreadView> = (views.iter())
        .filter(|v| v.role == ThreadRole::Worker)
        .collect();
    let ready_multi = ready(dump, None);
    if !workers.is_empty() && workers.iter().all(|v| stuck(v)) && ready_multi > 0 {
        out.push(Starved {
            flavor: "multi_thread".into(),
            workers: workers.len(),
            blocked: workers.len(),
            ready: ready_multi,
            threads: workers.iter().map(|v| v.tid).collect(),
            runtime: None,
            since: None,
        });
    }
    for v in views
        .iter()
        .filter(|v| v.role == ThreadRole::BlockOn && stuck(v))
    {
        let runtime = v
            .polling
            .and_then(|id| dump.task(id)?.tokio_task)
            .map(|k| k.runtime);
        let Some(runtime) = runtime.filter(|&r| flavor(dump, r) == Some("current_thread")) else {
            continue;
        };
        let ready = ready(dump, Some(runtime));
        if ready > 0 {
            out.push(Starved {
                flavor: "current_thread".into(),
                workers: 1,
                blocked: 1,
                ready,
                threads: vec![v.tid],
                runtime: Some(runtime),
                since: None,
            });
        }
    }
    for s in &mut out {
        s.since = since(dump, s);
    }
    out
}

/// Times each starved runtime of `dump` again, now that its tasks' wait targets are read.
pub fn time(dump: &mut Dump) {
    let mut starved = std::mem::take(&mut dump.starved);
    for s in &mut starved {
        s.since = since(dump, s);
    }
    dump.starved = starved;
}

fn flavor(dump: &Dump, runtime: u32) -> Option<&str> {
    (dump.runtimes.get(runtime as usize)).and_then(|r| r.flavor.as_deref())
}

fn ready(dump: &Dump, runtime: Option<u32>) -> usize {
    (dump.tasks.iter())
        .filter(|t| t.state == State::Scheduled && runs_on(dump, t, runtime))
        .count()
}

/// The longest of what says how long `s` has been starved.
fn since(dump: &Dump, s: &Starved) -> Option<StarvedSince> {
    let age = |t: &TaskView| t.state_age_ns.or(t.unchanged_ns);
    // Every worker inside its poll at least as long as the one polling the shortest.
    let polled = (s.threads.iter()).map(|tid| {
        let thread = dump.threads.iter().find(|v| v.tid == *tid)?;
        age(dump.task(thread.polling?)?)
    });
    let polls = polled
        .collect::<Option<Vec<u64>>>()
        .and_then(|a| a.into_iter().min());
    let tasks = || (dump.tasks.iter()).filter(|t| runs_on(dump, t, s.runtime));
    let woken = (tasks().filter(|t| t.state == State::Scheduled))
        .filter_map(|t| t.state_age_ns)
        .max();
    let timer = (tasks().filter(|t| t.state == State::Idle))
        .filter_map(overdue)
        .max();
    [
        (polls, StarvedBy::Polls),
        (woken, StarvedBy::Woken),
        (timer, StarvedBy::Timer),
    ]
    .into_iter()
    .filter_map(|(ns, by)| Some(StarvedSince { ns: ns?, by }))
    .filter(|s| s.ns > 0)
    .max_by_key(|s| s.ns)
}

/// How far past its deadline the most overdue sleep `task` waits on is, where one is.
fn overdue(task: &TaskView) -> Option<u64> {
    let most = Cell::new(None::<u64>);
    any_frame(&task.frames, &|f| {
        let sleep = f.waits_on.as_deref().filter(|w| w.kind == WaitKind::Sleep);
        for part in sleep.map_or(&[][..], |w| &w.parts[..]) {
            if let Value::Instant {
                age_ns: Some(a), ..
            } = part.value
                && a > 0
            {
                most.set(Some(most.get().map_or(a as u64, |m| m.max(a as u64))));
            }
        }
        false
    });
    most.get()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::TokioTask;
    use crate::model::values::{Local, WaitOn};
    use crate::testing::{blocked_worker, edge_snapshot, handshake, runtime};

    const S: u64 = 1_000_000_000;

    /// A multi-thread runtime (0) and a `current_thread` one (1); task 1 runs on worker 7, task 2
    /// is ready, tasks 3 and 4 idle, every task on runtime 0.
    fn dump() -> Dump {
        let mut dump = Dump::build(&handshake(), &edge_snapshot(&[]), 0);
        dump.runtimes = vec![runtime("multi_thread"), runtime("current_thread")];
        for (t, state) in
            dump.tasks
                .iter_mut()
                .zip([State::Running, State::Scheduled, State::Idle, State::Idle])
        {
            t.state = state;
            (t.state_age_ns, t.unchanged_ns) = (None, None);
            t.tokio_task = Some(TokioTask {
                header: 0x1000 * t.id,
                poll_fn: 0x2000,
                runtime: 0,
                other_refs: Some(1),
            });
        }
        dump.threads = vec![blocked_worker(7, dump.tasks[0].id)];
        dump
    }

    /// Task `i` of `dump` waits on a sleep whose deadline passed `overdue_s` seconds ago.
    fn sleeps(dump: &mut Dump, i: usize, overdue_s: i64) {
        let frame = &mut Arc::make_mut(&mut dump.tasks[i].frames)[0];
        let deadline = Value::Instant {
            monotonic_ns: 1,
            age_ns: Some(overdue_s * S as i64),
        };
        frame.waits_on = Some(Box::new(WaitOn {
            kind: WaitKind::Sleep,
            parts: vec![Local::new("deadline", "Instant", deadline)],
            holders: Vec::new(),
            statics: Vec::new(),
            threads: Vec::new(),
        }));
    }

    fn timed(dump: &Dump) -> Option<StarvedSince> {
        let starved = find(dump, &dump.threads);
        assert_eq!(starved.len(), 1, "its one worker blocked, a task ready");
        starved[0].since
    }

    #[test]
    fn nothing_timed_says_no_duration() {
        assert_eq!(timed(&dump()), None);
    }

    #[test]
    fn an_idle_tasks_overdue_timer_times_it() {
        let mut d = dump();
        sleeps(&mut d, 2, 2);
        sleeps(&mut d, 3, 3);
        let by = StarvedBy::Timer;
        assert_eq!(timed(&d), Some(StarvedSince { ns: 3 * S, by }));
    }

    #[test]
    fn a_timer_not_yet_due_or_of_a_woken_task_or_another_runtimes_times_nothing() {
        let mut d = dump();
        sleeps(&mut d, 2, -5);
        sleeps(&mut d, 1, 9);
        sleeps(&mut d, 3, 9);
        d.tasks[3].tokio_task.as_mut().unwrap().runtime = 1;
        assert_eq!(timed(&d), None);
    }

    #[test]
    fn the_longest_of_the_polls_the_wakes_and_the_timers_is_said_with_its_evidence() {
        let mut d = dump();
        sleeps(&mut d, 2, 2);
        d.tasks[1].state_age_ns = Some(4 * S);
        let woken = StarvedSince {
            ns: 4 * S,
            by: StarvedBy::Woken,
        };
        assert_eq!(timed(&d), Some(woken));
        d.tasks[0].unchanged_ns = Some(6 * S);
        let polls = StarvedSince {
            ns: 6 * S,
            by: StarvedBy::Polls,
        };
        assert_eq!(timed(&d), Some(polls));
        // The agent's timing of the poll before a lower bound from listings.
        d.tasks[0].state_age_ns = Some(5 * S);
        assert_eq!(timed(&d), Some(StarvedSince { ns: 5 * S, ..polls }));
    }

    #[test]
    fn time_fills_in_what_the_wait_targets_read_later_tell() {
        let mut d = dump();
        d.starved = find(&d, &d.threads);
        sleeps(&mut d, 2, 2);
        time(&mut d);
        assert_eq!(d.starved[0].since.map(|s| s.by), Some(StarvedBy::Timer));
    }
}
