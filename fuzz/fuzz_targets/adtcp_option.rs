//! The ADTCP option (papers/004): any byte string either parses or is an error, never a panic;
//! options built from arbitrary values round-trip alone and inside a TCP header beside the
//! timestamp and SACK options (whose blocks make room as needed).
#![no_main]

use adaptnet_core::adtcp::{AdtcpOption, StateReport};
use adaptnet_core::tcp::{Flags, SackBlock, SackBlocks, TcpRepr, Timestamps};
use libfuzzer_sys::fuzz_target;

fn u32_at(data: &[u8], i: usize) -> u32 {
    let mut b = [0u8; 4];
    for (k, slot) in b.iter_mut().enumerate() {
        *slot = data.get(i * 4 + k).copied().unwrap_or(0);
    }
    u32::from_be_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    // Raw bytes, as a whole option and as a kind-253 body, and inside a header.
    let _ = AdtcpOption::parse(data);
    let _ = AdtcpOption::parse_body(data);
    let _ = TcpRepr::parse(data);

    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let option = AdtcpOption {
        report: (ctl & 1 != 0).then_some(StateReport {
            congestion: ctl & 2 != 0,
            channel_error: ctl & 4 != 0,
            route_change: ctl & 8 != 0,
        }),
        sent_us: (ctl & 16 != 0).then(|| u32_at(rest, 0)),
    };
    let mut buf = [0u8; 9];
    let n = option.emit(&mut buf).expect("an option fits 9 bytes");
    assert_eq!(n, option.buffer_len());
    assert_eq!(AdtcpOption::parse(&buf[..n]), Ok(option));

    let mut sack = SackBlocks::EMPTY;
    for i in 0..usize::from(rest.first().copied().unwrap_or(0) & 7) {
        sack.push(SackBlock {
            left: u32_at(rest, 1 + 2 * i),
            right: u32_at(rest, 2 + 2 * i),
        });
    }
    let repr = TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: u32_at(rest, 10),
        ack: u32_at(rest, 11),
        flags: Flags {
            ack: true,
            syn: ctl & 32 != 0,
            ..Flags::default()
        },
        window: 100,
        mss: (ctl & 32 != 0).then_some(1460),
        window_scale: (ctl & 32 != 0).then_some(7),
        sack_permitted: ctl & 64 != 0,
        sack,
        timestamps: (ctl & 128 != 0).then(|| Timestamps {
            value: u32_at(rest, 12),
            echo: u32_at(rest, 13),
        }),
        adtcp: Some(option),
    };
    let len = repr.buffer_len();
    assert!(len <= 60);
    let mut hdr = vec![0u8; len];
    assert_eq!(repr.emit(&mut hdr), Ok(len));
    let back = TcpRepr::parse(&hdr).expect("emitted header parses");
    assert_eq!(back.adtcp, Some(option));
    let kept = back.sack.len();
    assert_eq!(back.sack.as_slice(), &repr.sack.as_slice()[..kept]);
    assert_eq!(TcpRepr { sack: back.sack, ..repr }, back);
});
