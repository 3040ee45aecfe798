//! Two hosts on one machine: a network namespace joined to the root namespace by a veth pair,
//! optionally shaped with `tbf`, deleted when dropped. The runtime's namespace tests and the
//! benchmarks that need a real link (`adaptnet bench env-netns`) share it.
//!
//! It runs iproute2 (`ip`, `tc`) and needs root (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN` for
//! `setns`); [`NetnsLink::create`] says which is missing rather than failing half-way. Code runs
//! inside the namespace on a thread of its own that entered it with `setns(2)`
//! ([`NetnsLink::spawn_inside`]): sockets it opens stay in the namespace after the thread ends,
//! while the rest of the process stays outside. Processes spawned from such a thread start in
//! the namespace too, so run `ip`/`tc` for the root side from an ordinary thread.

use std::net::SocketAddr;
use std::process::Command;
use std::thread::JoinHandle;
use thiserror::Error;

/// Why a namespace link could not be set up or changed.
#[derive(Debug, Error)]
pub enum NetnsError {
    /// Not running as root.
    #[error("not root (namespaces, veth and tc need CAP_NET_ADMIN)")]
    NotRoot,
    /// `ip` or `tc` is missing.
    #[error("ip/tc (iproute2) not installed")]
    NoIproute2,
    /// A command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr (or why it could not run).
        stderr: String,
    },
    /// Entering the namespace failed.
    #[error("entering namespace {ns}: {source}")]
    Enter {
        /// The namespace.
        ns: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Runs a command; `Ok` if it exited with success.
pub fn run(args: &[&str]) -> Result<(), NetnsError> {
    let command = args.join(" ");
    let Some((prog, rest)) = args.split_first() else {
        return Ok(());
    };
    match Command::new(prog).args(rest).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(NetnsError::Command {
            command,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        }),
        Err(e) => Err(NetnsError::Command {
            command,
            stderr: e.to_string(),
        }),
    }
}

/// `ip:0` (the unspecified address if `ip` does not parse, which `create`'s do).
fn any_port(ip: &str) -> SocketAddr {
    let ip = ip
        .parse()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    SocketAddr::new(ip, 0)
}

/// A namespace `ns` holding `peer` (at `b_ip`), joined by veth to `host` (at `a_ip`) in the
/// root namespace, both ends up. Dropping it deletes the namespace and so the pair.
#[derive(Debug)]
pub struct NetnsLink {
    /// The namespace's name (`/var/run/netns/<ns>`).
    pub ns: String,
    /// The veth end in the root namespace.
    pub host: String,
    /// The veth end inside the namespace.
    pub peer: String,
    /// `host`'s address.
    pub a_ip: String,
    /// `peer`'s address.
    pub b_ip: String,
}

impl NetnsLink {
    /// Creates the namespace and the pair on `10.<subnet>.0.0/24` (`.1` outside, `.2` inside);
    /// names carry `tag` and this process's id so parallel runs do not collide.
    pub fn create(tag: &str, subnet: u8) -> Result<NetnsLink, NetnsError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(NetnsError::NotRoot);
        }
        if run(&["ip", "-V"]).is_err() || run(&["tc", "-V"]).is_err() {
            return Err(NetnsError::NoIproute2);
        }
        let id = std::process::id() % 10_000;
        let link = NetnsLink {
            ns: format!("adn{tag}{id}"),
            host: format!("adh{tag}{id}"),
            peer: format!("adp{tag}{id}"),
            a_ip: format!("10.{subnet}.0.1"),
            b_ip: format!("10.{subnet}.0.2"),
        };
        // From here on, `link` is dropped (namespace deleted) on any error.
        let (ns, host, peer) = (&link.ns, &link.host, &link.peer);
        run(&["ip", "netns", "add", ns])?;
        run(&[
            "ip", "link", "add", host, "type", "veth", "peer", "name", peer,
        ])?;
        run(&["ip", "link", "set", peer, "netns", ns])?;
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", link.a_ip),
            "dev",
            host,
        ])?;
        run(&["ip", "link", "set", host, "up"])?;
        let b = format!("{}/24", link.b_ip);
        run(&["ip", "-n", ns, "addr", "add", &b, "dev", peer])?;
        run(&["ip", "-n", ns, "link", "set", peer, "up"])?;
        run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        Ok(link)
    }

    /// Shapes the host side (root → namespace) to `rate` (`tc` syntax, e.g. `10mbit`) with
    /// `tc qdisc replace … tbf burst 16kb latency 100ms`.
    pub fn shape(&self, rate: &str) -> Result<(), NetnsError> {
        run(&[
            "tc", "qdisc", "replace", "dev", &self.host, "root", "tbf", "rate", rate, "burst",
            "16kb", "latency", "100ms",
        ])
    }

    /// Removes the shaping again (the root qdisc back to the default).
    pub fn unshape(&self) -> Result<(), NetnsError> {
        match run(&["tc", "qdisc", "del", "dev", &self.host, "root"]) {
            // Nothing to delete is not an error here.
            Err(NetnsError::Command { stderr, .. })
                if stderr.contains("No such file") || stderr.contains("Cannot delete") =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// `b_ip:0`, the address to bind inside the namespace.
    pub fn inside_addr(&self) -> SocketAddr {
        any_port(&self.b_ip)
    }

    /// `a_ip:0`, the address to bind outside.
    pub fn outside_addr(&self) -> SocketAddr {
        any_port(&self.a_ip)
    }

    /// Runs `f` on a new thread that first entered the namespace; the thread ends with `f`.
    /// Returns once the thread is inside (or could not get in).
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<InsideThread<T>, NetnsError> {
        let ns = self.ns.clone();
        let file = std::fs::File::open(format!("/var/run/netns/{ns}")).map_err(|source| {
            NetnsError::Enter {
                ns: ns.clone(),
                source,
            }
        })?;
        match adaptnet_linkemu::netns::spawn_entered(file, f) {
            Ok(handle) => Ok(InsideThread { handle, ns }),
            Err(source) => Err(NetnsError::Enter { ns, source }),
        }
    }

    /// Runs `f` inside the namespace and waits for its result.
    pub fn inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, NetnsError> {
        self.spawn_inside(f)?.join()
    }
}

/// A thread running inside a namespace ([`NetnsLink::spawn_inside`]).
#[derive(Debug)]
pub struct InsideThread<T> {
    /// `None` only when the thread could not enter, which `spawn_inside` already reported.
    handle: JoinHandle<Option<T>>,
    ns: String,
}

impl<T> InsideThread<T> {
    /// Waits for the thread's result.
    pub fn join(self) -> Result<T, NetnsError> {
        let ns = self.ns;
        match self.handle.join() {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(NetnsError::Enter {
                ns,
                source: std::io::Error::other("the thread did not enter the namespace"),
            }),
            Err(_) => Err(NetnsError::Enter {
                ns,
                source: std::io::Error::other("the namespace thread panicked"),
            }),
        }
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

impl Drop for NetnsLink {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.ns]);
        // The pair goes with the namespace; delete the host end too in case it did not.
        let _ = Command::new("ip")
            .args(["link", "del", &self.host])
            .output();
    }
}
