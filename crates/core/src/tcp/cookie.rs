//! SYN cookies: a listening stream endpoint answers a SYN without keeping anything, and
//! allocates a connection only when an ACK echoes the initial sequence number it chose
//! (D. J. Bernstein's SYN cookies, described in RFC 4987 §3.6). The ISS is the server's
//! token, made with the same stateless HMAC as the session handshake's retry tokens
//! ([`crate::session::token::TokenConfig`]), so a client proves it receives at the address it
//! claims before the server spends memory on it — the stream transport's counterpart of
//! QUIC's Retry (RFC 9000 §8.1), with no change on the client: it is an ordinary TCP
//! handshake.
//!
//! The ISS's 32 bits: bit 31 the token epoch's parity; bits 21–30 the SYN's options in ten
//! bits (MSS as an index into [`MSS_TABLE`], rounded down; window scale present and its
//! shift; SACK permitted; timestamps), which the server cannot otherwise recover at the ACK;
//! bits 0–20 the first 21 bits of HMAC-SHA256(key, address ‖ ports, client ISN, option code ‖
//! epoch). A forged ACK is accepted with probability 2⁻²¹ per try, as with the ~24-bit MACs
//! of the SYN cookies in wide use; each try costs the attacker a packet, and a cookie lives
//! one to two token lifetimes.
//!
//! Amplification: the SYN-ACK carries only the options the SYN carried, so it is never more
//! than a few bytes larger than the SYN it answers (well under the 3× an unvalidated peer may
//! be sent; `test_syn_ack_is_no_larger_than_three_syns`).

use super::{Connection, Segment, TcpConfig, TcpRepr, Timestamps};
use crate::cc::CongestionController;
use crate::session::token::TokenConfig;
use crate::time::Time;
use std::net::SocketAddr;

/// The MSS values a cookie can carry (RFC 4987 §3.6: "a small set of possible MSS values";
/// the SYN's MSS is rounded down to one of them).
pub const MSS_TABLE: [u16; 8] = [536, 1200, 1220, 1280, 1360, 1400, 1440, 1460];
const MAC_BITS: u32 = 21;
const MAC_MASK: u32 = (1 << MAC_BITS) - 1;
/// RFC 7323 §2.3: the largest window-scale shift.
const MAX_WSCALE: u8 = 14;

/// Stateless SYN handling for one listening endpoint.
#[derive(Clone, Debug)]
pub struct SynCookies {
    tokens: TokenConfig,
}

/// What a SYN said, in the cookie's ten bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SynOptions {
    mss_index: u8,
    wscale: Option<u8>,
    sack: bool,
    timestamps: bool,
}

impl SynOptions {
    fn of(syn: &TcpRepr) -> SynOptions {
        let mss = syn.mss.unwrap_or(536);
        let mss_index = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0);
        SynOptions {
            mss_index: u8::try_from(mss_index).unwrap_or(0),
            wscale: syn.window_scale.map(|w| w.min(MAX_WSCALE)),
            sack: syn.sack_permitted,
            timestamps: syn.timestamps.is_some(),
        }
    }

    fn code(self) -> u32 {
        let ws = self.wscale.map_or(0, |w| 0x10 | u32::from(w));
        u32::from(self.mss_index)
            | (ws << 3)
            | (u32::from(self.sack) << 8)
            | (u32::from(self.timestamps) << 9)
    }

    fn from_code(code: u32) -> SynOptions {
        let ws = (code >> 3) & 0x1f;
        SynOptions {
            mss_index: u8::try_from(code & 7).unwrap_or(0),
            wscale: (ws & 0x10 != 0).then(|| u8::try_from(ws & 0xf).unwrap_or(0).min(MAX_WSCALE)),
            sack: code & (1 << 8) != 0,
            timestamps: code & (1 << 9) != 0,
        }
    }
}

impl SynCookies {
    /// Cookies made with `tokens` (a secret drawn at start-up, and the lifetime).
    pub fn new(tokens: TokenConfig) -> SynCookies {
        SynCookies { tokens }
    }

    /// The cookie for a SYN from `peer` with `ports` (source, destination), the client's
    /// `isn` and option `code`, in token `epoch`. The MAC covers the ports and ISN (the
    /// token's client id) and the option code (in the epoch word's high bits: epochs stay
    /// far below 2^21).
    fn cookie(&self, epoch: u32, peer: SocketAddr, ports: (u16, u16), isn: u32, code: u32) -> u32 {
        let id = (u64::from(ports.0) << 48) | (u64::from(ports.1) << 32) | u64::from(isn);
        let mac = self
            .tokens
            .tag32(peer, id, (epoch & MAC_MASK) | (code << MAC_BITS))
            & MAC_MASK;
        ((epoch & 1) << 31) | (code << MAC_BITS) | mac
    }

    /// The stateless answer to `syn` from `peer`: the SYN-ACK of a connection configured by
    /// `config`, with the cookie as its ISS. Nothing is kept. `None` if `syn` is not a bare
    /// SYN.
    pub fn answer(
        &self,
        now: Time,
        peer: SocketAddr,
        syn: &TcpRepr,
        config: &TcpConfig,
    ) -> Option<Segment> {
        if !syn.flags.syn || syn.flags.ack || syn.flags.rst {
            return None;
        }
        let opts = SynOptions::of(syn);
        let iss = self.cookie(
            self.tokens.epoch(now),
            peer,
            (syn.src_port, syn.dst_port),
            syn.seq,
            opts.code(),
        );
        let mut c = Connection::accept(config.clone(), syn, iss, Connection::newreno(config));
        c.poll_transmit(now)
    }

    /// Whether `ack` from `peer` echoes a cookie this endpoint issued (this token epoch or
    /// the previous one), without building anything: a caller can check before it spends
    /// on a connection (a CM flow, say). [`SynCookies::accept`] checks the same.
    pub fn is_valid(&self, now: Time, peer: SocketAddr, ack: &TcpRepr) -> bool {
        self.check(now, peer, ack).is_some()
    }

    /// The option code of a valid cookie ACK.
    fn check(&self, now: Time, peer: SocketAddr, ack: &TcpRepr) -> Option<u32> {
        if !ack.flags.ack || ack.flags.syn || ack.flags.rst {
            return None;
        }
        let iss = ack.ack.wrapping_sub(1);
        let client_isn = ack.seq.wrapping_sub(1);
        let code = (iss >> MAC_BITS) & 0x3ff;
        let current = self.tokens.epoch(now);
        let epoch = [current, current.wrapping_sub(1)]
            .into_iter()
            .find(|e| (e & 1) == (iss >> 31))?;
        let expected = self.cookie(epoch, peer, (ack.src_port, ack.dst_port), client_isn, code);
        (expected == iss).then_some(code)
    }

    /// An ACK from `peer` for no connection: if it acknowledges a cookie this endpoint issued
    /// (this token epoch or the previous one), the connection its handshake completes, in the
    /// state of one that sent its SYN-ACK; hand it `ack` next as any segment. `None`
    /// otherwise (drop `ack` without state).
    pub fn accept(
        &self,
        now: Time,
        peer: SocketAddr,
        ack: &TcpRepr,
        config: &TcpConfig,
        cc: Box<dyn CongestionController>,
    ) -> Option<Connection> {
        let code = self.check(now, peer, ack)?;
        let iss = ack.ack.wrapping_sub(1);
        let client_isn = ack.seq.wrapping_sub(1);
        let opts = SynOptions::from_code(code);
        // The SYN the cookie stands for.
        let syn = TcpRepr {
            src_port: ack.src_port,
            dst_port: ack.dst_port,
            seq: client_isn,
            ack: 0,
            flags: super::Flags {
                syn: true,
                ..super::Flags::default()
            },
            window: ack.window,
            mss: MSS_TABLE.get(usize::from(opts.mss_index)).copied(),
            window_scale: opts.wscale,
            sack_permitted: opts.sack,
            sack: super::SackBlocks::EMPTY,
            timestamps: opts
                .timestamps
                .then(|| ack.timestamps.unwrap_or(Timestamps { value: 0, echo: 0 })),
            adtcp: None,
        };
        let mut c = Connection::accept(config.clone(), &syn, iss, cc);
        // The SYN-ACK went out from `answer`; it is not sent again.
        let _ = c.poll_transmit(now);
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{Flags, State};

    fn cookies() -> SynCookies {
        SynCookies::new(TokenConfig::new([9; 32]))
    }

    fn peer() -> SocketAddr {
        "192.0.2.1:4000".parse().expect("address")
    }

    fn client(config: &TcpConfig) -> Connection {
        Connection::connect(config.clone(), 4000, 1, 77, Connection::newreno(config))
    }

    /// A client through the cookie handshake: the client, the cookie SYN-ACK, its ACK.
    fn handshake(config: &TcpConfig, now: Time) -> (Connection, Segment, Segment) {
        let mut c = client(config);
        let syn = c.poll_transmit(now).expect("SYN");
        let synack = cookies()
            .answer(now, peer(), &syn.repr, config)
            .expect("SYN-ACK");
        c.handle_segment(now, &synack.repr, 0);
        assert!(c.is_established());
        let ack = c.poll_transmit(now).expect("ACK");
        (c, synack, ack)
    }

    #[test]
    fn test_listen_ack_with_valid_cookie_establishes_with_the_syn_options() {
        let config = TcpConfig {
            sack: true,
            timestamps: true,
            mss: 1400,
            ..TcpConfig::default()
        };
        let now = Time::from_secs(5);
        let (mut c, _synack, ack) = handshake(&config, now);
        let mut s = cookies()
            .accept(
                now,
                peer(),
                &ack.repr,
                &config,
                Connection::newreno(&config),
            )
            .expect("a valid cookie");
        s.handle_segment(now, &ack.repr, 0);
        assert_eq!(s.state(), State::Established);
        assert!(s.sack_enabled() && s.timestamps_enabled());
        // Data flows both ways.
        c.write(3000);
        while let Some(seg) = c.poll_transmit(now) {
            s.handle_segment(now, &seg.repr, seg.payload_len);
        }
        assert_eq!(s.bytes_delivered(), 3000);
    }

    #[test]
    fn test_listen_ack_with_forged_or_stale_cookie_is_dropped() {
        let config = TcpConfig::default();
        let now = Time::from_secs(5);
        let (_c, _synack, ack) = handshake(&config, now);
        let jar = cookies();
        let accept = |repr: &TcpRepr, at: Time, from: SocketAddr| {
            jar.accept(at, from, repr, &config, Connection::newreno(&config))
                .is_some()
        };
        assert!(accept(&ack.repr, now, peer()));
        // Another address, another port pair, a flipped bit, a bare guess.
        assert!(!accept(
            &ack.repr,
            now,
            "192.0.2.2:4000".parse().expect("a")
        ));
        let mut other = ack.repr;
        other.src_port = 4001;
        assert!(!accept(&other, now, peer()));
        let mut flipped = ack.repr;
        flipped.ack ^= 1 << 3;
        assert!(!accept(&flipped, now, peer()));
        // Valid for one to two token lifetimes (10 s), not after.
        assert!(accept(
            &ack.repr,
            now + std::time::Duration::from_secs(14),
            peer()
        ));
        assert!(!accept(
            &ack.repr,
            now + std::time::Duration::from_secs(25),
            peer()
        ));
        // A SYN or RST is never a cookie ACK.
        let mut syn = ack.repr;
        syn.flags = Flags {
            syn: true,
            ack: true,
            ..Flags::default()
        };
        assert!(!accept(&syn, now, peer()));
    }

    #[test]
    fn test_syn_ack_is_no_larger_than_three_syns() {
        let config = TcpConfig {
            sack: true,
            timestamps: true,
            ..TcpConfig::default()
        };
        let now = Time::from_secs(1);
        let mut c = client(&config);
        let syn = c.poll_transmit(now).expect("SYN");
        let synack = cookies()
            .answer(now, peer(), &syn.repr, &config)
            .expect("SYN-ACK");
        assert!(synack.repr.buffer_len() <= syn.repr.buffer_len() + 4);
        assert!(synack.repr.buffer_len() <= 3 * syn.repr.buffer_len());
        assert_eq!(synack.payload_len, 0);
    }

    #[test]
    fn test_option_code_round_trips() {
        for mss_index in 0..8u8 {
            for wscale in [None, Some(0), Some(7), Some(14)] {
                for sack in [false, true] {
                    for timestamps in [false, true] {
                        let o = SynOptions {
                            mss_index,
                            wscale,
                            sack,
                            timestamps,
                        };
                        assert!(o.code() < 1 << 10);
                        assert_eq!(SynOptions::from_code(o.code()), o);
                    }
                }
            }
        }
    }
}
