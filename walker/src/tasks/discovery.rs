//! Discovery: the task lists of a target that nobody registered, kept from listing to listing, and
//! listed into reports. The same for the agent (its own memory), the inspector reading another
//! process, and a core file.
//!
//! A scan ([`super::census`]) costs one pass over the target's in-use writable memory (about 50 ms
//! per 200 MB on a small VM), so it is not repeated at every listing: the lists found are kept and
//! listed directly (each checked again against the id it was found with) until the last scan is
//! [`Discovery`]'s `max_age` old. A scan cut at its deadline resumes where it stopped at the next
//! listing, so memory too large for one deadline is still covered in turn. Runtimes made since the
//! last scan are found by the next one; the report says how old the scan is.

use std::time::{Duration, Instant};

use super::census::{MAX_BLOCKING, census, from};
use super::{FoundList, list_found, read_blocking};
use crate::memory::{Memory, Region};
use crate::plan::{CensusReport, RuntimePlan, RuntimeReport, RuntimeSource};

/// What a target's scans found so far: the task lists, the blocking-pool task headers of the last
/// scan (each checked again on use), when it ran and what it covered, and where a cut one stopped.
#[derive(Debug)]
pub struct Discovery {
    max_age: Duration,
    lists: Vec<FoundList>,
    blocking: Vec<u64>,
    last: Option<(Instant, CensusReport)>,
    resume: Option<u64>,
}

/// What discovery knows at one listing (see [`Discovery::known`]).
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub lists: Vec<FoundList>,
    pub blocking: Vec<u64>,
    pub report: CensusReport,
}

impl Discovery {
    /// Nothing found yet; the lists of one scan serve for `max_age` (zero: every listing scans).
    pub const fn new(max_age: Duration) -> Discovery {
        Discovery {
            max_age,
            lists: Vec::new(),
            blocking: Vec::new(),
            last: None,
            resume: None,
        }
    }

    /// What is known, scanning first (the regions `regions` gives, until `deadline`) if the last scan
    /// is too old or was cut.
    pub fn known(
        &mut self,
        mem: &impl Memory,
        rp: &RuntimePlan,
        regions: impl FnOnce() -> Vec<Region>,
        deadline: Option<Instant>,
    ) -> Known {
        let due = self.resume.is_some()
            || (self.last)
                .is_none_or(|(at, _)| self.max_age.is_zero() || at.elapsed() >= self.max_age);
        if due {
            let regions = from(&regions(), self.resume.unwrap_or(0));
            // A chunk buffer per scan, not kept: an agent's host gets its megabyte back.
            let scan = census(mem, rp, &regions, deadline, &mut Vec::new());
            for list in scan.found {
                if !self.lists.contains(&list) {
                    self.lists.push(list);
                }
            }
            // A cut scan's blocking tasks are kept with those of the scans before it.
            if self.resume.is_none() {
                self.blocking.clear();
            }
            self.blocking.extend(scan.blocking);
            self.blocking.sort_unstable();
            self.blocking.dedup();
            self.blocking.truncate(MAX_BLOCKING);
            self.resume = scan.stopped_at;
            self.last = Some((Instant::now(), scan.report));
        }
        let (at, mut report) = self
            .last
            .unwrap_or((Instant::now(), CensusReport::default()));
        report.age_ns = if due {
            0
        } else {
            at.elapsed().as_nanos() as u64
        };
        Known {
            lists: self.lists.clone(),
            blocking: self.blocking.clone(),
            report,
        }
    }

    /// Forgets a list that no longer checks out (its runtime dropped, its memory reused).
    pub fn forget(&mut self, list: FoundList) {
        self.lists.retain(|l| *l != list);
    }
}

/// Lists what `known` holds into `reports`: each list not in `listed` (already listed, as a
/// registered runtime) that still checks out and holds a task, then the blocking pool's live tasks.
/// Returns what the census covered and the lists that no longer check out (to forget).
pub fn list_known(
    mem: &impl Memory,
    rp: &RuntimePlan,
    known: Known,
    listed: &[u64],
    reports: &mut Vec<RuntimeReport>,
) -> (CensusReport, Vec<FoundList>) {
    let Known {
        lists,
        blocking,
        mut report,
    } = known;
    let lists: Vec<FoundList> = lists
        .into_iter()
        .filter(|l| !listed.contains(&l.owned))
        .collect();
    let mut found: Vec<RuntimeReport> = (lists.iter())
        .map(|l| RuntimeReport {
            handle: l.owned,
            source: RuntimeSource::Census,
            ..RuntimeReport::default()
        })
        .collect();
    let results = list_found(mem, rp, &lists, &mut found);
    report.found = 0;
    let mut stale = Vec::new();
    for ((list, r), result) in lists.into_iter().zip(found).zip(results) {
        match result {
            // A list that holds no task is shown no more than an idle runtime's would be.
            Ok(()) if r.tasks.is_empty() => {}
            Ok(()) => {
                report.found += 1;
                reports.push(r);
            }
            Err(_) => stale.push(list),
        }
    }
    let mut pool = RuntimeReport {
        source: RuntimeSource::Census,
        ..RuntimeReport::default()
    };
    read_blocking(mem, rp, &blocking, &mut pool);
    report.blocking = pool.tasks.len() as u64;
    if !pool.tasks.is_empty() {
        reports.push(pool);
    }
    (report, stale)
}
