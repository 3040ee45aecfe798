//! adaptnet-runtime: the real engine. It owns sockets and timers and drives the sans-IO
//! state machines of `adaptnet-core` exactly as the simulator does — `handle_*`, then drain
//! `poll_transmit` and `poll_event`, one timer at `poll_timeout` — with one clock conversion
//! at the edge ([`clock::Clock`]: `Instant` → core `Time`). It makes no protocol decision:
//! handshakes, demultiplexing, bounds and timers are all core's.
//!
//! * [`atp`]: NAI/ATP over UDP — an endpoint you bind, connections you open or accept,
//!   messages with priorities and callback timers whose outcomes you await, whole messages
//!   arriving as a stream, bandwidth notifications;
//! * [`iface`]: what ATP's estimator reads on a Linux host (interface byte counters and the
//!   socket's send-queue backlog), the counterpart of the paper's FreeBSD `ifmib` reading.
//! * [`naitcp`]: the NAI-TCP and NAI-MTCPk baselines over kernel TCP sockets.
//!
//! ```no_run
//! use adaptnet_runtime::atp::{AtpEndpoint, EndpointOptions};
//! use adaptnet_core::nai::{Priority, SendOptions};
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server()).await?;
//! let client = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client()).await?;
//! let conn = client.connect(server.local_addr()).await?;
//! let urgent = SendOptions { priority: Priority(0), timer: Some(Duration::from_secs(1)), ..Default::default() };
//! let handle = conn.send(b"hello".to_vec(), urgent).await?;
//! let mut incoming = server.accept().await.expect("a connection");
//! let message = incoming.recv().await.expect("a message");
//! assert_eq!(message.data, b"hello");
//! println!("outcome: {:?}", handle.outcome().await?);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod atp;
pub mod clock;
pub mod iface;
pub mod naitcp;
pub mod stream;
