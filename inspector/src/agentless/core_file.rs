//! An ELF core file as a memory source: what a process's memory held when it was dumped, read with
//! the same walker as a live process.
//!
//! The core's `PT_LOAD` segments map addresses to file offsets. A segment's bytes past its `p_filesz`
//! were not dumped (`/proc/PID/coredump_filter` left them out: usually the executable's read-only
//! code and data, which come from the executable itself), and a truncated core ends early: reads
//! there fail, and are counted as unreadable, never guessed. The notes give the process (`NT_PRPSINFO`:
//! pid and name), its threads' registers (`NT_PRSTATUS`), its auxiliary vector (`NT_AUXV`: the
//! executable's entry point) and its mapped files (`NT_FILE`: which file the executable was, and where
//! it was loaded).
//!
//! Reads are `pread`s of the ranges asked for, never the whole file and never a mapping: a core
//! truncated or rewritten while it is read gives failed reads, not a SIGBUS; the page cache makes
//! repeated reads as cheap as a mapping's.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use asyncdump_walker::{Memory, Read, Region, Unreadable};
use object::elf::{FileHeader64, PF_W, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadCache};

use crate::error::TargetError;
use crate::threads::{Mapping, Thread, registers};

/// One `PT_LOAD` segment: `memsz` bytes at `vaddr`, of which the first `filesz` are in the file at
/// `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
    writable: bool,
}

/// A core file, opened.
pub struct CoreFile {
    file: File,
    /// The file's length: a segment that claims bytes past it was cut off.
    len: u64,
    pub path: PathBuf,
    segments: Vec<Segment>,
    pub pid: u32,
    pub program: String,
    /// Each thread's registers, where its stack starts.
    pub threads: Vec<Thread>,
    /// The files it had mapped (`NT_FILE`).
    pub mapped: Vec<Mapping>,
    /// `AT_ENTRY` of the auxiliary vector: the executable's entry point.
    pub entry: Option<u64>,
    /// A note segment runs past the end of the file: the core was cut off.
    pub notes_cut: bool,
}

const NT_PRSTATUS: u32 = 1;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_FILE: u32 = 0x4649_4c45;
const AT_ENTRY: u64 = 9;

/// Most bytes of note segments read: a real core's notes are a few kilobytes a thread and its file
/// mappings; past this a core is taken as damaged there, and read as if cut.
const MAX_NOTE_BYTES: u64 = 64 << 20;

/// Most threads read from a core's notes: a census or a wait graph over more is the same story.
const MAX_THREADS: usize = 16_384;

/// `pr_pid` in `NT_PRPSINFO`, and `pr_fname` (16 bytes).
const PRPSINFO_PID: usize = 24;
const PRPSINFO_FNAME: usize = 40;

impl CoreFile {
    /// Opens and parses the core at `path`: its segments and notes only, nothing else is read.
    pub fn open(path: &Path) -> Result<CoreFile, TargetError> {
        let not_core = |detail: String| TargetError::CoreUnreadable {
            path: path.to_owned(),
            detail,
        };
        let io = |e: std::io::Error| not_core(format!("cannot open it ({e})"));
        let (file, len) = crate::input::open_regular(path).map_err(io)?;
        let cache = ReadCache::new(file.try_clone().map_err(io)?);
        let header = FileHeader64::<Endianness>::parse(&cache)
            .map_err(|e| not_core(format!("not a 64-bit ELF file ({e})")))?;
        let endian = header.endian().map_err(|e| not_core(e.to_string()))?;
        if header.e_type(endian).0 != object::elf::ET_CORE.0 {
            return Err(not_core("an ELF file, but not a core (ET_CORE)".into()));
        }
        let machine = header.e_machine(endian).0;
        if machine != super::OUR_MACHINE {
            return Err(not_core(format!(
                "a core of another architecture (ELF machine {machine})"
            )));
        }
        let phdrs = header
            .program_headers(endian, &cache)
            .map_err(|e| not_core(format!("its program headers are damaged ({e})")))?;
        let mut core = CoreFile {
            file,
            len,
            path: path.to_owned(),
            segments: Vec::new(),
            pid: 0,
            program: String::new(),
            threads: Vec::new(),
            mapped: Vec::new(),
            entry: None,
            notes_cut: false,
        };
        for ph in phdrs {
            if ph.p_type(endian).0 == PT_LOAD.0 {
                core.segments.push(Segment {
                    vaddr: ph.p_vaddr(endian),
                    memsz: ph.p_memsz(endian),
                    offset: ph.p_offset(endian),
                    filesz: ph.p_filesz(endian),
                    writable: ph.p_flags(endian).0 & PF_W.0 != 0,
                });
            }
            let note_end = ph.p_offset(endian).saturating_add(ph.p_filesz(endian));
            if ph.p_type(endian).0 == object::elf::PT_NOTE.0 && note_end > core.len {
                core.notes_cut = true;
            }
            if ph.p_type(endian).0 == object::elf::PT_NOTE.0 {
                core.read_notes(
                    endian,
                    ph.p_offset(endian),
                    ph.p_filesz(endian),
                    ph.p_align(endian),
                );
            }
        }
        core.segments.sort_unstable_by_key(|s| s.vaddr);
        if core.segments.is_empty() {
            return Err(not_core("it has no memory segments".into()));
        }
        Ok(core)
    }

    /// Reads a note segment's notes, the first [`MAX_NOTE_BYTES`] of it at most (more is marked cut,
    /// as a core cut short is). A damaged note segment loses its notes, not the core.
    fn read_notes(&mut self, endian: Endianness, offset: u64, size: u64, align: u64) {
        if size > MAX_NOTE_BYTES {
            self.notes_cut = true;
        }
        let mut bytes = vec![0u8; size.min(MAX_NOTE_BYTES).min(self.len) as usize];
        if self.file.read_exact_at(&mut bytes, offset).is_err() {
            return;
        }
        let Ok(mut notes) =
            object::read::elf::NoteIterator::<FileHeader64<Endianness>>::new(endian, align, &bytes)
        else {
            return;
        };
        while let Ok(Some(note)) = notes.next() {
            self.note(note.n_type(endian).0, note.name(), note.desc());
        }
    }

    /// Takes what one note says.
    fn note(&mut self, n_type: u32, name: &[u8], desc: &[u8]) {
        if name != b"CORE" {
            return;
        }
        match n_type {
            NT_PRSTATUS if self.threads.len() < MAX_THREADS => {
                self.threads.extend(registers::from_prstatus(desc))
            }
            NT_PRSTATUS => self.notes_cut = true,
            NT_PRPSINFO => {
                if let Some(pid) = desc.get(PRPSINFO_PID..PRPSINFO_PID + 4) {
                    self.pid = u32::from_ne_bytes(pid.try_into().unwrap_or_default());
                }
                if let Some(name) = desc.get(PRPSINFO_FNAME..PRPSINFO_FNAME + 16) {
                    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                    self.program = String::from_utf8_lossy(&name[..end]).into_owned();
                }
            }
            NT_AUXV => {
                let pairs = desc.chunks_exact(16);
                self.entry = pairs
                    .map(|p| (word_of(&p[..8]), word_of(&p[8..])))
                    .find(|&(k, _)| k == AT_ENTRY)
                    .map(|(_, v)| v);
            }
            NT_FILE => self.mapped = mapped_files(desc),
            _ => {}
        }
    }

    /// The executable: its path as the process had it, and the address its file offset 0 was
    /// mapped at (the mapping that holds the entry point, and that file's first mapping).
    pub fn executable(&self) -> Option<(&Path, u64)> {
        let entry = self.entry?;
        let text = self
            .mapped
            .iter()
            .find(|m| (m.start..m.end).contains(&entry))?;
        let first = (self.mapped.iter())
            .filter(|m| m.path == text.path)
            .find(|m| m.offset == 0)?;
        Some((text.path.as_path(), first.start))
    }

    /// The program it ran, as people name it: its executable's file name, whole, where the core
    /// names the executable, else the 15 bytes of its name `NT_PRPSINFO` keeps.
    pub fn program(&self) -> String {
        let file = self.executable().and_then(|(path, _)| path.file_name());
        file.map_or_else(
            || self.program.clone(),
            |f| {
                f.to_string_lossy()
                    .trim_end_matches(" (deleted)")
                    .to_owned()
            },
        )
    }

    /// Where a census looks: the writable segments that map no file (heap, arenas, stacks), those
    /// holding a thread's stack pointer marked as stacks; only as far as the file holds them (the
    /// rest cannot be read, and a segment may claim any size: see [`CoreFile::missing_bytes`]).
    pub fn regions(&self) -> Vec<Region> {
        (self.anonymous().filter(|s| self.held(s) > 0))
            .map(|s| Region {
                start: s.vaddr,
                end: s.vaddr.saturating_add(self.held(s)),
                stack: (self.threads.iter())
                    .any(|t| (s.vaddr..s.vaddr.saturating_add(s.memsz)).contains(&t.regs.sp)),
            })
            .collect()
    }

    /// Bytes of the census's memory the core does not hold: left out when it was dumped, or cut off.
    pub fn missing_bytes(&self) -> u64 {
        (self.anonymous())
            .map(|s| s.memsz - self.held(s))
            .fold(0, u64::saturating_add)
    }

    /// The writable segments that map no file, as far as the file holds them.
    fn anonymous(&self) -> impl Iterator<Item = &Segment> {
        let file_backed = |s: &Segment| {
            let end = s.vaddr.saturating_add(self.held(s));
            (self.mapped.iter()).any(|m| m.start < end && s.vaddr < m.end)
        };
        (self.segments.iter()).filter(move |s| s.writable && !file_backed(s))
    }

    /// Bytes of `s` the file really holds.
    fn held(&self, s: &Segment) -> u64 {
        let end = s.offset.saturating_add(s.filesz).min(self.len);
        end.saturating_sub(s.offset).min(s.memsz)
    }

    /// Reads `dst.len()` bytes at `addr`, across adjacent segments; `false` if any is not held.
    fn read_at(&self, mut addr: u64, mut dst: &mut [u8]) -> bool {
        while !dst.is_empty() {
            let i = self.segments.partition_point(|s| s.vaddr <= addr);
            let Some(s) = i.checked_sub(1).map(|i| self.segments[i]) else {
                return false;
            };
            let into = addr - s.vaddr;
            let held = self.held(&s);
            if into >= held {
                return false;
            }
            let n = (held - into).min(dst.len() as u64) as usize;
            let (now, rest) = dst.split_at_mut(n);
            // `held` keeps `offset + into` within the file; a read past the top of the address
            // space is no read.
            if self.file.read_exact_at(now, s.offset + into).is_err() {
                return false;
            }
            dst = rest;
            let Some(next) = addr.checked_add(n as u64) else {
                return dst.is_empty();
            };
            addr = next;
        }
        true
    }
}

impl Memory for CoreFile {
    fn read_many(&self, reads: &mut [Read<'_>]) -> Result<(), Unreadable> {
        for r in reads.iter_mut() {
            r.failed = r.addr == 0 || !self.read_at(r.addr, r.dst);
        }
        Ok(())
    }
}

/// Whether the file at `path` starts as an ELF core does (what `watch --from` tells apart from a
/// snapshot file by).
pub fn is_core(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 18];
    let read = crate::input::open_regular(path).and_then(|(mut f, _)| f.read_exact(&mut head));
    // e_type 4 (ET_CORE), little-endian as on every architecture this asyncdump reads.
    read.is_ok() && head[..4] == *b"\x7fELF" && head[16..18] == [4, 0]
}

/// Most program headers and note bytes read from an image in memory.
const MAX_PHDRS: usize = 64;
const MAX_NOTES: usize = 4096;

/// The GNU build-id of the ELF image whose file offset 0 is mapped at `base` in `mem`, read from
/// its program headers' notes; `None` when the memory does not hold them (a core keeps an
/// executable's first page when `coredump_filter` bit 4 is set, as by default).
pub fn build_id_at(mem: &impl Memory, base: u64) -> Option<Vec<u8>> {
    let ehdr = mem.read_vec(base, 64)?;
    if &ehdr[..4] != b"\x7fELF" || ehdr[4] != 2 {
        return None;
    }
    let half = |b: &[u8], at: usize| u16::from_ne_bytes([b[at], b[at + 1]]) as usize;
    let phoff = word_of(&ehdr[0x20..0x28]);
    let (entsize, count) = (half(&ehdr, 0x36), half(&ehdr, 0x38).min(MAX_PHDRS));
    if entsize < 56 {
        return None;
    }
    let phdrs = mem.read_vec(base.checked_add(phoff)?, entsize * count)?;
    let phdr = |i: usize| &phdrs[i * entsize..i * entsize + 56];
    // The image's load bias: its first PT_LOAD maps file offset p_offset at p_vaddr.
    let first = (0..count)
        .map(phdr)
        .find(|p| p[..4] == 1u32.to_ne_bytes())?;
    let bias = base.wrapping_sub(word_of(&first[0x10..0x18]).wrapping_sub(word_of(&first[8..16])));
    (0..count)
        .map(phdr)
        .filter(|p| p[..4] == 4u32.to_ne_bytes())
        .find_map(|p| {
            let len = (word_of(&p[0x28..0x30]) as usize).min(MAX_NOTES);
            let notes = mem.read_vec(bias.wrapping_add(word_of(&p[0x10..0x18])), len)?;
            gnu_build_id(&notes)
        })
}

/// The `NT_GNU_BUILD_ID` note among `notes` (4-byte aligned name and descriptor).
fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0usize;
    let u32_at =
        |i: usize| Some(u32::from_ne_bytes(notes.get(i..i + 4)?.try_into().ok()?) as usize);
    while at + 12 <= notes.len() {
        let (namesz, descsz, kind) = (u32_at(at)?, u32_at(at + 4)?, u32_at(at + 8)?);
        let name_at = at + 12;
        let desc_at = name_at.checked_add(namesz.next_multiple_of(4))?;
        let end = desc_at.checked_add(descsz.next_multiple_of(4))?;
        if kind == 3 && notes.get(name_at..name_at + namesz)? == b"GNU\0" {
            return notes.get(desc_at..desc_at + descsz).map(<[u8]>::to_vec);
        }
        at = end;
    }
    None
}

fn word_of(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b.try_into().unwrap_or_default())
}

/// `NT_FILE`'s mapped files: a count, the page size, `count` (start, end, page offset) triples, then
/// as many NUL-terminated names. A note that does not hold together gives what it held.
fn mapped_files(desc: &[u8]) -> Vec<Mapping> {
    let word = |i: usize| desc.get(i * 8..i * 8 + 8).map(word_of);
    let (Some(count), Some(page)) = (word(0), word(1)) else {
        return Vec::new();
    };
    // Each entry takes 24 bytes: a count the note cannot hold is a lie.
    let count = count.min(desc.len() as u64 / 24) as usize;
    let names_at = (2 + 3 * count) * 8;
    let Some(names) = desc.get(names_at..) else {
        return Vec::new();
    };
    let mut names = names.split(|&b| b == 0);
    (0..count)
        .map_while(|i| {
            let (start, end, pages) = (word(2 + 3 * i)?, word(3 + 3 * i)?, word(4 + 3 * i)?);
            Some(Mapping {
                start,
                end,
                offset: pages.saturating_mul(page),
                path: PathBuf::from(String::from_utf8_lossy(names.next()?).into_owned()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nt_file(entries: &[(u64, u64, u64, &str)]) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend((entries.len() as u64).to_ne_bytes());
        d.extend(4096u64.to_ne_bytes());
        for &(s, e, p, _) in entries {
            d.extend(s.to_ne_bytes());
            d.extend(e.to_ne_bytes());
            d.extend(p.to_ne_bytes());
        }
        for &(.., n) in entries {
            d.extend(n.as_bytes());
            d.push(0);
        }
        d
    }

    #[test]
    fn mapped_files_are_read_with_byte_offsets_and_a_lying_count_is_bounded() {
        let d = nt_file(&[(0x1000, 0x3000, 0, "/bin/x"), (0x3000, 0x4000, 2, "/bin/x")]);
        let m = mapped_files(&d);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[1].start, m[1].offset, m[1].path.to_str()),
            (0x3000, 8192, Some("/bin/x"))
        );
        let mut lying = d.clone();
        lying[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(mapped_files(&lying).len() <= 2);
        assert!(mapped_files(&d[..20]).is_empty());
        assert!(mapped_files(&d[..60]).is_empty(), "names cut off: no entry");
    }

    /// This process's own executable, as mapped: the build-id read from its memory is the file's.
    #[test]
    fn the_build_id_is_read_from_an_image_in_memory() {
        let exe = crate::attach::procfs::OWN_EXE;
        let me = std::process::id();
        let from_file = crate::dwarf::build_id(Path::new(exe)).unwrap();
        let inode = std::fs::metadata(exe).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
        let maps = crate::attach::procfs::maps(me).unwrap();
        let base = (asyncdump_walker::memory::maps::lines(&maps))
            .find(|m| m.offset == 0 && inode.as_ref().ok() == Some(&m.inode))
            .map(|m| m.start)
            .expect("the executable's first mapping");
        let mem = asyncdump_walker::ProcessMemory::own();
        let from_memory = build_id_at(&mem, base).map(|id| crate::dwarf::hex(&id));
        assert_eq!(from_memory, from_file);
        assert!(from_memory.is_some(), "the test binary has a build-id");
        assert_eq!(build_id_at(&mem, 0x1000), None, "nothing mapped there");
    }

    #[test]
    fn a_file_that_is_not_a_core_says_what_it_is() {
        let scratch = crate::testing::scratch();
        let path = scratch.path().join("text");
        std::fs::write(&path, b"hello").unwrap();
        let Err(e) = CoreFile::open(&path) else {
            panic!("a text file opened as a core");
        };
        assert!(e.to_string().contains("not a 64-bit ELF file"), "{e}");
        let exe = CoreFile::open(Path::new(crate::attach::procfs::OWN_EXE));
        let e = exe.err().expect("an executable is no core");
        assert!(e.to_string().contains("not a core (ET_CORE)"), "{e}");
    }
}
