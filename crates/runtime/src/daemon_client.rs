//! The client side of the host daemon's local protocol (`adaptnet daemon`, issue 20; wire
//! format in core's `daemon` module, documented in `docs/design/daemon.md`), on the caller's
//! tokio runtime: what an application, the runtime's own CM handle ([`crate::cm::Cm`] with
//! the daemon backend) and `adaptnet monitor` use to talk to the daemon. It lives here, not
//! in the daemon crate, because the runtime's handles use it and the daemon crate depends on
//! the runtime.
//!
//! One reader task per connection splits the daemon's frames into replies (handed to the
//! waiting call by `req_id`) and events (a bounded queue read with
//! [`DaemonClient::next_event`]; when the application does not keep up, the oldest events
//! are *not* kept: new ones are dropped and counted in [`DaemonClient::events_lost`], as the
//! daemon does for its side). Calls may be made concurrently from clones of the client.

use adaptnet_core::cm::{
    Feedback, FeedbackSource, FlowId, FlowKey, FlowQuery, MacroflowId, PeerAddr, Request,
    Thresholds,
};
use adaptnet_core::daemon::{
    DEFAULT_SOCKET_PATH, DevParam, ErrorCode, FrameDecoder, Message, SOCKET_ENV, encode_frame,
};
use adaptnet_core::env::{Level, LevelMask, Name, Param};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{mpsc, oneshot};

/// Events kept for the application by default.
pub const DEFAULT_EVENT_QUEUE: usize = 4096;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon could not be reached.
    #[error("connecting to the daemon at {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The connection ended (the daemon stopped or restarted).
    #[error("the daemon closed the connection")]
    Disconnected,
    /// The daemon refused the request.
    #[error("daemon refused: {code:?}: {message}")]
    Refused {
        /// Why.
        code: ErrorCode,
        /// Its message.
        message: String,
    },
    /// The daemon answered with something that is not a reply to this call.
    #[error("unexpected reply {0}")]
    Unexpected(&'static str),
    /// The request could not be encoded (a name too long, too many levels).
    #[error("request not encodable: {0}")]
    Encode(adaptnet_core::wire::WireError),
}

/// The socket path applications use: `$ADAPTNET_DAEMON_SOCKET`, else the default.
pub fn socket_path() -> PathBuf {
    std::env::var_os(SOCKET_ENV).map_or_else(|| PathBuf::from(DEFAULT_SOCKET_PATH), PathBuf::from)
}

/// The calls waiting for their replies, by `req_id`.
#[derive(Default)]
struct Calls {
    waiting: HashMap<u32, oneshot::Sender<Message>>,
    /// The reader has stopped: no reply will come, so no call may wait for one. Set under
    /// the same lock as `waiting` is cleared, so a call either is cleared or sees this.
    closed: bool,
}

type Pending = Arc<Mutex<Calls>>;

/// A connection to the daemon. Cheap to clone; the connection closes when the last clone is
/// dropped, and the daemon then frees everything the connection held.
#[derive(Clone)]
pub struct DaemonClient {
    inner: Arc<Inner>,
}

struct Inner {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    next_id: AtomicU32,
    events: tokio::sync::Mutex<mpsc::Receiver<Message>>,
    lost: Arc<AtomicU64>,
    reader: tokio::task::JoinHandle<()>,
    /// (client id, uid, share) from the daemon's `Welcome`; set once it arrives.
    welcome: OnceLock<(u32, u32, f64)>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl DaemonClient {
    /// Connects to the daemon at `path` and introduces itself as `name`.
    pub async fn connect(path: &Path, name: &str) -> Result<DaemonClient, ClientError> {
        Self::connect_with(path, name, DEFAULT_EVENT_QUEUE).await
    }

    /// As [`DaemonClient::connect`], keeping at most `event_queue` undelivered events.
    pub async fn connect_with(
        path: &Path,
        name: &str,
        event_queue: usize,
    ) -> Result<DaemonClient, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.to_owned(),
                source,
            })?;
        let client = Self::from_stream(stream, event_queue);
        client.hello(name).await?;
        Ok(client)
    }

    /// Connects to the daemon at `path` without waiting (for handles made in synchronous
    /// code, such as [`crate::cm::Cm::global`]): the connection is made at once, so a missing
    /// or dead daemon is an error here, and the introduction (`hello`) is sent in the
    /// background; [`DaemonClient::client_id`], [`DaemonClient::uid`] and
    /// [`DaemonClient::share`] read 0 until the daemon's welcome arrives. Call inside a
    /// tokio runtime.
    pub fn connect_now(path: &Path, name: &str) -> Result<DaemonClient, ClientError> {
        let connect_err = |source| ClientError::Connect {
            path: path.to_owned(),
            source,
        };
        let stream = std::os::unix::net::UnixStream::connect(path).map_err(connect_err)?;
        stream.set_nonblocking(true).map_err(connect_err)?;
        let stream = UnixStream::from_std(stream).map_err(connect_err)?;
        let client = Self::from_stream(stream, DEFAULT_EVENT_QUEUE);
        let (c, name) = (client.clone(), name.to_owned());
        tokio::spawn(async move {
            if let Err(e) = c.hello(&name).await {
                tracing::debug!(error = %e, "daemon client: hello");
            }
        });
        Ok(client)
    }

    async fn hello(&self, name: &str) -> Result<(), ClientError> {
        match self.call(Message::Hello { name: name.into() }).await? {
            Message::Welcome {
                client: id,
                uid,
                share,
                ..
            } => {
                let _ = self.inner.welcome.set((id, uid, share));
                Ok(())
            }
            _ => Err(ClientError::Unexpected("to hello")),
        }
    }

    /// Starts the reader task of a connected stream.
    fn from_stream(stream: UnixStream, event_queue: usize) -> DaemonClient {
        let (mut rd, wr) = stream.into_split();
        let pending: Pending = Arc::new(Mutex::new(Calls::default()));
        let (tx, rx) = mpsc::channel(event_queue.max(1));
        let lost = Arc::new(AtomicU64::new(0));
        let reader = {
            let pending = pending.clone();
            let lost = lost.clone();
            tokio::spawn(async move {
                let mut dec = FrameDecoder::new();
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = match rd.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    dec.push(buf.get(..n).unwrap_or_default());
                    while let Some(f) = dec.next_frame() {
                        let Ok((req_id, msg)) = f else { continue };
                        let waiting = if msg.is_event() || req_id == 0 {
                            None
                        } else {
                            lock(&pending).waiting.remove(&req_id)
                        };
                        match waiting {
                            Some(w) => {
                                let _ = w.send(msg);
                            }
                            // Events, and replies no call waits for (an error about a frame
                            // the daemon could not read), go to the event queue.
                            None => {
                                if let Message::Lost { events } = msg {
                                    lost.fetch_add(events, Ordering::Relaxed);
                                }
                                if tx.try_send(msg).is_err() {
                                    lost.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                }
                // Waiting calls see `Disconnected` when their senders drop, and later calls
                // see `closed`.
                let mut calls = lock(&pending);
                calls.closed = true;
                calls.waiting.clear();
            })
        };
        DaemonClient {
            inner: Arc::new(Inner {
                writer: tokio::sync::Mutex::new(wr),
                pending,
                next_id: AtomicU32::new(1),
                events: tokio::sync::Mutex::new(rx),
                lost,
                reader,
                welcome: OnceLock::new(),
            }),
        }
    }

    /// Connects to the socket named by [`socket_path`].
    pub async fn connect_default(name: &str) -> Result<DaemonClient, ClientError> {
        Self::connect(&socket_path(), name).await
    }

    /// This connection's number at the daemon.
    pub fn client_id(&self) -> u32 {
        self.inner.welcome.get().map_or(0, |w| w.0)
    }

    /// The uid the daemon sees (`SO_PEERCRED`).
    pub fn uid(&self) -> u32 {
        self.inner.welcome.get().map_or(0, |w| w.1)
    }

    /// This user's configured share.
    pub fn share(&self) -> f64 {
        self.inner.welcome.get().map_or(0.0, |w| w.2)
    }

    /// Events dropped because the application did not read them in time (here or at the
    /// daemon).
    pub fn events_lost(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// Sends one request and waits for its reply (an `Error` reply becomes
    /// [`ClientError::Refused`]).
    pub async fn call(&self, msg: Message) -> Result<Message, ClientError> {
        let mut id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        }
        let mut frame = Vec::with_capacity(64);
        encode_frame(id, &msg, &mut frame).map_err(ClientError::Encode)?;
        let (tx, rx) = oneshot::channel();
        {
            // The reader may have stopped after the daemon closed its end while the socket
            // still takes writes: a call registered then would wait forever.
            let mut calls = lock(&self.inner.pending);
            if calls.closed {
                return Err(ClientError::Disconnected);
            }
            calls.waiting.insert(id, tx);
        }
        {
            let mut w = self.inner.writer.lock().await;
            if w.write_all(&frame).await.is_err() {
                lock(&self.inner.pending).waiting.remove(&id);
                return Err(ClientError::Disconnected);
            }
        }
        match rx.await.map_err(|_| ClientError::Disconnected)? {
            Message::Error { code, message } => Err(ClientError::Refused { code, message }),
            m => Ok(m),
        }
    }

    /// Writes raw bytes to the daemon (tests of malformed input).
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<(), ClientError> {
        let mut w = self.inner.writer.lock().await;
        w.write_all(bytes)
            .await
            .map_err(|_| ClientError::Disconnected)
    }

    async fn ok(&self, msg: Message) -> Result<(), ClientError> {
        match self.call(msg).await? {
            Message::Ok => Ok(()),
            _ => Err(ClientError::Unexpected("expected Ok")),
        }
    }

    /// The next event (grant, rate change, environment event, estimate, lost count); `None`
    /// once the connection is closed and every event read.
    pub async fn next_event(&self) -> Option<Message> {
        self.inner.events.lock().await.recv().await
    }

    /// An event if one is queued.
    pub fn try_next_event(&self) -> Option<Message> {
        self.inner.events.try_lock().ok()?.try_recv().ok()
    }

    /// `cm_open`.
    pub async fn open(
        &self,
        dest: PeerAddr,
        key: FlowKey,
        weight: f64,
        feedback: FeedbackSource,
    ) -> Result<(FlowId, MacroflowId), ClientError> {
        match self
            .call(Message::Open {
                dest,
                key,
                weight,
                feedback,
            })
            .await?
        {
            Message::Opened { flow, macroflow } => Ok((flow, macroflow)),
            _ => Err(ClientError::Unexpected("to open")),
        }
    }

    /// `cm_close`.
    pub async fn close(&self, flow: FlowId) -> Result<(), ClientError> {
        self.ok(Message::Close { flow }).await
    }

    /// `cm_request`.
    pub async fn request(&self, flow: FlowId, request: Request) -> Result<(), ClientError> {
        self.ok(Message::Request { flow, request }).await
    }

    /// `cm_notify`.
    pub async fn notify(&self, flow: FlowId, nsent: u64) -> Result<(), ClientError> {
        self.ok(Message::Notify { flow, nsent }).await
    }

    /// `cm_update`.
    pub async fn update(&self, flow: FlowId, feedback: Feedback) -> Result<(), ClientError> {
        self.ok(Message::Update { flow, feedback }).await
    }

    /// `cm_query`.
    pub async fn query(&self, flow: FlowId) -> Result<FlowQuery, ClientError> {
        match self.call(Message::Query { flow }).await? {
            Message::QueryReply(q) => Ok(q),
            _ => Err(ClientError::Unexpected("to query")),
        }
    }

    /// `cm_thresh`: which rate changes are reported as `change_rate` events.
    pub async fn thresh(&self, flow: FlowId, thresholds: Thresholds) -> Result<(), ClientError> {
        self.ok(Message::Thresh { flow, thresholds }).await
    }

    /// Reports received data of a probe-fed flow to the receiver CM.
    pub async fn received(
        &self,
        from: PeerAddr,
        key: FlowKey,
        bytes: u64,
        ce: bool,
    ) -> Result<(), ClientError> {
        self.ok(Message::Received {
            from,
            key,
            bytes,
            ce,
        })
        .await
    }

    /// `set_dev_param`.
    pub async fn set_dev_param(
        &self,
        device: Name,
        param: Param,
        value: f64,
    ) -> Result<(), ClientError> {
        self.ok(Message::SetDevParam {
            device,
            param,
            value,
        })
        .await
    }

    /// `set_dev_param_wms`.
    pub async fn set_dev_param_wms(
        &self,
        device: Name,
        param: Param,
        levels: Vec<Level>,
    ) -> Result<(), ClientError> {
        self.ok(Message::SetDevParamWms {
            device,
            param,
            levels,
        })
        .await
    }

    /// `get_dev_params`.
    pub async fn get_dev_params(&self, device: Name) -> Result<Vec<DevParam>, ClientError> {
        match self.call(Message::GetDevParams { device }).await? {
            Message::DevParams { readings, .. } => Ok(readings),
            _ => Err(ClientError::Unexpected("to get_dev_params")),
        }
    }

    /// `request_event`.
    pub async fn request_event(
        &self,
        device: Name,
        param: Param,
        levels: LevelMask,
    ) -> Result<(), ClientError> {
        self.ok(Message::RequestEvent {
            device,
            param,
            levels,
        })
        .await
    }

    /// Subscribes to an interface's bandwidth estimates.
    pub async fn subscribe_estimator(&self, iface: &str) -> Result<(), ClientError> {
        self.ok(Message::SubscribeEstimator {
            iface: iface.into(),
        })
        .await
    }

    /// The daemon's state as JSON.
    pub async fn status(&self) -> Result<String, ClientError> {
        match self.call(Message::StatusRequest).await? {
            Message::Status { json } => Ok(json),
            _ => Err(ClientError::Unexpected("to status")),
        }
    }
}

/// How this process introduces itself to the daemon (its name in `adaptnet monitor`): the
/// executable's name and the process id.
pub fn process_name() -> String {
    let exe = std::env::current_exe().ok();
    let name = exe
        .as_deref()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("app");
    format!("{name}[{}]", std::process::id())
        .chars()
        .take(64)
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A daemon that closes its sending side but still takes writes: the client's reader
    /// ends, and a call made afterwards must fail at once instead of waiting for a reply
    /// that cannot come (a test of the daemon backend hung here about once in 100 loaded
    /// runs).
    #[tokio::test]
    async fn a_call_after_the_daemon_stopped_replying_fails_instead_of_waiting() {
        let (ours, mut theirs) = UnixStream::pair().expect("socket pair");
        let client = DaemonClient::from_stream(ours, 16);
        theirs
            .shutdown()
            .await
            .expect("shut down the daemon's sending side");
        // The reader has seen the end once the event queue closes.
        let end = tokio::time::timeout(Duration::from_secs(5), client.next_event()).await;
        assert!(matches!(end, Ok(None)), "the reader ended: {end:?}");
        let call = tokio::time::timeout(Duration::from_secs(5), client.status()).await;
        assert!(
            matches!(call, Ok(Err(ClientError::Disconnected))),
            "{call:?}"
        );
        // The daemon's side is still open for reading: the write itself succeeded.
        drop(theirs);
    }
}
