//! Walking a thread's stack from its registers, by the call frame information (`.eh_frame`) of the
//! files mapped where its return addresses point: the executable and the shared libraries (the C
//! library's system call wrappers are where a blocked thread's innermost frame is).
//!
//! Each file's sorted index (`.eh_frame_hdr`) is read from disk once, only for a file a frame is
//! in, and of its `.eh_frame` only the pages of the entries the walks look up. A step needs the canonical frame address from the stack or frame pointer
//! and the return address saved at an offset from it; a rule outside those (an expression, a
//! register other than the frame pointer, a frame pointer not known) ends the walk there. Every
//! word comes from the target's memory through [`Memory`]: a read that fails ends the walk, never
//! a guess.
//!
//! The callee-saved registers are followed too, frame by frame, for the locals optimised code keeps
//! in them: a caller's is where its callee saved it (the rule says at which offset from the frame
//! address), or, where no callee touched it, the callee's own. One not known in the innermost frame
//! (a thread read through `/proc` gives only its stack and instruction pointers) is known in a
//! caller only once a callee between them saved it.

use std::path::PathBuf;

use asyncdump_walker::Memory;
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, ParsedEhFrameHdr, RegisterRule,
    UnwindContext, UnwindSection,
};

/// Most frames walked per thread.
pub const MAX_FRAMES: usize = 256;

/// A file mapped into the process: `[start, end)` holds its bytes from `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: PathBuf,
}

/// Registers by DWARF number: wide enough for either architecture's general registers (x86_64
/// 0–16, aarch64 0–31).
pub const REGISTERS: usize = 32;

/// The registers a walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registers {
    pub pc: u64,
    pub sp: u64,
    /// The general registers by DWARF number, where known: a thread read through `/proc` gives
    /// none, a stopped one (`--stop`) and a core file every one.
    pub general: [Option<u64>; REGISTERS],
}

impl Registers {
    /// Only the stack and instruction pointers.
    pub fn pointers(pc: u64, sp: u64) -> Registers {
        Registers {
            pc,
            sp,
            general: [None; REGISTERS],
        }
    }

    /// The frame pointer, where known.
    pub fn fp(&self) -> Option<u64> {
        self.general[usize::from(RA_SP_FP.2)]
    }
}

/// One frame of a walked stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Where the frame's code is: the innermost frame's pc, for the others the return address less
    /// one (inside the call, which is the scope that matters).
    pub pc: u64,
    /// The stack pointer while the function runs (at its call, for the frames that called).
    pub sp: u64,
    /// The canonical frame address; `None` where the walk ended at this frame.
    pub cfa: Option<u64>,
    /// The general registers' values in this frame, where known: in the frames that called, the
    /// callee-saved ones only.
    pub general: [Option<u64>; REGISTERS],
}

impl Frame {
    /// Register `reg` (its DWARF number) in this frame: the stack pointer is always known.
    pub fn register(&self, reg: u16) -> Option<u64> {
        match reg {
            r if r == RA_SP_FP.1 => Some(self.sp),
            r => self.general.get(usize::from(r)).copied().flatten(),
        }
    }

    /// The frame pointer in this frame, where known.
    pub fn fp(&self) -> Option<u64> {
        self.general[usize::from(RA_SP_FP.2)]
    }
}

/// The call frame information of one file: its index read whole, its `.eh_frame` page by page as
/// the entries a walk needs are looked up (a walk needs a few of a file's thousands).
struct Unwind {
    eh_frame: LazyBytes,
    hdr: Vec<u8>,
    bases: BaseAddresses,
}

/// A range of a file read on demand, a page at a time, into a buffer of its whole length that is
/// never touched where it is not read (zeroed by the allocator, untouched pages cost nothing).
struct LazyBytes {
    file: std::fs::File,
    /// Where the range starts in the file.
    offset: u64,
    bytes: std::cell::RefCell<Vec<u8>>,
    /// The pages read, by index from the range's start.
    read: std::cell::RefCell<Vec<bool>>,
}

const LAZY_PAGE: usize = 4096;

impl LazyBytes {
    fn new(file: std::fs::File, offset: u64, len: usize) -> LazyBytes {
        LazyBytes {
            file,
            offset,
            bytes: std::cell::RefCell::new(vec![0; len]),
            read: std::cell::RefCell::new(vec![false; len.div_ceil(LAZY_PAGE)]),
        }
    }

    /// Reads the pages `[at, at + len)` covers that are not read yet; false where it cannot.
    fn load(&self, at: usize, len: usize) -> bool {
        use std::os::unix::fs::FileExt;
        let (mut bytes, mut read) = (self.bytes.borrow_mut(), self.read.borrow_mut());
        let Some(end) = at.checked_add(len).filter(|&e| e <= bytes.len()) else {
            return false;
        };
        for page in at / LAZY_PAGE..end.div_ceil(LAZY_PAGE) {
            if read[page] {
                continue;
            }
            let start = page * LAZY_PAGE;
            let stop = (start + LAZY_PAGE).min(bytes.len());
            let from = self.offset + start as u64;
            if self
                .file
                .read_exact_at(&mut bytes[start..stop], from)
                .is_err()
            {
                return false;
            }
            read[page] = true;
        }
        true
    }

    /// The little-endian (native) `u32` at `at`, read first if need be.
    fn u32_at(&self, at: usize) -> Option<u32> {
        if !self.load(at, 4) {
            return None;
        }
        let bytes = self.bytes.borrow();
        Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    }

    /// Reads the entry (a CIE or an FDE: its 32-bit length, then that many bytes) at `at`, and
    /// gives where the entry's CIE pointer field is (`at + 4`) and what it holds.
    fn entry(&self, at: usize) -> Option<(usize, u32)> {
        let len = self.u32_at(at)?;
        // A 64-bit length: no x86_64 or aarch64 compiler emits one in `.eh_frame`.
        if len == u32::MAX || !self.load(at, 4 + len as usize) {
            return None;
        }
        Some((at + 4, self.u32_at(at + 4)?))
    }
}

/// The files of one process, by where they are mapped, their frame information loaded on first use.
pub struct Modules {
    /// Ranges of mapped files, sorted, each with its module's index.
    ranges: Vec<(u64, u64, usize)>,
    /// Each range's file offset, by the range's index.
    offsets: Vec<u64>,
    modules: Vec<Module>,
}

/// A mapped file: its path and load bias, opened once on first use (for its frame information and
/// its code), its frame information once asked for (`None` inside: it has none, or could not be
/// opened or read).
struct Module {
    path: PathBuf,
    base: u64,
    file: Option<Option<std::fs::File>>,
    unwind: Option<Option<Unwind>>,
}

impl Module {
    fn file(&mut self) -> Option<&std::fs::File> {
        let path = &self.path;
        (self
            .file
            .get_or_insert_with(|| crate::input::open_regular(path).ok().map(|(f, _)| f)))
        .as_ref()
    }
}

impl Modules {
    /// The files of `mappings` (`/proc/PID/maps`, a core's `NT_FILE`), each biased by where its
    /// offset 0 is mapped.
    pub fn new(mappings: &[Mapping]) -> Modules {
        let mut modules: Vec<Module> = Vec::new();
        let mut ranges = Vec::new();
        for m in mappings {
            let i = match modules.iter().position(|o| o.path == m.path) {
                Some(i) => i,
                None => {
                    let Some(base) = (mappings.iter())
                        .find(|o| o.path == m.path && o.offset == 0)
                        .map(|o| o.start)
                    else {
                        continue;
                    };
                    modules.push(Module {
                        path: m.path.clone(),
                        base,
                        file: None,
                        unwind: None,
                    });
                    modules.len() - 1
                }
            };
            ranges.push((m.start, m.end, i, m.offset));
        }
        ranges.sort_unstable();
        let offsets = ranges.iter().map(|r| r.3).collect();
        let ranges = ranges.into_iter().map(|(a, b, i, _)| (a, b, i)).collect();
        Modules {
            ranges,
            modules,
            offsets,
        }
    }

    /// `len` bytes of code at `at`, from the file mapped there (code is the file's bytes: reading
    /// it costs the target nothing, and a core that keeps no code has it too).
    fn code(&mut self, at: u64, len: usize) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let i = self.ranges.partition_point(|r| r.0 <= at).checked_sub(1)?;
        let (start, end, m) = self.ranges[i];
        if !(start..end).contains(&at) || at.checked_add(len as u64)? > end {
            return None;
        }
        let offset = at - start + self.offsets[i];
        let mut out = vec![0; len];
        self.modules[m]
            .file()?
            .read_exact_at(&mut out, offset)
            .ok()?;
        Some(out)
    }

    /// The file mapped at `at`, and where its offset 0 is mapped.
    pub fn file_at(&self, at: u64) -> Option<(&std::path::Path, u64)> {
        let i = self.ranges.partition_point(|r| r.0 <= at).checked_sub(1)?;
        let (start, end, m) = self.ranges[i];
        let module = &self.modules[m];
        (start..end)
            .contains(&at)
            .then_some((module.path.as_path(), module.base))
    }

    /// Where the file at `path` has its offset 0 mapped, if it is mapped.
    pub fn base_of(&self, path: &std::path::Path) -> Option<u64> {
        (self.modules.iter())
            .find(|m| m.path == path)
            .map(|m| m.base)
    }

    /// The frame information of the file mapped at `pc`.
    fn at(&mut self, pc: u64) -> Option<&Unwind> {
        let i = self.ranges.partition_point(|r| r.0 <= pc).checked_sub(1)?;
        let (start, end, m) = self.ranges[i];
        if !(start..end).contains(&pc) {
            return None;
        }
        let module = &mut self.modules[m];
        if module.unwind.is_none() {
            let base = module.base;
            module.unwind = Some(module.file().and_then(|f| load(f, base)));
        }
        module.unwind.as_ref()?.as_ref()
    }
}

/// A file's `.eh_frame` and `.eh_frame_hdr`, at the addresses the process has them (`base` is
/// where the file's offset 0 is mapped), found as the loader finds them: the index by its program
/// header (`PT_GNU_EH_FRAME`), the frame information by the index's pointer to it. A few reads of
/// the file, where parsing it whole read its symbol table and each section's name apart.
fn load(file: &std::fs::File, base: u64) -> Option<Unwind> {
    use object::elf::{FileHeader64, PF_X, PT_GNU_EH_FRAME, PT_LOAD};
    use object::read::elf::{FileHeader, ProgramHeader};
    let cache = object::ReadCache::new(file);
    let header = FileHeader64::<object::Endianness>::parse(&cache).ok()?;
    let endian = header.endian().ok()?;
    let phdrs = header.program_headers(endian, &cache).ok()?;
    let loads: Vec<_> = (phdrs.iter())
        .filter(|p| p.p_type(endian) == PT_LOAD)
        .collect();
    let first = loads.first()?;
    let bias = base.wrapping_sub(first.p_vaddr(endian).wrapping_sub(first.p_offset(endian)));
    let index = phdrs.iter().find(|p| p.p_type(endian) == PT_GNU_EH_FRAME)?;
    let hdr_at = index.p_vaddr(endian).wrapping_add(bias);
    let size = file.metadata().ok()?.len();
    let hdr = read_at(file, size, index.p_offset(endian), index.p_filesz(endian))?;
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_at);
    let parsed = EhFrameHdr::new(&hdr, NativeEndian).parse(&bases, 8).ok()?;
    let gimli::Pointer::Direct(frame_at) = parsed.eh_frame_ptr() else {
        return None;
    };
    // `.eh_frame` has no size of its own here: what its segment holds from it on is read (the
    // sections after it, if any, are never looked into: the index points at each entry).
    let vaddr = frame_at.wrapping_sub(bias);
    let segment = (loads.iter().copied()).find(|p| {
        let start = p.p_vaddr(endian);
        (start..start.saturating_add(p.p_filesz(endian))).contains(&vaddr)
    })?;
    let into = vaddr - segment.p_vaddr(endian);
    let offset = segment.p_offset(endian).checked_add(into)?;
    let len = (segment.p_filesz(endian) - into)
        .min(MAX_EH_FRAME)
        .min(size.checked_sub(offset)?);
    let eh_frame = LazyBytes::new(file.try_clone().ok()?, offset, usize::try_from(len).ok()?);
    // Only `DW_EH_PE_textrel` pointers use it, which no x86_64 or aarch64 compiler emits: the
    // code segment's start stands for `.text`'s.
    let text_at = (loads.iter())
        .find(|p| p.p_flags(endian).0 & PF_X.0 != 0)
        .map_or(0, |p| p.p_vaddr(endian).wrapping_add(bias));
    Some(Unwind {
        eh_frame,
        hdr,
        bases: bases.set_eh_frame(frame_at).set_text(text_at),
    })
}

/// Most bytes of frame information read from one file.
const MAX_EH_FRAME: u64 = 64 << 20;

/// `len` bytes of `file` (`size` bytes long) from `offset`, or as many as it holds: a file cut
/// short still has the frame information it kept.
fn read_at(file: &std::fs::File, size: u64, offset: u64, len: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len = len.min(size.checked_sub(offset)?);
    let mut bytes = vec![0; usize::try_from(len).ok()?];
    file.read_exact_at(&mut bytes, offset).ok()?;
    Some(bytes)
}

/// The DWARF register numbers of the return address, the stack pointer and the frame pointer.
#[cfg(target_arch = "aarch64")]
const RA_SP_FP: (u16, u16, u16) = (30, 31, 29);
#[cfg(not(target_arch = "aarch64"))]
const RA_SP_FP: (u16, u16, u16) = (16, 7, 6);

/// The registers a function must give back to its caller as it found them, by DWARF number
/// (x86_64: rbx, rbp, r12–r15; aarch64: x19–x29).
#[cfg(target_arch = "aarch64")]
const CALLEE_SAVED: &[u16] = &[19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29];
#[cfg(not(target_arch = "aarch64"))]
const CALLEE_SAVED: &[u16] = &[3, 6, 12, 13, 14, 15];

/// The frames of the stack `regs` start, innermost first, at most [`MAX_FRAMES`].
pub fn walk(mem: &dyn Memory, modules: &mut Modules, regs: Registers) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut ctx = UnwindContext::new();
    let (mut pc, mut sp, mut general) = (regs.pc, regs.sp, regs.general);
    let fp = usize::from(RA_SP_FP.2);
    while frames.len() < MAX_FRAMES {
        // A return address points after its call: the call itself is one byte before.
        let lookup = if frames.is_empty() { pc } else { pc - 1 };
        let mut frame = Frame {
            pc: lookup,
            sp,
            cfa: None,
            general,
        };
        let mut stepped = modules
            .at(lookup)
            .and_then(|u| step(mem, u, &mut ctx, &frame));
        if stepped.is_none() && frame.fp().is_none() {
            // A function with a frame pointer, whose value no register read gave: found on the
            // stack where its frame begins, the first place that looks like one and from which
            // the walk goes on (a saved register or a local can look like one too).
            for found in frame_starts(mem, modules, sp) {
                let mut tried = frame;
                tried.general[fp] = Some(found);
                let Some(s) = (modules.at(lookup)).and_then(|u| step(mem, u, &mut ctx, &tried))
                else {
                    continue;
                };
                if goes_on(mem, modules, &mut ctx, &s) {
                    (frame, stepped) = (tried, Some(s));
                    break;
                }
            }
        }
        let Some((cfa, ra, caller)) = stepped else {
            frames.push(frame);
            break;
        };
        frame.cfa = Some(cfa);
        frames.push(frame);
        // No progress, or the outermost frame: the walk ends.
        if ra == 0 || cfa <= sp {
            break;
        }
        (pc, sp, general) = (ra, cfa, caller);
    }
    frames
}

/// Most bytes above the stack pointer searched for a frame's start.
const SCAN_BYTES: u64 = 4096;

/// Where the innermost frame kept by a frame pointer may begin, from `sp` up, lowest first: each
/// word (the caller's frame pointer saved, whatever it holds: a caller of optimised code keeps no
/// frame pointer) followed by a return address into a mapped file with frame information, which the
/// code before it shows is a call.
fn frame_starts(mem: &dyn Memory, modules: &mut Modules, sp: u64) -> Vec<u64> {
    let mut found = Vec::new();
    let mut at = sp & !7;
    while at < sp + SCAN_BYTES && found.len() < MAX_STARTS {
        let Some(chunk) = mem.read_vec(at, 512) else {
            break;
        };
        for (i, pair) in chunk.windows(16).step_by(8).enumerate() {
            let a = at + 8 * i as u64;
            let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or_default());
            let ra = word(&pair[8..]);
            if modules.at(ra.wrapping_sub(1)).is_some() && after_call(modules, ra) {
                found.push(a);
            }
        }
        at += 504;
    }
    found.dedup();
    found
}

/// Most places a frame may begin that are tried.
const MAX_STARTS: usize = 8;

/// Whether the caller a step found unwinds in turn, to a return address after a call: what a
/// frame pointer guessed wrong seldom gives twice.
fn goes_on(
    mem: &dyn Memory,
    modules: &mut Modules,
    ctx: &mut UnwindContext<usize>,
    &(cfa, ra, general): &(u64, u64, [Option<u64>; REGISTERS]),
) -> bool {
    if ra == 0 {
        return true;
    }
    let caller = Frame {
        pc: ra - 1,
        sp: cfa,
        cfa: None,
        general,
    };
    match modules.at(ra - 1).and_then(|u| step(mem, u, ctx, &caller)) {
        Some((next_cfa, next_ra, _)) => {
            next_cfa > cfa && (next_ra == 0 || after_call(modules, next_ra))
        }
        // The caller keeps a frame pointer this walk does not know either: nothing to check it by.
        None => caller.fp().is_none(),
    }
}

/// Whether the code before `ra` ends in a call (x86_64: `call rel32`, or `call` through a register
/// or memory, `FF /2`), read from the file mapped there. Code that cannot be read is taken as one.
fn after_call(modules: &mut Modules, ra: u64) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return true;
    }
    let Some(code) = ra.checked_sub(7).and_then(|at| modules.code(at, 7)) else {
        return true;
    };
    let direct = code[2] == 0xE8;
    let indirect = (0..6).any(|i| code[i] == 0xFF && (code[i + 1] >> 3) & 7 == 2);
    direct || indirect
}

/// One step: the frame's canonical frame address, its return address, and the caller's
/// callee-saved registers, where known.
fn step(
    mem: &dyn Memory,
    u: &Unwind,
    ctx: &mut UnwindContext<usize>,
    frame: &Frame,
) -> Option<(u64, u64, [Option<u64>; REGISTERS])> {
    let hdr: ParsedEhFrameHdr<_> = EhFrameHdr::new(&u.hdr, NativeEndian)
        .parse(&u.bases, 8)
        .ok()?;
    let table = hdr.table()?;
    // The entry the index names for this address, and its CIE, read before they are parsed.
    let pointer = table.lookup(frame.pc, &u.bases).ok()?;
    let at = table.pointer_to_offset(pointer).ok()?;
    let (cie_field, back) = u.eh_frame.entry(at.0)?;
    u.eh_frame.entry(cie_field.checked_sub(back as usize)?)?;
    let bytes = u.eh_frame.bytes.borrow();
    let eh_frame = EhFrame::new(&bytes, NativeEndian);
    let fde = (eh_frame.fde_from_offset(&u.bases, at, EhFrame::cie_from_offset))
        .ok()
        .filter(|fde| fde.contains(frame.pc))?;
    let row = fde
        .unwind_info_for_address(&eh_frame, &u.bases, ctx, frame.pc)
        .ok()?;
    let (ra_reg, sp_reg, fp_reg) = RA_SP_FP;
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let base = match register.0 {
                r if r == sp_reg => frame.sp,
                r if r == fp_reg => frame.fp()?,
                _ => return None,
            };
            base.checked_add_signed(*offset)?
        }
        CfaRule::Expression(_) => return None,
    };
    // A register is saved in the frame, never below the stack pointer: a frame address that puts
    // one there (a frame pointer guessed wrong) is not this frame's.
    let below_sp = |o: i64| cfa.checked_add_signed(o).is_none_or(|at| at < frame.sp);
    if (row.registers()).any(|(_, rule)| matches!(rule, RegisterRule::Offset(o) if below_sp(*o))) {
        return None;
    }
    // What the caller had in a register the rule names: `None` where it is not known.
    let caller_value = |rule: RegisterRule<usize>| match rule {
        RegisterRule::Offset(o) => mem.read_word(cfa.checked_add_signed(o)?),
        RegisterRule::ValOffset(o) => cfa.checked_add_signed(o),
        RegisterRule::Register(r) => frame.register(r.0),
        _ => None,
    };
    let ra = match row.register(gimli::Register(ra_reg))? {
        rule @ (RegisterRule::Offset(_) | RegisterRule::ValOffset(_)) => caller_value(rule)?,
        RegisterRule::SameValue | RegisterRule::Undefined => 0,
        _ => return None,
    };
    let mut caller = [None; REGISTERS];
    for &r in CALLEE_SAVED {
        caller[usize::from(r)] = match row.register(gimli::Register(r)) {
            // A callee-saved register no rule names keeps its value.
            None | Some(RegisterRule::SameValue) => frame.register(r),
            Some(rule) => caller_value(rule),
        };
    }
    Some((cfa, ra, caller))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_information_is_read_an_entry_at_a_time_and_never_past_its_range() {
        use std::io::Write;
        // 100 bytes before the range; in it a CIE of 12 bytes at 0, and at 6000 (a page further)
        // an FDE of 20 bytes whose CIE pointer leads back 6004 bytes, to the CIE.
        let mut bytes = vec![0xAAu8; 100 + 8192];
        let put = |b: &mut Vec<u8>, at: usize, v: u32| {
            b[100 + at..100 + at + 4].copy_from_slice(&v.to_ne_bytes());
        };
        put(&mut bytes, 0, 12);
        put(&mut bytes, 4, 0);
        put(&mut bytes, 6000, 20);
        put(&mut bytes, 6004, 6004);
        put(&mut bytes, 8180, 40);
        let dir = crate::testing::scratch();
        let path = dir.path().join("eh_frame");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&bytes)
            .unwrap();
        let lazy = LazyBytes::new(std::fs::File::open(&path).unwrap(), 100, 8192);
        assert_eq!(lazy.entry(6000), Some((6004, 6004)));
        assert_eq!(
            lazy.read.borrow().as_slice(),
            &[false, true],
            "one page read"
        );
        assert_eq!(lazy.entry(6004 - 6004), Some((4, 0)), "the CIE");
        assert_eq!(lazy.read.borrow().as_slice(), &[true, true]);
        assert_eq!(lazy.entry(8180), None, "an entry past the range's end");
        assert_eq!(lazy.entry(9000), None, "an offset past it");
        assert_eq!(
            lazy.bytes.borrow()[0],
            12,
            "read from the range's start, not the file's"
        );
    }

    fn mapping(start: u64, end: u64, offset: u64, path: &str) -> Mapping {
        Mapping {
            start,
            end,
            offset,
            path: path.into(),
        }
    }

    #[test]
    fn a_file_is_biased_by_where_its_offset_zero_is_mapped() {
        let m = Modules::new(&[
            mapping(0x7000, 0x8000, 0x1000, "/lib/libc.so.6"),
            mapping(0x6000, 0x7000, 0, "/lib/libc.so.6"),
            mapping(0x1000, 0x2000, 0x1000, "/no/offset/zero"),
        ]);
        assert_eq!(
            m.modules.len(),
            1,
            "a file whose start is not mapped is left out"
        );
        assert_eq!(m.modules[0].base, 0x6000);
        assert_eq!(m.ranges, vec![(0x6000, 0x7000, 0), (0x7000, 0x8000, 0)]);
    }

    /// This test's own thread, walked from the registers of a function it calls: its frames
    /// reach the test function, each with a frame address above the last.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn this_threads_own_stack_walks_back_to_its_caller() {
        let maps = crate::attach::procfs::maps(std::process::id()).unwrap();
        let mut modules = Modules::new(&super::super::registers::mappings(&maps));
        let mem = asyncdump_walker::ProcessMemory::of(std::process::id() as i32);
        let frames = walk(&mem, &mut modules, here());
        assert!(frames.len() > 3, "{frames:?}");
        let cfas: Vec<u64> = frames.iter().filter_map(|f| f.cfa).collect();
        assert!(cfas.windows(2).all(|w| w[0] < w[1]), "{frames:?}");
        let caller = this_threads_own_stack_walks_back_to_its_caller as *const () as u64;
        assert!(
            frames
                .iter()
                .skip(1)
                .any(|f| (caller..caller + 0x1000).contains(&f.pc)),
            "the test function, at {caller:#x}, is among {frames:?}"
        );
    }

    /// The registers inside this function.
    #[inline(never)]
    #[cfg(target_arch = "x86_64")]
    fn here() -> Registers {
        let (pc, sp): (u64, u64);
        // SAFETY: reads the instruction pointer (`lea` of the next instruction) and the stack
        // pointer into two output registers; nothing else is read or written.
        unsafe {
            std::arch::asm!(
                "lea {pc}, [rip]",
                "mov {sp}, rsp",
                pc = out(reg) pc,
                sp = out(reg) sp,
            );
        }
        Registers::pointers(pc, sp)
    }
}
