//! Bulk throughput of ATP on loopback: one 64 MB message (or `--mb N`), timed.
//!
//! Run: `cargo run --release -p adaptnet-runtime --example atp_bulk [-- MB]`

use adaptnet_core::nai::SendOptions;
use adaptnet_runtime::message::{ConnectionStats, Endpoint, EndpointOptions, Transport};
use std::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mb: usize = std::env::args().nth(1).map_or(Ok(64), |s| s.parse())?;
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
    let h = conn
        .send(vec![7u8; mb << 20], SendOptions::default())
        .await?;
    let m = incoming.recv().await?;
    let ConnectionStats::Atp(stats) = conn.stats().await? else {
        return Err("not an ATP connection".into());
    };
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} MB in {:.3} s: {:.3} Gbit/s; outcome {:?}; estimate {:.1} Mbit/s",
        m.data.len() >> 20,
        secs,
        m.data.len() as f64 * 8.0 / secs / 1e9,
        h.outcome().await,
        conn.bandwidth() * 8.0 / 1e6
    );
    println!("{stats:?}");
    Ok(())
}
