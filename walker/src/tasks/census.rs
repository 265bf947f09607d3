//! A census: the task lists of a process that nobody registered, found from the tasks themselves.
//!
//! Every tokio task header begins with a pointer to its type's vtable, a static of the binary whose
//! address the plan knows ([`CensusLayout::vtables`]). The census reads the process's writable
//! memory in large chunks and looks, at each multiple of the task allocation's alignment only, for
//! such a pointer where a header keeps it. A word that matches is only a hit: random data, a freed
//! task or a copy of a header can match too. A hit becomes a header when its state word holds a sane
//! reference count and its owner id is set; the header's scheduler pointer then names a task list
//! (a runtime's, or a `LocalSet`'s), which is kept only if that list exists and carries the header's
//! owner id. The lists found are then listed like registered ones, validating every header again,
//! so a census never shows a task no list holds: it finds lists, and the lists give the tasks.
//!
//! Cost: one pass over the writable memory, copied through the [`Memory`] source a chunk at a time,
//! one word looked at per aligned slot; cut at a deadline, and the report says how much was covered.

use std::time::Instant;

use rustc_hash::FxHashMap as FastMap;

use crate::bytes::word;
use crate::memory::{Memory, Read, Region};
use crate::plan::{CensusLayout, CensusReport, OwnedLayout, RuntimeFlavor, RuntimePlan};

/// Bytes read per call: large enough that a system call is a small part of copying them.
pub const CENSUS_CHUNK: usize = 1 << 20;

/// Pieces a chunk that failed to read whole is read again in, to keep what can be read of it.
const RETRY_PIECE: usize = 64 << 10;

/// Most references a task header may claim: tokio tasks hold a handful (the list, a `JoinHandle`,
/// wakers); a stale or random word as a state claims millions.
pub(super) const MAX_REFS: u64 = 1 << 20;

/// A task list a census found and checked: what owns it, where it is, and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundList {
    pub flavor: RuntimeFlavor,
    /// Address of the `OwnedTasks` (or `LocalOwnedTasks`).
    pub owned: u64,
    pub id: u64,
}

impl FoundList {
    /// The layout of this list in `rp`.
    pub fn layout(self, rp: &RuntimePlan) -> Option<&OwnedLayout> {
        match self.flavor {
            RuntimeFlavor::LocalSet => rp.local_set.as_ref().map(|l| &l.owned),
            _ => Some(&rp.owned),
        }
    }
}

/// Most distinct task lists one census checks (a process has a few; the rest are stale claims).
const MAX_CLAIMS: usize = 4096;

/// Most blocking-pool tasks a census keeps (tokio's pool has 512 threads by default).
pub const MAX_BLOCKING: usize = 4096;

/// What a census gives: the lists it found, what it covered, and where it stopped when cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    pub found: Vec<FoundList>,
    /// Headers of blocking-pool tasks (owned by no list), sorted; check each again before use
    /// ([`super::read_blocking`]).
    pub blocking: Vec<u64>,
    pub report: CensusReport,
    /// The address the scan had reached when its deadline came: where the next census can resume.
    pub stopped_at: Option<u64>,
}

/// Scans `regions` of `mem` for task headers with the plan's census layout, until `deadline`: the
/// task lists they name that check out, and what was covered. `buf` is the chunk buffer, kept by the
/// caller across censuses.
pub fn census(
    mem: &impl Memory,
    rp: &RuntimePlan,
    regions: &[Region],
    deadline: Option<Instant>,
    buf: &mut Vec<u8>,
) -> Census {
    let start = Instant::now();
    let mut out = Census::default();
    let report = &mut out.report;
    report.total_bytes = regions.iter().map(|r| r.end.saturating_sub(r.start)).sum();
    let Some(layout) = rp.census.as_ref().filter(|c| usable(c, rp)) else {
        return out;
    };
    buf.resize(CENSUS_CHUNK, 0);
    let ends = [layout.vtables.first(), layout.vtables.last()]
        .into_iter()
        .chain([layout.blocking.first(), layout.blocking.last()])
        .flatten()
        .map(|v| v.addr);
    let mut scan = Scan {
        rp,
        layout,
        lo: ends.clone().min().unwrap_or(0),
        hi: ends.max().unwrap_or(0),
        claims: FastMap::default(),
        blocking: Vec::new(),
        in_stack: false,
    };
    'regions: for r in regions {
        scan.in_stack = r.stack;
        let mut at = align_up(r.start, layout.align as u64);
        while at < r.end {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                report.cut = true;
                out.stopped_at = Some(at);
                break 'regions;
            }
            let len = (r.end - at).min(CENSUS_CHUNK as u64) as usize;
            read_chunk(mem, at, &mut buf[..len], report, |base, bytes, report| {
                scan.chunk(mem, base, bytes, report)
            });
            report.scanned_bytes += len as u64;
            at += len as u64;
        }
    }
    out.found = scan.check_lists(mem, report);
    scan.blocking.sort_unstable();
    scan.blocking.dedup();
    out.blocking = scan.blocking;
    report.elapsed_ns = start.elapsed().as_nanos() as u64;
    out
}

/// `regions` from the one holding `at` on (that one from `at`), then those before it: a census
/// that was cut resumes where it stopped and still covers everything in turn.
pub fn from(regions: &[Region], at: u64) -> Vec<Region> {
    let split = regions.partition_point(|r| r.end <= at);
    let mut out = Vec::with_capacity(regions.len() + 1);
    for r in &regions[split..] {
        out.push(Region {
            start: r.start.max(at.min(r.end)),
            ..*r
        });
    }
    for r in &regions[..split] {
        out.push(*r);
    }
    if let Some(r) = regions.get(split).filter(|r| r.start < at) {
        out.push(Region {
            end: at.min(r.end),
            ..*r
        });
    }
    out
}

/// Whether the layout can be followed at all: an alignment that is a power of two a header fits in.
fn usable(c: &CensusLayout, rp: &RuntimePlan) -> bool {
    c.align.is_power_of_two()
        && c.align >= 8
        && (c.align as usize) <= CENSUS_CHUNK
        && c.ref_one > 0
        && !(c.vtables.is_empty() && c.blocking.is_empty())
        && c.vtables.is_sorted_by_key(|v| v.addr)
        && c.blocking.is_sorted_by_key(|v| v.addr)
        && rp.header.size > 0
}

fn align_up(at: u64, align: u64) -> u64 {
    at.checked_next_multiple_of(align).unwrap_or(u64::MAX)
}

/// Reads `dst.len()` bytes at `at` and hands them to `scan`; a chunk that fails whole is read again
/// in pieces, and the pieces that fail are counted as unreadable.
fn read_chunk(
    mem: &impl Memory,
    at: u64,
    dst: &mut [u8],
    report: &mut CensusReport,
    mut scan: impl FnMut(u64, &[u8], &mut CensusReport),
) {
    let mut whole = [Read::new(at, dst)];
    if mem.read_many(&mut whole).is_ok() && !whole[0].failed {
        scan(at, dst, report);
        return;
    }
    let mut pieces: Vec<Read<'_>> = dst
        .chunks_mut(RETRY_PIECE)
        .enumerate()
        .map(|(i, d)| Read::new(at + (i * RETRY_PIECE) as u64, d))
        .collect();
    let read = mem.read_many(&mut pieces).is_ok();
    for p in pieces {
        if read && !p.failed {
            scan(p.addr, p.dst, report);
        } else {
            report.unreadable_bytes += p.dst.len() as u64;
        }
    }
}

/// The scan's state: what it looks for, and the task lists its headers claimed, by list address
/// and id (a stale header may claim a list with an id that is not its own).
struct Scan<'p> {
    rp: &'p RuntimePlan,
    layout: &'p CensusLayout,
    lo: u64,
    hi: u64,
    claims: FastMap<(u64, u64), RuntimeFlavor>,
    /// Headers of blocking-pool tasks.
    blocking: Vec<u64>,
    /// The region being scanned is a thread's stack (see [`Region::stack`]).
    in_stack: bool,
}

impl Scan<'_> {
    /// Looks at every aligned slot of `bytes` (read at `base`, itself aligned).
    fn chunk(&mut self, mem: &impl Memory, base: u64, bytes: &[u8], report: &mut CensusReport) {
        let h = self.rp.header;
        let step = self.layout.align as usize;
        let at_vtable = h.vtable as usize;
        let mut slot = 0usize;
        while slot + at_vtable + 8 <= bytes.len() {
            let w = word(bytes, (slot + at_vtable) as u32);
            if w >= self.lo && w <= self.hi {
                self.hit(mem, base + slot as u64, w, &bytes[slot..], report);
            }
            slot += step;
        }
    }

    /// A word at a header's vtable offset matched a vtable's range: is it a header, and whose?
    fn hit(
        &mut self,
        mem: &impl Memory,
        header: u64,
        vtable: u64,
        bytes: &[u8],
        report: &mut CensusReport,
    ) {
        let vts = &self.layout.vtables;
        let Ok(i) = vts.binary_search_by_key(&vtable, |v| v.addr) else {
            self.blocking_hit(header, vtable, bytes, report);
            return;
        };
        report.hits += 1;
        let Ok(k) = self
            .rp
            .tasks
            .binary_search_by_key(&vts[i].poll_fn, |t| t.poll_fn)
        else {
            return;
        };
        let Some(sched) = self.rp.tasks[k].scheduler else {
            return;
        };
        let h = self.rp.header;
        let refs = word(bytes, h.state) / self.layout.ref_one;
        let owner = word(bytes, h.owner_id);
        if !(1..=MAX_REFS).contains(&refs) || owner == 0 {
            return;
        }
        // The scheduler pointer is within the task's allocation, but may be past this chunk.
        let scheduler = match bytes.get(sched.offset as usize..sched.offset as usize + 8) {
            Some(_) => word(bytes, sched.offset),
            None => mem
                .read_word(header.wrapping_add(sched.offset as u64))
                .unwrap_or(0),
        };
        let Some(list) = self.list_of(sched.flavor, scheduler) else {
            return;
        };
        report.headers += 1;
        // Bounded whatever the plan or the memory: a plan naming common words as vtables must not
        // grow the agent's memory with the process's.
        if self.claims.len() < MAX_CLAIMS || self.claims.contains_key(&(list, owner)) {
            self.claims.insert((list, owner), sched.flavor);
        }
    }

    /// A word that may be a blocking task's vtable: a header owned by no list, holding a sane
    /// reference count, not complete.
    fn blocking_hit(&mut self, header: u64, vtable: u64, bytes: &[u8], report: &mut CensusReport) {
        let blocking = &self.layout.blocking;
        if self.in_stack || blocking.binary_search_by_key(&vtable, |v| v.addr).is_err() {
            return;
        }
        report.hits += 1;
        let h = self.rp.header;
        let state = word(bytes, h.state);
        let refs = state / self.layout.ref_one;
        let complete = state & self.rp.state_bits.complete != 0;
        let owned = word(bytes, h.owner_id) != 0;
        if (1..=MAX_REFS).contains(&refs)
            && !complete
            && !owned
            && self.blocking.len() < MAX_BLOCKING
        {
            report.headers += 1;
            self.blocking.push(header);
        }
    }

    /// Where the task list of a scheduler of `flavor` at `scheduler` is.
    fn list_of(&self, flavor: RuntimeFlavor, scheduler: u64) -> Option<u64> {
        // An `Arc` points at an aligned allocation, never into the first page.
        if scheduler < 4096 || !scheduler.is_multiple_of(8) {
            return None;
        }
        let offset = match flavor {
            RuntimeFlavor::LocalSet => self.rp.local_set?.owned_offset,
            f => self.rp.flavors.iter().find(|l| l.flavor == f)?.owned_offset,
        };
        Some(scheduler.wrapping_add(offset as u64))
    }

    /// The claimed lists that exist and carry the id their claimant named; the rest are counted.
    fn check_lists(&self, mem: &impl Memory, report: &mut CensusReport) -> Vec<FoundList> {
        let mut found: Vec<FoundList> = Vec::new();
        for (&(owned, id), &flavor) in &self.claims {
            let list = FoundList { flavor, owned, id };
            let ok = list
                .layout(self.rp)
                .and_then(|l| mem.read_word(owned.wrapping_add(l.id as u64)))
                .is_some_and(|read| read == id);
            if ok {
                found.push(list);
            } else {
                report.rejected_lists += 1;
            }
        }
        found.sort_unstable_by_key(|l| l.id);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ImageMemory;
    use crate::plan::{
        FlavorLayout, HeaderLayout, RuntimeReport, SchedulerField, Shards, StateBits, TaskLayout,
        TaskVtable, TrailerLayout, VtableLayout,
    };

    const VTABLE: u64 = 0x9000;
    const BLOCKING: u64 = 0x9100;
    const HANDLE: u64 = 0x5000;
    const HEAP: Region = Region {
        start: 0x10000,
        end: 0x20000,
        stack: false,
    };
    const REF_ONE: u64 = 64;

    /// A current-thread runtime whose `Arc` is at `HANDLE`, its task list at `HANDLE + 0x10` (id 7,
    /// head at 8), and one task of it in the heap at `0x10080`; task vtables are at `VTABLE`.
    fn plan() -> RuntimePlan {
        RuntimePlan {
            handle_discr: None,
            flavors: vec![FlavorLayout {
                value: None,
                flavor: RuntimeFlavor::CurrentThread,
                arc_offset: 0,
                owned_offset: 0x10,
            }],
            owned: OwnedLayout {
                id: 0,
                count: None,
                shards: Shards::Inline { head: 8 },
            },
            header: HeaderLayout {
                size: 64,
                state: 0,
                vtable: 16,
                owner_id: 24,
            },
            vtable: VtableLayout {
                size: 24,
                poll: 0,
                trailer_offset: 8,
                id_offset: 16,
            },
            trailer: TrailerLayout {
                size: 24,
                next: 0,
                waker_data: 8,
                waker_vtable: 16,
            },
            state_bits: StateBits::default(),
            tasks: vec![TaskLayout {
                poll_fn: 0x100,
                stage_offset: 72,
                stage_ty: 0,
                scheduler: Some(SchedulerField {
                    offset: 64,
                    flavor: RuntimeFlavor::CurrentThread,
                }),
            }],
            set_wakers: vec![],
            local_set: None,
            census: Some(CensusLayout {
                align: 128,
                ref_one: REF_ONE,
                vtables: vec![TaskVtable {
                    addr: VTABLE,
                    poll_fn: 0x100,
                }],
                blocking: vec![TaskVtable {
                    addr: BLOCKING,
                    poll_fn: 0x200,
                }],
            }),
            max_tasks: 10,
        }
    }

    /// Writes a task header at `at` in `heap` (which starts at `HEAP.start`).
    fn header(heap: &mut [u8], at: u64, state: u64, owner: u64, scheduler: u64) {
        let put = |heap: &mut [u8], off: u64, w: u64| {
            let i = (at - HEAP.start + off) as usize;
            heap[i..i + 8].copy_from_slice(&w.to_ne_bytes());
        };
        put(heap, 0, state);
        put(heap, 16, VTABLE);
        put(heap, 24, owner);
        put(heap, 64, scheduler);
        put(heap, 0x80, 42); // the task id
    }

    fn memory(heap: Vec<u8>) -> ImageMemory {
        let mut m = ImageMemory::new();
        let vtable = [0x100u64, 0x100, 0x80].map(u64::to_ne_bytes).concat();
        assert!(m.insert(VTABLE, vtable));
        let owned = [0u64, 0, 7, 0x10080].map(u64::to_ne_bytes).concat();
        assert!(m.insert(HANDLE, owned));
        assert!(m.insert(HEAP.start, heap));
        m
    }

    fn heap_with_decoys() -> Vec<u8> {
        let mut heap = vec![0u8; (HEAP.end - HEAP.start) as usize];
        header(&mut heap, 0x10080, 3 * REF_ONE, 7, HANDLE);
        // No reference held: a freed task.
        header(&mut heap, 0x10400, 0, 7, HANDLE);
        // A pointer-like state word: millions of references.
        header(&mut heap, 0x10480, 0x5555_5555_5000, 7, HANDLE);
        // Not at the alignment: never looked at.
        header(&mut heap, 0x10808, REF_ONE, 7, HANDLE);
        // A header that names the runtime's list with another list's id (a stale copy).
        header(&mut heap, 0x10c00, REF_ONE, 9, HANDLE);
        // Not yet owned by any list.
        header(&mut heap, 0x10d00, REF_ONE, 0, HANDLE);
        heap
    }

    fn run(mem: &ImageMemory, regions: &[Region]) -> (Vec<FoundList>, CensusReport) {
        let c = census(mem, &plan(), regions, None, &mut Vec::new());
        (c.found, c.report)
    }

    #[test]
    fn a_census_finds_a_list_from_one_of_its_tasks_and_the_list_gives_the_task() {
        let mem = memory(heap_with_decoys());
        let (found, report) = run(&mem, &[HEAP]);
        let list = FoundList {
            flavor: RuntimeFlavor::CurrentThread,
            owned: HANDLE + 0x10,
            id: 7,
        };
        assert_eq!(found, vec![list]);
        assert_eq!(report.hits, 5, "every aligned vtable word: {report:?}");
        assert_eq!(report.headers, 2, "only sane states with an owner");
        assert_eq!(report.rejected_lists, 1, "the list is not number 9");
        assert_eq!(report.scanned_bytes, HEAP.end - HEAP.start);
        assert!(!report.cut);
        let mut listed = [RuntimeReport::default()];
        let results = super::super::list_found(&mem, &plan(), &[list], &mut listed);
        assert_eq!(results, [Ok(())]);
        let ids: Vec<u64> = listed[0].tasks.iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![42]);
        // Once its runtime is gone and its memory holds another list, it is no longer this one.
        let other = FoundList { id: 8, ..list };
        let results = super::super::list_found(&mem, &plan(), &[other], &mut listed);
        assert!(results[0].as_ref().unwrap_err().contains("no longer list"));
    }

    /// A blocking-pool task is owned by no list: the census keeps its header (live, not complete),
    /// unless it lies on a thread's stack, where only copies of headers are.
    #[test]
    fn blocking_tasks_are_headers_owned_by_no_list_and_never_on_a_stack() {
        let mut heap = vec![0u8; (HEAP.end - HEAP.start) as usize];
        let blocking = |heap: &mut Vec<u8>, at: u64, state: u64, owner: u64| {
            header(heap, at, state, owner, 0);
            let i = (at - HEAP.start + 16) as usize;
            heap[i..i + 8].copy_from_slice(&BLOCKING.to_ne_bytes());
        };
        blocking(&mut heap, 0x10100, 2 * REF_ONE, 0);
        blocking(&mut heap, 0x10200, 0, 0);
        blocking(&mut heap, 0x10300, REF_ONE, 5);
        let mem = memory(heap);
        let c = census(&mem, &plan(), &[HEAP], None, &mut Vec::new());
        assert_eq!(c.blocking, [0x10100], "live, and owned by no list");
        let stack = Region {
            stack: true,
            ..HEAP
        };
        let c = census(&mem, &plan(), &[stack], None, &mut Vec::new());
        assert!(c.blocking.is_empty(), "a stack holds copies only");
    }

    #[test]
    fn a_list_that_does_not_carry_its_claimants_id_is_not_found() {
        let mut heap = vec![0u8; (HEAP.end - HEAP.start) as usize];
        header(&mut heap, 0x10080, REF_ONE, 8, HANDLE);
        let (found, report) = run(&memory(heap), &[HEAP]);
        assert!(found.is_empty());
        assert_eq!((report.headers, report.rejected_lists), (1, 1));
    }

    #[test]
    fn memory_that_cannot_be_read_is_counted_and_the_rest_still_scanned() {
        let mem = memory(heap_with_decoys());
        let hole = Region {
            start: 0x40000,
            end: 0x40000 + 3 * RETRY_PIECE as u64,
            stack: false,
        };
        let (found, report) = run(&mem, &[hole, HEAP]);
        assert_eq!(found.len(), 1);
        assert_eq!(report.unreadable_bytes, hole.end - hole.start);
        assert_eq!(report.total_bytes, report.scanned_bytes);
    }

    /// A plan whose vtables are words the memory is full of cannot make a census hold more than a
    /// bounded number of claimed lists.
    #[test]
    fn claims_are_bounded_whatever_the_memory_holds() {
        let big = Region {
            start: 0x100_0000,
            end: 0x110_0000,
            stack: false,
        };
        let mut heap = vec![0u8; (big.end - big.start) as usize];
        for (i, slot) in heap.chunks_mut(128).enumerate() {
            // A header in every slot, each naming a list of its own.
            let fields = [REF_ONE, 0, VTABLE, 7, 0, 0, 0, 0, 0x200_0000 + i as u64 * 8];
            for (k, w) in fields.iter().enumerate() {
                slot[k * 8..k * 8 + 8].copy_from_slice(&w.to_ne_bytes());
            }
        }
        let mut mem = memory(Vec::new());
        assert!(mem.insert(big.start, heap));
        let c = census(&mem, &plan(), &[big], None, &mut Vec::new());
        let slots = (big.end - big.start) / 128;
        assert_eq!(c.report.headers, slots, "every slot a header");
        assert!(slots as usize > MAX_CLAIMS);
        assert_eq!(
            c.report.rejected_lists, MAX_CLAIMS as u64,
            "only so many lists held, none of them real"
        );
    }

    #[test]
    fn a_census_past_its_deadline_stops_and_says_so() {
        let mem = memory(heap_with_decoys());
        let past = Some(Instant::now());
        let c = census(&mem, &plan(), &[HEAP], past, &mut Vec::new());
        assert!(c.found.is_empty());
        assert!(c.report.cut);
        assert_eq!(c.report.scanned_bytes, 0);
        assert_eq!(c.report.total_bytes, HEAP.end - HEAP.start);
        assert_eq!(c.stopped_at, Some(HEAP.start), "where the next one resumes");
    }

    #[test]
    fn a_census_resumed_where_it_stopped_covers_every_region_once() {
        let r = |start: u64, end: u64| Region {
            start,
            end,
            stack: false,
        };
        let regions = [r(0x1000, 0x3000), r(0x5000, 0x8000), r(0x9000, 0xa000)];
        assert_eq!(
            from(&regions, 0x6000),
            [
                r(0x6000, 0x8000),
                r(0x9000, 0xa000),
                r(0x1000, 0x3000),
                r(0x5000, 0x6000)
            ]
        );
        assert_eq!(
            from(&regions, 0x1000),
            regions,
            "from the start: as they are"
        );
        assert_eq!(
            from(&regions, 0x4000),
            [r(0x5000, 0x8000), r(0x9000, 0xa000), r(0x1000, 0x3000)],
            "between regions: from the next one"
        );
        let size = |rs: &[Region]| rs.iter().map(|r| r.end - r.start).sum::<u64>();
        for at in [0, 0x1800, 0x3000, 0x7fff, 0xa000, u64::MAX] {
            assert_eq!(size(&from(&regions, at)), size(&regions), "from {at:#x}");
        }
    }

    #[test]
    fn a_plan_without_a_usable_census_layout_scans_nothing() {
        let mem = memory(heap_with_decoys());
        for spoil in [
            |c: &mut CensusLayout| c.align = 96,
            |c: &mut CensusLayout| {
                c.vtables.clear();
                c.blocking.clear();
            },
            |c: &mut CensusLayout| c.ref_one = 0,
        ] {
            let mut rp = plan();
            spoil(rp.census.as_mut().unwrap());
            let c = census(&mem, &rp, &[HEAP], None, &mut Vec::new());
            assert!(c.found.is_empty());
            assert_eq!(c.report.scanned_bytes, 0);
        }
    }
}
