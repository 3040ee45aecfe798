//! What the server-facing CLI tests share: an `adaptnet serve` child process with its output
//! in files, ready once its listeners answer; the other subcommands run to completion; the
//! server's resident memory.

#![allow(dead_code, reason = "each test file uses a part")]

use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `adaptnet` binary under test.
pub fn adaptnet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_adaptnet"))
}

/// Runs `adaptnet ARGS` to the end.
pub fn run(args: &[&str]) -> Output {
    adaptnet().args(args).output().expect("run adaptnet")
}

/// The experiments directory of the source tree.
pub fn experiments() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments")
        .to_string_lossy()
        .into_owned()
}

/// A base port P with UDP and TCP P and P+1 free (checked by binding them).
pub fn free_base_port() -> u16 {
    for _ in 0..100 {
        let Ok(p) = UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()) else {
            continue;
        };
        let p = p.port();
        if p == u16::MAX {
            continue;
        }
        let free = [p, p + 1].iter().all(|&q| {
            UdpSocket::bind(("127.0.0.1", q)).is_ok()
                && std::net::TcpListener::bind(("127.0.0.1", q)).is_ok()
        });
        if free {
            return p;
        }
    }
    panic!("no free port pair");
}

/// A running `adaptnet serve`; killed when dropped if still running.
pub struct Server {
    /// The child process.
    pub child: Child,
    /// Its base address (P).
    pub addr: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Server {
    /// Starts `adaptnet serve --listen 127.0.0.1:P EXTRA…` (`prepare` adjusts the command,
    /// e.g. its resource limits) and waits until TCP P+1 accepts.
    pub fn start(tag: &str, extra: &[&str], prepare: impl FnOnce(&mut Command)) -> Server {
        let p = free_base_port();
        let addr: SocketAddr = format!("127.0.0.1:{p}").parse().expect("addr");
        let dir = std::env::temp_dir();
        let stdout = dir.join(format!("adaptnet-{tag}-{p}.out"));
        let stderr = dir.join(format!("adaptnet-{tag}-{p}.err"));
        let mut cmd = adaptnet();
        cmd.args(["serve", "--listen", &addr.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        prepare(&mut cmd);
        let child = cmd.spawn().expect("start adaptnet serve");
        let server = Server {
            child,
            addr,
            stdout,
            stderr,
        };
        let bulk = SocketAddr::new(addr.ip(), p + 1);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(bulk).is_err() {
            assert!(
                Instant::now() < deadline,
                "serve did not start: {}",
                server.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `HOST:P` as a string.
    pub fn to(&self) -> String {
        self.addr.to_string()
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid")
    }

    /// Resident memory now, KB (`VmRSS`).
    pub fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the server's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS")
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` and waits for the exit (at most 20 s); its stdout.
    pub fn stop_with(mut self, signal: i32) -> (std::process::ExitStatus, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid(), signal);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s;
            }
            assert!(Instant::now() < deadline, "serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        (status, read(&self.stdout))
    }

    /// What it printed on stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.stdout);
        let _ = std::fs::remove_file(&self.stderr);
    }
}

fn read(path: &PathBuf) -> String {
    let mut s = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// `out`'s stdout as JSON, after checking that it succeeded.
pub fn json_of(what: &str, out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// `adaptnet bulk --to TO --transport TRANSPORT EXTRA…`, `-t 1` unless `extra` says.
pub fn bulk(to: &str, transport: &str, extra: &[&str]) -> Output {
    let mut args = vec!["bulk", "--to", to, "--transport", transport];
    args.extend_from_slice(extra);
    one_second_unless_told(&mut args);
    run(&args)
}

fn one_second_unless_told(args: &mut Vec<&str>) {
    if !args.contains(&"-t") {
        args.extend(["-t", "1"]);
    }
}

/// `adaptnet send --to TO --transport TRANSPORT EXTRA…` (`-t 1` unless told) with the source tree's
/// experiments and a scratch output directory (removed after).
pub fn send(to: &str, transport: &str, extra: &[&str]) -> Output {
    let out = std::env::temp_dir().join(format!(
        "adaptnet-test-send-{}-{}",
        std::process::id(),
        to.replace([':', '.', '[', ']'], "-")
    ));
    let (experiments, out_s) = (experiments(), out.to_string_lossy().into_owned());
    let mut args = vec![
        "send",
        "--to",
        to,
        "--transport",
        transport,
        "--experiments",
        &experiments,
        "--out",
        &out_s,
    ];
    args.extend_from_slice(extra);
    one_second_unless_told(&mut args);
    let o = run(&args);
    let _ = std::fs::remove_dir_all(&out);
    o
}
