//! Why a link could not be emulated.

use thiserror::Error;

/// Why a link could not be set up, run or torn down.
#[derive(Debug, Error)]
pub enum LinkEmuError {
    /// Not running as root.
    #[error("not root (namespaces and TUN devices need CAP_NET_ADMIN and CAP_SYS_ADMIN)")]
    NotRoot,
    /// `ip` is missing.
    #[error("ip (iproute2) not installed")]
    NoIproute2,
    /// No TUN driver.
    #[error("/dev/net/tun is missing (load the tun module)")]
    NoTun,
    /// A namespace name that `ip netns` or interface naming would not take.
    #[error("bad link name {0:?}: use 1-64 letters, digits, '-' or '_'")]
    BadName(String),
    /// A namespace of that name already exists.
    #[error("namespace {0} already exists (`adaptnet link down` removes a stale link)")]
    Exists(String),
    /// Every `10.250.N.0/24` is taken on this host.
    #[error("no free 10.250.N.0/24 subnet on this host; pass one explicitly")]
    NoSubnet,
    /// A command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr (or why it could not run).
        stderr: String,
    },
    /// Entering a namespace failed.
    #[error("entering namespace {ns}: {source}")]
    Enter {
        /// The namespace.
        ns: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A TUN device could not be made or configured.
    #[error("TUN device {dev}: {source}")]
    Tun {
        /// The device name.
        dev: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A capture or log file could not be written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The emulator's thread failed.
    #[error("{0}")]
    Thread(String),
    /// Reading a device failed (other than "nothing to read").
    #[error("reading {dev}: {source}")]
    Read {
        /// The device.
        dev: String,
        /// The cause.
        source: std::io::Error,
    },
}
