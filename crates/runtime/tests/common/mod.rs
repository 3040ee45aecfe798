//! The namespace link shared by the runtime's two-host tests: the runtime's
//! [`adaptnet_testbed::netns::NetnsLink`] (a veth pair between the root namespace and a new
//! one, shaped with `tbf`, removed on drop), with a test's way of failing: skip loudly where
//! the machine cannot (not root, no iproute2), except under `CI=true`, and panic on errors.

#![allow(dead_code)] // each test file uses a different part

use adaptnet_testbed::netns::{self, NetnsError, NetnsLink};
use std::net::{SocketAddr, UdpSocket};

/// Runs a command; returns whether it succeeded (stderr shown on failure).
pub fn sh(args: &[&str]) -> bool {
    match netns::run(args) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("{e}");
            false
        }
    }
}

/// A namespace link for a test. Dropping it deletes the namespace (and so the veth pair),
/// even when the test fails.
pub struct Link(pub NetnsLink);

impl std::ops::Deref for Link {
    type Target = NetnsLink;
    fn deref(&self) -> &NetnsLink {
        &self.0
    }
}

impl Link {
    /// Sets up the link, or `None` (after saying why) where this machine cannot.
    pub fn new(tag: &str, subnet: u8) -> Option<Link> {
        match NetnsLink::create(tag, subnet) {
            Ok(l) => Some(Link(l)),
            Err(e) => {
                let why = match e {
                    NetnsError::NotRoot | NetnsError::NoIproute2 => e.to_string(),
                    other => format!("could not create the namespace and veth pair: {other}"),
                };
                let msg = format!("SKIPPED netns test {tag}: {why}");
                eprintln!("\n*** {msg} ***\n");
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "{msg} (CI must run the namespace tests)"
                );
                None
            }
        }
    }

    /// Shapes the host side (sender → receiver) to `rate` with `tc qdisc replace … tbf`.
    pub fn shape(&self, rate: &str) {
        if let Err(e) = self.0.shape(rate) {
            panic!("tc tbf on {}: {e}", self.host);
        }
    }

    /// Runs `make` on a thread of our own that entered the namespace: a socket it creates
    /// stays in the namespace after the thread ends; the rest of the process stays outside.
    pub fn inside<T: Send + 'static>(
        &self,
        make: impl FnOnce(SocketAddr) -> T + Send + 'static,
    ) -> T {
        let addr = self.inside_addr();
        match self.0.inside(move || make(addr)) {
            Ok(v) => v,
            Err(e) => panic!("inside {}: {e}", self.ns),
        }
    }

    /// A UDP socket bound inside the namespace, at `b_ip:0`.
    pub fn socket_inside(&self) -> UdpSocket {
        self.inside(|addr| UdpSocket::bind(addr).expect("bind inside the namespace"))
    }
}

/// Every whole message a server endpoint receives, on any of its connections (NAI-MTCPk's
/// clients open several), through one bounded channel; the task ends with the endpoint.
pub fn messages_of(
    server: adaptnet_runtime::message::Endpoint,
) -> tokio::sync::mpsc::Receiver<adaptnet_runtime::message::Message> {
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move {
        while let Some(conn) = server.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Ok(m) = conn.recv().await {
                    if tx.send(m).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    rx
}
