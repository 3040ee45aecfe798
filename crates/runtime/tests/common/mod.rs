//! The namespace link shared by the runtime's two-host tests: a veth pair between the root
//! namespace and a new one, shaped with `tbf`, removed on drop.

#![allow(dead_code)] // each test file uses a different part

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;

/// Runs a command; returns whether it succeeded (stderr shown on failure).
pub fn sh(args: &[&str]) -> bool {
    match Command::new(args[0]).args(&args[1..]).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => {
            eprintln!("{args:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
            false
        }
        Err(e) => {
            eprintln!("{args:?}: {e}");
            false
        }
    }
}

/// A namespace `ns` with `peer` (at `b_ip`) linked by veth to `host` (at `a_ip`) in the root
/// namespace. Dropping it deletes the namespace (and so the veth pair), even on failure.
pub struct Link {
    pub ns: String,
    pub host: String,
    pub a_ip: String,
    pub b_ip: String,
}

impl Link {
    /// Sets up the link, or `None` (after saying why) where this machine cannot.
    pub fn new(tag: &str, subnet: u8) -> Option<Link> {
        let skip = |why: &str| {
            let msg = format!("SKIPPED netns test {tag}: {why}");
            eprintln!("\n*** {msg} ***\n");
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{msg} (CI must run the namespace tests)"
            );
            None
        };
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return skip("not root");
        }
        if !sh(&["ip", "-V"]) || !sh(&["tc", "-V"]) {
            return skip("ip/tc (iproute2) not installed");
        }
        let id = std::process::id() % 10_000;
        let link = Link {
            ns: format!("adn{tag}{id}"),
            host: format!("adh{tag}{id}"),
            a_ip: format!("10.{subnet}.0.1"),
            b_ip: format!("10.{subnet}.0.2"),
        };
        let peer = format!("adp{tag}{id}");
        let ok = sh(&["ip", "netns", "add", &link.ns])
            && sh(&[
                "ip", "link", "add", &link.host, "type", "veth", "peer", "name", &peer,
            ])
            && sh(&["ip", "link", "set", &peer, "netns", &link.ns])
            && sh(&[
                "ip",
                "addr",
                "add",
                &format!("{}/24", link.a_ip),
                "dev",
                &link.host,
            ])
            && sh(&["ip", "link", "set", &link.host, "up"])
            && sh(&[
                "ip",
                "-n",
                &link.ns,
                "addr",
                "add",
                &format!("{}/24", link.b_ip),
                "dev",
                &peer,
            ])
            && sh(&["ip", "-n", &link.ns, "link", "set", &peer, "up"])
            && sh(&["ip", "-n", &link.ns, "link", "set", "lo", "up"]);
        if !ok {
            drop(link);
            return skip("could not create the namespace and veth pair");
        }
        Some(link)
    }

    /// Shapes the host side (sender → receiver) to `rate` with `tc qdisc replace … tbf`.
    pub fn shape(&self, rate: &str) {
        assert!(
            sh(&[
                "tc", "qdisc", "replace", "dev", &self.host, "root", "tbf", "rate", rate, "burst",
                "16kb", "latency", "100ms",
            ]),
            "tc tbf on {}",
            self.host
        );
    }

    /// Runs `make` on a thread of our own that entered the namespace: a socket it creates
    /// stays in the namespace after the thread ends; the rest of the process stays outside.
    pub fn inside<T: Send + 'static>(
        &self,
        make: impl FnOnce(SocketAddr) -> T + Send + 'static,
    ) -> T {
        let path = format!("/var/run/netns/{}", self.ns);
        let addr: SocketAddr = format!("{}:0", self.b_ip).parse().expect("address");
        std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("namespace file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a namespace fd for this thread only.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            make(addr)
        })
        .join()
        .expect("namespace thread")
    }

    /// A UDP socket bound inside the namespace, at `b_ip:0`.
    pub fn socket_inside(&self) -> UdpSocket {
        self.inside(|addr| UdpSocket::bind(addr).expect("bind inside the namespace"))
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        sh(&["ip", "netns", "del", &self.ns]);
        // The veth pair goes with the namespace; delete the host end too in case it did not.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .output();
    }
}
