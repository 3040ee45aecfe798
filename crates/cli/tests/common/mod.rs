//! What the CLI's integration tests share.

use std::net::{TcpListener, UdpSocket};

/// A base port P with UDP and TCP P and P+1 free (checked by binding them).
pub fn free_base_port() -> u16 {
    for _ in 0..100 {
        let Ok(probe) = UdpSocket::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(p) = probe.local_addr().map(|a| a.port()) else {
            continue;
        };
        drop(probe);
        if p == u16::MAX {
            continue;
        }
        let free = [p, p + 1].iter().all(|&q| {
            UdpSocket::bind(("127.0.0.1", q)).is_ok() && TcpListener::bind(("127.0.0.1", q)).is_ok()
        });
        if free {
            return p;
        }
    }
    panic!("no free port pair");
}
