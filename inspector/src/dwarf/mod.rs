//! A binary's DWARF, as zero-annotation chains need it: async state machines, root anchors, vtables.
//!
//! [`Debug::index`] reads an executable's debug info with `object` + `gimli` and finds every compiler-generated
//! coroutine: a structure with a `DW_TAG_variant_part` whose discriminant is the artificial `__state` member
//! and whose variants include `Unresumed` and `Returned` (detected by structure, not by the
//! `{async_fn_env#0}` name, which older compilers spell differently). For each it records the size, where
//! the state byte is, and for each `SuspendN` state the await's file and line and the `__awaitee` field
//! (offset within the whole future, and its type's name and DIE): state → variant → awaitee → the
//! awaitee's own state machine, down to a leaf type that is not one.
//!
//! [`Debug::load`] (`load`: file I/O, separate debug files, the load bias) hands the DWARF sections to
//! `parse`, which keeps the few useful attributes of every DIE outside function bodies in a flat table
//! (`Node`s, ordered by offset) that `decode` then uses to build walk plans for the agent. All of this
//! runs in the inspector; the target process never parses DWARF.

mod bodies;
mod load;
mod locations;
mod parse;
#[cfg(test)]
pub(crate) mod synthetic;

pub use bodies::FrameVar;
pub(crate) use bodies::{is_std_mutex_guard, pinned_mut};
pub use load::{
    CodeSections, SymbolTable, build_id, code_sections, hex, links_tokio_runtime, load_bias,
};
pub use locations::{FrameBase, Location, Place};

use std::path::PathBuf;

use gimli::{EndianSlice, RunTimeEndian, constants};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum DwarfError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not an executable asyncdump can read: {detail}", path.display())]
    Object { path: PathBuf, detail: String },
    #[error("malformed DWARF in {}: {detail}", path.display())]
    Dwarf { path: PathBuf, detail: String },
    #[error(
        "{} has no type debug info (stripped, or built with `debug = \"line-tables-only\"`, which keeps lines but not the types chains are walked by), and no separate debug file was found by its build-id or .gnu_debuglink; build it with `debug = \"full\"` (`debug = 2`), or give its debug file with --debug-file",
        path.display()
    )]
    NoTypes { path: PathBuf },
    #[error(
        "{} is not a Rust program ({evidence}); asyncdump reads async Rust programs",
        path.display()
    )]
    NotRust { path: PathBuf, evidence: String },
    #[error(
        "{} (build-id {}) is not the debug file of {} (build-id {})",
        debug.display(), found.as_deref().unwrap_or("none"), exe.display(), wanted.as_deref().unwrap_or("none")
    )]
    WrongDebugFile {
        debug: PathBuf,
        found: Option<String>,
        exe: PathBuf,
        wanted: Option<String>,
    },
    #[error(
        "{} has the build-id of {} but is not its debug file: {detail} (another build given the same build-id?); give the debug file of this very build",
        debug.display(), exe.display()
    )]
    OtherBuild {
        debug: PathBuf,
        exe: PathBuf,
        detail: String,
    },
}

impl DwarfError {
    /// Whether a process's own executable, opened through `/proc`, was refused: a program this
    /// user may run but not read (execute-only), whose readable copy can be given instead.
    pub fn is_running_image_refused(&self) -> bool {
        matches!(self, DwarfError::Io { path, source }
            if source.kind() == std::io::ErrorKind::PermissionDenied
                && crate::attach::procfs::is_under(path))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Index {
    pub debug_info_bytes: u64,
    pub machines: Vec<StateMachine>,
    /// Every instantiation of `<asyncdump_agent::Instrumented<F> as Future>::poll`, by address: what a
    /// task's `root_anchor` (minus the load bias) resolves through.
    pub anchors: Vec<RootAnchor>,
}

/// One root future type the agent can report, identified by its poll function's address.
#[derive(Debug, Clone, Serialize)]
pub struct RootAnchor {
    /// `DW_AT_low_pc` of the poll function: its address in the binary, before load bias.
    pub low_pc: u64,
    /// The DIE of `F`, the root future's exact type.
    pub root_die: u64,
    pub root_type: String,
}

impl Index {
    /// The root future type of a task whose agent reported `root_anchor`, in a process loaded at `bias`.
    pub fn root_of(&self, root_anchor: u64, bias: u64) -> Option<&RootAnchor> {
        let pc = root_anchor.checked_sub(bias)?;
        self.anchors.iter().find(|a| a.low_pc == pc)
    }
}

/// One async fn or async block's state machine.
#[derive(Debug, Clone, Serialize)]
pub struct StateMachine {
    /// Offset of its DIE in `.debug_info`: the identity of the type (names repeat across codegen units).
    pub die: u64,
    pub name: String,
    pub size: u64,
    pub state_offset: u64,
    pub state_size: u64,
    pub states: Vec<State>,
}

#[derive(Debug, Clone, Serialize)]
pub struct State {
    /// The value of the state byte for this state.
    pub discr: u64,
    /// `Unresumed`, `Returned`, `Panicked` or `SuspendN`.
    pub name: String,
    /// For `SuspendN`, the line of that await; otherwise the fn's header or closing brace.
    pub file: String,
    pub line: u64,
    pub awaitee: Option<Awaitee>,
    /// The `tokio::sync::oneshot::Sender`s held across this await: (offset within the whole state
    /// machine, type DIE). Whoever holds a sender is who can wake its receiver.
    #[serde(skip)]
    pub senders: Vec<(u64, u64)>,
    /// The locals that live across this await, as named in the source: (name, offset within the
    /// whole state machine, type DIE). Compiler temporaries (`__N`) and the awaitee are not among them.
    #[serde(skip)]
    pub locals: Vec<(String, u64, u64)>,
}

/// The future a suspended state awaits.
#[derive(Debug, Clone, Serialize)]
pub struct Awaitee {
    /// Byte offset of the awaitee within the whole state machine.
    pub offset: u64,
    pub type_name: String,
    pub type_die: u64,
}

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// One instantiation of tokio's `raw::poll::<T, S>`.
pub(crate) struct TaskPoll {
    /// Its address in the file, before load bias: what a task vtable's `poll` holds.
    pub(crate) low_pc: u64,
    /// The DIE of `T`, the task's future type.
    pub(crate) future: u64,
    /// `<T, S>` as spelled in its name, to find the matching `Cell<T, S>`.
    pub(crate) args: String,
}

/// What one DIE holds that the index and the walk plans need.
pub(crate) struct Node {
    /// Offset in `.debug_info`, and the unit (index into the per-unit file tables) it belongs to.
    pub(crate) offset: u64,
    pub(crate) unit: usize,
    pub(crate) tag: constants::DwTag,
    pub(crate) name: Option<String>,
    pub(crate) parent: Option<usize>,
    pub(crate) byte_size: Option<u64>,
    /// `DW_AT_alignment`, when the compiler gave one (0: none).
    pub(crate) alignment: u32,
    pub(crate) member_offset: Option<u64>,
    pub(crate) type_ref: Option<u64>,
    pub(crate) discr_ref: Option<u64>,
    pub(crate) discr_value: Option<u64>,
    pub(crate) decl_file: Option<u64>,
    pub(crate) decl_line: Option<u64>,
    pub(crate) low_pc: Option<u64>,
    /// An `Instrumented::poll` instantiation (see `is_anchor`).
    pub(crate) anchor: bool,
    /// A `tokio::runtime::task::raw::poll::<T, S>` instantiation: what a tokio task's vtable points at.
    pub(crate) task_poll: bool,
    /// A `tokio::util::wake::clone_arc_raw::<T>` instantiation: the first field of the vtable of a waker
    /// tokio makes from an `Arc<T>` (a `JoinSet` entry's, for one).
    pub(crate) wake_clone: bool,
    pub(crate) artificial: bool,
    /// `DW_AT_containing_type` (of a `{vtable_type}`: the concrete type).
    pub(crate) containing_type: Option<u64>,
    /// A variable's address, from a `DW_OP_addr` location.
    pub(crate) addr: Option<u64>,
    pub(crate) children: Vec<usize>,
}

/// The debug info of one executable, loaded once per dump.
pub struct Debug {
    /// The file the DWARF came from: the executable, or its separate debug file.
    pub path: PathBuf,
    /// GNU build-id of the executable (not of a separate debug file), hex.
    pub build_id: Option<String>,
    pub debug_info_bytes: u64,
    /// Of the executable (not a separate debug file): the address its first `PT_LOAD` gives file
    /// offset 0, for [`load_bias`]. Read here so that the executable is read once per dump.
    pub vaddr_at_zero: Option<u64>,
    /// Of the executable: every word of its data that holds a code address, as (code address, where
    /// the word is), sorted. Task vtables are found among them.
    pub(crate) code_words: Vec<(u64, u64)>,
    /// Of the executable: its waker vtables (four code words in a row, `RawWakerVTable`'s clone,
    /// wake, wake_by_ref and drop, the first a function named `clone…`), each as (address in the
    /// file, the clone function's path from the symbol table), sorted by address.
    pub(crate) waker_vtables: Vec<(u64, String)>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) by_offset: Offsets,
    /// File names per unit, by DWARF file index.
    pub(crate) files: Vec<Vec<String>>,
    /// `<T as Future>::{vtable}` statics: (address in the file, DIE of T).
    pub(crate) vtables: Vec<(u64, u64)>,
    /// The locals of function bodies that may hold a guard, a permit or a channel's end, by scope.
    pub(crate) frame_vars: Vec<FrameVar>,
    /// The futures `block_on`s keep pinned on their threads' stacks (their `Pin<&mut F>` locals), by
    /// scope.
    pub(crate) pinned_futures: Vec<FrameVar>,
    /// The code of an executor's own functions and of tasks' polls (`true`), out of line, sorted
    /// (see `Bodies::executor_code`).
    pub(crate) executor_code: Vec<(u64, u64, bool)>,
    /// Of the executable: its writable data as the file has it, before the program runs (see
    /// [`Debug::initial`]).
    pub(crate) initial: Vec<InitialData>,
}

/// One writable section of the executable as loaded, before the program writes to it: its bytes,
/// or `None` for one the loader fills with zeros (`.bss`).
pub(crate) struct InitialData {
    pub(crate) addr: u64,
    pub(crate) size: u64,
    pub(crate) bytes: Option<Vec<u8>>,
}

/// DIE offsets of [`Debug::nodes`], ascending (DIEs are read in section order): a node's index is found
/// by binary search, which beats a hash map of half a million entries on both time and memory.
pub(crate) struct Offsets(Vec<u64>);

impl Offsets {
    pub(crate) fn get(&self, die: &u64) -> Option<usize> {
        self.0.binary_search(die).ok()
    }
}

impl Debug {
    /// The index `asyncdump index` prints: every state machine and every root anchor.
    pub fn index(&self) -> Index {
        let (nodes, by_offset) = (&self.nodes, &self.by_offset);
        let mut machines: Vec<StateMachine> = (0..nodes.len())
            .filter(|&i| nodes[i].tag == constants::DW_TAG_structure_type)
            .filter_map(|i| machine(nodes, by_offset, &self.files[nodes[i].unit], i))
            .collect();
        machines.sort_by(|a, b| a.name.cmp(&b.name).then(a.die.cmp(&b.die)));
        Index {
            debug_info_bytes: self.debug_info_bytes,
            machines,
            anchors: self.anchors(),
        }
    }

    /// Every `Instrumented<F>::poll` instantiation and its `F`.
    pub fn anchors(&self) -> Vec<RootAnchor> {
        let nodes = &self.nodes;
        nodes
            .iter()
            .filter(|n| n.anchor)
            .filter_map(|n| {
                let die = self.type_param(n, "F")?;
                let root_type = qualified(nodes, self.by_offset.get(&die)?);
                Some(RootAnchor {
                    low_pc: n.low_pc?,
                    root_die: die,
                    root_type,
                })
            })
            .collect()
    }

    /// The address (in the file) of `asyncdump_agent`'s vtable for the wakers it hands out: a waker with
    /// this vtable has an `Arc<TaskCell>` as its data pointer.
    pub(crate) fn owned_waker_vtable(&self) -> Option<u64> {
        asyncdump_protocol::agent_names::spellings(
            asyncdump_protocol::agent_names::OWNED_WAKER_VTABLE,
        )
        .find_map(|path| self.static_addr(path))
    }

    /// Every `tokio::runtime::task::raw::poll::<T, S>` instantiation: a task type tokio can run.
    pub(crate) fn task_polls(&self) -> Vec<TaskPoll> {
        let nodes = &self.nodes;
        nodes
            .iter()
            .filter(|n| n.task_poll)
            .filter_map(|n| {
                Some(TaskPoll {
                    low_pc: n.low_pc?,
                    future: self.type_param(n, "T")?,
                    args: n.name.as_deref()?.strip_prefix("poll")?.to_owned(),
                })
            })
            .collect()
    }

    /// Every `tokio::util::wake::clone_arc_raw::<T>` instantiation: its address in the file (before load
    /// bias) and the DIE of `T`.
    pub(crate) fn wake_clones(&self) -> Vec<(u64, u64)> {
        let nodes = &self.nodes;
        nodes
            .iter()
            .filter(|n| n.wake_clone)
            .filter_map(|n| Some((n.low_pc?, self.type_param(n, "T")?)))
            .collect()
    }

    /// The type DIE of the template type parameter `name` of the type or subprogram at DIE `die`.
    pub(crate) fn type_param_of(&self, die: u64, name: &str) -> Option<u64> {
        self.type_param(self.node(die)?, name)
    }

    /// The type DIE of subprogram `n`'s template type parameter `name`.
    fn type_param(&self, n: &Node, name: &str) -> Option<u64> {
        n.children
            .iter()
            .map(|&c| &self.nodes[c])
            .find(|c| {
                c.tag == constants::DW_TAG_template_type_parameter
                    && c.name.as_deref() == Some(name)
            })?
            .type_ref
    }

    /// The DIE of the first complete (sized) structure or enum with this qualified name.
    pub(crate) fn find_type(&self, qualified_name: &str) -> Option<u64> {
        let last = qualified_name.rsplit("::").next()?;
        self.nodes.iter().enumerate().find_map(|(i, n)| {
            (n.tag == constants::DW_TAG_structure_type
                && n.byte_size.is_some()
                && n.name.as_deref() == Some(last)
                && qualified(&self.nodes, i) == qualified_name)
                .then_some(n.offset)
        })
    }

    /// The DIEs of the structures named `{name}{args}` in namespace `path` (e.g. tokio's `Cell<T, S>`), by
    /// their generic arguments `args` (`<T, S>`, as rustc spells them in DWARF).
    pub(crate) fn generic_types(&self, path: &[&str], name: &str) -> FastMap<&str, u64> {
        let mut out = FastMap::default();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.tag != constants::DW_TAG_structure_type || n.byte_size.is_none() {
                continue;
            }
            let Some(args) = n.name.as_deref().and_then(|s| s.strip_prefix(name)) else {
                continue;
            };
            if args.starts_with('<') && parents_are(&self.nodes, i, path) {
                out.entry(args).or_insert(n.offset);
            }
        }
        out
    }

    /// The statics whose type's name `wanted` takes: (qualified name, address in the file, type DIE).
    pub(crate) fn statics_where(&self, wanted: impl Fn(&str) -> bool) -> Vec<(String, u64, u64)> {
        (self.nodes.iter().enumerate())
            .filter(|(_, n)| n.tag == constants::DW_TAG_variable)
            .filter_map(|(i, n)| {
                let (addr, ty) = (n.addr?, n.type_ref?);
                wanted(&self.qualified_name(ty)).then(|| (qualified(&self.nodes, i), addr, ty))
            })
            .collect()
    }

    /// The `len` bytes at `addr` (in the file) before the program runs: what a static held when it
    /// was made (a `static` is made at compile time). `None` outside the writable sections.
    pub(crate) fn initial(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        let end = addr.checked_add(len as u64)?;
        let s = (self.initial.iter()).find(|s| s.addr <= addr && end <= s.addr + s.size)?;
        Some(match &s.bytes {
            Some(bytes) => {
                let at = usize::try_from(addr - s.addr).ok()?;
                bytes.get(at..at + len)?.to_vec()
            }
            None => vec![0; len],
        })
    }

    /// The address (in the file) of a static with this qualified name.
    pub(crate) fn static_addr(&self, qualified_name: &str) -> Option<u64> {
        let last = qualified_name.rsplit("::").next()?;
        self.nodes.iter().enumerate().find_map(|(i, n)| {
            (n.tag == constants::DW_TAG_variable
                && n.name.as_deref() == Some(last)
                && qualified(&self.nodes, i) == qualified_name)
                .then_some(n.addr)
                .flatten()
        })
    }

    /// The node of a DIE offset.
    pub(crate) fn node(&self, die: u64) -> Option<&Node> {
        self.by_offset.get(&die).map(|i| &self.nodes[i])
    }

    pub(crate) fn qualified_name(&self, die: u64) -> String {
        self.by_offset
            .get(&die)
            .map(|i| qualified(&self.nodes, i))
            .unwrap_or_else(|| format!("<type at {die:#x}>"))
    }

    /// The variant part of the structure DIE at `die`, if it has one.
    pub(crate) fn variant_part(&self, die: u64) -> Option<VariantPart> {
        variant_part(&self.nodes, &self.by_offset, self.by_offset.get(&die)?)
    }

    /// The one variant of an enum that has only one (no discriminant is kept for it): its member
    /// node. `None` for anything else.
    pub(crate) fn sole_variant(&self, die: u64) -> Option<usize> {
        let s = self.by_offset.get(&die)?;
        let nodes = &self.nodes;
        let vp = *nodes[s]
            .children
            .iter()
            .find(|&&c| nodes[c].tag == constants::DW_TAG_variant_part)?;
        if nodes[vp].discr_ref.is_some() {
            return None;
        }
        let mut variants =
            (nodes[vp].children.iter()).filter(|&&v| nodes[v].tag == constants::DW_TAG_variant);
        let (only, none) = (variants.next()?, variants.next());
        let member = nodes[*only]
            .children
            .iter()
            .find(|&&c| nodes[c].tag == constants::DW_TAG_member);
        member.copied().filter(|_| none.is_none())
    }

    /// The state machine whose structure DIE is at `die`, if it is one.
    pub(crate) fn machine(&self, die: u64) -> Option<StateMachine> {
        let i = self.by_offset.get(&die)?;
        machine(
            &self.nodes,
            &self.by_offset,
            &self.files[self.nodes[i].unit],
            i,
        )
    }
}

/// Whether node `i`'s enclosing namespaces are exactly `path` (outermost first) below the unit.
fn parents_are(nodes: &[Node], i: usize, path: &[&str]) -> bool {
    let mut at = nodes[i].parent;
    for want in path.iter().rev() {
        match at.map(|p| &nodes[p]) {
            Some(p) if p.tag == constants::DW_TAG_namespace && p.name.as_deref() == Some(*want) => {
                at = p.parent
            }
            _ => return false,
        }
    }
    at.is_some_and(|p| nodes[p].tag != constants::DW_TAG_namespace)
}

/// The DIE a reference attribute points at, as an offset in `.debug_info` (`base`: the offset of
/// the entry's unit, for a reference within it).
fn die_ref(v: Option<gimli::AttributeValue<Reader<'_>>>, base: u64) -> Option<u64> {
    match v? {
        gimli::AttributeValue::UnitRef(gimli::UnitOffset(o)) => Some(base + o as u64),
        gimli::AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
        _ => None,
    }
}

/// The file index of an entry's `DW_AT_decl_file`.
fn decl_file(entry: &gimli::DebuggingInformationEntry<Reader<'_>>) -> Option<u64> {
    match entry.attr_value(constants::DW_AT_decl_file)? {
        gimli::AttributeValue::FileIndex(i) => Some(i),
        other => other.udata_value(),
    }
}

/// The qualified name of a DIE: its namespaces and enclosing types, then its own name.
fn qualified(nodes: &[Node], mut i: usize) -> String {
    let mut parts = Vec::new();
    loop {
        let n = &nodes[i];
        if let Some(name) = &n.name {
            parts.push(name.as_str());
        }
        match n.parent {
            Some(p)
                if matches!(
                    nodes[p].tag,
                    constants::DW_TAG_namespace
                        | constants::DW_TAG_structure_type
                        | constants::DW_TAG_union_type
                        | constants::DW_TAG_enumeration_type
                ) =>
            {
                i = p
            }
            _ => break,
        }
    }
    parts.reverse();
    parts.join("::")
}

/// The state machine described by structure DIE `s`, if it is one.
/// A structure's `DW_TAG_variant_part`: the discriminant member's node, its size in bytes, and per variant
/// its discriminant value (`None` for the default variant of a niche layout) and member node.
pub(crate) struct VariantPart {
    pub(crate) discr: usize,
    pub(crate) discr_size: u64,
    pub(crate) variants: Vec<(Option<u64>, usize)>,
}

pub(crate) fn variant_part(nodes: &[Node], by_offset: &Offsets, s: usize) -> Option<VariantPart> {
    let vp = *nodes[s]
        .children
        .iter()
        .find(|&&c| nodes[c].tag == constants::DW_TAG_variant_part)?;
    let discr = by_offset.get(&nodes[vp].discr_ref?)?;
    let discr_size = nodes[discr]
        .type_ref
        .and_then(|t| by_offset.get(&t))
        .and_then(|t| nodes[t].byte_size)
        .unwrap_or(1);
    let variants = nodes[vp]
        .children
        .iter()
        .filter(|&&v| nodes[v].tag == constants::DW_TAG_variant)
        .filter_map(|&v| {
            let m = *nodes[v]
                .children
                .iter()
                .find(|&&c| nodes[c].tag == constants::DW_TAG_member)?;
            Some((nodes[v].discr_value, m))
        })
        .collect();
    Some(VariantPart {
        discr,
        discr_size,
        variants,
    })
}

fn machine(
    nodes: &[Node],
    by_offset: &Offsets,
    files: &[String],
    s: usize,
) -> Option<StateMachine> {
    let part = variant_part(nodes, by_offset, s)?;
    let d = &nodes[part.discr];
    if d.name.as_deref() != Some("__state") || !d.artificial {
        return None;
    }
    let mut states = Vec::new();
    for &(value, m) in &part.variants {
        let member = &nodes[m];
        let Some(ty) = member.type_ref.and_then(|t| by_offset.get(&t)) else {
            continue;
        };
        let base = member.member_offset.unwrap_or(0);
        let awaitee = nodes[ty]
            .children
            .iter()
            .map(|&f| &nodes[f])
            .find(|f| f.tag == constants::DW_TAG_member && f.name.as_deref() == Some("__awaitee"))
            .and_then(|f| {
                let t = by_offset.get(&f.type_ref?)?;
                Some(Awaitee {
                    offset: base + f.member_offset?,
                    type_name: qualified(nodes, t),
                    type_die: f.type_ref?,
                })
            });
        let senders = nodes[ty]
            .children
            .iter()
            .map(|&f| &nodes[f])
            .filter(|f| f.tag == constants::DW_TAG_member)
            .filter_map(|f| {
                let t = f.type_ref?;
                let ti = by_offset.get(&t)?;
                // The unqualified name first: most members are not senders.
                let is_sender = nodes[ti].name.as_deref()?.starts_with("Sender<")
                    && qualified(nodes, ti).starts_with("tokio::sync::oneshot::Sender<");
                is_sender.then(|| Some((base + f.member_offset?, t)))?
            })
            .collect();
        let locals = locals(nodes, ty, base, awaitee.as_ref());
        states.push(State {
            discr: value.unwrap_or(0),
            name: nodes[ty].name.clone().unwrap_or_default(),
            file: member
                .decl_file
                .and_then(|f| files.get(f as usize))
                .cloned()
                .unwrap_or_default(),
            line: member.decl_line.unwrap_or(0),
            awaitee,
            senders,
            locals,
        });
    }
    let has = |name: &str| states.iter().any(|s| s.name == name);
    if !(has("Unresumed") && has("Returned")) {
        return None;
    }
    Some(StateMachine {
        die: nodes[s].offset,
        name: qualified(nodes, s),
        size: nodes[s].byte_size.unwrap_or(0),
        state_offset: d.member_offset.unwrap_or(0),
        state_size: part.discr_size,
        states,
    })
}

/// The locals of a state's variant structure `ty` at `base`: named members, each once (rustc lists a
/// local again for each scope it lives in), without the awaitee or what overlaps it (a local moved into
/// the await).
fn locals(
    nodes: &[Node],
    ty: usize,
    base: u64,
    awaitee: Option<&Awaitee>,
) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for f in nodes[ty].children.iter().map(|&f| &nodes[f]) {
        let (Some(name), Some(off), Some(t)) = (&f.name, f.member_offset, f.type_ref) else {
            continue;
        };
        // `__N`: compiler temporaries; `_ref__x`: a second name of `x` (a `ref` binding's).
        if f.tag != constants::DW_TAG_member || name.starts_with("__") || name.starts_with("_ref__")
        {
            continue;
        }
        let at = base + off;
        if awaitee.is_some_and(|a| a.offset == at) || out.iter().any(|l| l.0 == *name && l.1 == at)
        {
            continue;
        }
        out.push((name.clone(), at, t));
    }
    out
}
