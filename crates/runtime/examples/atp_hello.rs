//! A server and a client in one process over loopback UDP: the client sends a bulk message at
//! low priority and then an urgent one with a callback timer; the server prints what arrives
//! in which order, and the client prints each message's outcome.
//!
//! Run: `cargo run -p adaptnet-runtime --example atp_hello`

use adaptnet_core::nai::{Priority, SendOptions};
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
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

    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let bulk = conn.send(vec![0u8; 8 << 20], low).await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let urgent = SendOptions {
        priority: Priority(0),
        timer: Some(Duration::from_secs(1)),
        ..SendOptions::default()
    };
    let ping = conn.send(b"urgent: hello".to_vec(), urgent).await?;

    for _ in 0..2 {
        let m = incoming.recv().await?;
        println!(
            "server received message {} (priority {}, {} bytes)",
            m.id.0,
            m.priority.0,
            m.data.len()
        );
    }
    println!("urgent: {:?}", ping.outcome().await);
    println!("bulk:   {:?}", bulk.outcome().await);
    println!("estimate: {:.1} Mbit/s", conn.bandwidth() * 8.0 / 1e6);
    conn.close(Duration::from_secs(1)).await;
    println!("server side: {}", incoming.closed().await);
    client.close();
    client.wait_idle().await;
    Ok(())
}
