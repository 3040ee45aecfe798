//! adaptnet-runtime: the real engine. It owns sockets and timers and drives the sans-IO
//! state machines of `adaptnet-core` exactly as the simulator does — `handle_*`, then drain
//! `poll_transmit` and `poll_event`, one timer at `poll_timeout` — with one clock conversion
//! at the edge ([`clock::Clock`]: `Instant` → core `Time`). It makes no protocol decision:
//! handshakes, demultiplexing, bounds and timers are all core's.
//!
//! The message transports ([`message`]: ATP and the NAI baselines), the stream transport
//! ([`stream`]) and the CM host ([`cm`]) run one driver loop (the crate's `driver` module): a task on the caller's tokio runtime waiting on its socket, its
//! earliest timer, its application commands and its handles' wake-ups, with one shape of API
//! (`…Options` with named bounds, one error vocabulary in [`error`], bounded queues, cheap
//! handles) and one lifecycle (dropping the last handle closes; dropping an endpoint closes
//! its connections and sends their CLOSEs; `close` and `wait_idle` for those who must know).
//! The TPBA and environment endpoints still run loops of their own.
//!
//! * [`message`]: one message transport interface — endpoints, connections, messages with
//!   priorities and callback timers whose one outcome you await, whole messages received,
//!   events — over ATP ([`atp`]: NAI/ATP over UDP) and the paper's NAI-TCP / NAI-MTCPk
//!   baselines over kernel TCP ([`naitcp`]);
//! * [`error`]: [`ConnectError`], [`ConnectionError`] (why a connection ended),
//!   [`SendError`];
//! * [`iface`]: what ATP's estimator reads on a Linux host (interface byte counters and the
//!   socket's send-queue backlog), the counterpart of the paper's FreeBSD `ifmib` reading.
//! * [`env`](mod@env): environment events on a Linux host (papers/001): interface availability,
//!   bandwidth and signal polled from `/sys` and `/proc`, authenticated status messages over
//!   UDP, events to subscribers as async streams;
//! * [`udp`]: the drivers' UDP I/O — batched (`recvmmsg`, optional GSO) through quinn-udp,
//!   never blocking the driver on a full socket, each datagram stamped with its kernel
//!   arrival time.
//! * [`host_events`]: environment events from the host daemon's event service when it runs,
//!   else from this process's [`env::EnvMonitor`], with one API;
//! * [`cm`]: the Congestion Manager for applications — the host daemon's when it runs
//!   ([`daemon_client`]: its local protocol), else one per process, shared by every flow
//!   to a destination host (application flows and CM-delegated streams), `open`/`request`/
//!   grants/`notify`/`update`/`query`/`close`/`change_rate`, probes between hosts over UDP;
//! * [`stream`]: core's TCP over UDP as `AsyncRead + AsyncWrite`, NewReno or CM-delegated.
//! * [`tpba`]: TPBA media flows over a kernel TCP connection and UDP —
//!   [`TpbaSender::connect(addr, options)`](tpba::TpbaSender::connect),
//!   [`send(adu, boundary)`](tpba::TpbaSender::send), [`finish()`](tpba::TpbaSender::finish);
//!   [`TpbaReceiver::bind(addr, options)`](tpba::TpbaReceiver::bind),
//!   [`recv()`](tpba::TpbaReceiver::recv) yielding whole ADUs in order — with the
//!   rate-probing period reading snd_una's progress from Linux `TCP_INFO` ([`tcpinfo`]).
//!
//! ```no_run
//! use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
//! use adaptnet_core::nai::{Priority, SendOptions};
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // `Transport::NaiTcp` or `Transport::NaiMtcp(k)` run the same code over kernel TCP.
//! let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server(Transport::Atp))?;
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client(Transport::Atp))?;
//! let conn = client.connect(server.local_addr()).await?;
//! let urgent = SendOptions { priority: Priority(0), timer: Some(Duration::from_secs(1)), ..Default::default() };
//! let handle = conn.send(b"hello".to_vec(), urgent).await?;
//! let incoming = server.accept().await.expect("a connection");
//! let message = incoming.recv().await?;
//! assert_eq!(message.data, b"hello");
//! println!("outcome: {:?}", handle.outcome().await);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod atp;
pub mod clock;
pub mod cm;
pub mod daemon_client;
mod driver;
pub mod env;
pub mod error;
pub mod host_events;
pub mod iface;
pub mod message;
pub mod naitcp;
pub mod stream;
pub mod tcpinfo;
pub mod tpba;
pub mod udp;

pub use error::{ConnectError, ConnectionError, EndpointClosed, ReadError, SendError, WriteError};
