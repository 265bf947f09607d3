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
//! [`Debug::load`] keeps the few useful attributes of every DIE outside function bodies in a flat table
//! (`Node`s, ordered by offset) that `decode` then uses to build walk plans for the agent. All of this runs in the inspector; the target process never
//! parses DWARF. A binary without type info is looked up again as a separate debug file, by build-id
//! (`/usr/lib/debug/.build-id/xx/yyyy.debug`) or `.gnu_debuglink` (beside the binary, in its `.debug/`,
//! and under `/usr/lib/debug`), as gdb does; `$ASYNCDUMP_DEBUG_DIR` replaces `/usr/lib/debug`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gimli::{AttributeValue, EndianSlice, RunTimeEndian, UnitOffset, constants};
use object::{Object, ObjectSection, ObjectSegment};
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
        "{} has no type debug info (stripped, or built with `debug = \"line-tables-only\"`); build it with `debug = \"full\"` to decode async chains",
        path.display()
    )]
    NoTypes { path: PathBuf },
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

/// The load bias of a running process's executable: where its first mapping at file offset 0 starts, less
/// `vaddr_at_zero`, the virtual address the ELF file gives that offset ([`Debug::vaddr_at_zero`]; zero
/// for most PIE executables).
pub fn load_bias(pid: u32, vaddr_at_zero: Option<u64>) -> Result<u64, DwarfError> {
    // By inode, not path: a path may hold spaces, and an executable replaced on disk shows as
    // `path (deleted)`, while `/proc/PID/exe` still opens (and stats as) the running image.
    let exe = format!("/proc/{pid}/exe");
    let bad = |detail: String| DwarfError::Object {
        path: PathBuf::from(&exe),
        detail,
    };
    let vaddr_at_zero = vaddr_at_zero.ok_or_else(|| bad("no loadable segment".into()))?;
    let inode = std::os::unix::fs::MetadataExt::ino(
        &std::fs::metadata(&exe).map_err(|e| bad(e.to_string()))?,
    );
    let maps =
        std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| bad(e.to_string()))?;
    let start = maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (range, offset, ino) = (f.first()?, f.get(2)?, f.get(4)?);
            let at_zero =
                u64::from_str_radix(offset, 16).ok()? == 0 && ino.parse::<u64>().ok()? == inode;
            at_zero
                .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
                .flatten()
        })
        .next()
        .ok_or_else(|| {
            bad(format!(
                "no mapping of {exe} (inode {inode}) in process {pid}"
            ))
        })?;
    Ok(start.saturating_sub(vaddr_at_zero))
}

/// The virtual address the first `PT_LOAD` gives file offset 0.
fn vaddr_at_zero(obj: &object::File<'_>) -> Option<u64> {
    let first = obj.segments().next()?;
    Some(first.address().saturating_sub(first.file_range().0))
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
    pub(crate) nodes: Vec<Node>,
    pub(crate) by_offset: Offsets,
    /// File names per unit, by DWARF file index.
    pub(crate) files: Vec<Vec<String>>,
    /// `<T as Future>::{vtable}` statics: (address in the file, DIE of T).
    pub(crate) vtables: Vec<(u64, u64)>,
}

/// DIE offsets of [`Debug::nodes`], ascending (DIEs are read in section order): a node's index is found
/// by binary search, which beats a hash map of half a million entries on both time and memory.
pub(crate) struct Offsets(Vec<u64>);

impl Offsets {
    pub(crate) fn get(&self, die: &u64) -> Option<usize> {
        self.0.binary_search(die).ok()
    }
}

/// The GNU build-id of an ELF file, hex; `None` if it has none.
pub fn build_id(path: &Path) -> Result<Option<String>, DwarfError> {
    let bytes = read(path)?;
    let obj = parse(path, &bytes)?;
    Ok(obj.build_id().ok().flatten().map(hex))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn read(path: &Path) -> Result<Vec<u8>, DwarfError> {
    std::fs::read(path).map_err(|source| DwarfError::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<object::File<'a>, DwarfError> {
    object::File::parse(bytes).map_err(|e| DwarfError::Object {
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

/// The directories separate debug files live under: `$ASYNCDUMP_DEBUG_DIR` (colon-separated, like gdb's
/// `debug-file-directory`) if set, else `/usr/lib/debug`.
fn debug_dirs() -> Vec<PathBuf> {
    match std::env::var_os("ASYNCDUMP_DEBUG_DIR") {
        Some(dirs) => std::env::split_paths(&dirs).collect(),
        None => vec![PathBuf::from("/usr/lib/debug")],
    }
}

/// Where a separate debug file for `exe` may be, most specific first: by build-id under each debug
/// directory, then by `.gnu_debuglink` beside the executable, in its `.debug/`, and under each debug
/// directory.
fn debug_file_candidates(exe: &Path, obj: &object::File<'_>) -> Vec<PathBuf> {
    let dirs = debug_dirs();
    let mut out = Vec::new();
    if let Some(id) = obj.build_id().ok().flatten().filter(|id| id.len() > 1) {
        let id = hex(id);
        for d in &dirs {
            out.push(d.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..])));
        }
    }
    if let Some((name, _crc)) = obj.gnu_debuglink().ok().flatten() {
        let name = Path::new(std::str::from_utf8(name).unwrap_or_default());
        let real = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_owned());
        let dir = real.parent().unwrap_or(Path::new("/"));
        out.push(dir.join(name));
        out.push(dir.join(".debug").join(name));
        for d in &dirs {
            out.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
        }
    }
    out
}

impl Debug {
    /// Loads the DWARF of the executable at `path`, or of its separate debug file when the executable
    /// itself has no type info. The debug file must have the executable's build-id.
    pub fn load(path: &Path) -> Result<Debug, DwarfError> {
        let bytes = read(path)?;
        let obj = parse(path, &bytes)?;
        let build_id = obj.build_id().ok().flatten().map(hex);
        let at_zero = vaddr_at_zero(&obj);
        let found = match Debug::from_object(path, &obj, build_id.clone()) {
            Err(DwarfError::NoTypes { .. }) => debug_file_candidates(path, &obj)
                .iter()
                .find_map(|candidate| {
                    let bytes = std::fs::read(candidate).ok()?;
                    let dobj = object::File::parse(&*bytes).ok()?;
                    if dobj.build_id().ok().flatten().map(hex) != build_id {
                        return None;
                    }
                    Debug::from_object(candidate, &dobj, build_id.clone()).ok()
                })
                .ok_or_else(|| DwarfError::NoTypes {
                    path: path.to_owned(),
                }),
            other => other,
        };
        // From the executable in every case: a separate debug file is not what is mapped.
        found.map(|d| Debug {
            vaddr_at_zero: at_zero,
            ..d
        })
    }

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
        self.static_addr(asyncdump_protocol::agent_names::OWNED_WAKER_VTABLE)
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

impl Debug {
    fn from_object(
        path: &Path,
        obj: &object::File<'_>,
        build_id: Option<String>,
    ) -> Result<Debug, DwarfError> {
        let endian = if obj.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
            Ok(obj
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .unwrap_or(Cow::Borrowed(&[])))
        };
        let sections = gimli::DwarfSections::load(load).map_err(|e| DwarfError::Dwarf {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
        let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
        let debug_info_bytes = obj.section_by_name(".debug_info").map_or(0, |s| s.size());
        let bad = |e: gimli::Error| DwarfError::Dwarf {
            path: path.to_owned(),
            detail: e.to_string(),
        };

        let mut nodes: Vec<Node> = Vec::new();
        // About one DIE per 10 bytes of .debug_info: reserve once rather than grow (and copy) a huge table.
        let mut by_offset = Offsets(Vec::with_capacity(debug_info_bytes as usize / 10));
        nodes.reserve(debug_info_bytes as usize / 10);
        let mut files: Vec<Vec<String>> = Vec::new();
        let mut saw_types = false;
        let mut impls: FastMap<String, String> = FastMap::default();
        let mut units = dwarf.units();
        while let Some(header) = units.next().map_err(bad)? {
            let unit = dwarf.unit(header).map_err(bad)?;
            let unit_index = files.len();
            files.push(unit_files(&dwarf, &unit));
            let base = unit.header.offset().0 as u64;
            let mut stack: Vec<usize> = Vec::new();
            // Inside a subprogram that is not an anchor (its parameters, locals, blocks, inlined calls:
            // most DIEs of a binary), nothing is of use: skip down to this depth.
            let mut skip_below: Option<usize> = None;
            let mut entries = unit.entries();
            while let Some(entry) = entries.next_dfs().map_err(bad)? {
                let depth = entry.depth().max(0) as usize;
                match skip_below {
                    Some(d) if depth > d => continue,
                    _ => skip_below = None,
                }
                stack.truncate(depth);
                let anchor = entry.tag() == constants::DW_TAG_subprogram
                    && entry
                        .attr_value(constants::DW_AT_linkage_name)
                        .and_then(|v| dwarf.attr_string(&unit, v).ok())
                        .is_some_and(|s| is_anchor(&s));
                let task_poll = entry.tag() == constants::DW_TAG_subprogram
                    && !anchor
                    && in_namespace(&nodes, &stack, TOKIO_RAW)
                    && entry
                        .attr_value(constants::DW_AT_name)
                        .and_then(|v| dwarf.attr_string(&unit, v).ok())
                        .is_some_and(|s| s.starts_with(b"poll<"));
                let wake_clone = entry.tag() == constants::DW_TAG_subprogram
                    && !anchor
                    && in_namespace(&nodes, &stack, TOKIO_WAKE)
                    && entry
                        .attr_value(constants::DW_AT_name)
                        .and_then(|v| dwarf.attr_string(&unit, v).ok())
                        .is_some_and(|s| s.starts_with(b"clone_arc_raw<"));
                if entry.tag() == constants::DW_TAG_subprogram
                    && !anchor
                    && !task_poll
                    && !wake_clone
                {
                    skip_below = Some(depth);
                    name_impl(&nodes, &stack, &mut impls, || {
                        entry
                            .attr_value(constants::DW_AT_linkage_name)
                            .and_then(|v| dwarf.attr_string(&unit, v).ok())
                            .map(|s| s.to_string_lossy().into_owned())
                    });
                    continue;
                }
                let offset = base + entry.offset().0 as u64;
                let unit_ref = |v: Option<AttributeValue<Reader<'_>>>| match v {
                    Some(AttributeValue::UnitRef(UnitOffset(o))) => Some(base + o as u64),
                    Some(AttributeValue::DebugInfoRef(o)) => Some(o.0 as u64),
                    _ => None,
                };
                let udata = |v: Option<AttributeValue<Reader<'_>>>| v.and_then(|v| v.udata_value());
                let name = entry
                    .attr_value(constants::DW_AT_name)
                    .and_then(|v| dwarf.attr_string(&unit, v).ok())
                    .map(|s| s.to_string_lossy().into_owned());
                saw_types |= entry.tag() == constants::DW_TAG_structure_type;
                let addr = match entry.attr_value(constants::DW_AT_location) {
                    Some(AttributeValue::Exprloc(e))
                        if entry.tag() == constants::DW_TAG_variable =>
                    {
                        // Only the plain `DW_OP_addr X` form statics use.
                        let b = e.0.slice();
                        (b.len() == 9 && b[0] == constants::DW_OP_addr.0).then(|| {
                            let mut a = [0u8; 8];
                            a.copy_from_slice(&b[1..9]);
                            match endian {
                                RunTimeEndian::Little => u64::from_le_bytes(a),
                                RunTimeEndian::Big => u64::from_be_bytes(a),
                            }
                        })
                    }
                    _ => None,
                };
                let node = Node {
                    offset,
                    unit: unit_index,
                    tag: entry.tag(),
                    name,
                    parent: stack.last().copied(),
                    byte_size: udata(entry.attr_value(constants::DW_AT_byte_size)),
                    member_offset: udata(entry.attr_value(constants::DW_AT_data_member_location)),
                    type_ref: unit_ref(entry.attr_value(constants::DW_AT_type)),
                    discr_ref: unit_ref(entry.attr_value(constants::DW_AT_discr)),
                    discr_value: udata(entry.attr_value(constants::DW_AT_discr_value)),
                    decl_file: match entry.attr_value(constants::DW_AT_decl_file) {
                        Some(AttributeValue::FileIndex(i)) => Some(i),
                        other => udata(other),
                    },
                    decl_line: udata(entry.attr_value(constants::DW_AT_decl_line)),
                    low_pc: match entry.attr_value(constants::DW_AT_low_pc) {
                        Some(AttributeValue::Addr(a)) if a != 0 => Some(a),
                        _ => None,
                    },
                    anchor,
                    task_poll,
                    wake_clone,
                    artificial: matches!(
                        entry.attr_value(constants::DW_AT_artificial),
                        Some(AttributeValue::Flag(true))
                    ),
                    containing_type: unit_ref(entry.attr_value(constants::DW_AT_containing_type)),
                    addr,
                    children: Vec::new(),
                };
                let idx = nodes.len();
                if let Some(&p) = stack.last() {
                    nodes[p].children.push(idx);
                }
                nodes.push(node);
                by_offset.0.push(offset);
                stack.push(idx);
            }
        }
        rename_impls(&mut nodes, &impls);
        if !saw_types {
            return Err(DwarfError::NoTypes {
                path: path.to_owned(),
            });
        }
        let vtables = nodes
            .iter()
            .filter(|n| {
                n.tag == constants::DW_TAG_variable
                    && n.name
                        .as_deref()
                        .is_some_and(|s| s.ends_with(" as core::future::future::Future>::{vtable}"))
            })
            .filter_map(|n| {
                let ty = &nodes[by_offset.get(&n.type_ref?)?];
                Some((n.addr?, ty.containing_type?))
            })
            .collect();
        Ok(Debug {
            path: path.to_owned(),
            build_id,
            debug_info_bytes,
            vaddr_at_zero: None,
            nodes,
            by_offset,
            files,
            vtables,
        })
    }
}

/// The namespaces of tokio's `raw::poll`, innermost last.
const TOKIO_RAW: &[&str] = &["tokio", "runtime", "task", "raw"];
/// The namespaces of tokio's wakers made from an `Arc`.
const TOKIO_WAKE: &[&str] = &["tokio", "util", "wake"];

/// Whether the DIEs on `stack` (the current DIE's ancestors, outermost first) end in the namespaces `path`.
fn in_namespace(nodes: &[Node], stack: &[usize], path: &[&str]) -> bool {
    stack.len() > path.len()
        && stack[stack.len() - path.len()..]
            .iter()
            .zip(path)
            .all(|(&i, want)| {
                nodes[i].tag == constants::DW_TAG_namespace
                    && nodes[i].name.as_deref() == Some(*want)
            })
}

/// Whether a linkage (mangled) name is `<asyncdump_agent::instrument::Instrumented<F> as Future>::poll`,
/// under legacy or v0 mangling. Only names that mention both the crate and the type are demangled.
fn is_anchor(linkage: &[u8]) -> bool {
    let has = |needle: &[u8]| linkage.windows(needle.len()).any(|w| w == needle);
    if !has(b"asyncdump_agent") || !has(b"Instrumented") {
        return false;
    }
    let Ok(linkage) = std::str::from_utf8(linkage) else {
        return false;
    };
    rustc_demangle::try_demangle(linkage)
        .is_ok_and(|d| asyncdump_protocol::agent_names::is_anchor(&format!("{d:#}")))
}

/// File names of a unit's line program, by DWARF file index (directory joined when relative).
fn unit_files(dwarf: &gimli::Dwarf<Reader<'_>>, unit: &gimli::Unit<Reader<'_>>) -> Vec<String> {
    let Some(program) = &unit.line_program else {
        return Vec::new();
    };
    let header = program.header();
    let string = |v| {
        dwarf
            .attr_string(unit, v)
            .ok()
            .map(|s| s.to_string_lossy().into_owned())
    };
    // DWARF 5 numbers files from 0, earlier versions from 1: ask for each index the header can answer.
    let count = header.file_names().len() as u64 + 1;
    (0..count)
        .map(|i| {
            header
                .file(i)
                .and_then(|f| {
                    let name = string(f.path_name())?;
                    match f.directory(header).and_then(string) {
                        Some(dir) if !name.starts_with('/') => Some(format!("{dir}/{name}")),
                        _ => Some(name),
                    }
                })
                .unwrap_or_default()
        })
        .collect()
}

/// Finds the name of an impl block's namespace (`{impl#3}`, which says nothing): what it implements, as
/// people write it: `Mutex` for `impl<T> Mutex<T>`, `<F as Handler>` for `impl Handler for F`. The
/// demangled linkage name of a function inside it (`linkage`, asked for only while the namespace is
/// still unnamed) says which: `tokio::sync::mutex::Mutex<T>::lock`, `<F as axum::handler::Handler<..>>::call`.
fn name_impl(
    nodes: &[Node],
    stack: &[usize],
    impls: &mut FastMap<String, String>,
    linkage: impl FnOnce() -> Option<String>,
) {
    // The nearest enclosing impl namespace, through namespaces only: the function may be the impl's
    // own (`{impl#3}::f`) or an async fn's poll inside it (`{impl#3}::f::{async_fn#0}`).
    let is_impl = |n: &Node| n.name.as_deref().is_some_and(|s| s.starts_with("{impl#"));
    let Some(&ns) = stack
        .iter()
        .rev()
        .take_while(|&&i| nodes[i].tag == constants::DW_TAG_namespace)
        .find(|&&i| is_impl(&nodes[i]))
    else {
        return;
    };
    // By qualified path: the same impl's namespace appears again in every unit that uses its types,
    // often without any of its functions.
    let path = qualified(nodes, ns);
    if impls.contains_key(&path) {
        return;
    }
    let Some(mangled) = linkage() else { return };
    let demangled = format!("{:#}", rustc_demangle::demangle(&mangled));
    let prefix = path
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| format!("{p}::"));
    if let Some(name) = impl_name(&demangled, &prefix) {
        impls.insert(path, name);
    }
}

/// Applies the names [`name_impl`] found to every unit's copy of each impl namespace.
fn rename_impls(nodes: &mut [Node], impls: &FastMap<String, String>) {
    let renames: Vec<(usize, String)> = (0..nodes.len())
        .filter(|&i| {
            nodes[i].tag == constants::DW_TAG_namespace
                && nodes[i]
                    .name
                    .as_deref()
                    .is_some_and(|s| s.starts_with("{impl#"))
        })
        .filter_map(|i| Some((i, impls.get(&qualified(nodes, i))?.clone())))
        .collect();
    for (i, name) in renames {
        nodes[i].name = Some(name);
    }
}

/// What an impl block implements, from the demangled path of a function in it (legacy or v0 mangling):
/// `<T as Trait>` with both named by their last segment, or the inherent type's last segment, without
/// generic arguments.
fn impl_name(demangled: &str, namespace: &str) -> Option<String> {
    let last = |path: &str| {
        let path = path.split('<').next().unwrap_or(path).trim();
        path.rsplit("::").next().unwrap_or(path).to_owned()
    };
    if let Some(rest) = demangled.strip_prefix('<') {
        let inner = &rest[..matching_close(rest)?];
        return Some(match split_top_level(inner, " as ") {
            Some((ty, tr)) => format!("<{} as {}>", last(ty), last(tr)),
            // v0 mangling spells an inherent impl's path `<Type<Args>>::f`.
            None => last(inner),
        });
    }
    let rest = demangled.strip_prefix(namespace)?;
    let end = rest.find(['<', ':']).unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_owned())
}

/// The index in `s` of the `>` that closes a `<` opened just before `s`.
fn matching_close(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if i > 0 && s[..i].ends_with('-') => {} // `->` in a fn type
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `s` split at the first `sep` outside any `<...>`.
fn split_top_level<'s>(s: &'s str, sep: &str) -> Option<(&'s str, &'s str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if !s[..i].ends_with('-') => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(sep) => {
                return Some((&s[..i], &s[i + sep.len()..]));
            }
            _ => {}
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::impl_name;

    #[test]
    fn impl_blocks_are_named_after_what_they_implement() {
        assert_eq!(
            impl_name(
                "tokio::sync::mutex::Mutex<T>::lock::{{closure}}",
                "tokio::sync::mutex::"
            ),
            Some("Mutex".into())
        );
        assert_eq!(
            impl_name(
                "<F as axum::handler::Handler<(M, T1), S>>::call::{{closure}}",
                "axum::handler::"
            ),
            Some("<F as Handler>".into())
        );
        assert_eq!(
            impl_name("<fn() -> u8 as core::ops::Fn<()>>::call", "core::ops::"),
            Some("<fn() -> u8 as Fn>".into()),
            "a `->` is not a closing bracket"
        );
        assert_eq!(
            impl_name(
                "<tokio::sync::mpsc::bounded::Receiver<()>>::recv::{closure#0}",
                "tokio::sync::mpsc::bounded::"
            ),
            Some("Receiver".into()),
            "v0 mangling"
        );
        assert_eq!(impl_name("other::path::f", "mini_redis::server::"), None);
    }
}
