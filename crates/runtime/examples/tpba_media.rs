//! A TPBA media flow (papers/002) over loopback: the sender probes the TCP-exact rate on a
//! kernel TCP connection, then sends on UDP at that rate; the receiver yields whole ADUs in
//! order whichever path carried them. Prints the probed rates, the switches and which path
//! carried how many ADUs.
//!
//! Run: `cargo run -p adaptnet-runtime --example tpba_media`

use adaptnet_core::tpba::{FsConfig, TpbaConfig};
use adaptnet_runtime::tpba::{TpbaOptions, TpbaReceiver, TpbaSender};
use std::time::Duration;

/// ADUs ("frames") to send, and their size.
const FRAMES: u32 = 600;
const FRAME_BYTES: usize = 1200;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Short periods, so that a few seconds show probing → running → probing.
    let options = TpbaOptions::with_fs(FsConfig {
        tpba: TpbaConfig {
            t_running: Duration::from_millis(500),
            t_tcp: Duration::from_millis(50),
            max_probe_samples: Some(4),
            ..TpbaConfig::default()
        },
        reorder_timeout: Duration::from_millis(300),
        ..FsConfig::default()
    });
    let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse()?, options.clone())?;
    let tx = TpbaSender::connect(rx.local_addr(), options).await?;
    let source = tokio::spawn(async move {
        for i in 0..FRAMES {
            let mut frame = vec![0u8; FRAME_BYTES];
            frame[..4].copy_from_slice(&i.to_be_bytes());
            tx.send(frame, true).await?;
            // A 250-frame/s source: application-limited, as media is.
            tokio::time::sleep(Duration::from_millis(4)).await;
        }
        tx.finish().await
    });
    let mut received = 0u32;
    let end = loop {
        match rx.recv().await {
            Ok(frame) => {
                let n = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                assert_eq!(n, received, "ADUs arrive in order");
                received += 1;
            }
            Err(why) => break why,
        }
    };
    let stats = source.await??;
    let r = rx.stats();
    println!("received {received} of {FRAMES} frames; the flow ended: {end}");
    println!(
        "probed rates (Mbit/s): {:?}",
        stats
            .probed_rates_bytes_per_s
            .iter()
            .map(|r| (r * 8e-6 * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    println!(
        "switches to running {}, back to probing {}; ADUs on TCP {}, on UDP {}, lost {}",
        stats.switches_to_running, stats.switches_to_probing, r.adus_tcp, r.adus_udp, r.adus_lost
    );
    Ok(())
}
