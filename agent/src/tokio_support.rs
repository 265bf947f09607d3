//! tokio integration (feature `tokio`): [`spawn`] / [`spawn_named`] register the task, and the returned
//! [`JoinHandle`] records the cross-task edge while it is awaited.
//!
//! The edge lives in the *awaited* task's cell (`awaited_by`: awaiting task and frame), written whenever a
//! poll of the handle returns `Pending` and cleared when it completes or is dropped. The handle itself holds
//! no intrusive state, so it stays `Unpin` and can be moved and polled by reference like tokio's.

use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};

use crate::task::{Instrumented, TaskCell, mark_changed, polling_frame};

/// Spawns `fut` on the current tokio runtime as an asyncdump task; the caller's location is its spawn site.
#[track_caller]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_inner(None, Location::caller(), fut)
}

/// Like [`spawn`], with a task name shown in dumps.
#[track_caller]
pub fn spawn_named<F>(name: impl Into<String>, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_inner(Some(name.into().into_boxed_str()), Location::caller(), fut)
}

fn spawn_inner<F>(
    name: Option<Box<str>>,
    at: &'static Location<'static>,
    fut: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let fut = Instrumented::new(name, at, fut);
    let task = fut.cell().clone();
    JoinHandle {
        inner: tokio::spawn(fut),
        task,
    }
}

/// tokio's `JoinHandle`, plus the cross-task edge while it is awaited.
pub struct JoinHandle<T> {
    inner: tokio::task::JoinHandle<T>,
    task: Arc<TaskCell>,
}

impl<T> JoinHandle<T> {
    /// The agent's id of the task this handle joins.
    pub fn task_id(&self) -> u64 {
        self.task.id
    }
    pub fn abort(&self) {
        self.inner.abort();
    }
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    fn clear_edge(&self) {
        if self.task.awaited_by_task.swap(0, Relaxed) != 0 {
            mark_changed(&self.task);
        }
        self.task.awaited_by_frame.store(0, Relaxed);
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = Pin::new(&mut self.inner).poll(cx);
        match out.is_pending().then(polling_frame).flatten() {
            Some((awaiter, frame)) => {
                // Frame first, task second: the snapshot reads the task id first and tolerates a frame
                // id that does not (any more) exist in the awaiting task.
                let t = &self.task;
                if t.awaited_by_task.load(Relaxed) != awaiter
                    || t.awaited_by_frame.load(Relaxed) != frame
                {
                    t.awaited_by_frame.store(frame, Relaxed);
                    t.awaited_by_task.store(awaiter, Relaxed);
                    mark_changed(t);
                }
            }
            None => self.clear_edge(),
        }
        out
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        self.clear_edge();
    }
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("task_id", &self.task.id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use asyncdump_protocol::agent_names as names;

    #[test]
    fn the_inspector_finds_the_join_handle_by_the_names_in_the_protocol() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _in_runtime = rt.enter();
        let handle = spawn(async {});
        let ty = std::any::type_name_of_val(&handle);
        assert!(ty.starts_with(&format!("{}<", names::JOIN_HANDLE)), "{ty}");
        let [_, task] = field_names!(handle, JoinHandle { inner, task });
        assert_eq!(task, names::JOIN_HANDLE_TASK);
    }
}
