//! What remembering tasks' ages costs a listing: `Ages::observe` over 100,000 listed tasks, each with a
//! decoded walk of 8 nodes, as a listing of a big service gives it (every task unchanged since the
//! last listing, the common case; and every task new). Compare with a listing's own time (the
//! census bench's snapshot of 100,000 tasks).

use std::hint::black_box;

use asyncdump_walker::tasks::Ages;
use asyncdump_walker::{NodeStatus, RuntimeTask, StateBits, Walk, WalkNode};
use criterion::Criterion;

const TASKS: u64 = 100_000;

const BITS: StateBits = StateBits {
    running: 1,
    complete: 2,
    notified: 4,
    join_waker: 8,
};

fn tasks(offset: u64) -> Vec<RuntimeTask> {
    (0..TASKS)
        .map(|i| {
            let nodes = (0..8)
                .map(|n| WalkNode {
                    parent: n.max(1) - 1,
                    ty: n,
                    addr: 0x7f00_0000_0000 + i * 0x400 + u64::from(n) * 0x40,
                    discr: Some(3),
                    status: NodeStatus::Read,
                })
                .collect();
            RuntimeTask {
                id: i + offset,
                header: 0x5500_0000_0000 + i * 0x400,
                state: 0,
                poll_fn: 0x1234,
                join_waker: None,
                set_waker: None,
                walk: Some(Walk::Nodes {
                    nodes,
                    truncated: false,
                }),
                unchanged_since_ns: None,
            }
        })
        .collect()
}

fn main() {
    let mut c = Criterion::default().configure_from_args().sample_size(20);
    let mut listed = tasks(0);
    let mut ages = Ages::default();
    ages.observe(1, &BITS, &mut listed);
    let mut now = 2;
    c.bench_function("ages/100k tasks, all unchanged", |b| {
        b.iter(|| {
            now += 1;
            ages.observe(now, &BITS, black_box(&mut listed));
        })
    });
    let mut fresh = [tasks(0), tasks(TASKS)];
    let mut turn = 0;
    c.bench_function("ages/100k tasks, all new", |b| {
        b.iter(|| {
            turn ^= 1;
            now += 1;
            ages.observe(now, &BITS, black_box(&mut fresh[turn]));
        })
    });
    c.final_summary();
}
