//! A congestion-controlled UDP sender on the process CM (papers/003 §3.1's request /
//! app_notify / notify / update loop) over loopback: the sender asks for 4 MB and sends one
//! datagram (sequence number, send time) per grant; the receiver acknowledges every datagram
//! with the bytes it has received, the highest sequence number seen and the echoed send
//! time; the sender turns each acknowledgement into `cm_update(nrecd, nlost, lossmode,
//! rtt)`. It prints the CM's `change_rate` callbacks (±20 % thresholds) and a final
//! `cm_query`.
//!
//! Run: `cargo run -p adaptnet-runtime --example cm_udp`

use adaptnet_core::cm::{Feedback, LossMode};
use adaptnet_runtime::cm::{Cm, Notice};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;

const TOTAL: u64 = 4_000_000;
const HEADER: usize = 16;

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b.get(at..at + 8).unwrap_or(&[0; 8]));
    u64::from_be_bytes(w)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let receiver = UdpSocket::bind("127.0.0.1:0").await?;
    let sender = UdpSocket::bind("127.0.0.1:0").await?;
    sender.connect(receiver.local_addr()?).await?;

    // The receiver: acknowledges each datagram with (bytes received, highest sequence
    // number, the datagram's send time).
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        let (mut bytes, mut highest) = (0u64, 0u64);
        while let Ok((len, from)) = receiver.recv_from(&mut buf).await {
            bytes += len as u64;
            highest = highest.max(word(&buf, 0));
            let mut ack = Vec::with_capacity(24);
            ack.extend_from_slice(&bytes.to_be_bytes());
            ack.extend_from_slice(&highest.to_be_bytes());
            ack.extend_from_slice(buf.get(8..16).unwrap_or(&[0; 8]));
            let _ = receiver.send_to(&ack, from).await;
        }
    });

    let cm = Cm::global()?;
    let mut flow = cm.open(sender.peer_addr()?).await?;
    let mut rates = flow.rate_changes();
    flow.request(TOTAL).await?;
    let start = Instant::now();
    // Bytes sent up to and including each sequence number.
    let mut sent_through: Vec<u64> = Vec::new();
    let (mut sent, mut recd, mut lost) = (0u64, 0u64, 0u64);
    let mut ack = [0u8; 24];
    loop {
        tokio::select! {
            notice = flow.next_notice(), if sent < TOTAL => match notice {
                Some(Notice::Grant(bytes)) => {
                    // app_notify: one datagram of the granted size.
                    let mut datagram = vec![0u8; usize::try_from(bytes)?.max(HEADER)];
                    let seq = sent_through.len() as u64;
                    let stamp = u64::try_from(start.elapsed().as_micros())?;
                    datagram[..8].copy_from_slice(&seq.to_be_bytes());
                    datagram[8..16].copy_from_slice(&stamp.to_be_bytes());
                    sender.send(&datagram).await?;
                    flow.notify(bytes).await?;
                    sent += datagram.len() as u64;
                    sent_through.push(sent);
                }
                Some(Notice::RequestExpired(_)) | None => break,
            },
            r = sender.recv(&mut ack) => {
                if r? != ack.len() {
                    continue;
                }
                let (total, highest, stamp) = (word(&ack, 0), word(&ack, 8), word(&ack, 16));
                let through = usize::try_from(highest).ok().and_then(|h| sent_through.get(h));
                let now_lost = through.map_or(lost, |&t| t.saturating_sub(total)).max(lost);
                let fb = Feedback {
                    nrecd_bytes: total.saturating_sub(recd),
                    nlost_bytes: now_lost - lost,
                    mode: if now_lost > lost { LossMode::Loss } else { LossMode::NoCongestion },
                    rtt: Some(start.elapsed().saturating_sub(Duration::from_micros(stamp))),
                };
                flow.update(fb).await?;
                (recd, lost) = (recd.max(total), now_lost);
                if sent >= TOTAL && recd + lost >= sent {
                    break;
                }
            }
            Some(c) = rates.next() => println!(
                "{:>7.3} s  change_rate: {:>9.2} Mbit/s (srtt {:?})",
                start.elapsed().as_secs_f64(),
                c.rate_bytes_per_s * 8e-6,
                c.srtt
            ),
            () = tokio::time::sleep(Duration::from_secs(1)) => break,
        }
    }
    let q = flow.query().await?;
    println!(
        "sent {sent} B, {recd} B acknowledged, {lost} B lost, in {:.2} s; cm_query: rate {:.1} Mbit/s, srtt {:?}",
        start.elapsed().as_secs_f64(),
        q.rate_bytes_per_s.unwrap_or(0.0) * 8e-6,
        q.srtt
    );
    flow.close().await;
    Ok(())
}
