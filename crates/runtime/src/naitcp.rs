//! The paper's NAI-over-TCP baselines (§5.2) over kernel TCP sockets: NAI-TCP (one blocking
//! connection, one FIFO queue) and NAI-MTCPk (one connection per priority level, k for the
//! highest, early termination on timer expiry). A user can run them on the same network as
//! ATP to compare.
//!
//! Every decision is core's [`BaselineSender`] and [`RecordReceiver`], and so is the framing
//! (`submit_bytes` holds a message's bytes, bounded; `poll_transmit_bytes` writes each record;
//! `handle_bytes` splits the stream into records and reassembles): this module moves record
//! bytes between core and the sockets. The sender's "unacknowledged bytes" of a connection — what the paper's
//! blocking send waited on — are the bytes queued for the socket plus the kernel's send
//! queue (`SIOCOUTQ`: unsent and unacknowledged), so the 32 KB send-buffer bound means the
//! same thing as on the paper's FreeBSD hosts.

use crate::atp::{Error, Message};
use crate::clock::Clock;
use crate::iface::send_queue_bytes;
use adaptnet_core::Time;
use adaptnet_core::nai::baseline::record::RecordReceiver;
use adaptnet_core::nai::baseline::{BaselineConfig, BaselineKind, BaselineSender};
use adaptnet_core::nai::{MessageId, NaiEvent, Outcome, SendOptions};
use adaptnet_core::spp::SppEvent;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// Largest message a receiver accepts (bytes); a record declaring more closes the connection.
pub const MAX_MESSAGE_BYTES: u32 = 64 << 20;
/// How often the sender re-checks the kernel send queue while a write waits for room.
const ROOM_POLL: Duration = Duration::from_millis(1);

enum Cmd {
    Send {
        data: Vec<u8>,
        opts: SendOptions,
        reply: oneshot::Sender<Result<BaselineHandle, Error>>,
    },
}

/// A message submitted to a baseline sender.
pub struct BaselineHandle {
    id: MessageId,
    outcome: oneshot::Receiver<Outcome>,
}

impl BaselineHandle {
    /// The message's id.
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// Waits for the one final outcome (`Abandoned` if the sender stopped first).
    pub async fn outcome(self) -> Outcome {
        self.outcome.await.unwrap_or(Outcome::Abandoned)
    }
}

/// The sending side of NAI-TCP or NAI-MTCPk.
pub struct BaselineClient {
    cmd: mpsc::Sender<Cmd>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BaselineClient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One connection's write side as the driver sees it.
struct Link {
    records: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes handed to the writer task and not yet written to the socket.
    queued: Arc<AtomicU64>,
    fd: RawFd,
}

impl BaselineClient {
    /// Opens the baseline's connections to `peer` (one for NAI-TCP; one per level, k for the
    /// highest, for NAI-MTCPk).
    pub async fn connect(
        peer: SocketAddr,
        kind: BaselineKind,
        levels: u8,
    ) -> Result<BaselineClient, Error> {
        BaselineClient::connect_with(peer, BaselineConfig::new(kind, levels)).await
    }

    /// [`connect`](Self::connect) with every bound of the baseline chosen by the caller, e.g.
    /// [`BaselineConfig::max_buffered_bytes`], the message bytes the sender holds until their
    /// outcome (64 MiB by default; beyond it `send` fails with `BufferFull`).
    pub async fn connect_with(
        peer: SocketAddr,
        config: BaselineConfig,
    ) -> Result<BaselineClient, Error> {
        let sender = BaselineSender::new(config);
        let (ack_tx, ack_rx) = mpsc::unbounded_channel::<(usize, u64)>();
        let mut links = Vec::new();
        for i in 0..sender.connections() {
            let stream = TcpStream::connect(peer).await?;
            stream.set_nodelay(true)?;
            let fd = stream.as_raw_fd();
            let (mut rd, mut wr) = stream.into_split();
            let ack_tx = ack_tx.clone();
            // Acknowledgement bytes: each is one delivered message on this connection.
            tokio::spawn(async move {
                let mut buf = [0u8; 256];
                while let Ok(n) = rd.read(&mut buf).await {
                    if n == 0 || ack_tx.send((i, n as u64)).is_err() {
                        break;
                    }
                }
            });
            let (rec_tx, mut rec_rx) = mpsc::unbounded_channel::<Vec<u8>>();
            let queued = Arc::new(AtomicU64::new(0));
            let q = queued.clone();
            tokio::spawn(async move {
                while let Some(r) = rec_rx.recv().await {
                    if wr.write_all(&r).await.is_err() {
                        break;
                    }
                    q.fetch_sub(r.len() as u64, Ordering::Relaxed);
                }
            });
            links.push(Link {
                records: rec_tx,
                queued,
                fd,
            });
        }
        let (cmd_tx, cmd_rx) = mpsc::channel(1024);
        let task = tokio::spawn(drive(sender, links, cmd_rx, ack_rx));
        Ok(BaselineClient { cmd: cmd_tx, task })
    }

    /// Submits a message (no admission control: the baselines have no estimator).
    pub async fn send(&self, data: Vec<u8>, opts: SendOptions) -> Result<BaselineHandle, Error> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Cmd::Send {
                data,
                opts,
                reply: tx,
            })
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }
}

async fn drive(
    mut sender: BaselineSender,
    links: Vec<Link>,
    mut cmds: mpsc::Receiver<Cmd>,
    mut acks: mpsc::UnboundedReceiver<(usize, u64)>,
) {
    let clock = Clock::new();
    let mut waiting: HashMap<MessageId, oneshot::Sender<Outcome>> = HashMap::new();
    loop {
        let now = clock.now();
        let blocked = write_records(&mut sender, &links, now);
        while let Some(ev) = sender.poll_event() {
            if let NaiEvent::Outcome { id, outcome } = ev
                && let Some(tx) = waiting.remove(&id)
            {
                let _ = tx.send(outcome);
            }
        }
        let timer = sender.poll_timeout();
        let sleep = async {
            let wake = match (timer, blocked) {
                (Some(t), true) => Some(
                    clock
                        .instant_of(t)
                        .min(std::time::Instant::now() + ROOM_POLL),
                ),
                (Some(t), false) => Some(clock.instant_of(t)),
                (None, true) => Some(std::time::Instant::now() + ROOM_POLL),
                (None, false) => None,
            };
            match wake {
                Some(w) => tokio::time::sleep_until(w.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(Cmd::Send { data: bytes, opts, reply }) => {
                    let now = clock.now();
                    let r = sender
                        .submit_bytes(now, bytes, opts)
                        .map_err(Error::from)
                        .map(|id| {
                            let (tx, rx) = oneshot::channel();
                            waiting.insert(id, tx);
                            BaselineHandle { id, outcome: rx }
                        });
                    let _ = reply.send(r);
                }
                None => break,
            },
            Some((conn, n)) = acks.recv() => sender.handle_ack_bytes(clock.now(), conn, n),
            () = sleep => {
                let now = clock.now();
                if sender.poll_timeout().is_some_and(|t| t <= now) {
                    sender.handle_timeout(now);
                }
            }
        }
    }
    let _ = sender.finish_all(clock.now());
    while let Some(ev) = sender.poll_event() {
        if let NaiEvent::Outcome { id, outcome } = ev
            && let Some(tx) = waiting.remove(&id)
        {
            let _ = tx.send(outcome);
        }
    }
}

/// Writes every record the sender allows; returns whether some connection has a message
/// waiting for room (so the driver re-checks the kernel queue soon).
fn write_records(sender: &mut BaselineSender, links: &[Link], now: Time) -> bool {
    for (i, link) in links.iter().enumerate() {
        let mut rec = Vec::new();
        loop {
            let unacked =
                link.queued.load(Ordering::Relaxed) + send_queue_bytes(link.fd).unwrap_or(0);
            if sender
                .poll_transmit_bytes(now, i, unacked, &mut rec)
                .is_none()
            {
                break;
            }
            link.queued.fetch_add(rec.len() as u64, Ordering::Relaxed);
            if link.records.send(std::mem::take(&mut rec)).is_err() {
                break;
            }
        }
    }
    sender.live_messages() > 0
}

/// The receiving side: accepts baseline connections and delivers their messages.
pub struct BaselineServer {
    messages: mpsc::UnboundedReceiver<Message>,
    local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BaselineServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl BaselineServer {
    /// Listens on `addr` (TCP).
    pub async fn bind(addr: SocketAddr) -> Result<BaselineServer, Error> {
        BaselineServer::start(TcpListener::bind(addr).await?)
    }

    /// Uses an already bound listener (e.g. one created in another network namespace). Call
    /// within a tokio runtime.
    pub fn from_std(listener: std::net::TcpListener) -> Result<BaselineServer, Error> {
        listener.set_nonblocking(true)?;
        BaselineServer::start(TcpListener::from_std(listener)?)
    }

    fn start(listener: TcpListener) -> Result<BaselineServer, Error> {
        let local_addr = listener.local_addr()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(receive(stream, tx));
            }
        });
        Ok(BaselineServer {
            messages: rx,
            local_addr,
            task,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The next whole message from any connection.
    pub async fn recv(&mut self) -> Option<Message> {
        self.messages.recv().await
    }
}

/// One connection: records in, messages out, one acknowledgement byte per message back.
async fn receive(stream: TcpStream, out: mpsc::UnboundedSender<Message>) {
    let _ = stream.set_nodelay(true);
    let clock = Clock::new();
    let (mut rd, mut wr) = stream.into_split();
    let mut rx = RecordReceiver::with_max_message_bytes(u64::from(MAX_MESSAGE_BYTES));
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Every record completed by these bytes, in stream order; a corrupt stream cannot be
        // resynchronised: drop the connection.
        if rx
            .handle_bytes(clock.now(), chunk.get(..n).unwrap_or_default())
            .is_err()
        {
            return;
        }
        while let Some(ev) = rx.poll_event() {
            if let SppEvent::Delivered(d) = ev {
                let _ = out.send(Message {
                    id: d.id,
                    priority: d.priority,
                    data: d.data.unwrap_or_default(),
                });
            }
        }
        let acks = rx.take_acks();
        if acks > 0 {
            let ack = vec![1u8; acks as usize];
            if wr.write_all(&ack).await.is_err() {
                return;
            }
        }
    }
}
