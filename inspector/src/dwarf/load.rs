//! Reading a binary from disk: its bytes, its build-id, where it is mapped in a process (the load bias),
//! and, when it has no type info, its separate debug file, looked up by build-id
//! (`/usr/lib/debug/.build-id/xx/yyyy.debug`) or `.gnu_debuglink` (beside the binary, in its `.debug/`,
//! and under `/usr/lib/debug`), as gdb does; `$ASYNCDUMP_DEBUG_DIR` replaces `/usr/lib/debug`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gimli::RunTimeEndian;
use object::{Object, ObjectSection, ObjectSegment};
use rustc_hash::FxHashMap;

use super::{Debug, DwarfError};

/// An executable or debug file, parsed over its file: only the parts asked for are read (its
/// headers, the sections a plan needs), never the whole file at once.
type Elf<'a> = object::File<'a, &'a object::ReadCache<std::fs::File>>;

/// The load bias of a running process's executable: where its first mapping at file offset 0 starts, less
/// `vaddr_at_zero`, the virtual address the ELF file gives that offset ([`Debug::vaddr_at_zero`]; zero
/// for most PIE executables).
pub fn load_bias(pid: u32, vaddr_at_zero: Option<u64>) -> Result<u64, DwarfError> {
    let exe = crate::attach::procfs::exe(pid);
    let bad = |detail: String| DwarfError::Object {
        path: exe.clone(),
        detail,
    };
    let vaddr_at_zero = vaddr_at_zero.ok_or_else(|| bad("no loadable segment".into()))?;
    let start = crate::attach::procfs::exe_image(pid)
        .map_err(|e| bad(e.to_string()))?
        .ok_or_else(|| {
            bad(format!(
                "no mapping of {} at its file offset 0 in process {pid}",
                exe.display()
            ))
        })?;
    Ok(start.saturating_sub(vaddr_at_zero))
}

/// The virtual address the first `PT_LOAD` gives file offset 0.
fn vaddr_at_zero<'d, R: object::ReadRef<'d>>(obj: &object::File<'d, R>) -> Option<u64> {
    let first = obj.segments().next()?;
    Some(first.address().saturating_sub(first.file_range().0))
}

/// Every word of the executable's data that holds the address of code, as `(code address, where the
/// word is)`, sorted: what a static table of function pointers (a vtable) is made of. Under PIE such
/// words are relocations (`R_*_RELATIVE`, whose addend is the address) and the file holds zeros there;
/// otherwise, and with packed relocations, the file holds the address itself.
/// The executable's writable sections as the file has them (see [`Debug::initial`]); not its
/// thread-local templates, which no `static` lies in.
fn initial_data(obj: &Elf<'_>) -> Vec<super::InitialData> {
    use object::SectionKind;
    (obj.sections())
        .filter_map(|s| {
            let bytes = match s.kind() {
                SectionKind::Data => Some(s.data().ok()?.to_vec()),
                SectionKind::UninitializedData => None,
                _ => return None,
            };
            Some(super::InitialData {
                addr: s.address(),
                size: s.size(),
                bytes,
            })
        })
        .filter(|d| d.bytes.as_ref().is_none_or(|b| b.len() as u64 == d.size))
        .collect()
}

fn code_words(obj: &Elf<'_>) -> Vec<(u64, u64)> {
    use object::SectionKind;
    let code: Vec<(u64, u64)> = obj
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    let in_code = |a: u64| code.iter().any(|&(lo, hi)| (lo..hi).contains(&a));
    let mut out: Vec<(u64, u64)> = Vec::new();
    if let Some(relocs) = obj.dynamic_relocations() {
        for (at, r) in relocs {
            let relative = matches!(
                r.flags(),
                object::RelocationFlags::Elf { r_type }
                    if r_type == object::elf::R_X86_64_RELATIVE && obj.architecture() == object::Architecture::X86_64
                    || r_type == object::elf::R_AARCH64_RELATIVE && obj.architecture() == object::Architecture::Aarch64
            );
            let target = r.addend() as u64;
            if relative && in_code(target) {
                out.push((target, at));
            }
        }
    }
    let little = obj.is_little_endian();
    for s in obj.sections().filter(|s| {
        matches!(
            s.kind(),
            SectionKind::Data | SectionKind::ReadOnlyData | SectionKind::ReadOnlyDataWithRel
        )
    }) {
        let Ok(data) = s.data() else { continue };
        let base = s.address();
        let skip = (base.wrapping_neg() % 8) as usize;
        for (i, w) in data
            .get(skip..)
            .unwrap_or_default()
            .chunks_exact(8)
            .enumerate()
        {
            let w: [u8; 8] = w.try_into().expect("chunks of 8");
            let v = if little {
                u64::from_le_bytes(w)
            } else {
                u64::from_be_bytes(w)
            };
            if v != 0 && in_code(v) {
                out.push((v, base + (skip + i * 8) as u64));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The GNU build-id of an ELF file, hex; `None` if it has none.
/// Reads only the headers and the note it is in, not the whole file (nor its symbol table, as
/// parsing it as an object would): the plan cache is looked up by it before any DWARF is read.
pub fn build_id(path: &Path) -> Result<Option<String>, DwarfError> {
    use object::read::elf::{FileHeader as _, SectionHeader as _};
    let (file, _) = open_regular(path)?;
    let cache = object::ReadCache::new(file);
    let bad = |e: object::Error| DwarfError::Object {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    let (header, endian) = elf_header(&cache).map_err(bad)?;
    let sections = header.sections(endian, &cache).map_err(bad)?;
    for section in sections.iter() {
        let Ok(Some(mut notes)) = section.notes(endian, &cache) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            let gnu_build_id = note.n_type(endian) == object::elf::NT_GNU_BUILD_ID;
            if note.name() == object::elf::ELF_NOTE_GNU && gnu_build_id {
                return Ok(Some(hex(note.desc())));
            }
        }
    }
    Ok(None)
}

/// A 64-bit ELF file's header, with its byte order.
fn elf_header(
    cache: &object::ReadCache<std::fs::File>,
) -> object::Result<(
    &object::elf::FileHeader64<object::Endianness>,
    object::Endianness,
)> {
    use object::read::elf::FileHeader as _;
    let header = object::elf::FileHeader64::<object::Endianness>::parse(cache)?;
    Ok((header, header.endian()?))
}

/// Whether the executable at `path` links tokio's runtime: a symbol of `tokio::runtime` in its
/// symbol tables' names (legacy and v0 manglings both spell the path `5tokio7runtime`). The string
/// tables are searched a megabyte at a time, so that a program with a huge (or sparse) symbol table
/// costs `ps` no more memory than a small one.
pub fn links_tokio_runtime(path: &Path) -> bool {
    use object::read::elf::{FileHeader as _, SectionHeader as _};
    let Ok((file, _)) = open_regular(path) else {
        return false;
    };
    let cache = object::ReadCache::new(file);
    let Ok((header, endian)) = elf_header(&cache) else {
        return false;
    };
    let Ok(sections) = header.sections(endian, &cache) else {
        return false;
    };
    let strings = (sections.iter()).filter(|s| {
        let name = sections.section_name(endian, s).unwrap_or_default();
        s.sh_type(endian) == object::elf::SHT_STRTAB && (name == b".strtab" || name == b".dynstr")
    });
    let ranges: Vec<(u64, u64)> = strings.filter_map(|s| s.file_range(endian)).collect();
    let file = cache.into_inner();
    (ranges.into_iter()).any(|(offset, size)| file_holds(&file, offset, size, b"5tokio7runtime"))
}

/// Whether `size` bytes of `file` from `offset` hold `needle`, read a megabyte at a time.
fn file_holds(file: &std::fs::File, offset: u64, size: u64, needle: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 1 << 20;
    let mut buf = vec![0u8; CHUNK + needle.len()];
    let (mut at, end) = (offset, offset.saturating_add(size));
    // The bytes carried over from the chunk before, so that a name across two is found.
    let mut kept = 0;
    while at < end {
        let want = (CHUNK as u64).min(end - at) as usize;
        let Ok(n) = file.read_at(&mut buf[kept..kept + want], at) else {
            return false;
        };
        if n == 0 {
            return false;
        }
        let filled = kept + n;
        if memchr::memmem::find(&buf[..filled], needle).is_some() {
            return true;
        }
        kept = (needle.len() - 1).min(filled);
        buf.copy_within(filled - kept..filled, 0);
        at += n as u64;
    }
    false
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Largest executable or debug file read: far above any real one, and what keeps `/dev/zero`-like
/// input from filling memory.
pub const MAX_BINARY_BYTES: u64 = 16 << 30;

/// Opens an executable or debug file: a regular file, at most [`MAX_BINARY_BYTES`]; with its length.
fn open_regular(path: &Path) -> Result<(std::fs::File, u64), DwarfError> {
    let io = |source| DwarfError::Io {
        path: path.to_owned(),
        source,
    };
    let (file, len) = crate::input::open_regular(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => DwarfError::Object {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        _ => io(e),
    })?;
    if len > MAX_BINARY_BYTES {
        return Err(DwarfError::Object {
            path: path.to_owned(),
            detail: "over 16 GiB".to_owned(),
        });
    }
    Ok((file, len))
}

/// Opens an executable or debug file for reading on demand (see [`open_regular`]).
fn read(path: &Path) -> Result<object::ReadCache<std::fs::File>, DwarfError> {
    Ok(object::ReadCache::new(open_regular(path)?.0))
}

fn parse<'a>(
    path: &Path,
    file: &'a object::ReadCache<std::fs::File>,
) -> Result<Elf<'a>, DwarfError> {
    object::File::parse(file).map_err(|e| DwarfError::Object {
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
fn debug_file_candidates(exe: &Path, obj: &Elf<'_>) -> Vec<PathBuf> {
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

/// The waker vtables among `code_words` (see [`Debug::waker_vtables`]), named from the symbol table:
/// symbols, not DWARF, so that finding them costs the DWARF parse nothing. A stripped executable has
/// none, and its foreign wakers go unnamed.
fn waker_vtables(obj: &Elf<'_>, code_words: &[(u64, u64)]) -> Vec<(u64, String)> {
    let at: FxHashMap<u64, u64> = code_words.iter().map(|&(code, w)| (w, code)).collect();
    let symbols = obj.symbol_map();
    let mut out = Vec::new();
    for (&word, &code) in &at {
        if !(1..4).all(|k| at.contains_key(&(word + 8 * k))) {
            continue;
        }
        let Some(sym) = symbols.before(code).filter(|s| s.address() == code) else {
            continue;
        };
        let name = format!("{:#}", rustc_demangle::demangle(sym.name()));
        // `path::clone_arc_raw` (legacy mangling) or `path::clone_arc_raw::<W>` (v0).
        let path = name.split("::<").next().unwrap_or(&name);
        let path = path.split('<').next().unwrap_or(path);
        let last = path.rsplit("::").next().unwrap_or(path);
        if last.starts_with("clone") && path.contains("::") {
            out.push((word, path.to_owned()));
        }
    }
    out.sort_unstable();
    out
}

impl Debug {
    /// Loads the DWARF of the executable at `path`, or of its separate debug file when the executable
    /// itself has no type info. The debug file must have the executable's build-id.
    pub fn load(path: &Path) -> Result<Debug, DwarfError> {
        Debug::load_with(path, None)
    }

    /// [`Debug::load`], with the DWARF from `debug_file` when one is given (`--debug-file`): it
    /// must have the executable's build-id.
    pub fn load_with(path: &Path, debug_file: Option<&Path>) -> Result<Debug, DwarfError> {
        let bytes = read(path)?;
        let obj = parse(path, &bytes)?;
        let build_id = obj.build_id().ok().flatten().map(hex);
        let at_zero = vaddr_at_zero(&obj);
        let code_words = code_words(&obj);
        let waker_vtables = waker_vtables(&obj, &code_words);
        let given = match debug_file {
            Some(debug) => {
                let dbytes = read(debug)?;
                let dobj = parse(debug, &dbytes)?;
                let found = dobj.build_id().ok().flatten().map(hex);
                if found != build_id {
                    return Err(DwarfError::WrongDebugFile {
                        debug: debug.to_owned(),
                        found,
                        exe: path.to_owned(),
                        wanted: build_id,
                    });
                }
                if let Some(detail) = layout_differs(&obj, &dobj) {
                    return Err(DwarfError::OtherBuild {
                        debug: debug.to_owned(),
                        exe: path.to_owned(),
                        detail,
                    });
                }
                Some(from_object(debug, &dobj, build_id.clone()))
            }
            None => None,
        };
        let found = match given.unwrap_or_else(|| from_object(path, &obj, build_id.clone())) {
            Err(DwarfError::NoTypes { .. }) => debug_file_candidates(path, &obj)
                .iter()
                .find_map(|candidate| {
                    let bytes = read(candidate).ok()?;
                    let dobj = object::File::parse(&bytes).ok()?;
                    if dobj.build_id().ok().flatten().map(hex) != build_id
                        || layout_differs(&obj, &dobj).is_some()
                    {
                        return None;
                    }
                    from_object(candidate, &dobj, build_id.clone()).ok()
                })
                .ok_or_else(|| match not_rust(&obj) {
                    // `/proc/PID/exe` says less than the file it links to.
                    Some(evidence) => DwarfError::NotRust {
                        path: std::fs::read_link(path).unwrap_or_else(|_| path.to_owned()),
                        evidence,
                    },
                    None => DwarfError::NoTypes {
                        path: path.to_owned(),
                    },
                }),
            other => other,
        };
        // From the executable in every case: a separate debug file is not what is mapped.
        let initial = initial_data(&obj);
        found.map(|d| Debug {
            vaddr_at_zero: at_zero,
            code_words,
            waker_vtables,
            initial,
            ..d
        })
    }
}

/// Why `obj` is no Rust program, where nothing in it says it is one: rustc names itself in
/// `.comment`, mangles its symbols its own ways (`_ZN…17h…E`, `_R…`), and the standard library's
/// panic locations name its sources (`library/core/src/…` in `.rodata`), kept in stripped builds
/// too. `None`: it is one, or may be. Asked only once it cannot be read, so its cost is no dump's.
fn not_rust(obj: &Elf<'_>) -> Option<String> {
    use object::ObjectSymbol;
    let data = |name| obj.section_by_name(name).and_then(|s| s.data().ok());
    let compilers: Vec<String> = (data(".comment").unwrap_or_default().split(|&b| b == 0))
        .filter(|c| !c.is_empty())
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let rustc = compilers.iter().any(|c| c.starts_with("rustc "));
    let mangled =
        |name: &str| name.starts_with("_R") || (name.starts_with("_ZN") && name.contains("17h"));
    let symbols = obj.symbols().chain(obj.dynamic_symbols());
    let rust_symbols = (symbols.take(1 << 20)).any(|s| s.name().is_ok_and(mangled));
    let rodata = data(".rodata").unwrap_or_default();
    let sources = memchr::memmem::find(rodata, b"library/core/src/").is_some();
    if rustc || rust_symbols || sources {
        return None;
    }
    Some(match compilers.is_empty() {
        true => "no compiler named in it, no Rust symbols, no Rust standard library".to_owned(),
        false => format!(
            "built by {}; no Rust symbols, no Rust standard library",
            compilers.join(", ")
        ),
    })
}

/// How a debug file's sections differ from the executable's, if they do: a debug file keeps every
/// section header of its build (`objcopy --only-keep-debug` empties the sections, never moves them),
/// so an allocated section of the same name at another address or of another size means another
/// build, whatever build-id it carries.
fn layout_differs(exe: &Elf<'_>, debug: &Elf<'_>) -> Option<String> {
    let placed = |s: &object::Section<'_, '_, _>| {
        s.address() != 0 && s.size() != 0 && s.name().is_ok_and(|n| !n.is_empty())
    };
    for s in exe.sections().filter(placed) {
        let name = s.name().unwrap_or_default();
        let Some(d) = debug.section_by_name(name) else {
            continue;
        };
        if (d.address(), d.size()) != (s.address(), s.size()) {
            return Some(format!(
                "its {name} is at {:#x}, {} bytes, the executable's at {:#x}, {} bytes",
                d.address(),
                d.size(),
                s.address(),
                s.size()
            ));
        }
    }
    None
}

/// The DWARF of an object file, its sections decompressed as they are asked for.
fn from_object(path: &Path, obj: &Elf<'_>, build_id: Option<String>) -> Result<Debug, DwarfError> {
    let endian = if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    for s in obj.sections() {
        let name = s.name().unwrap_or_default();
        if name.starts_with(".debug_") || name.starts_with(".zdebug_") {
            check_section_size(path, name, &s)?;
        }
    }
    let sections = |name: &str| -> Option<Cow<'_, [u8]>> {
        obj.section_by_name(name)
            .and_then(|s| s.uncompressed_data().ok())
    };
    Debug::from_sections(path, endian, &sections, build_id)
}

/// Largest DWARF section read, decompressed: past any real program's (a large service's
/// `.debug_info` is tens of MB).
pub const MAX_SECTION_BYTES: u64 = 4 << 30;

/// How far a compressed DWARF section may claim to grow: real debug info compresses three to
/// twenty times; a claim past this is a bomb (a megabyte of zlib that says it holds a gigabyte).
const MAX_COMPRESSION_RATIO: u64 = 256;

/// Refuses a DWARF section whose (decompressed) size is past [`MAX_SECTION_BYTES`] or, compressed,
/// claims to grow past [`MAX_COMPRESSION_RATIO`]: checked on its header, before anything is
/// allocated for it.
fn check_section_size<'a>(
    path: &Path,
    name: &str,
    section: &object::Section<'a, '_, &'a object::ReadCache<std::fs::File>>,
) -> Result<(), DwarfError> {
    let refuse = |detail: String| DwarfError::Object {
        path: path.to_owned(),
        detail,
    };
    let range = section
        .compressed_file_range()
        .map_err(|e| refuse(format!("its {name} is damaged ({e})")))?;
    if range.uncompressed_size > MAX_SECTION_BYTES {
        return Err(refuse(format!(
            "its {name} claims {} bytes, past the {} this asyncdump reads",
            range.uncompressed_size, MAX_SECTION_BYTES
        )));
    }
    let compressed = range.format != object::CompressionFormat::None;
    let bound = (range.compressed_size.saturating_mul(MAX_COMPRESSION_RATIO)).saturating_add(4096);
    if compressed && range.uncompressed_size > bound {
        return Err(refuse(format!(
            "its {name} claims to decompress to {} bytes from {}: no debug info compresses so far (damaged, or a decompression bomb)",
            range.uncompressed_size, range.compressed_size
        )));
    }
    Ok(())
}

/// What names the code of one file (an executable or a shared library): its function and data
/// symbols, and its DWARF (from the file, or its separate debug file) for inlined calls and lines.
pub struct CodeSections {
    /// The virtual address the file gives its offset 0 (see [`Debug::vaddr_at_zero`]).
    pub vaddr_at_zero: u64,
    /// Function symbols.
    pub functions: SymbolTable,
    /// Data symbols (the program's statics).
    pub data: SymbolTable,
    /// Its DWARF, where it or its debug file has some.
    pub dwarf: Option<gimli::Dwarf<gimli::EndianArcSlice<RunTimeEndian>>>,
}

/// Symbols of one kind, sorted by address, their names (as mangled) in the file's string table.
#[derive(Default)]
pub struct SymbolTable {
    /// `(address, size, name's offset in strings)`.
    entries: Vec<(u64, u64, u32)>,
    strings: Vec<u8>,
}

impl SymbolTable {
    /// The symbol whose extent holds `vaddr` (one of size 0 holds only its own address): its start
    /// and name.
    pub fn at(&self, vaddr: u64) -> Option<(u64, &str)> {
        let i = self
            .entries
            .partition_point(|e| e.0 <= vaddr)
            .checked_sub(1)?;
        let (start, size, name) = self.entries[i];
        if vaddr - start >= size.max(1) {
            return None;
        }
        let name = self.strings.get(name as usize..)?;
        let end = memchr::memchr(0, name).unwrap_or(name.len());
        Some((start, std::str::from_utf8(&name[..end]).ok()?))
    }
}

/// `.symtab` (else `.dynsym`) read whole with its string table, in two reads, and parsed here: a
/// symbol's name read one at a time through the file costs a read each.
fn symbol_tables(obj: &Elf<'_>) -> (SymbolTable, SymbolTable) {
    let (mut functions, mut data) = (SymbolTable::default(), SymbolTable::default());
    let table = [(".symtab", ".strtab"), (".dynsym", ".dynstr")]
        .into_iter()
        .find_map(|(t, s)| Some((obj.section_by_name(t)?, obj.section_by_name(s)?)));
    let Some((symtab, strtab)) = table else {
        return (functions, data);
    };
    let (Ok(syms), Ok(strings)) = (symtab.data(), strtab.data()) else {
        return (functions, data);
    };
    let little = obj.is_little_endian();
    let word = |b: &[u8]| -> u64 {
        let b: [u8; 8] = b.try_into().unwrap_or_default();
        if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    };
    // Elf64_Sym: st_name (4), st_info (1), st_other (1), st_shndx (2), st_value (8), st_size (8).
    for sym in syms.chunks_exact(24) {
        let name: [u8; 4] = sym[0..4].try_into().unwrap_or_default();
        let name = if little {
            u32::from_le_bytes(name)
        } else {
            u32::from_be_bytes(name)
        };
        let shndx = if little {
            u16::from_le_bytes([sym[6], sym[7]])
        } else {
            u16::from_be_bytes([sym[6], sym[7]])
        };
        let (addr, size) = (word(&sym[8..16]), word(&sym[16..24]));
        let into = match sym[4] & 0xf {
            2 => &mut functions, // STT_FUNC
            1 => &mut data,      // STT_OBJECT
            _ => continue,
        };
        if shndx != 0 && addr != 0 && name != 0 {
            into.entries.push((addr, size, name));
        }
    }
    for t in [&mut functions, &mut data] {
        t.entries.sort_unstable();
        t.strings = strings.to_vec();
    }
    (functions, data)
}

/// The names of the code of the file at `path`: its symbol tables (`.symtab`, else `.dynsym`) and,
/// with `lines`, the DWARF of `debug_file` when given, else its own, else its separate debug
/// file's (found as [`Debug::load`] finds one, by build-id or debug link, checked to be of its
/// build). `None` where the file cannot be read as an object file.
pub fn code_sections(path: &Path, debug_file: Option<&Path>, lines: bool) -> Option<CodeSections> {
    let cache = read(path).ok()?;
    let obj = parse(path, &cache).ok()?;
    let (functions, data) = symbol_tables(&obj);
    let with_dwarf = |at: &Path, o: &Elf<'_>| {
        let has = o
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0);
        has.then(|| code_dwarf(at, o)).flatten()
    };
    let build_id = obj.build_id().ok().flatten().map(hex);
    let of_this_build = |candidate: &Path| {
        let cache = read(candidate).ok()?;
        let dobj = parse(candidate, &cache).ok()?;
        let same = dobj.build_id().ok().flatten().map(hex) == build_id
            && layout_differs(&obj, &dobj).is_none();
        same.then(|| with_dwarf(candidate, &dobj)).flatten()
    };
    let dwarf = match debug_file {
        _ if !lines => None,
        Some(debug) => of_this_build(debug),
        None => with_dwarf(path, &obj)
            .or_else(|| (debug_file_candidates(path, &obj).iter()).find_map(|c| of_this_build(c))),
    };
    Some(CodeSections {
        vaddr_at_zero: vaddr_at_zero(&obj).unwrap_or(0),
        functions,
        data,
        dwarf,
    })
}

/// The DWARF sections of `obj` that name code, each checked for size as [`Debug::load`] checks
/// them, decompressed.
fn code_dwarf(
    path: &Path,
    obj: &Elf<'_>,
) -> Option<gimli::Dwarf<gimli::EndianArcSlice<RunTimeEndian>>> {
    let endian = if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    use gimli::SectionId as S;
    // What naming code needs: units, their functions, inlined calls and line programs.
    const NEEDED: &[S] = &[
        S::DebugInfo,
        S::DebugAbbrev,
        S::DebugLine,
        S::DebugLineStr,
        S::DebugStr,
        S::DebugStrOffsets,
        S::DebugAddr,
        S::DebugRanges,
        S::DebugRngLists,
        S::DebugAranges,
    ];
    let load = |id: gimli::SectionId| -> Result<_, ()> {
        let section = obj
            .section_by_name(id.name())
            .filter(|_| NEEDED.contains(&id));
        let bytes: std::sync::Arc<[u8]> = match section {
            Some(s) => {
                check_section_size(path, id.name(), &s).map_err(drop)?;
                s.uncompressed_data().map_err(drop)?.into()
            }
            None => std::sync::Arc::from([]),
        };
        Ok(gimli::EndianArcSlice::new(bytes, endian))
    };
    gimli::Dwarf::load(load).ok()
}
