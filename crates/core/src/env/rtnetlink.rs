//! The Linux kernel's link messages (rtnetlink `RTM_NEWLINK` / `RTM_DELLINK`), parsed without
//! I/O: the pushed source of a device's availability (papers/001 §3.4: "the kernel … can make
//! a simple function call to set these parameters"; here the kernel tells us and the runtime
//! makes the call).
//!
//! The runtime reads these from a `NETLINK_ROUTE` socket subscribed to `RTMGRP_LINK`; the
//! parse lives in core so that it is fuzzed with the other wire formats (`fuzz/`, target
//! `env_rtnetlink`) and needs no operating system. Read first: `netlink(7)`, `rtnetlink(7)`,
//! and the kernel's `include/uapi/linux/{netlink,rtnetlink,if_link}.h`.
//!
//! What one datagram holds: one or more netlink messages, each 4-byte aligned,
//!
//! ```text
//! nlmsghdr   (16 bytes, host byte order)
//!   0  u32  nlmsg_len    length of this message, header included
//!   4  u16  nlmsg_type   RTM_NEWLINK 16, RTM_DELLINK 17; NLMSG_NOOP 1, ERROR 2, DONE 3, OVERRUN 4
//!   6  u16  nlmsg_flags
//!   8  u32  nlmsg_seq
//!  12  u32  nlmsg_pid
//! ifinfomsg  (16 bytes; link messages only)
//!  16  u8   ifi_family, u8 pad, u16 ifi_type
//!  20  i32  ifi_index
//!  24  u32  ifi_flags    IFF_UP 0x1, IFF_RUNNING 0x40, IFF_LOWER_UP 0x10000, …
//!  28  u32  ifi_change
//! rtattr…    (each: u16 rta_len incl. its 4-byte header, u16 rta_type, payload, padded to 4)
//! ```
//!
//! Exactly these attributes are read; every other one is skipped by its length:
//! `IFLA_IFNAME` (3, NUL-terminated name), `IFLA_OPERSTATE` (16, one byte, RFC 2863
//! `IF_OPER_*`) and `IFLA_CARRIER` (33, one byte, 1 = carrier). An attribute that appears
//! twice: the last one wins, as the kernel never sends duplicates.
//!
//! Contract (as for every wire format here): [`Messages`] never panics on any byte string; a
//! malformed message is an [`RtnlError`] and ends the iteration (a length that cannot be
//! trusted leaves no trustworthy next message).

use thiserror::Error;

/// `NLMSG_NOOP`.
pub const NLMSG_NOOP: u16 = 1;
/// `NLMSG_ERROR`: an acknowledgement or error for a request (payload: `i32` errno, negated).
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a multipart (dump) answer.
pub const NLMSG_DONE: u16 = 3;
/// `NLMSG_OVERRUN`.
pub const NLMSG_OVERRUN: u16 = 4;
/// `RTM_NEWLINK`: a link was created or changed (also each entry of a dump).
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`: a link was removed.
pub const RTM_DELLINK: u16 = 17;
/// `RTM_GETLINK`: a request for links (with `NLM_F_DUMP`: all of them).
pub const RTM_GETLINK: u16 = 18;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
pub const NLM_F_DUMP: u16 = 0x300;
/// `RTMGRP_LINK`: the multicast group of link notifications (bind's `nl_groups`).
pub const RTMGRP_LINK: u32 = 0x1;
/// `IFLA_IFNAME`.
pub const IFLA_IFNAME: u16 = 3;
/// `IFLA_OPERSTATE`.
pub const IFLA_OPERSTATE: u16 = 16;
/// `IFLA_CARRIER`.
pub const IFLA_CARRIER: u16 = 33;
/// `IFF_UP`: administratively up.
pub const IFF_UP: u32 = 0x1;
/// `IFF_RUNNING`: operationally up (RFC 2863 `up`).
pub const IFF_RUNNING: u32 = 0x40;
/// `IFF_LOWER_UP`: the driver signals carrier.
pub const IFF_LOWER_UP: u32 = 0x1_0000;
/// Length of `struct nlmsghdr`.
pub const NLMSG_HDR_LEN: usize = 16;
/// Length of `struct ifinfomsg`.
pub const IFINFOMSG_LEN: usize = 16;
/// Length of an `rtattr` header.
const RTA_HDR_LEN: usize = 4;
/// `NLA_TYPE_MASK`: the attribute type without the nested / byte-order flag bits.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// Longest interface name the kernel allows (`IFNAMSIZ` 16, NUL included).
pub const IFNAMSIZ: usize = 16;

/// Why a datagram is not a valid sequence of netlink messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum RtnlError {
    /// A header or payload is shorter than its format.
    #[error("truncated netlink {what}: needed {needed} bytes, had {available}")]
    Truncated {
        /// Which structure.
        what: &'static str,
        /// Bytes required.
        needed: usize,
        /// Bytes that were there.
        available: usize,
    },
    /// `nlmsg_len` is below the header or past the datagram.
    #[error("netlink message length {len} is invalid ({available} bytes left)")]
    BadLength {
        /// The length field.
        len: u32,
        /// Bytes left in the datagram.
        available: usize,
    },
    /// An attribute's `rta_len` is below its header or past the message.
    #[error("attribute {kind} has invalid length {len}")]
    BadAttribute {
        /// The attribute type.
        kind: u16,
        /// Its length field.
        len: u16,
    },
    /// An attribute's payload does not fit its type (name not UTF-8 or too long, …).
    #[error("attribute {0} has an invalid payload")]
    BadPayload(u16),
}

/// What one link message says about one interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    /// `ifi_index`.
    pub index: i32,
    /// `ifi_flags` (`IFF_*`).
    pub flags: u32,
    /// `IFLA_IFNAME`, if present.
    pub name: Option<String>,
    /// `IFLA_OPERSTATE` (`IF_OPER_*`), if present.
    pub operstate: Option<u8>,
    /// `IFLA_CARRIER`, if present.
    pub carrier: Option<bool>,
}

/// One netlink message of a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RtnlMessage {
    /// `RTM_NEWLINK`: the link exists and this is its state.
    NewLink(LinkInfo),
    /// `RTM_DELLINK`: the link is gone.
    DelLink(LinkInfo),
    /// `NLMSG_DONE`: a dump is complete.
    Done,
    /// `NLMSG_ERROR` with its (negative) errno; 0 is an acknowledgement.
    Error(i32),
    /// `NLMSG_OVERRUN`: the kernel lost data.
    Overrun,
    /// Any other type (`NLMSG_NOOP`, other rtnetlink families): skipped by its length.
    Other(u16),
}

/// Rounds `n` up to netlink's 4-byte alignment, or `None` on overflow.
fn align4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

/// `N` bytes at `at` of `buf`, or why not.
fn array<const N: usize>(buf: &[u8], at: usize, what: &'static str) -> Result<[u8; N], RtnlError> {
    let truncated = RtnlError::Truncated {
        what,
        needed: at.saturating_add(N),
        available: buf.len(),
    };
    let end = at.checked_add(N).ok_or(truncated)?;
    let mut a = [0u8; N];
    a.copy_from_slice(buf.get(at..end).ok_or(truncated)?);
    Ok(a)
}

/// The netlink messages of one datagram, in order. Ends after the first error.
#[derive(Clone, Debug)]
pub struct Messages<'a> {
    rest: &'a [u8],
    failed: bool,
}

/// Iterates over the messages of `datagram` (as read from a netlink socket).
pub fn messages(datagram: &[u8]) -> Messages<'_> {
    Messages {
        rest: datagram,
        failed: false,
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<RtnlMessage, RtnlError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let r = self.step();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

impl<'a> Messages<'a> {
    /// Parses the next message and advances past it (and its padding).
    fn step(&mut self) -> Result<RtnlMessage, RtnlError> {
        let buf = self.rest;
        let len_field = u32::from_ne_bytes(array(buf, 0, "header")?);
        let kind = u16::from_ne_bytes(array(buf, 4, "header")?);
        // Fails on 32-bit only when no buffer could hold the message anyway.
        let len = usize::try_from(len_field).unwrap_or(usize::MAX);
        if len < NLMSG_HDR_LEN || len > buf.len() {
            return Err(RtnlError::BadLength {
                len: len_field,
                available: buf.len(),
            });
        }
        let msg = buf.get(..len).unwrap_or(&[]);
        let next = align4(len).unwrap_or(usize::MAX).min(buf.len());
        self.rest = buf.get(next..).unwrap_or(&[]);
        let payload = msg.get(NLMSG_HDR_LEN..).unwrap_or(&[]);
        match kind {
            RTM_NEWLINK => Ok(RtnlMessage::NewLink(parse_link(payload)?)),
            RTM_DELLINK => Ok(RtnlMessage::DelLink(parse_link(payload)?)),
            NLMSG_DONE => Ok(RtnlMessage::Done),
            NLMSG_OVERRUN => Ok(RtnlMessage::Overrun),
            NLMSG_ERROR => Ok(RtnlMessage::Error(i32::from_ne_bytes(array(
                payload, 0, "error",
            )?))),
            other => Ok(RtnlMessage::Other(other)),
        }
    }
}

/// Parses an `ifinfomsg` and its attributes.
fn parse_link(payload: &[u8]) -> Result<LinkInfo, RtnlError> {
    let mut info = LinkInfo {
        index: i32::from_ne_bytes(array(payload, 4, "ifinfomsg")?),
        flags: u32::from_ne_bytes(array(payload, 8, "ifinfomsg")?),
        ..LinkInfo::default()
    };
    // `array` above proved IFINFOMSG_LEN bytes are there.
    let mut attrs = payload.get(IFINFOMSG_LEN..).unwrap_or(&[]);
    while attrs.len() >= RTA_HDR_LEN {
        let rta_len = u16::from_ne_bytes(array(attrs, 0, "attribute")?);
        let rta_type = u16::from_ne_bytes(array(attrs, 2, "attribute")?) & NLA_TYPE_MASK;
        let len = usize::from(rta_len);
        if len < RTA_HDR_LEN || len > attrs.len() {
            return Err(RtnlError::BadAttribute {
                kind: rta_type,
                len: rta_len,
            });
        }
        let data = attrs.get(RTA_HDR_LEN..len).unwrap_or(&[]);
        match rta_type {
            IFLA_IFNAME => info.name = Some(parse_name(data)?),
            IFLA_OPERSTATE => {
                info.operstate = Some(*data.first().ok_or(RtnlError::BadPayload(rta_type))?)
            }
            IFLA_CARRIER => {
                info.carrier = Some(*data.first().ok_or(RtnlError::BadPayload(rta_type))? != 0)
            }
            _ => {}
        }
        let next = align4(len).unwrap_or(usize::MAX).min(attrs.len());
        attrs = attrs.get(next..).unwrap_or(&[]);
    }
    Ok(info)
}

/// `IFLA_IFNAME`: up to the first NUL, at most `IFNAMSIZ - 1` bytes of UTF-8, not empty.
fn parse_name(data: &[u8]) -> Result<String, RtnlError> {
    let bad = RtnlError::BadPayload(IFLA_IFNAME);
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let bytes = data.get(..end).ok_or(bad)?;
    if bytes.is_empty() || bytes.len() >= IFNAMSIZ {
        return Err(bad);
    }
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| bad)
}

/// The request for a dump of every link (`RTM_GETLINK` with `NLM_F_REQUEST | NLM_F_DUMP`,
/// family `AF_UNSPEC`), with sequence number `seq`.
pub fn getlink_dump_request(seq: u32) -> [u8; NLMSG_HDR_LEN + IFINFOMSG_LEN] {
    const TOTAL: u32 = 32; // NLMSG_HDR_LEN + IFINFOMSG_LEN
    let mut b = [0u8; NLMSG_HDR_LEN + IFINFOMSG_LEN];
    let total = TOTAL;
    let fields: [(usize, &[u8]); 4] = [
        (0, &total.to_ne_bytes()),
        (4, &RTM_GETLINK.to_ne_bytes()),
        (6, &(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes()),
        (8, &seq.to_ne_bytes()),
    ];
    for (at, bytes) in fields {
        if let Some(dst) = b.get_mut(at..at.saturating_add(bytes.len())) {
            dst.copy_from_slice(bytes);
        }
    }
    b
}

/// Builds one link message (`kind` [`RTM_NEWLINK`] or [`RTM_DELLINK`]) carrying `info`'s
/// fields as the kernel would lay them out: for tests, fuzz seeds and tools. A name longer
/// than `IFNAMSIZ - 1` bytes is cut.
pub fn emit_link(kind: u16, info: &LinkInfo) -> Vec<u8> {
    let mut attrs: Vec<u8> = Vec::new();
    let mut attr = |kind: u16, data: &[u8]| {
        let len = RTA_HDR_LEN + data.len();
        attrs.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes());
        attrs.extend_from_slice(&kind.to_ne_bytes());
        attrs.extend_from_slice(data);
        attrs.resize(align4(attrs.len()).unwrap_or(attrs.len()), 0);
    };
    if let Some(name) = &info.name {
        let mut n: Vec<u8> = name.bytes().take(IFNAMSIZ - 1).collect();
        n.push(0);
        attr(IFLA_IFNAME, &n);
    }
    if let Some(s) = info.operstate {
        attr(IFLA_OPERSTATE, &[s]);
    }
    if let Some(c) = info.carrier {
        attr(IFLA_CARRIER, &[u8::from(c)]);
    }
    let total = NLMSG_HDR_LEN + IFINFOMSG_LEN + attrs.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(&[0u8; 10]); // flags, seq, pid
    out.extend_from_slice(&[0u8; 4]); // family, pad, type
    out.extend_from_slice(&info.index.to_ne_bytes());
    out.extend_from_slice(&info.flags.to_ne_bytes());
    out.extend_from_slice(&[0u8; 4]); // ifi_change
    out.extend_from_slice(&attrs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn veth(operstate: u8, carrier: bool) -> LinkInfo {
        LinkInfo {
            index: 7,
            flags: IFF_UP | IFF_LOWER_UP,
            name: Some("veth0".into()),
            operstate: Some(operstate),
            carrier: Some(carrier),
        }
    }

    #[test]
    fn test_newlink_round_trips_name_operstate_carrier() {
        let info = veth(6, true);
        let bytes = emit_link(RTM_NEWLINK, &info);
        let got: Vec<_> = messages(&bytes).collect();
        assert_eq!(got, vec![Ok(RtnlMessage::NewLink(info))]);
    }

    #[test]
    fn test_two_messages_in_one_datagram_then_done() {
        let mut d = emit_link(RTM_NEWLINK, &veth(2, false));
        d.extend(emit_link(RTM_DELLINK, &veth(2, false)));
        let mut done = [0u8; 20];
        done[..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        d.extend_from_slice(&done);
        let got: Vec<_> = messages(&d).map(|m| m.expect("valid")).collect();
        assert!(matches!(got[0], RtnlMessage::NewLink(ref l) if l.operstate == Some(2)));
        assert!(matches!(got[1], RtnlMessage::DelLink(_)));
        assert_eq!(got[2], RtnlMessage::Done);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn test_unknown_attributes_and_nested_flag_are_skipped() {
        let mut bytes = emit_link(RTM_NEWLINK, &veth(6, true));
        // Append IFLA_STATS64-like junk (type 23, 12 bytes) and a nested-flagged operstate.
        let mut extra = Vec::new();
        extra.extend_from_slice(&12u16.to_ne_bytes());
        extra.extend_from_slice(&23u16.to_ne_bytes());
        extra.extend_from_slice(&[9u8; 8]);
        extra.extend_from_slice(&5u16.to_ne_bytes());
        extra.extend_from_slice(&(IFLA_OPERSTATE | 0x8000).to_ne_bytes());
        extra.extend_from_slice(&[5u8, 0, 0, 0]);
        bytes.extend_from_slice(&extra);
        let total = bytes.len() as u32;
        bytes[..4].copy_from_slice(&total.to_ne_bytes());
        let got: Vec<_> = messages(&bytes).collect();
        let Some(Ok(RtnlMessage::NewLink(l))) = got.first() else {
            panic!("{got:?}");
        };
        assert_eq!(l.operstate, Some(5), "the last operstate wins");
        assert_eq!(l.carrier, Some(true));
    }

    #[test]
    fn test_bad_lengths_are_errors_and_end_iteration() {
        let good = emit_link(RTM_NEWLINK, &veth(6, true));
        // nlmsg_len past the datagram.
        let mut b = good.clone();
        b[..4].copy_from_slice(&1000u32.to_ne_bytes());
        let got: Vec<_> = messages(&b).collect();
        assert!(matches!(
            got[..],
            [Err(RtnlError::BadLength { len: 1000, .. })]
        ));
        // nlmsg_len below the header.
        let mut b = good.clone();
        b[..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(messages(&b).count(), 1);
        // An attribute claiming more than the message holds.
        let mut b = good.clone();
        b[32..34].copy_from_slice(&500u16.to_ne_bytes());
        assert!(matches!(
            messages(&b).next(),
            Some(Err(RtnlError::BadAttribute { len: 500, .. }))
        ));
        // A link message without a whole ifinfomsg.
        let mut b = good[..24].to_vec();
        b[..4].copy_from_slice(&24u32.to_ne_bytes());
        assert!(matches!(
            messages(&b).next(),
            Some(Err(RtnlError::Truncated { .. }))
        ));
        // A short tail after a good message: one Ok, then one error, then nothing.
        let mut b = good.clone();
        b.extend_from_slice(&[1, 2, 3]);
        let got: Vec<_> = messages(&b).collect();
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ok() && got[1].is_err());
    }

    #[test]
    fn test_names_must_be_short_utf8_and_non_empty() {
        assert_eq!(parse_name(b"eth0\0\0\0"), Ok("eth0".into()));
        assert_eq!(
            parse_name(b"eth0"),
            Ok("eth0".into()),
            "NUL missing: whole payload"
        );
        assert!(parse_name(b"\0").is_err());
        assert!(parse_name(&[0xff, 0xfe, 0]).is_err());
        assert!(parse_name(b"sixteen-bytes-xx\0").is_err());
    }

    #[test]
    fn test_dump_request_layout() {
        let r = getlink_dump_request(42);
        let m: Vec<_> = messages(&r).collect();
        assert_eq!(m, vec![Ok(RtnlMessage::Other(RTM_GETLINK))]);
        assert_eq!(u16::from_ne_bytes([r[6], r[7]]), NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(u32::from_ne_bytes([r[8], r[9], r[10], r[11]]), 42);
    }

    #[test]
    fn test_error_and_overrun_messages() {
        let mut b = vec![0u8; 20];
        b[..4].copy_from_slice(&20u32.to_ne_bytes());
        b[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        b[16..20].copy_from_slice(&(-105i32).to_ne_bytes());
        assert_eq!(messages(&b).next(), Some(Ok(RtnlMessage::Error(-105))));
        b[4..6].copy_from_slice(&NLMSG_OVERRUN.to_ne_bytes());
        assert_eq!(messages(&b).next(), Some(Ok(RtnlMessage::Overrun)));
    }

    proptest! {
        #[test]
        fn prop_parse_never_panics_and_is_bounded(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            // Every message consumes at least a header: at most len/16 + 1 items.
            let n = messages(&data).count();
            prop_assert!(n <= data.len() / NLMSG_HDR_LEN + 1);
        }

        #[test]
        fn prop_emitted_links_parse_back(index in any::<i32>(), flags in any::<u32>(),
                                         name in "[a-z0-9]{1,15}", op in any::<Option<u8>>(),
                                         carrier in any::<Option<bool>>(), del in any::<bool>()) {
            let info = LinkInfo { index, flags, name: Some(name), operstate: op, carrier };
            let kind = if del { RTM_DELLINK } else { RTM_NEWLINK };
            let got: Vec<_> = messages(&emit_link(kind, &info)).collect();
            let want = if del { RtnlMessage::DelLink(info) } else { RtnlMessage::NewLink(info) };
            prop_assert_eq!(got, vec![Ok(want)]);
        }
    }
}
