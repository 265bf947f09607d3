//! The poll path: everything that runs when a task or a frame is polled, and the only code in the agent
//! that touches raw task memory (intrusive frame nodes, task cells behind raw pointers, raw wakers).
//!
//! - `cell`: a task's bookkeeping ([`TaskCell`]), its lock and the registry of tasks.
//! - `frame`: intrusive frame nodes ([`Framed`]), linked under the frame that polls them, and the copy
//!   of a task's tree that a snapshot takes under the task's lock ([`ReadLock::copy_frames`]).
//! - `instrument`: the task's root future wrapper ([`Instrumented`]) that takes the lock for each poll.
//! - `waker`: the waker a poll lends, and the delegate a leaf that keeps it records.
//! - `changes`: the log of tasks that changed, read by live subscriptions.
//!
//! The five depend on one another (a cell holds its root frame, a frame points at its cell, a poll marks
//! its cell changed): they are one unit, and the module-cycle check treats this folder as one node.
//! Everything outside reaches it through the safe items re-exported here.

mod cell;
mod changes;
mod frame;
mod instrument;
mod waker;

pub use cell::{COMPLETED_RETAINED, MAX_COMPLETED_RETAINED};
pub(crate) use cell::{ReadLock, TaskCell, registry, set_completed_retained};
pub(crate) use changes::Subscriber;
#[cfg(feature = "tokio")]
pub(crate) use changes::mark as mark_changed;
#[cfg(feature = "tokio")]
pub(crate) use frame::polling_frame;
pub use frame::{Framed, Label, MAX_FRAMES_PER_TASK, MetaSlot};
pub(crate) use frame::{RawFrame, Source};
#[doc(hidden)]
pub use instrument::__private;
pub use instrument::{FrameExt, Instrumented, instrument, instrument_named};
