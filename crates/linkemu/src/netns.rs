//! Network namespaces and TUN devices: creation, entering, deletion.
//!
//! Namespaces are made with iproute2 (`ip netns add`, so they are visible to `ip netns list`
//! and `ip netns exec` like any other), entered by threads with `setns(2)`, and deleted on
//! drop. A TUN device belongs to the namespace of the thread that opened `/dev/net/tun`, so
//! each device is created by a thread that first entered its namespace; the file descriptor
//! then works from any thread, and the device disappears when it is closed.

use crate::LinkEmuError;
use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;

/// Runs `ip` (or any program) with `args`; `Ok` if it exited with success.
pub fn run(program: &str, args: &[&str]) -> Result<(), LinkEmuError> {
    let command = format!("{program} {}", args.join(" "));
    match Command::new(program).args(args).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(LinkEmuError::Command {
            command,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        }),
        Err(e) => Err(LinkEmuError::Command {
            command,
            stderr: e.to_string(),
        }),
    }
}

/// Says what is missing to emulate a link here: root, iproute2, `/dev/net/tun`.
pub fn check_prerequisites() -> Result<(), LinkEmuError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LinkEmuError::NotRoot);
    }
    if run("ip", &["-V"]).is_err() {
        return Err(LinkEmuError::NoIproute2);
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(LinkEmuError::NoTun);
    }
    Ok(())
}

/// Whether a named namespace exists (`/var/run/netns/NAME`).
pub fn exists(name: &str) -> bool {
    std::path::Path::new("/var/run/netns").join(name).exists()
}

/// Deletes a named namespace if it exists.
pub fn delete(name: &str) -> Result<(), LinkEmuError> {
    if exists(name) {
        run("ip", &["netns", "del", name])?;
    }
    Ok(())
}

/// A named namespace made by [`Namespace::create`], deleted on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    /// Open handle, for `setns`.
    file: File,
}

impl Namespace {
    /// Creates namespace `name` with its loopback up. Fails if one of that name exists.
    pub fn create(name: &str) -> Result<Namespace, LinkEmuError> {
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(LinkEmuError::BadName(name.to_string()));
        }
        if exists(name) {
            return Err(LinkEmuError::Exists(name.to_string()));
        }
        if let Err(e) = run("ip", &["netns", "add", name]) {
            // `ip` may have been killed half-way (a Ctrl-C reaches the whole process group),
            // leaving the name behind: remove it.
            let _ = delete(name);
            return Err(e);
        }
        let file = match File::open(format!("/var/run/netns/{name}")) {
            Ok(f) => f,
            Err(source) => {
                let _ = run("ip", &["netns", "del", name]);
                return Err(LinkEmuError::Enter {
                    ns: name.to_string(),
                    source,
                });
            }
        };
        let ns = Namespace {
            name: name.to_string(),
            file,
        };
        run("ip", &["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a new thread that first entered the namespace, and waits for its result.
    /// Sockets opened by `f` stay in the namespace.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, LinkEmuError> {
        self.spawn(f)?.join()
    }

    /// Runs `f` on a new thread inside the namespace; returns once the thread is inside (or
    /// could not get in, which is the error).
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<InsideThread<T>, LinkEmuError> {
        let ns = self.name.clone();
        let enter_err = |source| LinkEmuError::Enter {
            ns: ns.clone(),
            source,
        };
        let file = self.file.try_clone().map_err(enter_err)?;
        let handle = spawn_entered(file, f).map_err(enter_err)?;
        Ok(InsideThread { handle, ns })
    }

    /// `ip netns exec NAME program`: a command that runs inside the namespace (with `/sys`
    /// remounted for it, so it sees the namespace's interfaces).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// Runs `f` on a new thread that first entered the network namespace open as `file`
/// (`/var/run/netns/NAME`); returns once the thread is inside, or the `setns(2)` error. The
/// thread's result is `None` only when it could not enter, which this already reported.
///
/// A thread, not the process: `setns` moves only the calling thread, so sockets opened by
/// `f` live in the namespace while the rest of the process stays where it was.
pub fn spawn_entered<T: Send + 'static>(
    file: std::fs::File,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<Option<T>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::spawn(move || {
        // SAFETY: setns on an open namespace descriptor, for this thread only.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        let entered = (rc == 0)
            .then_some(())
            .ok_or_else(std::io::Error::last_os_error);
        let ok = entered.is_ok();
        let _ = tx.send(entered);
        // Outside the namespace `f` must not run.
        ok.then(f)
    });
    let entered = rx
        .recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("the thread ended early")));
    match entered {
        Ok(()) => Ok(handle),
        Err(e) => {
            let _ = handle.join();
            Err(e)
        }
    }
}

/// A thread running inside a namespace ([`Namespace::spawn`]).
#[derive(Debug)]
pub struct InsideThread<T> {
    /// `None` only when the thread could not enter, which `spawn` already reported.
    handle: std::thread::JoinHandle<Option<T>>,
    ns: String,
}

impl<T> InsideThread<T> {
    /// Waits for the thread's result.
    pub fn join(self) -> Result<T, LinkEmuError> {
        match self.handle.join() {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(LinkEmuError::Thread(format!(
                "a thread did not enter {}",
                self.ns
            ))),
            Err(_) => Err(LinkEmuError::Thread(format!(
                "a thread in {} panicked",
                self.ns
            ))),
        }
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Creates TUN device `dev` (no packet information header, `mtu`, address `addr/24`, up) in
/// the calling thread's namespace, with offloads (`IFF_VNET_HDR`, TSO, USO where the kernel
/// has it) if `offload`. IPv6 is switched off on it before it comes up: the link is
/// IPv4, and the kernel's own IPv6 chatter (router solicitations, MLD reports) would otherwise
/// cross the emulated link at random times.
pub fn open_tun(
    dev: &str,
    mtu: u16,
    addr: Ipv4Addr,
    offload: bool,
) -> Result<tun_rs::SyncDevice, LinkEmuError> {
    let err = |source| LinkEmuError::Tun {
        dev: dev.to_string(),
        source,
    };
    let device = tun_rs::DeviceBuilder::new()
        .name(dev)
        .mtu(mtu)
        .ipv4(addr, 24u8, None)
        .packet_information(false)
        .offload(offload)
        .enable(false)
        .build_sync()
        .map_err(err)?;
    // /proc/sys/net shows the namespace of the thread that opens it. A kernel without IPv6
    // has no such file, which is fine.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
    device.enabled(true).map_err(err)?;
    device.set_nonblocking(true).map_err(err)?;
    Ok(device)
}

/// The first `10.250.N.0/24` (N in 1..=254) with no address in the root namespace, for a link
/// whose far side is this host.
pub fn free_host_subnet() -> Result<u8, LinkEmuError> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map_err(|e| LinkEmuError::Command {
            command: "ip -4 -o addr show".into(),
            stderr: e.to_string(),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    (1..=254u8)
        .find(|n| !text.contains(&format!(" 10.250.{n}.")))
        .ok_or(LinkEmuError::NoSubnet)
}

/// The transmit-drop counter of `dev` (in namespace `ns`, or this host's): for a TUN device,
/// packets the kernel routed into it but could not queue for the reader because its queue
/// (the device's `txqueuelen`) was full — packets the emulator fell too far behind to read.
pub fn tx_dropped(ns: Option<&str>, dev: &str) -> Option<u64> {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["-n", ns]);
    }
    let out = c.args(["-s", "link", "show", "dev", dev]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "    TX:  bytes packets errors dropped carrier collsns" then the numbers.
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("TX:"));
    lines.next()?;
    lines.next()?.split_whitespace().nth(3)?.parse().ok()
}
