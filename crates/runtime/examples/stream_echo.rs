//! The stream transport (core's TCP over UDP) on one tokio runtime: a server echoes what each
//! stream sends; two clients — one NewReno, one under the process CM — send 1 MiB each, read
//! the echo back to its end, and print what it took. Dropping a stream's handle closes it
//! gracefully (FIN); closing the endpoints waits until their streams are done.
//!
//! Run: `cargo run -p adaptnet-runtime --example stream_echo`

use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BYTES: usize = 1 << 20;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::server())?;
    let echo = server.clone();
    tokio::spawn(async move {
        while let Some(stream) = echo.accept().await {
            tokio::spawn(async move {
                let (mut rx, mut tx) = (stream.clone(), stream);
                // Echo to the end of stream, then our FIN.
                if tokio::io::copy(&mut rx, &mut tx).await.is_ok() {
                    let _ = tx.shutdown().await;
                }
            });
        }
    });
    for (name, options) in [
        ("NewReno", StreamOptions::client()),
        ("process CM", StreamOptions::client().with_cm()),
    ] {
        let client = StreamEndpoint::bind("127.0.0.1:0".parse()?, options)?;
        let started = Instant::now();
        let stream = client.connect(server.local_addr()).await?;
        let (mut rx, mut tx) = (stream.clone(), stream);
        let data: Vec<u8> = (0..BYTES).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            tx.write_all(&sent).await?;
            tx.shutdown().await
        });
        let mut back = Vec::with_capacity(BYTES);
        rx.read_to_end(&mut back).await?;
        writer.await??;
        println!(
            "{name}: {} bytes echoed {} in {:?}; the stream ended: {}",
            back.len(),
            if back == data { "intact" } else { "CORRUPTED" },
            started.elapsed(),
            rx.closed().await
        );
        client.close();
        client.wait_idle().await;
    }
    Ok(())
}
