//! The agent's census (see `asyncdump_walker::tasks::census`): when it scans, and the task lists
//! it has found so far.
//!
//! A scan costs one pass over the process's in-use writable memory (about 50 ms per 200 MB on a
//! small VM), so it is not repeated for every request: the lists found are kept, process-wide, and
//! listed directly (each checked again against the id it was found with) until the last scan is
//! [`CENSUS_MAX_AGE`] old. A scan cut at its deadline resumes where it stopped at the next request,
//! so memory too large for one deadline is still covered in turn. Runtimes made since the last scan
//! are found by the next one; the report says how old the scan is.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use asyncdump_protocol::{CensusReport, RuntimePlan};
use asyncdump_walker::ProcessMemory;
use asyncdump_walker::tasks::{self, FoundList};

/// How long the lists of one scan serve before the next scan.
pub const CENSUS_MAX_AGE: Duration = Duration::from_secs(10);

/// Lists the censuses found, the blocking-pool tasks the last one found, when it ran and what it
/// covered, and where a cut one stopped.
struct Known {
    lists: Vec<FoundList>,
    blocking: Vec<u64>,
    last: Option<(Instant, CensusReport)>,
    resume: Option<u64>,
}

static KNOWN: Mutex<Known> = Mutex::new(Known {
    lists: Vec::new(),
    blocking: Vec::new(),
    last: None,
    resume: None,
});

/// What the census knows: the task lists, the blocking-pool task headers of the last scan (each to be
/// checked again), and that scan's report with its age.
pub(super) struct Found {
    pub(super) lists: Vec<FoundList>,
    pub(super) blocking: Vec<u64>,
    pub(super) report: CensusReport,
}

/// What the census knows (see [`Found`]), scanning first if the last scan is too old or was cut.
pub(super) fn lists(mem: &ProcessMemory, rp: &RuntimePlan, deadline: Instant) -> Found {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let due = known.resume.is_some()
        || known
            .last
            .is_none_or(|(at, _)| at.elapsed() >= CENSUS_MAX_AGE);
    if due {
        let regions = mem.heap_regions().unwrap_or_default();
        let regions = tasks::from(&regions, known.resume.unwrap_or(0));
        let scan = tasks::census(mem, rp, &regions, Some(deadline), &mut Vec::new());
        for list in scan.found {
            if !known.lists.contains(&list) {
                known.lists.push(list);
            }
        }
        // A cut scan's blocking tasks are kept with those of the scans before it (checked on use).
        if known.resume.is_none() {
            known.blocking.clear();
        }
        known.blocking.extend(scan.blocking);
        known.blocking.sort_unstable();
        known.blocking.dedup();
        known.blocking.truncate(tasks::MAX_BLOCKING);
        known.resume = scan.stopped_at;
        known.last = Some((Instant::now(), scan.report));
    }
    let (at, mut report) = known
        .last
        .unwrap_or((Instant::now(), CensusReport::default()));
    report.age_ns = if due {
        0
    } else {
        at.elapsed().as_nanos() as u64
    };
    Found {
        lists: known.lists.clone(),
        blocking: known.blocking.clone(),
        report,
    }
}

/// Forgets a list that no longer checks out (its runtime dropped, its memory reused).
pub(super) fn forget(list: FoundList) {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    known.lists.retain(|l| *l != list);
}
