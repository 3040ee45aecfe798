//! TCP headers with SACK and timestamp options built from arbitrary values: `emit` never
//! panics, stays within 60 bytes, and parses back to the same header with only the SACK
//! blocks that fit (the first ones, in order).
#![no_main]

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
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let mut sack = SackBlocks::EMPTY;
    for i in 0..usize::from(ctl & 7) {
        sack.push(SackBlock {
            left: u32_at(rest, 2 * i),
            right: u32_at(rest, 2 * i + 1),
        });
    }
    let repr = TcpRepr {
        src_port: 1,
        dst_port: 2,
        seq: u32_at(rest, 10),
        ack: u32_at(rest, 11),
        flags: Flags {
            ack: true,
            syn: ctl & 8 != 0,
            ..Flags::default()
        },
        window: 100,
        mss: (ctl & 16 != 0).then_some(1460),
        window_scale: (ctl & 32 != 0).then_some(7),
        sack_permitted: ctl & 64 != 0,
        sack,
        timestamps: (ctl & 128 != 0).then(|| Timestamps {
            value: u32_at(rest, 12),
            echo: u32_at(rest, 13),
        }),
        adtcp: None,
    };
    let len = repr.buffer_len();
    assert!(len <= 60);
    let mut buf = vec![0u8; len];
    assert_eq!(repr.emit(&mut buf), Ok(len));
    let back = TcpRepr::parse(&buf).expect("emitted header parses");
    let kept = back.sack.len();
    assert!(kept <= repr.sack.len());
    assert_eq!(back.sack.as_slice(), &repr.sack.as_slice()[..kept]);
    assert_eq!(TcpRepr { sack: back.sack, ..repr }, back);
});
