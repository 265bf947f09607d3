//! tokio's types: `JoinHandle`, a task's stage, `oneshot::Receiver` (and the `Sender`s state machines
//! hold), the futures behind `tokio::join!` and `tokio::select!`, and `tokio::time::timeout`.

use std::sync::Arc;

use asyncdump_protocol::{Case, Discr, Edge, EdgeTarget, TypePlan};
use gimli::constants;

use super::std::member;
use super::{Rule, Verdict, combinator, inline, plan};
use crate::model::{FrameInfo, Source};
use crate::names::short_type;
use crate::plan::Kind;
use crate::plan::builder::{Builder, enum_plan};

/// tokio's `JoinHandle<T>`: a leaf whose child reads the joined task's header pointer (a cross-task
/// edge to a listed runtime task).
pub(super) const JOIN_HANDLE: Rule = Rule {
    name: "tokio::task::JoinHandle",
    matches: |t| {
        t.name
            .starts_with("tokio::runtime::task::join::JoinHandle<")
    },
    plan: |b, t| {
        let name = short_type(&t.name.replacen("runtime::task::join::", "task::", 1));
        let info = Arc::new(FrameInfo::awaitee(name));
        match b.header_path(t.die) {
            Some(edge) => Verdict::Plan(plan(t.size, vec![edge]), Kind::JoinHandle(info)),
            None => Verdict::Plan(TypePlan::default(), Kind::Leaf(info)),
        }
    },
};

/// A runtime task's stage: the future while it runs (`Running`), then its output.
pub(super) const TASK_STAGE: Rule = Rule {
    name: "tokio task stage",
    matches: |t| t.name.starts_with("tokio::runtime::task::core::Stage<"),
    plan: |b, t| {
        let Some((discr, variants)) = b.variants(t.die) else {
            return Verdict::Leaf;
        };
        let values: Vec<Option<u64>> = variants.iter().map(|v| v.0).collect();
        let cases: Vec<Case> = variants
            .into_iter()
            .filter(|v| v.1 == "Running")
            .filter_map(|(value, _, vdie, voff)| {
                let (off, ty) = b.member(vdie, &["__0"])?;
                let edges = vec![inline(voff + off, b.ty(ty))];
                Some(Case { value, edges })
            })
            .collect();
        Verdict::Plan(enum_plan(t.size, discr, cases, &values), Kind::Transparent)
    },
};

/// `oneshot::Receiver<T>`: a leaf whose channel state and registered waker are read, to say whose
/// waker it holds and whether a value was already sent.
pub(super) const ONESHOT_RECEIVER: Rule = Rule {
    name: "tokio::sync::oneshot::Receiver",
    matches: |t| t.name.starts_with("tokio::sync::oneshot::Receiver<"),
    plan: |b, t| {
        let info = Arc::new(FrameInfo::awaitee(short_type(&t.name)));
        match b.oneshot_path(t.die) {
            Some(edge) => Verdict::Plan(plan(t.size, vec![edge]), Kind::Oneshot(info)),
            None => Verdict::Plan(TypePlan::default(), Kind::Leaf(info)),
        }
    },
};

/// `tokio::join!` / `tokio::select!`: a `PollFn` whose closure holds (a pointer to) the tuple of
/// branches, and for `select!` the mask of disabled branches. Before 1.39 tokio's macros use its own
/// `PollFn`, with the same field.
pub(super) const JOIN_OR_SELECT: Rule = Rule {
    name: "tokio::join! / tokio::select!",
    matches: |t| {
        t.name.starts_with("core::future::poll_fn::PollFn<")
            || t.name.starts_with("tokio::future::poll_fn::PollFn<")
    },
    plan: |b, t| {
        let Some((f_off, closure)) = member(t, &["f"]) else {
            return Verdict::Leaf;
        };
        let closure = b.strip(closure);
        let caps = b.members(closure);
        let field = |names: [&str; 2]| {
            caps.iter()
                .find(|m| names.contains(&m.0.as_str()))
                .map(|m| (m.1, m.2))
        };
        let Some((off, ty)) = field(["futures", "_ref__futures"]) else {
            return Verdict::Leaf;
        };
        let disabled = field(["disabled", "_ref__disabled"]);
        let label = if disabled.is_some() {
            "tokio::select!"
        } else {
            "tokio::join!"
        };
        let info = Arc::new(FrameInfo::new(label.into(), None, Source::Decoded));
        // The mask first: the walk then reaches it before the branches, which sit deeper.
        let mut edges: Vec<Edge> = disabled
            .and_then(|(m_off, m_ty)| b.mask(f_off + m_off, m_ty))
            .into_iter()
            .collect();
        edges.push(inline(f_off + off, b.ty(ty)));
        let kind = match disabled {
            Some(_) => Kind::Select(info),
            None => Kind::Combinator(info),
        };
        Verdict::Plan(plan(t.size, edges), kind)
    },
};

/// `tokio::time::timeout`: shown as its own line over the future it times.
pub(super) const TIMEOUT: Rule = Rule {
    name: "tokio::time::timeout",
    matches: |t| t.name.starts_with("tokio::time::timeout::Timeout<"),
    plan: |b, t| combinator(b, t, "value", "tokio::time::timeout"),
};

impl Builder<'_> {
    /// The edge to a `select!`'s `disabled` mask, captured at `offset` by value or by reference.
    fn mask(&mut self, offset: u64, ty: u64) -> Option<Edge> {
        let node = self.debug.node(self.strip(ty))?;
        let (pointer, size) = match node.tag {
            constants::DW_TAG_pointer_type | constants::DW_TAG_reference_type => {
                let pointee = self.debug.node(self.strip(node.type_ref?))?;
                (true, pointee.byte_size?)
            }
            _ => (false, node.byte_size?),
        };
        if !matches!(size, 1 | 2 | 4 | 8) {
            return None;
        }
        let t = self.synthetic_sized(0, size as u8, Kind::SelectMask);
        let to = if pointer {
            EdgeTarget::Pointer(t)
        } else {
            EdgeTarget::Inline(t)
        };
        Some(Edge {
            offset: offset as u32,
            to,
        })
    }

    /// In `tokio::sync::oneshot::Receiver`: `inner: Option<Arc<Inner>>` → `Inner { state, rx_task }`,
    /// where `rx_task` holds a `Waker { data, vtable }`. Returns the edge to a view of `Inner` whose
    /// discriminant is the state word, with children for the waker's vtable and data pointer, read from
    /// the same copy: one read per receiver. (The state word changes under the read as the sender acts;
    /// `rx_task` only changes when the receiving task, which holds still meanwhile, polls it.)
    fn oneshot_path(&mut self, die: u64) -> Option<Edge> {
        let (ptr_off, arc_inner) = self.pointer_to(die, "inner")?;
        let (data_off, inner) = self.member(arc_inner, &["data"])?;
        let inner = self.strip(inner);
        let (state_off, _) = self.member(inner, &["state"])?;
        let (rx_off, rx_ty) = self.member(inner, &["rx_task"])?;
        let vtable_off = self.find_member(rx_ty, "vtable", 8)?;
        let waker_data_off = self.find_member(rx_ty, "data", 8)?;
        let base = data_off + rx_off;
        let vt = self.synthetic(base + vtable_off, Kind::WakerVtable);
        // The data pointer of an asyncdump waker is `Arc::<TaskCell>::into_raw`: the cell itself.
        let data = self.synthetic(base + waker_data_off, Kind::WakerData);
        let size = self.debug.node(arc_inner)?.byte_size?;
        let view = self.types.len() as u32;
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: (data_off + state_off) as u32,
                size: 8,
            }),
            always: vec![inline(0, vt), inline(0, data)],
            cases: Vec::new(),
        });
        self.kinds.push(Kind::OneshotInner);
        Some(Edge {
            offset: ptr_off as u32,
            to: EdgeTarget::Pointer(view),
        })
    }

    /// The plan type of a `oneshot::Sender` (DIE `die`) a state machine holds: its channel pointer
    /// read as the discriminant, nothing followed. `None` if its layout is not the one known.
    pub(super) fn sender(&mut self, die: u64) -> Option<u32> {
        let die = self.strip(die);
        if let Some(&t) = self.by_die.get(&die) {
            return matches!(self.kinds[t as usize], Kind::OneshotSender).then_some(t);
        }
        let (ptr_off, _) = self.pointer_to(die, "inner")?;
        let size = self.debug.node(die)?.byte_size?;
        let t = self.types.len() as u32;
        self.by_die.insert(die, t);
        self.types.push(TypePlan {
            size: size as u32,
            discr: Some(Discr {
                offset: ptr_off as u32,
                size: 8,
            }),
            ..TypePlan::default()
        });
        self.kinds.push(Kind::OneshotSender);
        Some(t)
    }

    /// In tokio's `JoinHandle`: `raw: RawTask { ptr: NonNull<Header> }`. Returns the edge to a value that
    /// reads that pointer: the joined task's header, compared with the listed runtime tasks' headers.
    fn header_path(&mut self, die: u64) -> Option<Edge> {
        let (off, _) = self.pointer_to(die, "raw")?;
        let t = self.synthetic(0, Kind::HeaderRef);
        Some(inline(off, t))
    }
}
