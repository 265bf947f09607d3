//! h2's types: the reference to one HTTP/2 stream that hyper's `H2Stream` (a server's request
//! task) and h2's `ResponseFuture` (a client's request) hold. Read, never shown: the stream's id,
//! the connection its state is in, and the waker of the task that drives that connection, so that
//! a request's task is tied to its connection's.

use asyncdump_protocol::{Discr, Edge, EdgeTarget, TypePlan};

use super::{Rule, Verdict, inline};
use crate::plan::Kind;
use crate::plan::builder::Builder;

/// `h2::proto::streams::streams::OpaqueStreamRef { inner: Arc<Mutex<Inner>>, key: Key }`: its key
/// holds the stream's id (`Key { index, stream_id: StreamId(u32) }`); `inner` leads to the state of
/// every stream of the connection, whose `actions.task` is the waker of the connection's task (set
/// each time that task has flushed what the streams gave it, which is how an idle connection
/// waits). A layout other than this is declined: the type is then state, as before.
pub(super) const STREAM_REF: Rule = Rule {
    name: "h2 stream reference",
    matches: |t| t.name == "h2::proto::streams::streams::OpaqueStreamRef",
    plan: |b, t| match b.h2_stream_ref(t.die, t.size) {
        Some(plan) => Verdict::Plan(plan, Kind::H2Stream),
        None => Verdict::Decline,
    },
};

impl Builder<'_> {
    fn h2_stream_ref(&mut self, die: u64, size: u32) -> Option<TypePlan> {
        let (key_at, key) = self.member(die, &["key"])?;
        let (id_at, id) = self.member(self.strip(key), &["stream_id"])?;
        let (word_at, word) = self.member(self.strip(id), &["__0"])?;
        if self.debug.node(self.strip(word))?.byte_size? != 4 {
            return None;
        }
        let (ptr, shared) = self.pointer_to(die, "inner")?;
        let connection = self.h2_connection(shared)?;
        Some(TypePlan {
            size,
            discr: Some(Discr {
                offset: u32::try_from(key_at + id_at + word_at).ok()?,
                size: 4,
            }),
            always: vec![Edge {
                offset: u32::try_from(ptr).ok()?,
                to: EdgeTarget::Pointer(connection),
            }],
            cases: Vec::new(),
        })
    }

    /// The view of `ArcInner<Mutex<Inner>>` (`shared`) that reads the connection task's waker:
    /// `data` (the mutex), its `data` (an `UnsafeCell`), its `value` (h2's `Inner`), then
    /// `actions.task`, an `Option<Waker>` (a null vtable is `None`).
    fn h2_connection(&mut self, shared: u64) -> Option<u32> {
        let mut at = 0;
        let mut ty = shared;
        for field in ["data", "data", "value", "actions", "task"] {
            let (off, next) = self.member(self.strip(ty), &[field])?;
            at += off;
            ty = next;
        }
        let vtable = at + self.find_member(ty, "vtable", 8)?;
        let data = at + self.find_member(ty, "data", 8)?;
        let vt = self.synthetic(vtable, Kind::WakerVtable);
        let waker = self.synthetic(data, Kind::WakerData);
        let view = self.types.len() as u32;
        self.types.push(TypePlan {
            size: u32::try_from(vtable.max(data) + 8).ok()?,
            discr: None,
            always: vec![inline(0, vt), inline(0, waker)],
            cases: Vec::new(),
        });
        self.kinds.push(Kind::H2Connection);
        Some(view)
    }
}
