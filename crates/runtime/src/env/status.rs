//! The status message receiver: the role of papers/001 §3.1's ICMP_STATUS, over UDP.
//!
//! A base station or proxy sends core's [`adaptnet_core::env::StatusMessage`] signed with a
//! shared key ([`adaptnet_core::env::StatusSigner`]). The receiver checks every datagram with
//! core's [`StatusVerifier`] keyed by the datagram's source address (configured peer, key id,
//! HMAC, replay window, in that order) and, if it is accepted, sets the reported value with
//! `set_dev_param` on *this host's* table: the sender's `violated`/`cleared` masks describe its
//! own levels and are not used — events come from the host's levels, so subscribers see one
//! consistent set of watermarks whichever source set the value. Rejected datagrams are counted
//! in [`super::MonitorStats::status_rejected`] and otherwise ignored (logged at debug level).

use super::{EnvMonitorError, Shared};
use adaptnet_core::env::StatusVerifier;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::UdpSocket;

/// Largest datagram read; longer ones are truncated and then fail authentication.
const MAX_DATAGRAM_BYTES: usize = 2048;

/// Binds the status socket (non-blocking, registered with `handle`'s reactor).
pub(super) fn bind(
    addr: SocketAddr,
    handle: &tokio::runtime::Handle,
) -> Result<UdpSocket, EnvMonitorError> {
    let err = |source| EnvMonitorError::Socket { addr, source };
    let std_sock = std::net::UdpSocket::bind(addr).map_err(err)?;
    std_sock.set_nonblocking(true).map_err(err)?;
    let _guard = handle.enter();
    UdpSocket::from_std(std_sock).map_err(err)
}

/// Receives, verifies and applies status messages until the monitor closes.
pub(super) async fn receive(
    shared: Arc<Shared>,
    socket: UdpSocket,
    mut verifier: StatusVerifier<SocketAddr>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    loop {
        let Some(received) = super::until_stopped(&mut stop, socket.recv_from(&mut buf)).await
        else {
            return;
        };
        let (len, from) = match received {
            Ok(r) => r,
            Err(e) => {
                // ICMP errors surface here on some systems; keep receiving.
                tracing::debug!("status socket: {e}");
                continue;
            }
        };
        let datagram = buf.get(..len).unwrap_or_default();
        let verdict = verifier.verify(&from, datagram);
        let mut st = shared.lock();
        match verdict {
            Ok(msg) => match st.set(&msg.device, &msg.param, msg.value) {
                Ok(()) => {
                    st.stats.status_accepted += 1;
                    st.drain();
                }
                Err(e) => {
                    st.stats.status_rejected += 1;
                    tracing::debug!("status message from {from}: {e}");
                }
            },
            Err(e) => {
                st.stats.status_rejected += 1;
                tracing::debug!("status message from {from} rejected: {e}");
            }
        }
        drop(st);
        shared.kick.notify_one();
    }
}
