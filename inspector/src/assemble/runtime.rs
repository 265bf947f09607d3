//! Tasks listed from registered tokio runtimes, merged with the agent's own tasks.
//!
//! Each listed task gets a key in the dump: a task spawned through the agent is matched by the agent
//! cell its `Instrumented` root points at, and shown once, as the agent's task with tokio's id added;
//! any other is keyed by [`TOKIO_ONLY`] plus tokio's id and shows what tokio knows: its state, its root
//! future's type and its decoded chain, but no name, spawn site or timings, which only the agent records.
//! Edges through tokio's own `JoinHandle` come from two sides: the awaiting task's decoded walk reaches
//! the handle (its header pointer names the awaited task), and the awaited task's join waker names the
//! awaiting task (tokio's waker points at the task header, the agent's at its cell).

use std::sync::Arc;

use asyncdump_protocol::{RuntimeFlavor, RuntimeSource, RuntimeTask, Snapshot, StateBits, Walk};

use crate::decode::TaskRefs;
use crate::model::values::Reading;
use crate::model::{
    AwaitedBy, DecodingInfo, FastMap, FoundBy, FrameNode, RuntimeView, Source, State, TOKIO_ONLY,
    TaskView,
};
use crate::plan::Plan;

/// The runtime tasks of one snapshot, keyed.
pub(super) struct Listed<'a> {
    tasks: Vec<(&'a RuntimeTask, u64)>,
    refs: TaskRefs,
    /// Agent task id → index in `tasks`.
    by_agent: FastMap<u64, usize>,
    bits: StateBits,
    /// The snapshot's time, on the agent's monotonic clock.
    now_ns: u64,
    /// The runtime (its place in the snapshot's and the dump's list) each task header is in.
    runtime_of: FastMap<u64, u32>,
}

/// Which task holds the `Sender` of each oneshot channel a walk found one of, by channel address:
/// every agent task's walk, then every listed runtime task's (`tasks`, with their keys).
fn senders_held(snap: &Snapshot, d: &Plan, tasks: &[(&RuntimeTask, u64)]) -> FastMap<u64, u64> {
    let walks = (snap.tasks.iter().map(|t| (t.walk.as_ref(), t.id)))
        .chain(tasks.iter().map(|&(t, key)| (t.walk.as_ref(), key)));
    let mut out = FastMap::default();
    for (walk, key) in walks {
        if let Some(Walk::Nodes { nodes, .. }) = walk {
            out.extend(d.senders_held(nodes).map(|ch| (ch, key)));
        }
    }
    out
}

impl<'a> Listed<'a> {
    pub(super) fn new(snap: &'a Snapshot, decoder: Option<&Plan>) -> Listed<'a> {
        let cells: FastMap<u64, u64> = snap.tasks.iter().map(|t| (t.cell, t.id)).collect();
        // A running task cannot be walked: its header, as the waker it was polled with, names it.
        let polled_with: FastMap<u64, u64> = (snap.tasks.iter())
            .filter(|t| t.poll_waker_data != 0)
            .map(|t| (t.poll_waker_data, t.id))
            .collect();
        let mut listed = Listed {
            tasks: Vec::new(),
            refs: TaskRefs::default(),
            by_agent: FastMap::default(),
            now_ns: snap.now_ns,
            runtime_of: (snap.runtimes.iter().enumerate())
                .flat_map(|(i, r)| r.tasks.iter().map(move |t| (t.header, i as u32)))
                .collect(),
            bits: decoder
                .and_then(|d| d.walk.runtime.as_ref())
                .map(|r| r.state_bits)
                .unwrap_or_default(),
        };
        // In tokio's task order, whatever order the agent listed them in (shard by shard, or the
        // shards interleaved): edges found from them come out in the same order every time.
        let mut listing: Vec<&RuntimeTask> = snap.runtimes.iter().flat_map(|r| &r.tasks).collect();
        listing.sort_by_key(|t| t.id);
        for t in listing {
            if listed.refs.headers.contains_key(&t.header) {
                continue; // one runtime registered twice
            }
            let agent = match (decoder, &t.walk) {
                (Some(d), Some(Walk::Nodes { nodes, .. })) => d.agent_cell(nodes),
                _ => None,
            }
            .and_then(|cell| cells.get(&cell).copied())
            .or_else(|| polled_with.get(&t.header).copied());
            let key = agent.unwrap_or(TOKIO_ONLY | t.id);
            if let Some(id) = agent {
                listed.by_agent.insert(id, listed.tasks.len());
            }
            listed.refs.headers.insert(t.header, key);
            listed.tasks.push((t, key));
        }
        listed.refs.cells = cells;
        if let Some(d) = decoder {
            listed.refs.senders = senders_held(snap, d, &listed.tasks);
        }
        listed
    }

    pub(super) fn refs(&self) -> &TaskRefs {
        &self.refs
    }

    fn state(&self, word: u64) -> State {
        let b = self.bits;
        if word & b.complete != 0 {
            State::Completed
        } else if word & b.running != 0 {
            State::Running
        } else if word & b.notified != 0 {
            State::Scheduled
        } else {
            State::Idle
        }
    }

    /// Adds tokio's id, and its word on whether the task is scheduled, to an agent task it listed.
    pub(super) fn annotate(&self, view: &mut TaskView) {
        if let Some(&i) = view.agent_id.and_then(|id| self.by_agent.get(&id)) {
            let (t, _) = self.tasks[i];
            view.tokio_id = Some(t.id);
            view.tokio_task = Some(self.tokio_task(t));
            view.unchanged_ns = self.unchanged_ns(t);
            if view.state == State::Idle && self.state(t.state) == State::Scheduled {
                view.state = State::Scheduled;
            }
        }
    }

    /// The listed tasks the agent has no record of, in the order of tokio's ids (the order of spawning).
    /// With `live`, each view gets what only a live view uses: its search text and frame ids.
    pub(super) fn views(
        &self,
        decoder: Option<&Plan>,
        live: bool,
        wanted: &Reading,
    ) -> Vec<TaskView> {
        let mut views: Vec<TaskView> = self
            .tasks
            .iter()
            .filter(|(_, key)| key & TOKIO_ONLY != 0)
            .map(|&(t, key)| self.view(t, key, (decoder, wanted), live))
            .collect();
        views.sort_unstable_by_key(|v| v.id);
        views
    }

    /// Where tokio keeps `t`, and the references to it its state word counts beyond its list's
    /// and its `JoinHandle`'s (see [`other_refs`]).
    fn tokio_task(&self, t: &RuntimeTask) -> crate::model::TokioTask {
        crate::model::TokioTask {
            header: t.header,
            poll_fn: t.poll_fn,
            runtime: self.runtime_of.get(&t.header).copied().unwrap_or(u32::MAX),
            other_refs: other_refs(t.state),
        }
    }

    /// How long `t` has looked as it does, when an earlier listing saw it so.
    fn unchanged_ns(&self, t: &RuntimeTask) -> Option<u64> {
        let since = t.unchanged_since_ns?;
        Some(self.now_ns.saturating_sub(since)).filter(|&ns| ns > 0)
    }

    fn view(
        &self,
        t: &RuntimeTask,
        key: u64,
        (decoder, wanted): (Option<&Plan>, &Reading),
        live: bool,
    ) -> TaskView {
        let state = self.state(t.state);
        let mut awaits_tasks = Vec::new();
        let (mut frames, decoded_delegates, decode_note) = match (decoder, &t.walk) {
            (Some(d), Some(walk @ Walk::Nodes { nodes, .. })) => {
                let (frames, delegates) =
                    d.merge(nodes, &[], &mut awaits_tasks, &self.refs, wanted);
                (frames, delegates, Plan::note(walk))
            }
            (Some(_), Some(walk)) => (Vec::new(), Vec::new(), Plan::note(walk)),
            _ => (Vec::new(), Vec::new(), None),
        };
        if live {
            crate::model::assign_frame_ids(&mut frames);
        }
        let root_type = decoder
            .and_then(|d| d.task_types.get(&t.poll_fn).cloned())
            .unwrap_or_else(|| Arc::from("a future type the DWARF does not name"));
        let root_type = shown_root(root_type, &frames);
        let stream = match (decoder, &t.walk) {
            (Some(d), Some(Walk::Nodes { nodes, .. })) => d.h2_stream(nodes, &self.refs),
            _ => None,
        };
        let mut view = TaskView {
            tokio_id: Some(t.id),
            stream,
            unchanged_ns: self.unchanged_ns(t),
            frames: frames.into(),
            awaits_tasks,
            decoded_delegates: decoded_delegates.into(),
            decode_note: decode_note.map(Arc::from),
            tokio_task: Some(self.tokio_task(t)),
            ..TaskView::decoded(key, state, root_type)
        };
        if live {
            view.searched = view.search_text();
        }
        view
    }

    /// Edges from join wakers: whoever awaits a listed task's `JoinHandle`, or polls the `JoinSet` it
    /// is in. An edge the agent already recorded stays as it is.
    pub(super) fn join_edges(&self, views: &mut [TaskView], decoder: Option<&Plan>) {
        let Some(d) = decoder else { return };
        let index: FastMap<u64, usize> = views.iter().enumerate().map(|(i, v)| (v.id, i)).collect();
        for &(t, key) in &self.tasks {
            let (w, in_set) = match (t.set_waker, t.join_waker) {
                (Some(w), _) => (w, true),
                (None, Some(w)) => (w, false),
                (None, None) => continue,
            };
            let awaiter = if Some(w.vtable) == d.tokio_vtable {
                self.refs.headers.get(&w.data)
            } else if Some(w.vtable) == d.owned_vtable {
                self.refs.cells.get(&w.data)
            } else {
                None
            };
            let (Some(&awaiter), Some(&awaited)) = (awaiter, index.get(&key)) else {
                continue;
            };
            let Some(&a) = index.get(&awaiter) else {
                continue;
            };
            if views[awaited].awaited_by.is_some() || a == awaited {
                continue;
            }
            if in_set
                && path_to(&views[a].frames, key).is_none()
                && let Some(f) =
                    join_set_frame(Arc::<Vec<FrameNode>>::make_mut(&mut views[a].frames))
            {
                f.awaits_tasks.push(key);
            }
            let path = path_to(&views[a].frames, key);
            if path.is_none() && !views[a].awaits_tasks.contains(&key) {
                views[a].awaits_tasks.push(key);
            }
            views[awaited].awaited_by = Some(AwaitedBy {
                task: awaiter,
                task_name: views[a].name.as_deref().map(str::to_owned),
                path: path.unwrap_or_default(),
            });
        }
    }

    /// Tasks that a decoded frame of another awaits (through a `JoinHandle` no join waker names, or a
    /// oneshot whose sender the other holds) and that nothing else names an awaiter of: that frame's
    /// task is their awaiter. The first such frame, in task order, wins.
    pub(super) fn frame_edges(views: &mut [TaskView]) {
        // Every (awaiting task, awaited key), found with one stack for all tasks.
        let mut edges: Vec<(usize, u64)> = Vec::new();
        let mut stack: Vec<&FrameNode> = Vec::new();
        for (a, v) in views.iter().enumerate() {
            stack.extend(v.frames.iter());
            while let Some(f) = stack.pop() {
                edges.extend(f.awaits_tasks.iter().map(|&key| (a, key)));
                stack.extend(f.children.iter());
            }
        }
        drop(stack);
        if edges.is_empty() {
            return;
        }
        let index: FastMap<u64, usize> = views.iter().enumerate().map(|(i, v)| (v.id, i)).collect();
        for (a, key) in edges {
            let Some(&b) = index.get(&key).filter(|&&b| b != a) else {
                continue;
            };
            if views[b].awaited_by.is_some() {
                continue;
            }
            views[b].awaited_by = Some(AwaitedBy {
                task: views[a].id,
                task_name: views[a].name.as_deref().map(str::to_owned),
                path: path_to(&views[a].frames, key).unwrap_or_default(),
            });
        }
    }

    pub(super) fn reports(
        &self,
        snap: &Snapshot,
        decoder: Option<&Plan>,
        decoding: &DecodingInfo,
    ) -> Vec<RuntimeView> {
        let why_not = || match decoder {
            Some(d) => d.runtime_note.clone(),
            None => Some(
                decoding
                    .note
                    .clone()
                    .unwrap_or_else(|| "chains not decoded".into()),
            ),
        };
        snap.runtimes
            .iter()
            .map(|r| {
                let not_listed = r.error.clone().or_else(|| {
                    let planned = decoder.is_some_and(|d| d.walk.runtime.is_some());
                    (!planned).then(why_not).flatten()
                });
                RuntimeView {
                    flavor: r.flavor.map(|f| {
                        match f {
                            RuntimeFlavor::CurrentThread => "current_thread",
                            RuntimeFlavor::MultiThread => "multi_thread",
                            RuntimeFlavor::LocalSet => "local_set",
                            RuntimeFlavor::Blocking => "blocking",
                        }
                        .to_owned()
                    }),
                    found_by: match r.source {
                        RuntimeSource::Registered => FoundBy::Registration,
                        RuntimeSource::Census => FoundBy::Census,
                    },
                    alive: r.alive,
                    listed: r.tasks.len(),
                    skipped: r.skipped,
                    not_listed,
                }
            })
            .collect()
    }
}

/// A task spawned as a boxed `dyn Future` (hyper-util's connection tasks, any executor's boxed
/// futures) is named by the future its walk found behind the vtable, its first frame, rather than
/// `Pin<Box<dyn Future>>`. One spawned as an adapter over a closure (`fut.map(…)`, `poll_fn(…)`,
/// `spawn_blocking`'s task) is named by the future it adapts, else by where its closure was written.
fn shown_root(root_type: Arc<str>, frames: &[FrameNode]) -> Arc<str> {
    let boxed_dyn = (root_type.starts_with("core::pin::Pin<alloc::boxed::Box<")
        || root_type.starts_with("alloc::boxed::Box<"))
        && root_type.contains("dyn ");
    let first = frames.first().filter(|f| f.meta.source != Source::Cut);
    if let (true, Some(first)) = (boxed_dyn, first) {
        return Arc::from(first.meta.name.as_str());
    }
    match crate::names::closure_named(&root_type) {
        Some(named) => match first.filter(|f| f.meta.source != Source::Awaitee) {
            Some(adapted) => Arc::from(adapted.meta.name.as_str()),
            None => Arc::from(named),
        },
        None => root_type,
    }
}

/// The one innermost frame polling a `JoinSet` (`JoinSet::join_next`, inside `join_all`, say), where
/// the set's members are awaited; `None` if no frame is, or frames in two branches are.
fn join_set_frame(frames: &mut [FrameNode]) -> Option<&mut FrameNode> {
    let path = join_set_path(frames).ok()??;
    let (first, rest) = path.split_first()?;
    let mut f = &mut frames[*first];
    for &i in rest {
        f = &mut f.children[i];
    }
    Some(f)
}

/// Child indexes down to the innermost `JoinSet` frame: `Ok(None)` if there is none, `Err` if two
/// branches hold one.
fn join_set_path(frames: &[FrameNode]) -> Result<Option<Vec<usize>>, ()> {
    let mut found = None;
    for (i, f) in frames.iter().enumerate() {
        let here = match join_set_path(&f.children)? {
            Some(mut below) => {
                below.insert(0, i);
                Some(below)
            }
            None if f.meta.name.starts_with("tokio::task::join_set::JoinSet::") => Some(vec![i]),
            None => None,
        };
        if here.is_some() {
            if found.is_some() {
                return Err(());
            }
            found = here;
        }
    }
    Ok(found)
}

/// Names from the root down to the frame that awaits task `key` (the awaiting leaf itself left out),
/// or `None` if no frame does.
pub(super) fn path_to(frames: &[FrameNode], key: u64) -> Option<Vec<String>> {
    for f in frames {
        if f.awaits_tasks.contains(&key) {
            return Some(match f.meta.source {
                super::Source::Awaitee => Vec::new(),
                _ => vec![f.meta.name.clone()],
            });
        }
        if let Some(mut below) = path_to(&f.children, key) {
            below.insert(0, f.meta.name.clone());
            return Some(below);
        }
    }
    None
}

/// tokio's task state word keeps a reference count above its six state bits (`REF_COUNT_SHIFT`),
/// one of which says the `JoinHandle` is alive (`JOIN_INTEREST`); the same from 1.32 (the oldest
/// tokio read) through 1.54.
const REF_SHIFT: u32 = 6;
const JOIN_INTEREST: u64 = 0b1000;

/// The references `word` counts beyond the task list's (every listed task has it: tokio's
/// `OwnedTasks` holds one) and its `JoinHandle`'s, while that is alive: its wakers, its
/// `AbortHandle`s, and a scheduled task's place in a run queue. 0 says no waker of it exists;
/// `None`, a count too small to be a listed task's (read as it was freed), says nothing.
pub(crate) fn other_refs(word: u64) -> Option<u64> {
    let join = u64::from(word & JOIN_INTEREST != 0);
    (word >> REF_SHIFT).checked_sub(1 + join)
}

#[cfg(test)]
mod tests {
    use super::other_refs;

    #[test]
    fn references_beyond_the_list_and_the_join_handle_are_wakers_or_abort_handles() {
        const REF: u64 = 1 << 6;
        // Idle, its JoinHandle alive, one waker kept by what it waits on.
        assert_eq!(other_refs((3 * REF) | 0b1000), Some(1));
        // Idle, its JoinHandle dropped, no waker anywhere: nothing can wake it.
        assert_eq!(other_refs(REF), Some(0));
        assert_eq!(other_refs((2 * REF) | 0b1000), Some(0));
        // Fewer references than a listed task has: a freed task's word, which says nothing.
        assert_eq!(other_refs(REF | 0b1000), None);
        assert_eq!(other_refs(0), None);
    }
}
