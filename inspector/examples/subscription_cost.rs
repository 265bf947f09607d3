//! What a live view's updates cost, for `bench/watch_mass.py`: attaches to PID as `asyncdump watch`
//! does, subscribes, and prints one line per update: whether it was the full state, the tasks it
//! carried, its size on the wire, the agent's time on it and the inspector's time to apply it and
//! rebuild the whole dump.
//!
//! `cargo run --release -p asyncdump --example subscription_cost -- PID [UPDATES] [INTERVAL_MS]`

use asyncdump::attach::target::Target;
use asyncdump::session::{Session, SessionOptions};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pid: u32 = args
        .first()
        .ok_or_else(|| anyhow::anyhow!("usage: PID [UPDATES] [INTERVAL_MS]"))?
        .parse()?;
    let updates: usize = args.get(1).map_or(Ok(20), |a| a.parse())?;
    let interval: u32 = args.get(2).map_or(Ok(250), |a| a.parse())?;
    let options = SessionOptions::default();
    let mut session = Session::attach(&Target::Pid(pid), &options)?;
    session.subscribe(interval, false)?;
    println!("full tasks_total carried bytes agent_ms build_ms");
    for _ in 0..updates {
        let (dump, a) = session.next_update()?;
        println!(
            "{} {} {} {} {:.3} {:.3}",
            a.full as u8,
            dump.tasks.len(),
            a.new + a.changed + a.completed,
            a.bytes,
            a.agent_ns as f64 / 1e6,
            a.build_ns as f64 / 1e6
        );
    }
    Ok(())
}
