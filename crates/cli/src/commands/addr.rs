//! Addresses on the command line and what the network says about them: `HOST:PORT` with a
//! host name or an address, the port plan's second port, and a missing UDP server reported
//! as soon as the network says so (ICMP port unreachable) instead of at a handshake timeout.

use anyhow::{Context, Result, bail};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// How long a UDP client waits for its handshake before it asks the network whether anything
/// listens there: a live server on any real path has answered by then, so the probe's empty
/// datagram (counted as malformed by the server) is sent only when something is wrong.
const PROBE_AFTER: Duration = Duration::from_millis(300);
/// Between probes (the kernel rate-limits ICMP errors; one may be lost).
const PROBE_EVERY: Duration = Duration::from_millis(300);

/// `HOST:PORT` — `localhost:7700`, `10.0.0.2:7700`, `[::1]:7700` — as one address, resolved
/// with the system's resolver. A name with addresses of both families resolves to its IPv4
/// one, the family `adaptnet serve` listens on by default (`0.0.0.0`).
pub async fn resolve(host_port: &str) -> Result<SocketAddr> {
    if let Ok(a) = host_port.parse::<SocketAddr>() {
        return Ok(a);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(host_port)
        .await
        .with_context(|| format!("resolving {host_port:?} (expected HOST:PORT)"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .with_context(|| format!("{host_port:?} resolves to no address"))
}

/// The port plan's second port P + 1 of base `base` (an error at 65535, which has none).
pub fn next_port(base: SocketAddr) -> Result<SocketAddr> {
    let Some(port) = base.port().checked_add(1) else {
        bail!(
            "port {} leaves no room for the bulk port P+1: `adaptnet serve` uses P and P+1, so P \
             must be at most 65534",
            base.port()
        );
    };
    Ok(SocketAddr::new(base.ip(), port))
}

/// Runs `connect` (a UDP transport's handshake to `to`), and fails early with "nothing
/// listens" if, after [`PROBE_AFTER`], the network answers a probe with ICMP port (or host)
/// unreachable. A connected UDP socket is what hears that answer: Linux reports ICMP errors
/// to connected sockets only, and an endpoint serving many peers is not connected.
pub async fn connect_udp<T, E>(
    to: SocketAddr,
    what: &str,
    connect: impl Future<Output = Result<T, E>>,
) -> Result<T>
where
    E: Into<anyhow::Error>,
{
    tokio::select! {
        r = connect => r.map_err(Into::into).with_context(|| format!("connecting ({what}) to {to}")),
        e = unreachable(to) => Err(e).with_context(|| format!(
            "connecting ({what}) to {to}: nothing listens there (is `adaptnet serve` running?)"
        )),
    }
}

/// Resolves with the network's answer once it reports `to` unreachable over UDP; pending
/// forever if it never does (a silent network, a firewall, a live server).
async fn unreachable(to: SocketAddr) -> io::Error {
    tokio::time::sleep(PROBE_AFTER).await;
    let local = adaptnet_runtime::message::unspecified_for(to);
    let socket = match tokio::net::UdpSocket::bind(local).await {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    if socket.connect(to).await.is_err() {
        return std::future::pending().await;
    }
    let mut buf = [0u8; 64];
    loop {
        // An empty datagram: nothing any adaptnet server parses, so at most a counter moves.
        if let Err(e) = socket.send(&[]).await
            && is_unreachable(&e)
        {
            return e;
        }
        match tokio::time::timeout(PROBE_EVERY, socket.recv(&mut buf)).await {
            Ok(Err(e)) if is_unreachable(&e) => return e,
            _ => {}
        }
    }
}

fn is_unreachable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::HostUnreachable
            | io::ErrorKind::NetworkUnreachable
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_port_has_no_next() {
        let a: SocketAddr = "127.0.0.1:65535".parse().expect("addr");
        let err = next_port(a).expect_err("no P+1");
        assert!(err.to_string().contains("65534"), "{err}");
        let b: SocketAddr = "127.0.0.1:7700".parse().expect("addr");
        assert_eq!(next_port(b).expect("P+1").port(), 7701);
    }

    #[tokio::test]
    async fn host_names_resolve_preferring_ipv4() {
        let a = resolve("localhost:7700").await.expect("localhost");
        assert_eq!(a, "127.0.0.1:7700".parse().expect("addr"));
        assert_eq!(
            resolve("[::1]:9").await.expect("literal"),
            "[::1]:9".parse().expect("addr")
        );
        assert!(resolve("localhost").await.is_err(), "a port is required");
    }

    #[tokio::test]
    async fn a_closed_udp_port_is_reported_at_once() {
        // A port that was just free: nothing listens there.
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .expect("a free port");
        let start = std::time::Instant::now();
        let never = std::future::pending::<Result<(), io::Error>>();
        let err = connect_udp(port, "test", never).await.expect_err("refused");
        assert!(format!("{err:#}").contains("nothing listens"), "{err:#}");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }
}
