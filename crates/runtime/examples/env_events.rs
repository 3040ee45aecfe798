//! Environment events (papers/001) on this host: subscribe to `lo`'s availability and to a
//! parameter the application knows itself (a cost), set watermarks, and print the events as
//! they come. The availability comes from the kernel (rtnetlink, or polling `/sys`); the cost
//! is set by hand and crosses its levels twice.
//!
//! Run: `cargo run -p adaptnet-runtime --example env_events`

use adaptnet_core::env::{Level, LevelMask, Param, Watermarks};
use adaptnet_runtime::env::{EnvMonitor, EnvOptions, table3_availability};
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let monitor = EnvMonitor::start(EnvOptions {
        interfaces: vec!["lo".into()],
        period: Duration::from_millis(100),
        ..EnvOptions::default()
    })?;
    let mut events = monitor.subscribe("lo", Param::Availability, LevelMask::ALL)?;
    events.also("lo", Param::Cost, LevelMask::ALL)?;
    // papers/001 Table 3's levels for availability; two for the cost: cheap below 2, dear
    // above 8.
    monitor.set_watermarks("lo", Param::Availability, table3_availability())?;
    monitor.set_watermarks(
        "lo",
        Param::Cost,
        Watermarks::new(vec![Level::low(2.0), Level::high(8.0)])?,
    )?;
    for cost in [5.0, 9.0, 1.0] {
        monitor.set_dev_param("lo", Param::Cost, cost)?;
    }
    // Whatever else comes within half a second (the first availability reading).
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while let Ok(Some(d)) = tokio::time::timeout_at(deadline, events.recv()).await {
        println!(
            "{} {} = {} (violated levels {:?}, lost before: {})",
            d.event.device, d.event.param, d.event.value, d.event.violated, d.lost_before
        );
    }
    for r in monitor.get_dev_params("lo")? {
        println!("now: {r:?}");
    }
    monitor.close();
    monitor.wait_idle().await;
    Ok(())
}
