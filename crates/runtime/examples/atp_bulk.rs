//! Bulk throughput of ATP on loopback: one 64 MB message (or `MB`), timed; or, with a
//! message size, `MB` of messages of `KB` each with at most 256 awaiting their outcome (the
//! workload of `adaptnet bench loopback`), for profiling the data path alone.
//!
//! Run: `cargo run --release -p adaptnet-runtime --example atp_bulk [-- MB [KB]]`

use adaptnet_core::nai::SendOptions;
use adaptnet_runtime::message::{
    Connection, ConnectionStats, Endpoint, EndpointOptions, MessageHandle, Transport,
};
use std::collections::VecDeque;
use std::time::Instant;

/// Messages kept awaiting their outcome in the message mode.
const OUTSTANDING: usize = 256;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mb: usize = std::env::args().nth(1).map_or(Ok(64), |s| s.parse())?;
    let kb: Option<usize> = std::env::args().nth(2).map(|s| s.parse()).transpose()?;
    let server = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointOptions::server(Transport::Atp),
    )?;
    let client = Endpoint::bind(
        "127.0.0.1:0".parse()?,
        EndpointOptions::client(Transport::Atp),
    )?;
    let conn = client.connect(server.local_addr()).await?;
    let incoming = server.accept().await.ok_or("server stopped")?;
    let start = Instant::now();
    match kb {
        None => {
            let h = conn
                .send(vec![7u8; mb << 20], SendOptions::default())
                .await?;
            let m = incoming.recv().await?;
            let outcome = format!("{:?}", h.outcome().await);
            let stats = conn.stats().await?;
            report(start, m.data.len(), &outcome, stats, &conn);
            Ok(())
        }
        Some(kb) => {
            let size = (kb << 10).max(1);
            let count = (mb << 20) / size;
            // The reader hands its connection back: dropping it would close the connection
            // before the sender's counters are read.
            let reader = tokio::spawn(async move {
                let mut bytes = 0;
                for _ in 0..count {
                    match incoming.recv().await {
                        Ok(m) => bytes += m.data.len(),
                        Err(_) => break,
                    }
                }
                (bytes, incoming)
            });
            let mut pending: VecDeque<MessageHandle> = VecDeque::new();
            for _ in 0..count {
                if pending.len() >= OUTSTANDING
                    && let Some(h) = pending.pop_front()
                {
                    let _ = h.outcome().await;
                }
                pending.push_back(conn.send(vec![7u8; size], SendOptions::default()).await?);
            }
            let (bytes, incoming) = reader.await?;
            let stats = conn.stats().await;
            drop(incoming);
            report(
                start,
                bytes,
                &format!("{count} messages of {kb} KB"),
                stats?,
                &conn,
            );
            Ok(())
        }
    }
}

/// Prints the rate and the sender's counters.
fn report(start: Instant, bytes: usize, what: &str, stats: ConnectionStats, conn: &Connection) {
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} MB in {:.3} s: {:.3} Gbit/s; {what}; estimate {:.1} Mbit/s",
        bytes >> 20,
        secs,
        bytes as f64 * 8.0 / secs / 1e9,
        conn.bandwidth() * 8.0 / 1e6
    );
    if let ConnectionStats::Atp(stats) = stats {
        println!("{stats:?}");
    }
}
