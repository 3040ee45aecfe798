//! The paper's NAI-TCP baseline (papers/000 §5.2) through the same message interface as ATP:
//! a server and a client in one process over loopback TCP. The client queues a bulk message
//! and then two urgent ones with 5 ms callback timers; NAI-TCP's one FIFO connection takes
//! them in order, so the urgent ones wait behind the bulk one and may expire unsent — what
//! ATP's priorities fix (`--example atp_hello` sends the same way over ATP). Every message
//! gets exactly one outcome either way.
//!
//! Run: `cargo run -p adaptnet-runtime --example naitcp_messages`

use adaptnet_core::nai::{Priority, SendOptions};
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let loopback = "127.0.0.1:0".parse()?;
    let server = Endpoint::bind(loopback, EndpointOptions::server(Transport::NaiTcp))?;
    let client = Endpoint::bind(
        loopback,
        EndpointOptions::client(Transport::NaiTcp).with_levels(2),
    )?;
    let conn = client.connect(server.local_addr()).await?;
    let incoming = server.accept().await.ok_or("server stopped")?;

    let bulk = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let urgent = SendOptions {
        priority: Priority(0),
        timer: Some(Duration::from_millis(5)),
        ..SendOptions::default()
    };
    let mut handles = vec![("bulk 4 MB", conn.send(vec![0u8; 4 << 20], bulk).await?)];
    for i in 0..2 {
        handles.push(("urgent 1 KB", conn.send(vec![i; 1024], urgent).await?));
    }
    // What arrives within a second (expired messages never do).
    while let Ok(m) = tokio::time::timeout(Duration::from_secs(1), incoming.recv()).await {
        let m = m?;
        println!(
            "server: message {:?} at priority {}: {} bytes",
            m.id,
            m.priority.0,
            m.data.len()
        );
    }
    for (what, h) in handles {
        println!("client: {what}: {:?}", h.outcome().await);
    }
    client.close();
    client.wait_idle().await;
    println!("server: the connection ended: {}", incoming.closed().await);
    server.close();
    server.wait_idle().await;
    Ok(())
}
