//! `adaptnet serve --listen HOST:P`: the receiving side of `adaptnet send` and `adaptnet bulk`
//! on four listeners (the port plan of [`super::bulk`]): ATP on UDP P, NAI-TCP/MTCP on TCP P,
//! the stream transport's bulk sink on UDP P+1, kernel TCP's on TCP P+1.
//!
//! A server on a real network meets careless and hostile peers, so every listener has a
//! connection limit and an idle timeout ([`ServeArgs`]); idle connections hold no buffer (the
//! sinks read through one buffer per worker thread, NAI-TCP through one per endpoint); an
//! accept that fails — out of file descriptors, most often — is logged once, backed off from
//! and retried, never the end of the listener; a listener that does stop is an error: the
//! summary is printed and the command fails. The allocator is asked to hand freed memory back
//! to the system when connections go (glibc keeps it otherwise).

use super::addr;
use adaptnet_core::nai::MAX_LEVELS;
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use anyhow::{Context, Result, anyhow};
use std::cell::RefCell;
use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How long a sink's accept loop pauses after accepting failed.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Connections named on stderr as they arrive; the rest are counted in the per-second lines.
const CONNECTIONS_LISTED: u64 = 16;
/// How long a sink waits for its side's close to be acknowledged.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(2);
/// The sinks' read buffer, one per worker thread.
const SINK_READ_BYTES: usize = 64 << 10;

/// The arguments of `adaptnet serve`.
pub struct ServeArgs {
    /// `HOST:P`, a name or an address.
    pub listen: String,
    /// Stop after this long (else at Ctrl-C / SIGTERM).
    pub duration: Option<Duration>,
    /// The summary as JSON.
    pub json: bool,
    /// Connections each listener holds at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// How long a peer may leave a connection unanswered before it ends (`None`: the
    /// runtime's default).
    pub peer_timeout: Option<Duration>,
}

/// What every listener counts, shown once a second and in the summary.
#[derive(Default)]
struct Tally {
    messages: [AtomicU64; MAX_LEVELS as usize],
    bytes: AtomicU64,
    bulk_bytes: AtomicU64,
    /// Connections accepted, in all.
    accepted: AtomicU64,
    /// Connections open now.
    open: AtomicU64,
    /// Connections closed because the peer sent nothing for the idle timeout.
    idle_closed: AtomicU64,
    /// Connections refused at the limit (the sinks'; the endpoints count their own).
    refused: AtomicU64,
    /// Accepts of the TCP bulk sink that failed (out of descriptors …) and were retried
    /// (NAI-TCP's listener logs its own).
    accept_errors: AtomicU64,
}

impl Tally {
    fn messages(&self) -> Vec<u64> {
        self.messages
            .iter()
            .map(|m| m.load(Ordering::Relaxed))
            .collect()
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// A connection arrived from `peer` on `listener`; the first few are named.
    fn opened(&self, listener: &str, peer: std::net::SocketAddr) {
        let n = self.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        if n <= CONNECTIONS_LISTED {
            eprintln!("adaptnet: {listener} connection from {peer}");
        }
        if n == CONNECTIONS_LISTED {
            eprintln!("adaptnet: further connections are counted, not listed");
        }
    }

    fn closed(&self, idle: bool) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        if idle {
            self.idle_closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Why serving stopped.
enum Stop {
    Time,
    Signal(&'static str),
    Failed(anyhow::Error),
}

/// `adaptnet serve`.
pub fn serve(a: &ServeArgs) -> Result<ExitCode> {
    if a.max_connections == 0 {
        anyhow::bail!("--max-connections must be at least 1");
    }
    super::real::runtime()?.block_on(run(a))
}

async fn run(a: &ServeArgs) -> Result<ExitCode> {
    let listen = addr::resolve(&a.listen).await?;
    addr::next_port(listen)?;
    let atp = Endpoint::bind(listen, server_options(Transport::Atp, a))
        .with_context(|| format!("binding ATP on UDP {listen}"))?;
    let base = atp.local_addr();
    let bulk_at = addr::next_port(base)?;
    eprintln!("adaptnet: ATP server listening on {base} (UDP)");
    // The NAI-TCP / NAI-MTCP baselines on the same port number, over TCP.
    let tcp = Endpoint::bind(base, server_options(Transport::NaiTcp, a))
        .with_context(|| format!("binding NAI-TCP on TCP {base}"))?;
    eprintln!("adaptnet: NAI-TCP/MTCP server listening on {base} (TCP)");
    let mut stream_options = StreamOptions::server();
    stream_options.max_connections = a.max_connections;
    let streams = StreamEndpoint::bind(bulk_at, stream_options)
        .with_context(|| format!("binding the stream bulk sink on UDP {bulk_at}"))?;
    eprintln!("adaptnet: stream bulk sink listening on {bulk_at} (UDP)");
    let tcp_sink = tokio::net::TcpListener::bind(bulk_at)
        .await
        .with_context(|| format!("binding the TCP bulk sink on {bulk_at}"))?;
    eprintln!("adaptnet: TCP bulk sink listening on {bulk_at} (TCP)");
    eprintln!(
        "adaptnet: at most {} connections per listener; idle ones closed after {:.0} s",
        a.max_connections,
        a.idle_timeout.as_secs_f64()
    );

    let tally = Arc::new(Tally::default());
    let closing = Arc::new(AtomicBool::new(false));
    let mut listeners: JoinSet<Result<()>> = JoinSet::new();
    let ctx = Listener {
        tally: tally.clone(),
        closing: closing.clone(),
        idle: a.idle_timeout,
    };
    listeners.spawn(ctx.clone().messages(atp.clone(), "ATP"));
    listeners.spawn(ctx.clone().messages(tcp.clone(), "NAI-TCP/MTCP"));
    let streams = Arc::new(streams);
    listeners.spawn(ctx.clone().stream_sink(streams.clone()));
    listeners.spawn(ctx.tcp_sink(tcp_sink, a.max_connections));

    let start = Instant::now();
    let stop = watch_until_stop(a, &tally, &mut listeners, start).await;
    closing.store(true, Ordering::Relaxed);
    let atp_stats = atp.stats().await.ok();
    let tcp_stats = tcp.stats().await.ok();
    let stream_refused = streams.stats().await.map_or(0, |s| s.refused);
    // Peers are told: every connection is closed before the process ends.
    for endpoint in [&atp, &tcp] {
        endpoint.close();
        endpoint.wait_idle().await;
    }
    listeners.abort_all();
    let core = atp_stats
        .as_ref()
        .and_then(|s| s.atp.clone())
        .map(|a| a.core)
        .unwrap_or_default();
    let refused = Tally::get(&tally.refused)
        + core.refused_full
        + tcp_stats.as_ref().map_or(0, |s| s.refused)
        + stream_refused;
    let per_level = tally.messages();
    let seconds = start.elapsed().as_secs_f64();
    let why = match &stop {
        Stop::Time => "time".to_owned(),
        Stop::Signal(s) => (*s).to_owned(),
        Stop::Failed(e) => format!("failed: {e:#}"),
    };
    if a.json {
        let out = serde_json::json!({
            "stopped_by": why,
            "messages_per_level": per_level,
            "bytes": Tally::get(&tally.bytes),
            "bulk_bytes": Tally::get(&tally.bulk_bytes),
            "seconds": seconds,
            "connections_accepted": Tally::get(&tally.accepted),
            "connections_refused": refused,
            "connections_idle_closed": Tally::get(&tally.idle_closed),
            "tcp_sink_accept_errors": Tally::get(&tally.accept_errors),
            "endpoint": core,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "stopped ({why}) after {seconds:.1} s: received {} messages, {} bytes, {} bulk bytes; \
             connections: {} accepted, {} refused (limit or accept queue), {} closed idle; {} failed accepts on the TCP sink; \
             ATP dropped {} malformed datagrams, {} from unknown peers",
            per_level.iter().sum::<u64>(),
            Tally::get(&tally.bytes),
            Tally::get(&tally.bulk_bytes),
            Tally::get(&tally.accepted),
            refused,
            Tally::get(&tally.idle_closed),
            Tally::get(&tally.accept_errors),
            core.malformed,
            core.unknown_peer
        );
    }
    match stop {
        Stop::Failed(e) => Err(e),
        Stop::Time | Stop::Signal(_) => Ok(ExitCode::SUCCESS),
    }
}

/// Prints a line a second until the time is up, a signal comes, or a listener stops.
async fn watch_until_stop(
    a: &ServeArgs,
    tally: &Tally,
    listeners: &mut JoinSet<Result<()>>,
    start: Instant,
) -> Stop {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut int, mut term) = match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(i), Ok(t)) => (i, t),
        (Err(e), _) | (_, Err(e)) => {
            return Stop::Failed(anyhow!(e).context("installing the signal handlers"));
        }
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let (mut last_msgs, mut last_bytes, mut last_bulk) = (0u64, 0u64, 0u64);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = int.recv() => return Stop::Signal("SIGINT"),
            _ = term.recv() => return Stop::Signal("SIGTERM"),
            Some(r) = listeners.join_next() => {
                let e = match r {
                    Ok(Ok(())) => anyhow!("a listener stopped"),
                    Ok(Err(e)) => e,
                    Err(e) => anyhow!(e).context("a listener's task"),
                };
                eprintln!("adaptnet: error: {e:#}");
                return Stop::Failed(e);
            }
        }
        let msgs: u64 = tally.messages().iter().sum();
        let bytes = Tally::get(&tally.bytes);
        let bulk = Tally::get(&tally.bulk_bytes);
        let open = Tally::get(&tally.open);
        eprintln!(
            "{:6.1} s  {:6} messages  {:8.3} Mbit/s  bulk {:8.3} Mbit/s  {:5} connections",
            start.elapsed().as_secs_f64(),
            msgs - last_msgs,
            (bytes - last_bytes) as f64 * 8.0 / 1e6,
            (bulk - last_bulk) as f64 * 8.0 / 1e6,
            open
        );
        // Cheap on a small heap; done every second rather than when connections close, since
        // transports free a connection's memory some time after it closed (lingering).
        release_freed_memory();
        (last_msgs, last_bytes, last_bulk) = (msgs, bytes, bulk);
        if a.duration.is_some_and(|d| start.elapsed() >= d) {
            return Stop::Time;
        }
    }
}

/// Hands memory freed by closed connections back to the system. glibc's allocator keeps
/// freed heap in its per-thread arenas otherwise, and a server that once held thousands of
/// connections would look that large for the rest of its life.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A server endpoint of `transport` with `serve`'s limits. A burst of connections waits in
/// the accept queue for the listener task rather than being refused.
fn server_options(transport: Transport, a: &ServeArgs) -> EndpointOptions {
    let mut o = EndpointOptions::server(transport);
    o.accept_queue_len = a.max_connections;
    if let Some(atp) = o.atp_mut() {
        atp.core.max_connections = a.max_connections;
        atp.core.liveness.idle_timeout = a.idle_timeout;
        // Our keep-alives stay well inside the timeout (core's liveness asks for that).
        atp.core.liveness.keepalive = atp.core.liveness.keepalive.min(a.idle_timeout / 3);
    }
    if let Some(b) = o.baseline_mut() {
        b.max_connections = a.max_connections;
        b.idle_timeout = Some(a.idle_timeout);
    }
    if let Some(t) = a.peer_timeout {
        super::real::set_peer_timeout(&mut o, t);
    }
    o
}

/// What every listener's task shares.
#[derive(Clone)]
struct Listener {
    tally: Arc<Tally>,
    /// Set when `serve` stops: a listener ending then is no failure.
    closing: Arc<AtomicBool>,
    idle: Duration,
}

impl Listener {
    fn stopped(&self, what: &str) -> Result<()> {
        if self.closing.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(anyhow!("the {what} listener stopped accepting"))
        }
    }

    /// Accepts `endpoint`'s connections and tallies every message they bring.
    async fn messages(self, endpoint: Endpoint, kind: &'static str) -> Result<()> {
        while let Some(conn) = endpoint.accept().await {
            self.tally.opened(kind, conn.peer());
            let tally = self.tally.clone();
            tokio::spawn(async move {
                let why = loop {
                    match conn.recv().await {
                        Ok(m) => {
                            if let Some(c) = tally.messages.get(usize::from(m.priority.0)) {
                                Tally::add(c, 1);
                            }
                            Tally::add(&tally.bytes, m.data.len() as u64);
                        }
                        Err(why) => break why,
                    }
                };
                let idle = matches!(why, adaptnet_runtime::ConnectionError::TimedOut);
                tally.closed(idle);
            });
        }
        self.stopped(kind)
    }

    /// The stream transport's sink: reads and discards every accepted stream.
    async fn stream_sink(self, streams: Arc<StreamEndpoint>) -> Result<()> {
        while let Some(s) = streams.accept().await {
            self.tally.opened("stream", s.peer());
            tokio::spawn(self.clone().drain(s));
        }
        self.stopped("stream bulk sink")
    }

    /// Kernel TCP's sink: at most `limit` connections, each read and discarded; an accept
    /// that fails is retried after a pause (the connection waits in the kernel's backlog).
    async fn tcp_sink(self, listener: tokio::net::TcpListener, limit: usize) -> Result<()> {
        let slots = Arc::new(Semaphore::new(limit));
        let mut failures = 0u64;
        loop {
            match listener.accept().await {
                Ok((s, peer)) => {
                    if failures > 0 {
                        eprintln!(
                            "adaptnet: TCP bulk sink accepting again after {failures} failed attempts"
                        );
                        failures = 0;
                    }
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        // Dropping the stream closes it: refused at no cost.
                        Tally::add(&self.tally.refused, 1);
                        continue;
                    };
                    self.tally.opened("TCP bulk", peer);
                    let me = self.clone();
                    tokio::spawn(async move {
                        me.drain(s).await;
                        drop(slot);
                    });
                }
                Err(e) if fatal_accept_error(&e) => {
                    return Err(e).context("the TCP bulk sink cannot accept");
                }
                Err(e) => {
                    if failures == 0 {
                        eprintln!(
                            "adaptnet: TCP bulk sink: accepting failed ({e}); retrying every {} ms",
                            ACCEPT_BACKOFF.as_millis()
                        );
                    }
                    failures += 1;
                    Tally::add(&self.tally.accept_errors, 1);
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    /// Reads and discards until the peer ends, fails, or sends nothing for the idle timeout;
    /// then closes this side too (a stream is only finished, and its memory released, once
    /// both sides have closed).
    async fn drain(self, mut s: impl AsyncRead + AsyncWrite + Unpin) {
        let idle = loop {
            match tokio::time::timeout(self.idle, discard(&mut s)).await {
                Err(_) => break true,
                Ok(Ok(0)) | Ok(Err(_)) => break false,
                Ok(Ok(n)) => Tally::add(&self.tally.bulk_bytes, n as u64),
            }
        };
        let _ = tokio::time::timeout(SHUTDOWN_LIMIT, s.shutdown()).await;
        self.tally.closed(idle);
    }
}

/// Errors after which a listening socket will never accept again (it is not a listener any
/// more); the others — out of descriptors or memory, a connection aborted before it was
/// taken — pass.
fn fatal_accept_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EOPNOTSUPP | libc::EFAULT)
    )
}

thread_local! {
    /// The sinks' one read buffer per worker thread: an idle connection holds none.
    static SINK_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Reads once from `r` into this thread's sink buffer and forgets the bytes: their count,
/// 0 at the end of the stream.
async fn discard(r: &mut (impl AsyncRead + Unpin)) -> io::Result<usize> {
    std::future::poll_fn(|cx| {
        SINK_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            if buf.len() < SINK_READ_BYTES {
                buf.resize(SINK_READ_BYTES, 0);
            }
            let mut rb = ReadBuf::new(&mut buf);
            match std::pin::Pin::new(&mut *r).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(rb.filled().len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
    })
    .await
}
