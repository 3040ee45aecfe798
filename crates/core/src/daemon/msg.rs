//! The daemon's messages and their encoding (version 1, big-endian).
//!
//! ```text
//! frame   len u32 (bytes after this field, ≤ MAX_FRAME_LEN) | body
//! body    version u8 (=1) | kind u8 | req_id u32 | payload (per kind, below)
//! ```
//! A client numbers its requests (`req_id` ≠ 0); the daemon answers each request with exactly
//! one reply carrying the same `req_id` (`Ok`, `Error` or a kind-specific reply), in order.
//! Events (grants, rate changes, environment events, estimates, lost counts) carry
//! `req_id` 0 and may arrive between replies.
//!
//! Field types: `str` is `len u8 | UTF-8 bytes` (≤ [`MAX_NAME_LEN`]; an error's message
//! ≤ [`MAX_MESSAGE_LEN`]); `f64` is its IEEE bits
//! as u64; `dur` is nanoseconds as u64 with `u64::MAX` meaning "none"; `opt_f64` is
//! `present u8 | f64`; `param` is `code u8` (1..=7 the well-known parameters of
//! papers/001, 0 custom) followed, for 0, by `name str`; `mask` is a u128 level bit set.
//!
//! Kinds 0x01–0x3f are requests, 0x40–0x7f replies, 0x80–0xbf events; the table of fields is
//! in `docs/design/daemon.md` and in [`Message`]'s variants, which are in wire order.

use super::{MAX_FRAME_LEN, MAX_LEVELS, MAX_NAME_LEN, MAX_READINGS, VERSION};
use crate::cm::{
    Feedback, FeedbackSource, FlowId, FlowKey, FlowQuery, LossMode, MacroflowId, PeerAddr, Request,
    Thresholds,
};
use crate::env::{Level, LevelKind, LevelMask, Name, Param};
use crate::wire::{Reader, WireError, Writer};
use std::time::Duration;

/// Longest error message, bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE_LEN: usize = 255;

/// Bytes of the body header (version, kind, req_id).
pub const BODY_HEADER_LEN: usize = 6;

/// Why the daemon refused a request (the `code` of [`Message::Error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ErrorCode {
    /// The frame did not parse.
    Malformed,
    /// The frame's version is not one this daemon speaks.
    UnsupportedVersion,
    /// The frame was longer than [`MAX_FRAME_LEN`]; it was skipped.
    TooLarge,
    /// No flow of this client has that id (another client's flows are not visible).
    UnknownFlow,
    /// A per-client table is full (flows, subscriptions), or the host's.
    LimitExceeded,
    /// An argument was out of range.
    InvalidArgument,
    /// The environment engine refused the request.
    Environment,
    /// The request is a reply or event kind, or not allowed to this caller.
    NotAllowed,
    /// The daemon could not serve the request now.
    Unavailable,
}

impl ErrorCode {
    const ALL: [ErrorCode; 9] = [
        ErrorCode::Malformed,
        ErrorCode::UnsupportedVersion,
        ErrorCode::TooLarge,
        ErrorCode::UnknownFlow,
        ErrorCode::LimitExceeded,
        ErrorCode::InvalidArgument,
        ErrorCode::Environment,
        ErrorCode::NotAllowed,
        ErrorCode::Unavailable,
    ];

    /// The wire code (1..=9).
    pub fn code(self) -> u16 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::UnsupportedVersion => 2,
            ErrorCode::TooLarge => 3,
            ErrorCode::UnknownFlow => 4,
            ErrorCode::LimitExceeded => 5,
            ErrorCode::InvalidArgument => 6,
            ErrorCode::Environment => 7,
            ErrorCode::NotAllowed => 8,
            ErrorCode::Unavailable => 9,
        }
    }

    /// The error with wire code `code`.
    pub fn from_code(code: u16) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|e| e.code() == code)
    }
}

/// One parameter as `get_dev_params` reports it (papers/001 §3.2).
#[derive(Clone, Debug, PartialEq)]
pub struct DevParam {
    /// The parameter.
    pub param: Param,
    /// The last value set.
    pub raw: f64,
    /// The value checked against the watermarks.
    pub effective: f64,
    /// Nanoseconds since the daemon started, when it was last set.
    pub updated_ns: u64,
    /// Levels violated and not cleared.
    pub violated: LevelMask,
}

/// One watermark level of `set_dev_param_wms`.
pub type ParamLevel = Level;

/// The answer to `query` (RFC 3124 `cm_query`, with the probe protocol's loss counters).
pub type QueryReply = FlowQuery;

/// A message of the local protocol. Variants are listed in wire-kind order.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    // ----- requests (client → daemon) -----
    /// 0x01 `name str`: first message of a connection; the reply is [`Message::Welcome`].
    Hello {
        /// The client's name, for `adaptnet monitor`.
        name: String,
    },
    /// 0x02 `dest u128 | key u64 | weight f64 | feedback u8 (0 implicit, 1 acks, 2 probe)`:
    /// `cm_open`. Reply [`Message::Opened`].
    Open {
        /// Destination host.
        dest: PeerAddr,
        /// The flow's key at the receiver (probe-fed flows).
        key: FlowKey,
        /// Requested weight; the daemon scales it by the caller's configured share.
        weight: f64,
        /// Where the flow's feedback comes from.
        feedback: FeedbackSource,
    },
    /// 0x03 `flow u32`: `cm_close`.
    Close {
        /// The flow.
        flow: FlowId,
    },
    /// 0x04 `flow u32 | bytes u64 | min_bytes u64 | latency dur`: `cm_request`.
    Request {
        /// The flow.
        flow: FlowId,
        /// What is asked.
        request: Request,
    },
    /// 0x05 `flow u32 | nsent u64`: `cm_notify`.
    Notify {
        /// The flow.
        flow: FlowId,
        /// Bytes sent.
        nsent: u64,
    },
    /// 0x06 `flow u32 | nrecd u64 | nlost u64 | mode u8 | rtt dur`: `cm_update`.
    Update {
        /// The flow.
        flow: FlowId,
        /// The feedback.
        feedback: Feedback,
    },
    /// 0x07 `flow u32`: `cm_query`. Reply [`Message::QueryReply`].
    Query {
        /// The flow.
        flow: FlowId,
    },
    /// 0x08 `flow u32 | rate_down f64 | rate_up f64 | rtt_down f64 | rtt_up f64`:
    /// `cm_thresh`, which gates the flow's `change_rate` events.
    Thresh {
        /// The flow.
        flow: FlowId,
        /// The thresholds.
        thresholds: Thresholds,
    },
    /// 0x09 `from u128 | key u64 | bytes u64 | ce u8`: a packet of a probe-fed flow from host
    /// `from` reached this host (the receiver CM's count, papers/003 Figure 5).
    Received {
        /// The sending host.
        from: PeerAddr,
        /// The flow's key.
        key: FlowKey,
        /// Bytes received.
        bytes: u64,
        /// Whether it carried an ECN mark.
        ce: bool,
    },
    /// 0x0a `device str | param | value f64`: `set_dev_param` (papers/001 §3.2).
    SetDevParam {
        /// Device.
        device: Name,
        /// Parameter.
        param: Param,
        /// New value.
        value: f64,
    },
    /// 0x0b `device str | param | count u8 | count × {value f64 | kind u8 (0 low, 1 high)}`:
    /// `set_dev_param_wms`.
    SetDevParamWms {
        /// Device.
        device: Name,
        /// Parameter.
        param: Param,
        /// Levels, increasing.
        levels: Vec<Level>,
    },
    /// 0x0c `device str`: `get_dev_params`. Reply [`Message::DevParams`].
    GetDevParams {
        /// Device.
        device: Name,
    },
    /// 0x0d `device str | param | levels mask`: `request_event` (papers/001 §3.2).
    RequestEvent {
        /// Device.
        device: Name,
        /// Parameter.
        param: Param,
        /// Levels whose violations the client wants.
        levels: LevelMask,
    },
    /// 0x0e `device str | param`: withdraws a `request_event`.
    CancelEvent {
        /// Device.
        device: Name,
        /// Parameter.
        param: Param,
    },
    /// 0x0f `iface str`: subscribe to an interface's bandwidth estimates (papers/000 §5).
    SubscribeEstimator {
        /// Interface name.
        iface: String,
    },
    /// 0x10 `iface str`: withdraw that subscription.
    UnsubscribeEstimator {
        /// Interface name.
        iface: String,
    },
    /// 0x11 (empty): the daemon's state, for `adaptnet monitor`. Reply [`Message::Status`].
    StatusRequest,

    // ----- replies (daemon → client) -----
    /// 0x40 (empty): done.
    Ok,
    /// 0x41 `code u16 | message str`: refused.
    Error {
        /// Why.
        code: ErrorCode,
        /// For people.
        message: String,
    },
    /// 0x42 `client u32 | uid u32 | share f64 | max_flows u32`: the answer to `Hello`.
    Welcome {
        /// This connection's number.
        client: u32,
        /// The caller's uid, from `SO_PEERCRED`.
        uid: u32,
        /// The caller's configured share (the user's weight).
        share: f64,
        /// Most flows this client may hold open.
        max_flows: u32,
    },
    /// 0x43 `flow u32 | macroflow u32`.
    Opened {
        /// The new flow.
        flow: FlowId,
        /// Its macroflow.
        macroflow: MacroflowId,
    },
    /// 0x44 `rate opt_f64 | srtt dur | rttvar dur | min_rtt dur | mf_rate f64 | loss opt_f64 |
    /// probe_sent u64 | probe_lost u64`.
    QueryReply(QueryReply),
    /// 0x45 `device str | count u8 | count × {param | raw f64 | effective f64 | updated u64 |
    /// violated mask}`.
    DevParams {
        /// Device.
        device: Name,
        /// Its parameters.
        readings: Vec<DevParam>,
    },
    /// 0x46 `len u16 | UTF-8 JSON`: the daemon's state.
    Status {
        /// JSON text (see `docs/design/daemon.md`).
        json: String,
    },

    // ----- events (daemon → client, req_id 0) -----
    /// 0x80 `flow u32 | bytes u64`: `app_notify` — the flow may send `bytes` now.
    Grant {
        /// The flow.
        flow: FlowId,
        /// Bytes allowed.
        bytes: u64,
    },
    /// 0x81 `flow u32 | rate f64 | srtt dur | rttvar dur`: `change_rate`.
    RateChange {
        /// The flow.
        flow: FlowId,
        /// The flow's new share, bytes/s.
        rate_bytes_per_s: f64,
        /// Smoothed RTT.
        srtt: Duration,
        /// RTT variation.
        rttvar: Duration,
    },
    /// 0x82 `flow u32 | bytes u64`: a request's latency passed.
    RequestExpired {
        /// The flow.
        flow: FlowId,
        /// Bytes withdrawn.
        bytes: u64,
    },
    /// 0x83 `device str | param | value f64 | violated mask | cleared mask | highs mask |
    /// at u64 | lost_before u64`: an environment event (papers/001 §3).
    EnvEvent {
        /// Device.
        device: Name,
        /// Parameter.
        param: Param,
        /// The value checked.
        value: f64,
        /// Levels violated.
        violated: LevelMask,
        /// Levels cleared.
        cleared: LevelMask,
        /// Which levels are high watermarks.
        highs: LevelMask,
        /// Nanoseconds since the daemon started.
        at_ns: u64,
        /// Events this subscriber lost before this one.
        lost_before: u64,
    },
    /// 0x84 `iface str | rate f64 | total u64 | at u64`: an interface's measured throughput.
    Estimate {
        /// Interface.
        iface: String,
        /// Bytes per second through the interface (both directions) over the last period.
        bytes_per_s: f64,
        /// The interface's byte counter.
        total_bytes: u64,
        /// Nanoseconds since the daemon started.
        at_ns: u64,
    },
    /// 0x85 `events u64`: the daemon dropped this many events for this client because it did
    /// not read them fast enough.
    Lost {
        /// Events dropped since the previous `Lost`.
        events: u64,
    },
}

const DUR_NONE: u64 = u64::MAX;

fn dur_to_wire(d: Option<Duration>) -> u64 {
    d.map_or(DUR_NONE, |d| {
        u64::try_from(d.as_nanos()).unwrap_or(DUR_NONE - 1)
    })
}

fn dur_from_wire(v: u64) -> Option<Duration> {
    (v != DUR_NONE).then(|| Duration::from_nanos(v))
}

fn get_f64(r: &mut Reader<'_>) -> Result<f64, WireError> {
    Ok(f64::from_bits(r.u64()?))
}

fn get_opt_f64(r: &mut Reader<'_>) -> Result<Option<f64>, WireError> {
    let present = r.u8()?;
    let v = get_f64(r)?;
    match present {
        0 => Ok(None),
        1 => Ok(Some(v)),
        _ => Err(WireError::Malformed("optional flag")),
    }
}

fn get_u128(r: &mut Reader<'_>) -> Result<u128, WireError> {
    let hi = r.u64()?;
    let lo = r.u64()?;
    Ok((u128::from(hi) << 64) | u128::from(lo))
}

fn get_str(r: &mut Reader<'_>) -> Result<String, WireError> {
    get_text(r, MAX_NAME_LEN)
}

fn get_text(r: &mut Reader<'_>, max: usize) -> Result<String, WireError> {
    let n = usize::from(r.u8()?);
    if n > max {
        return Err(WireError::Malformed("string longer than its field allows"));
    }
    let b = r.bytes(n)?;
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| WireError::Malformed("string not UTF-8"))
}

fn get_name(r: &mut Reader<'_>) -> Result<Name, WireError> {
    let s = get_str(r)?;
    Name::new(&s).map_err(|_| WireError::Malformed("device or parameter name"))
}

fn get_param(r: &mut Reader<'_>) -> Result<Param, WireError> {
    let code = r.u8()?;
    if code == Param::CUSTOM_CODE {
        return Ok(Param::Custom(get_name(r)?));
    }
    Param::from_code(code).ok_or(WireError::UnknownKind {
        field: "parameter code",
        value: u32::from(code),
    })
}

/// Wire codes of the feedback sources of `Open`.
const FEEDBACK_CODES: [(FeedbackSource, u8); 3] = [
    (FeedbackSource::Implicit, 0),
    (FeedbackSource::Acks, 1),
    (FeedbackSource::Probe, 2),
];

/// Wire codes of the loss modes of `Update` (RFC 3124 §3.3's order).
const LOSS_CODES: [(LossMode, u8); 4] = [
    (LossMode::NoCongestion, 0),
    (LossMode::Loss, 1),
    (LossMode::Ecn, 2),
    (LossMode::NoFeedback, 3),
];

fn code_of<T: PartialEq>(table: &[(T, u8)], v: &T) -> u8 {
    table
        .iter()
        .find(|(t, _)| t == v)
        .map_or(u8::MAX, |(_, c)| *c)
}

fn get_coded<T: Copy>(
    r: &mut Reader<'_>,
    table: &[(T, u8)],
    field: &'static str,
) -> Result<T, WireError> {
    let code = r.u8()?;
    table
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(t, _)| *t)
        .ok_or(WireError::UnknownKind {
            field,
            value: u32::from(code),
        })
}

/// A list's `count u8`, refused above `max` before anything is allocated for it.
fn get_count(r: &mut Reader<'_>, max: usize, what: &'static str) -> Result<usize, WireError> {
    let n = usize::from(r.u8()?);
    if n > max {
        return Err(WireError::Malformed(what));
    }
    Ok(n)
}

fn flow(r: &mut Reader<'_>) -> Result<FlowId, WireError> {
    Ok(FlowId(r.u32()?))
}

/// Parses one frame body (after the length prefix) into `(req_id, message)`. Never panics;
/// trailing bytes are an error.
pub fn parse_body(body: &[u8]) -> Result<(u32, Message), WireError> {
    if body.len() > MAX_FRAME_LEN {
        return Err(WireError::Malformed("frame longer than MAX_FRAME_LEN"));
    }
    let mut r = Reader::new(body);
    let version = r.u8()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let kind = r.u8()?;
    let req_id = r.u32()?;
    let msg = parse_payload(kind, &mut r)?;
    if r.remaining() != 0 {
        return Err(WireError::Malformed("trailing bytes"));
    }
    Ok((req_id, msg))
}

fn parse_payload(kind: u8, r: &mut Reader<'_>) -> Result<Message, WireError> {
    Ok(match kind {
        0x01 => Message::Hello { name: get_str(r)? },
        0x02 => Message::Open {
            dest: PeerAddr(get_u128(r)?),
            key: FlowKey(r.u64()?),
            weight: get_f64(r)?,
            feedback: get_coded(r, &FEEDBACK_CODES, "feedback source")?,
        },
        0x03 => Message::Close { flow: flow(r)? },
        0x04 => Message::Request {
            flow: flow(r)?,
            request: Request {
                bytes: r.u64()?,
                min_bytes: r.u64()?,
                latency: dur_from_wire(r.u64()?),
            },
        },
        0x05 => Message::Notify {
            flow: flow(r)?,
            nsent: r.u64()?,
        },
        0x06 => {
            let flow = flow(r)?;
            let nrecd_bytes = r.u64()?;
            let nlost_bytes = r.u64()?;
            let mode = get_coded(r, &LOSS_CODES, "loss mode")?;
            let rtt = dur_from_wire(r.u64()?);
            Message::Update {
                flow,
                feedback: Feedback {
                    nrecd_bytes,
                    nlost_bytes,
                    mode,
                    rtt,
                },
            }
        }
        0x07 => Message::Query { flow: flow(r)? },
        0x08 => Message::Thresh {
            flow: flow(r)?,
            thresholds: Thresholds {
                rate_down: get_f64(r)?,
                rate_up: get_f64(r)?,
                rtt_down: get_f64(r)?,
                rtt_up: get_f64(r)?,
            },
        },
        0x09 => Message::Received {
            from: PeerAddr(get_u128(r)?),
            key: FlowKey(r.u64()?),
            bytes: r.u64()?,
            ce: r.u8()? != 0,
        },
        0x0a => Message::SetDevParam {
            device: get_name(r)?,
            param: get_param(r)?,
            value: get_f64(r)?,
        },
        0x0b => {
            let device = get_name(r)?;
            let param = get_param(r)?;
            let n = get_count(r, MAX_LEVELS, "more than 128 levels")?;
            let mut levels = Vec::with_capacity(n);
            for _ in 0..n {
                let value = get_f64(r)?;
                let kind = match r.u8()? {
                    0 => LevelKind::Low,
                    1 => LevelKind::High,
                    _ => return Err(WireError::Malformed("level kind")),
                };
                levels.push(Level { value, kind });
            }
            Message::SetDevParamWms {
                device,
                param,
                levels,
            }
        }
        0x0c => Message::GetDevParams {
            device: get_name(r)?,
        },
        0x0d => Message::RequestEvent {
            device: get_name(r)?,
            param: get_param(r)?,
            levels: LevelMask::from_bits(get_u128(r)?),
        },
        0x0e => Message::CancelEvent {
            device: get_name(r)?,
            param: get_param(r)?,
        },
        0x0f => Message::SubscribeEstimator { iface: get_str(r)? },
        0x10 => Message::UnsubscribeEstimator { iface: get_str(r)? },
        0x11 => Message::StatusRequest,
        0x40 => Message::Ok,
        0x41 => {
            let code = r.u16()?;
            Message::Error {
                code: ErrorCode::from_code(code).ok_or(WireError::UnknownKind {
                    field: "error code",
                    value: u32::from(code),
                })?,
                message: get_text(r, MAX_MESSAGE_LEN)?,
            }
        }
        0x42 => Message::Welcome {
            client: r.u32()?,
            uid: r.u32()?,
            share: get_f64(r)?,
            max_flows: r.u32()?,
        },
        0x43 => Message::Opened {
            flow: flow(r)?,
            macroflow: MacroflowId(r.u32()?),
        },
        0x44 => Message::QueryReply(FlowQuery {
            rate_bytes_per_s: get_opt_f64(r)?,
            srtt: dur_from_wire(r.u64()?),
            rttvar: dur_from_wire(r.u64()?),
            min_rtt: dur_from_wire(r.u64()?),
            macroflow_rate_bytes_per_s: get_f64(r)?,
            loss_rate: get_opt_f64(r)?,
            probe_sent_bytes: r.u64()?,
            probe_lost_bytes: r.u64()?,
        }),
        0x45 => {
            let device = get_name(r)?;
            let n = get_count(r, MAX_READINGS, "more than 64 readings")?;
            let mut readings = Vec::with_capacity(n);
            for _ in 0..n {
                readings.push(DevParam {
                    param: get_param(r)?,
                    raw: get_f64(r)?,
                    effective: get_f64(r)?,
                    updated_ns: r.u64()?,
                    violated: LevelMask::from_bits(get_u128(r)?),
                });
            }
            Message::DevParams { device, readings }
        }
        0x46 => {
            let n = usize::from(r.u16()?);
            let b = r.bytes(n)?;
            Message::Status {
                json: std::str::from_utf8(b)
                    .map_err(|_| WireError::Malformed("status not UTF-8"))?
                    .to_owned(),
            }
        }
        0x80 => Message::Grant {
            flow: flow(r)?,
            bytes: r.u64()?,
        },
        0x81 => Message::RateChange {
            flow: flow(r)?,
            rate_bytes_per_s: get_f64(r)?,
            srtt: dur_from_wire(r.u64()?).unwrap_or_default(),
            rttvar: dur_from_wire(r.u64()?).unwrap_or_default(),
        },
        0x82 => Message::RequestExpired {
            flow: flow(r)?,
            bytes: r.u64()?,
        },
        0x83 => Message::EnvEvent {
            device: get_name(r)?,
            param: get_param(r)?,
            value: get_f64(r)?,
            violated: LevelMask::from_bits(get_u128(r)?),
            cleared: LevelMask::from_bits(get_u128(r)?),
            highs: LevelMask::from_bits(get_u128(r)?),
            at_ns: r.u64()?,
            lost_before: r.u64()?,
        },
        0x84 => Message::Estimate {
            iface: get_str(r)?,
            bytes_per_s: get_f64(r)?,
            total_bytes: r.u64()?,
            at_ns: r.u64()?,
        },
        0x85 => Message::Lost { events: r.u64()? },
        other => {
            return Err(WireError::UnknownKind {
                field: "daemon message kind",
                value: u32::from(other),
            });
        }
    })
}

/// A growable writer for one frame; every put is bounds-free (a `Vec`), and the frame's size
/// is checked once at the end.
struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u128(&mut self, v: u128) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
    fn opt_f64(&mut self, v: Option<f64>) {
        self.u8(u8::from(v.is_some()));
        self.f64(v.unwrap_or(0.0));
    }
    fn dur(&mut self, d: Option<Duration>) {
        self.u64(dur_to_wire(d));
    }
    fn str(&mut self, s: &str) -> Result<(), WireError> {
        self.text(s, MAX_NAME_LEN)
    }
    fn text(&mut self, s: &str, max: usize) -> Result<(), WireError> {
        let n = u8::try_from(s.len())
            .ok()
            .filter(|n| usize::from(*n) <= max)
            .ok_or(WireError::Malformed("string longer than 64 bytes"))?;
        self.u8(n);
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn count(&mut self, n: usize, max: usize, what: &'static str) -> Result<(), WireError> {
        let n = u8::try_from(n)
            .ok()
            .filter(|n| usize::from(*n) <= max)
            .ok_or(WireError::Malformed(what))?;
        self.u8(n);
        Ok(())
    }
    fn param(&mut self, p: &Param) -> Result<(), WireError> {
        let code = p.code();
        self.u8(code);
        if code == Param::CUSTOM_CODE {
            self.str(p.name())?;
        }
        Ok(())
    }
}

impl Message {
    /// The wire kind.
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello { .. } => 0x01,
            Message::Open { .. } => 0x02,
            Message::Close { .. } => 0x03,
            Message::Request { .. } => 0x04,
            Message::Notify { .. } => 0x05,
            Message::Update { .. } => 0x06,
            Message::Query { .. } => 0x07,
            Message::Thresh { .. } => 0x08,
            Message::Received { .. } => 0x09,
            Message::SetDevParam { .. } => 0x0a,
            Message::SetDevParamWms { .. } => 0x0b,
            Message::GetDevParams { .. } => 0x0c,
            Message::RequestEvent { .. } => 0x0d,
            Message::CancelEvent { .. } => 0x0e,
            Message::SubscribeEstimator { .. } => 0x0f,
            Message::UnsubscribeEstimator { .. } => 0x10,
            Message::StatusRequest => 0x11,
            Message::Ok => 0x40,
            Message::Error { .. } => 0x41,
            Message::Welcome { .. } => 0x42,
            Message::Opened { .. } => 0x43,
            Message::QueryReply(_) => 0x44,
            Message::DevParams { .. } => 0x45,
            Message::Status { .. } => 0x46,
            Message::Grant { .. } => 0x80,
            Message::RateChange { .. } => 0x81,
            Message::RequestExpired { .. } => 0x82,
            Message::EnvEvent { .. } => 0x83,
            Message::Estimate { .. } => 0x84,
            Message::Lost { .. } => 0x85,
        }
    }

    /// Whether this is a client's request (kinds 0x01–0x3f).
    pub fn is_request(&self) -> bool {
        self.kind() < 0x40
    }

    /// Whether this is an event (kinds 0x80–0xbf), sent with `req_id` 0.
    pub fn is_event(&self) -> bool {
        self.kind() >= 0x80
    }

    fn emit_payload(&self, o: &mut Out) -> Result<(), WireError> {
        match self {
            Message::Hello { name } => o.str(name)?,
            Message::Open {
                dest,
                key,
                weight,
                feedback,
            } => {
                o.u128(dest.0);
                o.u64(key.0);
                o.f64(*weight);
                o.u8(code_of(&FEEDBACK_CODES, feedback));
            }
            Message::Close { flow } | Message::Query { flow } => o.u32(flow.0),
            Message::Request { flow, request } => {
                o.u32(flow.0);
                o.u64(request.bytes);
                o.u64(request.min_bytes);
                o.dur(request.latency);
            }
            Message::Notify { flow, nsent } => {
                o.u32(flow.0);
                o.u64(*nsent);
            }
            Message::Update { flow, feedback } => {
                o.u32(flow.0);
                o.u64(feedback.nrecd_bytes);
                o.u64(feedback.nlost_bytes);
                o.u8(code_of(&LOSS_CODES, &feedback.mode));
                o.dur(feedback.rtt);
            }
            Message::Thresh { flow, thresholds } => {
                o.u32(flow.0);
                o.f64(thresholds.rate_down);
                o.f64(thresholds.rate_up);
                o.f64(thresholds.rtt_down);
                o.f64(thresholds.rtt_up);
            }
            Message::Received {
                from,
                key,
                bytes,
                ce,
            } => {
                o.u128(from.0);
                o.u64(key.0);
                o.u64(*bytes);
                o.u8(u8::from(*ce));
            }
            Message::SetDevParam {
                device,
                param,
                value,
            } => {
                o.str(device.as_str())?;
                o.param(param)?;
                o.f64(*value);
            }
            Message::SetDevParamWms {
                device,
                param,
                levels,
            } => {
                o.str(device.as_str())?;
                o.param(param)?;
                o.count(levels.len(), MAX_LEVELS, "more than 128 levels")?;
                for l in levels {
                    o.f64(l.value);
                    o.u8(u8::from(l.kind == LevelKind::High));
                }
            }
            Message::GetDevParams { device } => o.str(device.as_str())?,
            Message::RequestEvent {
                device,
                param,
                levels,
            } => {
                o.str(device.as_str())?;
                o.param(param)?;
                o.u128(levels.bits());
            }
            Message::CancelEvent { device, param } => {
                o.str(device.as_str())?;
                o.param(param)?;
            }
            Message::SubscribeEstimator { iface } | Message::UnsubscribeEstimator { iface } => {
                o.str(iface)?;
            }
            Message::StatusRequest | Message::Ok => {}
            Message::Error { code, message } => {
                o.u16(code.code());
                // Messages are for people: cut at a character boundary rather than refuse.
                let mut end = message.len().min(MAX_MESSAGE_LEN);
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                o.text(message.get(..end).unwrap_or(""), MAX_MESSAGE_LEN)?;
            }
            Message::Welcome {
                client,
                uid,
                share,
                max_flows,
            } => {
                o.u32(*client);
                o.u32(*uid);
                o.f64(*share);
                o.u32(*max_flows);
            }
            Message::Opened { flow, macroflow } => {
                o.u32(flow.0);
                o.u32(macroflow.0);
            }
            Message::QueryReply(q) => {
                o.opt_f64(q.rate_bytes_per_s);
                o.dur(q.srtt);
                o.dur(q.rttvar);
                o.dur(q.min_rtt);
                o.f64(q.macroflow_rate_bytes_per_s);
                o.opt_f64(q.loss_rate);
                o.u64(q.probe_sent_bytes);
                o.u64(q.probe_lost_bytes);
            }
            Message::DevParams { device, readings } => {
                o.str(device.as_str())?;
                o.count(readings.len(), MAX_READINGS, "more than 64 readings")?;
                for d in readings {
                    o.param(&d.param)?;
                    o.f64(d.raw);
                    o.f64(d.effective);
                    o.u64(d.updated_ns);
                    o.u128(d.violated.bits());
                }
            }
            Message::Status { json } => {
                let n = u16::try_from(json.len())
                    .ok()
                    .filter(|n| usize::from(*n) + BODY_HEADER_LEN + 2 <= MAX_FRAME_LEN)
                    .ok_or(WireError::Malformed("status longer than a frame"))?;
                o.u16(n);
                o.0.extend_from_slice(json.as_bytes());
            }
            Message::Grant { flow, bytes } | Message::RequestExpired { flow, bytes } => {
                o.u32(flow.0);
                o.u64(*bytes);
            }
            Message::RateChange {
                flow,
                rate_bytes_per_s,
                srtt,
                rttvar,
            } => {
                o.u32(flow.0);
                o.f64(*rate_bytes_per_s);
                o.dur(Some(*srtt));
                o.dur(Some(*rttvar));
            }
            Message::EnvEvent {
                device,
                param,
                value,
                violated,
                cleared,
                highs,
                at_ns,
                lost_before,
            } => {
                o.str(device.as_str())?;
                o.param(param)?;
                o.f64(*value);
                o.u128(violated.bits());
                o.u128(cleared.bits());
                o.u128(highs.bits());
                o.u64(*at_ns);
                o.u64(*lost_before);
            }
            Message::Estimate {
                iface,
                bytes_per_s,
                total_bytes,
                at_ns,
            } => {
                o.str(iface)?;
                o.f64(*bytes_per_s);
                o.u64(*total_bytes);
                o.u64(*at_ns);
            }
            Message::Lost { events } => o.u64(*events),
        }
        Ok(())
    }
}

/// Appends one whole frame (length prefix and body) for `(req_id, msg)` to `out`. Fails,
/// leaving `out` as it was, if a field does not fit its encoding or the body would exceed
/// [`MAX_FRAME_LEN`].
pub fn encode_frame(req_id: u32, msg: &Message, out: &mut Vec<u8>) -> Result<(), WireError> {
    let mut o = Out(Vec::with_capacity(64));
    o.u32(0); // length, patched below
    o.u8(VERSION);
    o.u8(msg.kind());
    o.u32(req_id);
    msg.emit_payload(&mut o)?;
    let body = o.0.len() - 4;
    if body > MAX_FRAME_LEN {
        return Err(WireError::Malformed("frame longer than MAX_FRAME_LEN"));
    }
    let len = u32::try_from(body).map_err(|_| WireError::Malformed("frame length"))?;
    let mut w = Writer::new(&mut o.0);
    w.u32(len)?;
    out.extend_from_slice(&o.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Param;

    fn round_trip(req_id: u32, m: &Message) {
        let mut buf = Vec::new();
        encode_frame(req_id, m, &mut buf).expect("encodes");
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        assert_eq!(len, buf.len() - 4);
        let (id, back) = parse_body(&buf[4..]).expect("parses");
        assert_eq!(id, req_id);
        assert_eq!(&back, m, "{m:?}");
    }

    pub(crate) fn samples() -> Vec<Message> {
        let dev = Name::new("wlan0").expect("name");
        vec![
            Message::Hello { name: "app".into() },
            Message::Open {
                dest: PeerAddr(0x0a00_0002),
                key: FlowKey(7),
                weight: 2.0,
                feedback: FeedbackSource::Probe,
            },
            Message::Close { flow: FlowId(3) },
            Message::Request {
                flow: FlowId(3),
                request: Request {
                    bytes: 10_000,
                    min_bytes: 1500,
                    latency: Some(Duration::from_millis(200)),
                },
            },
            Message::Notify {
                flow: FlowId(3),
                nsent: 1500,
            },
            Message::Update {
                flow: FlowId(3),
                feedback: Feedback {
                    nrecd_bytes: 3000,
                    nlost_bytes: 1500,
                    mode: LossMode::Loss,
                    rtt: None,
                },
            },
            Message::Query { flow: FlowId(1) },
            Message::Thresh {
                flow: FlowId(1),
                thresholds: Thresholds::default(),
            },
            Message::Received {
                from: PeerAddr(9),
                key: FlowKey(1),
                bytes: 1200,
                ce: true,
            },
            Message::SetDevParam {
                device: dev.clone(),
                param: Param::Bandwidth,
                value: 1e6,
            },
            Message::SetDevParamWms {
                device: dev.clone(),
                param: Param::Custom(Name::new("queue").expect("name")),
                levels: vec![Level::low(1.0), Level::high(5.0)],
            },
            Message::GetDevParams {
                device: dev.clone(),
            },
            Message::RequestEvent {
                device: dev.clone(),
                param: Param::Loss,
                levels: LevelMask::of(&[0, 3]),
            },
            Message::CancelEvent {
                device: dev.clone(),
                param: Param::Loss,
            },
            Message::SubscribeEstimator {
                iface: "eth0".into(),
            },
            Message::UnsubscribeEstimator {
                iface: "eth0".into(),
            },
            Message::StatusRequest,
            Message::Ok,
            Message::Error {
                code: ErrorCode::UnknownFlow,
                message: "no such flow".into(),
            },
            Message::Welcome {
                client: 4,
                uid: 1000,
                share: 1.0,
                max_flows: 256,
            },
            Message::Opened {
                flow: FlowId(3),
                macroflow: MacroflowId(1),
            },
            Message::QueryReply(FlowQuery {
                rate_bytes_per_s: Some(1e5),
                srtt: Some(Duration::from_millis(20)),
                rttvar: None,
                min_rtt: Some(Duration::from_millis(10)),
                macroflow_rate_bytes_per_s: 2e5,
                loss_rate: None,
                probe_sent_bytes: 5,
                probe_lost_bytes: 1,
            }),
            Message::DevParams {
                device: dev.clone(),
                readings: vec![DevParam {
                    param: Param::Latency,
                    raw: 3.0,
                    effective: 2.5,
                    updated_ns: 99,
                    violated: LevelMask::of(&[1]),
                }],
            },
            Message::Status {
                json: "{\"flows\":[]}".into(),
            },
            Message::Grant {
                flow: FlowId(3),
                bytes: 1500,
            },
            Message::RateChange {
                flow: FlowId(3),
                rate_bytes_per_s: 12_345.5,
                srtt: Duration::from_micros(50),
                rttvar: Duration::ZERO,
            },
            Message::RequestExpired {
                flow: FlowId(3),
                bytes: 8,
            },
            Message::EnvEvent {
                device: dev,
                param: Param::SignalQuality,
                value: -80.0,
                violated: LevelMask::of(&[2]),
                cleared: LevelMask::EMPTY,
                highs: LevelMask::of(&[2, 4]),
                at_ns: 5,
                lost_before: 2,
            },
            Message::Estimate {
                iface: "veth0".into(),
                bytes_per_s: 125_000.0,
                total_bytes: 1 << 40,
                at_ns: 77,
            },
            Message::Lost { events: 12 },
        ]
    }

    #[test]
    fn test_every_message_round_trips() {
        for (i, m) in samples().iter().enumerate() {
            round_trip(u32::try_from(i).expect("small"), m);
        }
    }

    #[test]
    fn test_kinds_are_classified() {
        for m in samples() {
            let classes = [
                m.is_request(),
                !m.is_request() && !m.is_event(),
                m.is_event(),
            ];
            assert_eq!(classes.iter().filter(|c| **c).count(), 1, "{m:?}");
        }
        assert!(
            Message::Open {
                dest: PeerAddr(1),
                key: FlowKey(1),
                weight: 1.0,
                feedback: FeedbackSource::Implicit
            }
            .is_request()
        );
        assert!(
            Message::Grant {
                flow: FlowId(1),
                bytes: 1
            }
            .is_event()
        );
    }

    #[test]
    fn test_parse_rejects_bad_version_kind_and_trailing_bytes() {
        assert_eq!(
            parse_body(&[2, 1, 0, 0, 0, 1, 0]),
            Err(WireError::UnsupportedVersion(2))
        );
        assert!(matches!(
            parse_body(&[1, 0x3f, 0, 0, 0, 1]),
            Err(WireError::UnknownKind { .. })
        ));
        assert!(parse_body(&[1, 0x40, 0, 0, 0, 1, 0]).is_err(), "trailing");
        assert_eq!(parse_body(&[1, 0x40, 0, 0, 0, 1]), Ok((1, Message::Ok)));
        // A string claiming 200 bytes is refused before it is read.
        let mut long = vec![1, 0x01, 0, 0, 0, 1, 200];
        long.extend(std::iter::repeat_n(b'a', 200));
        assert!(parse_body(&long).is_err());
        // Unknown error codes and invalid level kinds.
        assert!(parse_body(&[1, 0x41, 0, 0, 0, 1, 0, 99, 0]).is_err());
    }

    #[test]
    fn test_encode_refuses_oversized_fields() {
        let mut out = vec![9];
        let long = "x".repeat(65);
        assert!(encode_frame(1, &Message::Hello { name: long }, &mut out).is_err());
        assert_eq!(out, vec![9], "left as it was");
        let big = Message::Status {
            json: "y".repeat(MAX_FRAME_LEN),
        };
        assert!(encode_frame(1, &big, &mut out).is_err());
        // Error messages are cut rather than refused.
        let e = Message::Error {
            code: ErrorCode::Malformed,
            message: "é".repeat(200),
        };
        encode_frame(1, &e, &mut out).expect("cut to fit");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = parse_body(&bytes);
        }

        #[test]
        fn parse_never_panics_on_valid_headers(
            kind in 0u8..0x90,
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let mut bytes = vec![VERSION, kind, 0, 0, 0, 1];
            bytes.extend(rest);
            if let Ok((id, m)) = parse_body(&bytes) {
                // Whatever parses re-encodes and parses to the same message (NaNs aside).
                let mut buf = Vec::new();
                encode_frame(id, &m, &mut buf).expect("re-encodes");
                let again = parse_body(&buf[4..]).expect("re-parses");
                proptest::prop_assert_eq!(format!("{:?}", again.1), format!("{m:?}"));
            }
        }
    }
}
