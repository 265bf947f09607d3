//! A fixed workload of plain tokio tasks for counting instructions (`valgrind --tool=callgrind`), with
//! and without `init()`: `init_alone N [no-agent|init]` runs N spawn-and-yield operations and N channel
//! round trips between two tasks on a current-thread runtime. With `init`, the agent is started inside
//! the runtime first, which registers it; nothing is spawned through the agent.

use tokio::sync::mpsc;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let with_agent = std::env::args().nth(2).as_deref() == Some("init");
    // No time or I/O driver: their work depends on elapsed time, which would make counts vary.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        if with_agent {
            asyncdump_agent::init().expect("agent started");
        }
        for _ in 0..n {
            tokio::spawn(async { tokio::task::yield_now().await })
                .await
                .unwrap();
        }
        let (to_echo, mut echo_rx) = mpsc::channel::<u64>(1);
        let (to_main, mut main_rx) = mpsc::channel::<u64>(1);
        let echo = tokio::spawn(async move {
            while let Some(v) = echo_rx.recv().await {
                let _ = to_main.send(v).await;
            }
        });
        for i in 0..n {
            to_echo.send(i).await.unwrap();
            main_rx.recv().await.unwrap();
        }
        drop(to_echo);
        echo.await.unwrap();
    });
}
