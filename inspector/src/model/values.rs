//! The values a suspended frame holds: each local that lives across its await ([`Local`]), as data
//! ([`Value`]), which `--json` writes as it is and the text view formats.
//!
//! A value is read from a process that may keep running, so every value may also be
//! [`Value::Unreadable`] (its memory could not be read) or [`Value::Changed`] (the frame moved to
//! another await while it was read). Nothing here is a guess: a type with no known shape is
//! [`Value::Opaque`], its type name and address.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One local of a suspended frame: written as `{ "name", "type", "value" }`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "LocalFields")]
pub struct Local {
    /// Its name and type, shared by every local read at its place in its future's type.
    pub info: Arc<LocalInfo>,
    pub value: Value,
}

/// What the locals read at one place of one future type have in common. Shared, as a frame's
/// [`FrameInfo`](crate::model::FrameInfo) is: a dump of 10,000 tasks holds 150,000 locals.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LocalInfo {
    /// As in the source.
    pub name: Arc<str>,
    /// Its type, shortened.
    pub type_name: Arc<str>,
    /// For a lock guard: the await that took it (kept for the wait graph, not written).
    pub acquired: Option<crate::model::Loc>,
}

impl Local {
    /// A local of its own (not one of a future type's places, whose info is shared).
    pub fn new(name: impl Into<Arc<str>>, type_name: impl Into<Arc<str>>, value: Value) -> Local {
        let info = LocalInfo {
            name: name.into(),
            type_name: type_name.into(),
            acquired: None,
        };
        Local {
            info: Arc::new(info),
            value,
        }
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    pub fn type_name(&self) -> &str {
        &self.info.type_name
    }
}

impl Serialize for Local {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Local", 3)?;
        st.serialize_field("name", &*self.info.name)?;
        st.serialize_field("type", &*self.info.type_name)?;
        st.serialize_field("value", &self.value)?;
        st.end()
    }
}

/// [`Local`] as written.
#[derive(Deserialize)]
struct LocalFields {
    name: Arc<str>,
    #[serde(rename = "type")]
    type_name: Arc<str>,
    value: Value,
}

impl From<LocalFields> for Local {
    fn from(f: LocalFields) -> Local {
        Local::new(f.name, f.type_name, f.value)
    }
}

/// A socket a task waits to read or write through tokio's I/O driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskSocket {
    pub fd: i64,
    /// As `/proc` tells it: `tcp 127.0.0.1:7001 ↔ 127.0.0.1:51234`.
    pub socket: String,
    /// For a connection accepted from a listener of the process: the client's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    pub read: bool,
    pub write: bool,
}

/// The HTTP/2 stream a task serves (hyper's `H2Stream`: a server's request) or awaits the response
/// of (h2's `ResponseFuture`: a client's), read from h2's reference to it (see
/// `Plan::h2_stream`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stream {
    /// The stream's id: odd for a stream the client opened.
    pub id: u32,
    /// The address of the connection's shared state: streams with the same one are on one
    /// connection. 0 where it was not read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connection: u64,
    /// The task that drives the connection (hyper's connection task), where the connection's state
    /// keeps its waker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_task: Option<u64>,
    /// The connection task's socket, from a live process's I/O driver (see `TaskView::sockets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<TaskSocket>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A stream a connection's task drives, and the task that serves it (see [`Stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServedStream {
    pub id: u32,
    pub task: u64,
}

/// Ties each task serving an HTTP/2 stream to the task driving its connection: the connection's
/// task gets the streams it drives (by stream id). A stream whose connection names no task is
/// tied to the task another stream of the same connection named.
pub fn link_streams(tasks: &mut [super::TaskView]) {
    let mut by_connection: super::FastMap<u64, u64> = super::FastMap::default();
    for t in tasks.iter() {
        if let Some(s) = t.stream.as_ref().filter(|s| s.connection != 0)
            && let Some(c) = s.connection_task
        {
            by_connection.entry(s.connection).or_insert(c);
        }
    }
    let mut served: super::FastMap<u64, Vec<ServedStream>> = super::FastMap::default();
    for t in tasks.iter_mut() {
        let id = t.id;
        let Some(s) = t.stream.as_mut() else { continue };
        if s.connection_task.is_none() {
            s.connection_task = by_connection.get(&s.connection).copied();
        }
        if let Some(c) = s.connection_task.filter(|&c| c != id) {
            served
                .entry(c)
                .or_default()
                .push(ServedStream { id: s.id, task: id });
        }
    }
    for t in tasks.iter_mut() {
        if let Some(mut streams) = served.remove(&t.id) {
            streams.sort_unstable_by_key(|s| s.id);
            t.serves = streams;
        }
    }
}

/// The HTTP request a task serves, as far as its frames hold it: `POST /order?id=42`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The URI's path and query, at most [`crate::values::MAX_TEXT`] bytes of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// The request a chain's frames hold (an `http` request head, its URI, its method, read into a
/// [`Value::Http`]), outermost first: the first target found, with the first method. `None`
/// where no frame holds a target.
pub fn request_of(frames: &[super::FrameNode]) -> Option<Request> {
    let (mut method, mut target) = (None, None);
    let mut stack: Vec<&super::FrameNode> = frames.iter().rev().collect();
    while let Some(f) = stack.pop() {
        for l in &f.locals {
            let mut v = &l.value;
            while let Value::Pointer { to, .. } = v {
                v = to;
            }
            if let Value::Http {
                method: m,
                target: t,
            } = v
            {
                method = method.or_else(|| m.clone());
                target = target.or_else(|| t.clone());
            }
        }
        if method.is_some() && target.is_some() {
            break;
        }
        stack.extend(f.children.iter().rev());
    }
    target.is_some().then_some(Request { method, target })
}

/// What a leaf future waits for, decoded: its kind, and the parts read to say so (each a value,
/// named: a sleep's `deadline`; a semaphore acquire's `wanted` permits and `semaphore`, whose value
/// holds its free permits, whether it is closed, and the waiter's place in its queue).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WaitOn {
    pub kind: WaitKind,
    pub parts: Vec<Local>,
    /// For a lock: the tasks' frames found holding it. None found while it is taken, and no static
    /// either: it is held where asyncdump does not look (a thread's stack, a value on the heap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<super::waits::Holder>,
    /// The program's statics found holding it: holders that are no task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statics: Vec<super::waits::StaticHolder>,
    /// The program's threads found holding it in a local on their stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<super::waits::ThreadHolder>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// `tokio::time::Sleep` (and so `sleep`, `interval`, `timeout`'s timer).
    Sleep,
    /// tokio's semaphore `Acquire`, under a `Mutex`, an `RwLock`, a `Semaphore` or a bounded
    /// channel's send: `lock` names which, from the frame that awaits it.
    Permits { lock: Arc<str> },
    /// A read or write of a file descriptor (part `fd`) and, where the process's `/proc` says, the
    /// socket it is (part `socket`: `proto`, `local`, `peer`, `queued` bytes in the direction waited on).
    Io { write: bool },
    /// A tokio `mpsc` receive: part `channel`, as a bounded send's is (`addr`, `capacity` if bounded,
    /// `queued` messages, `senders` alive, `receiver_alive`).
    Receive,
    /// A `Notify`'s `notified()`: part `notify` (`addr`, `state`: `empty`, `waiting` or
    /// `notified`, `queued` waiters and this one's `position`, `notified`: this waiter was).
    Notify,
    /// A `watch` receiver's `changed()`: part `watch` (`addr`, `state`: the version shifted left
    /// one, the low bit set once its senders are gone, `senders` alive, the version `seen`, as
    /// `state` keeps it).
    Watch,
    /// A `broadcast` receive: part `broadcast` (`addr`, `next` position to read, `tail` position
    /// next written, `mask`: the capacity less one, `closed`, `senders`, `receivers`).
    Broadcast,
    /// A `Barrier`'s `wait()`: part `barrier` (`addr`, `arrived`, `n` to arrive).
    Barrier,
    /// A listener's `accept()`: part `fd` and, where the process's `/proc` says, part `socket`
    /// (`queued`: connections waiting to be accepted).
    Accept,
}

impl WaitKind {
    /// Whether what it waits for can be held by a frame, which the wait graph then names: a lock's
    /// or a semaphore's permits (by guards), a channel's send or receive (by its other ends).
    pub fn may_be_held(&self) -> bool {
        matches!(self, WaitKind::Permits { .. } | WaitKind::Receive)
    }
}

impl WaitOn {
    /// The part named `name`.
    pub fn part(&self, name: &str) -> Option<&Value> {
        self.parts
            .iter()
            .find(|p| p.name() == name)
            .map(|p| &p.value)
    }
}

/// A named part of a value: a struct's field, an enum variant's payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    pub name: Arc<str>,
    pub value: Value,
}

/// A value as data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Bool(bool),
    Int(i64),
    Uint(u64),
    /// Its IEEE bits (`f64`; an `f32` widened), so that values compare and hash.
    Float(FloatBits),
    /// A `char`; a word that is no `char` is [`Value::Unreadable`].
    Char(char),
    /// `String` and `&str`: the text read (at most a bounded prefix) and the length the value states.
    Str {
        text: String,
        len: u64,
    },
    /// `Vec`, slices: the stated length and the first few items.
    Seq {
        len: u64,
        items: Vec<Value>,
    },
    /// An enum's variant (`Option`, `Result`, ...) and its payload.
    Variant {
        name: Arc<str>,
        fields: Vec<Field>,
    },
    /// A structure or tuple of the program's, field by field. `type_name` is empty for a tuple.
    Struct {
        type_name: Arc<str>,
        fields: Vec<Field>,
    },
    /// `Box`, `&`, `Arc`, `Rc`: where it points, the counts of a counted pointer, and the pointee.
    Pointer {
        kind: PointerKind,
        addr: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strong: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weak: Option<u64>,
        to: Box<Value>,
    },
    Duration {
        secs: u64,
        nanos: u32,
    },
    /// A monotonic instant; `age_ns` is how long before the snapshot it was (negative: after it),
    /// absent when the snapshot has no clock to compare with (a core file).
    Instant {
        monotonic_ns: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        age_ns: Option<i64>,
    },
    /// An IP socket address, as `127.0.0.1:8080` or `[::1]:8080`.
    SocketAddr(String),
    /// What names an HTTP request (an `http` request head, its URI or its method): its method
    /// (`POST`) and its target, the URI's path and query (`/order?id=42`), each where read.
    Http {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        method: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A type asyncdump has no shape for (or the limits left unread): its short name and address.
    Opaque {
        type_name: Arc<str>,
        addr: u64,
    },
    /// A raw pointer: its address only.
    Address(u64),
    /// A tokio `mpsc` sender or receiver: the channel it is an end of, by the address a wait on
    /// the channel names.
    Endpoint {
        sender: bool,
        addr: u64,
        // Boxed, as the rare parts of `Guard`: every value is as large as the largest variant.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within: Option<Box<Within>>,
    },
    /// A tokio lock guard or permit: the lock it holds (`Mutex`, `RwLock`, `Semaphore`; `write` for a
    /// write guard), by its semaphore's address, the one a waiter's acquire names.
    Guard {
        lock: Arc<str>,
        write: bool,
        addr: u64,
        /// Where the guard lies inside a future the local holds (a state machine value, not
        /// awaited from this frame): the outermost such future.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        within: Option<Box<Within>>,
        /// Where it was taken, for a guard inside such a future (a local's own is the local's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        acquired_at: Option<Box<crate::model::Loc>>,
    },
    /// Its memory could not be read.
    Unreadable,
    /// The frame moved on while it was read: not shown, since it may be torn.
    Changed,
    /// Not read: a limit of depth, length or total size was reached.
    Cut,
    /// Not read yet: the reading stage fills these in, and none is left in a finished dump.
    #[serde(skip)]
    Unread {
        shape: u32,
        addr: u64,
        check: Check,
    },
}

/// A future held as a value, in which a guard was found: its address, and the await it is stopped at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Within {
    pub addr: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<crate::model::Loc>,
}

/// How a frame's locals are checked after they are read: its state at `addr` (`size` bytes) must
/// still be `expected`, or every local of it is [`Value::Changed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Check {
    pub addr: u64,
    pub size: u8,
    pub expected: u64,
}

impl Value {
    /// The instant a deadline holds: itself, or (an interval's) the one it leads to through its
    /// pointers and fields.
    pub fn instant(&self) -> Option<&Value> {
        match self {
            Value::Instant { .. } => Some(self),
            Value::Pointer { to, .. } => to.instant(),
            Value::Struct { fields, .. } => fields.iter().find_map(|f| f.value.instant()),
            _ => None,
        }
    }

    /// Text read whole (its stated length is its own).
    pub fn text(t: impl Into<String>) -> Value {
        let text = t.into();
        Value::Str {
            len: text.len() as u64,
            text,
        }
    }

    /// Field `name` of a structure or variant.
    pub fn field(&self, name: &str) -> Option<&Value> {
        let (Value::Struct { fields, .. } | Value::Variant { fields, .. }) = self else {
            return None;
        };
        fields.iter().find(|f| &*f.name == name).map(|f| &f.value)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointerKind {
    Box,
    Ref,
    Arc,
    Rc,
}

/// An `f64` kept as its bits; written and read as a JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FloatBits(pub u64);

impl FloatBits {
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl Serialize for FloatBits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.get();
        // JSON has no NaN or infinity: those are written as text.
        match v.is_finite() {
            true => s.serialize_f64(v),
            false => s.serialize_str(&v.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for FloatBits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Num(f64),
            Text(String),
        }
        let v = match Either::deserialize(d)? {
            Either::Num(v) => v,
            Either::Text(t) => t.parse().map_err(serde::de::Error::custom)?,
        };
        Ok(FloatBits(v.to_bits()))
    }
}

/// What decoded frames carry unread for the values stage: the locals wanted, and whether leaves
/// carry what they wait for (a one-off dump's, which the values stage then reads; not a live view's
/// through the agent, which reads no memory after its updates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    pub locals: Wanted,
    pub targets: bool,
    /// Every thread's native stack (`--threads`), not only those of threads inside a task's poll.
    pub threads: bool,
}

/// Which locals a dump reads: none (the default), every one (`-v`), or those named (`--fields`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Wanted {
    #[default]
    None,
    All,
    Named(Vec<String>),
}

impl Wanted {
    pub fn any(&self) -> bool {
        *self != Wanted::None
    }

    pub fn wants(&self, name: &str) -> bool {
        match self {
            Wanted::None => false,
            Wanted::All => true,
            Wanted::Named(names) => names.iter().any(|n| n == name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The connection's task drives the streams that name it, in stream order; a stream whose
    /// connection keeps no waker (the connection's task was woken and has not run since) is tied
    /// through another stream of the same connection; one on a connection no stream names a task
    /// of stays untied.
    #[test]
    fn streams_are_tied_to_the_task_driving_their_connection() {
        use crate::model::{State, TaskView};
        let task = |id: u64, stream: Option<(u32, u64, Option<u64>)>| TaskView {
            stream: stream.map(|(id, connection, connection_task)| Stream {
                id,
                connection,
                connection_task,
                socket: None,
            }),
            ..TaskView::decoded(id, State::Idle, "H2Stream".into())
        };
        let mut tasks = vec![
            task(1, None),
            task(5, Some((3, 0xc0, Some(1)))),
            task(4, Some((1, 0xc0, None))),
            task(6, Some((1, 0xd0, None))),
        ];
        link_streams(&mut tasks);
        let served: Vec<(u32, u64)> = tasks[0].serves.iter().map(|s| (s.id, s.task)).collect();
        assert_eq!(served, [(1, 4), (3, 5)]);
        assert_eq!(tasks[2].stream.as_ref().unwrap().connection_task, Some(1));
        assert_eq!(tasks[3].stream.as_ref().unwrap().connection_task, None);
    }

    #[test]
    fn a_chains_request_is_the_first_target_its_frames_hold_with_the_first_method() {
        use crate::model::{FrameInfo, FrameNode, Source};
        let http = |method: Option<&str>, target: Option<&str>| Value::Http {
            method: method.map(str::to_owned),
            target: target.map(str::to_owned),
        };
        let frame = |locals: Vec<Local>, children| FrameNode {
            id: 0,
            meta: std::sync::Arc::new(FrameInfo::new("f".into(), None, Source::Decoded)),
            awaits_tasks: Vec::new(),
            locals,
            waits_on: None,
            holds: Vec::new(),
            walked_within: Vec::new(),
            children,
        };
        let inner = frame(
            vec![Local::new("uri", "Uri", http(None, Some("/inner")))],
            Vec::new(),
        );
        let outer = frame(
            vec![
                Local::new("method", "Method", http(Some("GET"), None)),
                Local::new("uri", "Uri", http(None, Some("/orders?id=1"))),
            ],
            vec![inner],
        );
        let got = request_of(&[outer]).unwrap();
        assert_eq!(
            (got.method.as_deref(), got.target.as_deref()),
            (Some("GET"), Some("/orders?id=1"))
        );
        // A method alone names no request.
        let alone = frame(
            vec![Local::new("m", "Method", http(Some("GET"), None))],
            vec![],
        );
        assert!(request_of(&[alone]).is_none());
    }

    #[test]
    fn a_value_is_written_as_data_not_text() {
        let local = Local::new(
            "user",
            "Option<String>",
            Value::Variant {
                name: "Some".into(),
                fields: vec![Field {
                    name: "0".into(),
                    value: Value::Str {
                        text: "alice".into(),
                        len: 5,
                    },
                }],
            },
        );
        let json = serde_json::to_string(&local).unwrap();
        assert_eq!(
            json,
            r#"{"name":"user","type":"Option<String>","value":{"variant":{"name":"Some","fields":[{"name":"0","value":{"str":{"text":"alice","len":5}}}]}}}"#
        );
        assert_eq!(serde_json::from_str::<Local>(&json).unwrap(), local);
    }

    #[test]
    fn floats_are_numbers_and_non_finite_ones_text() {
        let v = |f: f64| serde_json::to_string(&Value::Float(FloatBits(f.to_bits()))).unwrap();
        assert_eq!(v(1.5), r#"{"float":1.5}"#);
        assert_eq!(v(f64::INFINITY), r#"{"float":"inf"}"#);
        let back: Value = serde_json::from_str(r#"{"float":"NaN"}"#).unwrap();
        assert!(matches!(back, Value::Float(b) if b.get().is_nan()));
    }

    #[test]
    fn fields_choose_locals_by_name() {
        let w = Wanted::Named(vec!["id".into()]);
        assert!(w.wants("id") && !w.wants("name"));
        assert!(Wanted::All.wants("name") && !Wanted::None.wants("name"));
    }

    #[test]
    fn a_value_stays_small_since_every_local_of_a_dump_holds_one() {
        // The rare parts (where a guard lies, where it was taken) are boxed to keep it so.
        assert!(std::mem::size_of::<Value>() <= 56);
        assert!(std::mem::size_of::<Local>() <= 64);
    }
}

/// A local of a function on a thread's stack, as the values stage reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadLocal {
    pub tid: u32,
    pub thread: Option<String>,
    pub function: String,
    pub declared: Option<super::Loc>,
    pub local: Local,
}
