//! The futures the process's threads run through a `block_on` (found by
//! [`crate::threads::block_on`]), added to a built dump as tasks keyed by their thread ([`THREAD`]
//! and its id), after its tasks: their chains decoded as a listed task's are, the tasks they await told that
//! they are awaited, and the deadlocks found again with them.

use std::sync::Arc;

use crate::decode::TaskRefs;
use crate::model::values::Reading;
use crate::model::{AwaitedBy, Dump, State, THREAD, TaskView, derived_name, find_cycles};
use crate::plan::Plan;
use crate::threads::block_on::{Found, Root};

impl Dump {
    /// Adds the futures of `roots`, decoded with `decoder`, their frames carrying what `reading`
    /// asks for; with `live`, each gets what a live view uses (frame ids, search text).
    pub fn add_thread_futures(
        &mut self,
        roots: &[Root],
        decoder: &Plan,
        reading: &Reading,
        live: bool,
    ) {
        if roots.is_empty() {
            return;
        }
        let mut refs = TaskRefs::default();
        for t in &self.tasks {
            if let Some(k) = t.tokio_task {
                refs.headers.insert(k.header, t.id);
            }
        }
        let views: Vec<TaskView> = (roots.iter())
            .map(|r| view(r, decoder, &refs, reading, live))
            .collect();
        // Every (awaiting thread, awaited key), with the path to the frame that awaits it.
        let mut edges = Vec::new();
        for v in &views {
            let mut stack: Vec<&crate::model::FrameNode> = v.frames.iter().collect();
            let mut keys = v.awaits_tasks.clone();
            while let Some(f) = stack.pop() {
                keys.extend(&f.awaits_tasks);
                stack.extend(f.children.iter());
            }
            for k in keys {
                let path = super::runtime::path_to(&v.frames, k).unwrap_or_default();
                edges.push((v.id, v.name.clone(), k, path));
            }
        }
        self.snapshot.block_ons += views.len();
        self.tasks.extend(views);
        self.index = Default::default();
        for (by, name, awaited, path) in edges {
            let Some(i) = self.tasks.iter().position(|t| t.id == awaited) else {
                continue;
            };
            let t = &mut self.tasks[i];
            if t.awaited_by.is_none() {
                t.awaited_by = Some(AwaitedBy {
                    task: by,
                    task_name: name.as_deref().map(str::to_owned),
                    path,
                });
            }
        }
        self.deadlocks = find_cycles(&self.tasks);
    }
}

/// The task view of one thread's future.
fn view(r: &Root, decoder: &Plan, refs: &TaskRefs, reading: &Reading, live: bool) -> TaskView {
    let mut awaits_tasks = Vec::new();
    let (mut frames, decoded_delegates, note, state) = match &r.found {
        Found::Walked(walk @ asyncdump_walker::Walk::Nodes { nodes, .. }) => {
            let (frames, delegates) = decoder.merge(nodes, &[], &mut awaits_tasks, refs, reading);
            (frames, delegates, Plan::note(walk), State::Idle)
        }
        Found::Walked(walk) => (Vec::new(), Vec::new(), Plan::note(walk), State::Idle),
        Found::Polled => (Vec::new(), Vec::new(), None, State::Running),
        Found::Missing(why) => (
            Vec::new(),
            Vec::new(),
            Some(format!("its future not read: {why}")),
            State::Idle,
        ),
    };
    if live {
        crate::model::assign_frame_ids(&mut frames);
    }
    // A `Pin<&mut dyn Future>` (what `#[tokio::test]` runs) says less than the future behind it.
    let root_type: Arc<str> = match frames.first() {
        Some(f) if r.future.contains("dyn core::future::future::Future") => {
            Arc::from(f.meta.name.as_str())
        }
        _ => Arc::from(crate::names::display_name(&r.future).as_str()),
    };
    let name = r.thread.as_deref().map(Arc::from);
    let derived = match name {
        Some(_) => None,
        None => Some(Arc::from(&*derived_name(&frames, &root_type))),
    };
    use crate::names::code::{Says, blocking_call_of, says};
    let block_on = match (says(&r.function), blocking_call_of(&root_type)) {
        // tokio's `block_on` running one of tokio's own futures: a `blocking_*` call.
        (Some(Says::BlockOn(api)), Some(call)) if api.starts_with("tokio::") => Arc::from(call),
        (Some(Says::BlockOn(api)), _) => Arc::from(api),
        _ => Arc::from(crate::names::path_of(&r.function).as_str()),
    };
    let mut view = TaskView {
        name,
        derived_name: derived,
        request: None,
        sockets: Vec::new(),
        frames: frames.into(),
        awaits_tasks,
        decoded_delegates: decoded_delegates.into(),
        decode_note: note.map(Arc::from),
        block_on: Some(block_on),
        ..TaskView::decoded(THREAD | u64::from(r.tid), state, root_type)
    };
    if live {
        view.searched = view.search_text();
    }
    view
}
