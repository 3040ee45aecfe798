//! The host daemon's local protocol (issue 20): how applications on one host talk to the
//! daemon that holds the host's Congestion Manager (papers/003 §3: one CM for "all
//! applications and transport protocols"), its per-interface bandwidth estimators
//! (papers/000 §5) and its environment engine (papers/001 §3: events to every application).
//!
//! Read `docs/design/daemon.md` first. This module is sans-IO: it turns messages into bytes
//! and bytes into messages; the daemon and the client library do the socket work.
//!
//! * [`msg`]: the messages ([`Message`]) and their binary encoding, one frame each;
//! * [`frame`]: the stream framing over a Unix stream socket ([`FrameDecoder`]), which bounds
//!   every frame and resynchronises after an oversized one.
//!
//! Contract, as for every adaptnet wire format: [`parse_body`] and [`FrameDecoder`] never
//! panic on any byte string, and nothing they allocate exceeds [`MAX_FRAME_LEN`] plus a
//! constant.

pub mod frame;
pub mod msg;

pub use frame::{FrameDecoder, FrameError};
pub use msg::{DevParam, ErrorCode, Message, ParamLevel, QueryReply, encode_frame, parse_body};

/// The protocol version this build speaks (the second byte of every frame body).
pub const VERSION: u8 = 1;

/// Largest frame body, bytes. Larger frames are refused (skipped, with an error reply).
pub const MAX_FRAME_LEN: usize = 16 * 1024;

/// Bytes of the length prefix before every frame body.
pub const LEN_PREFIX: usize = 4;

/// Longest string field (device, interface and client names), bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Most watermark levels in one `set_dev_param_wms` (a [`crate::env::LevelMask`] holds 128).
pub const MAX_LEVELS: usize = 128;

/// Most readings in one `get_dev_params` reply.
pub const MAX_READINGS: usize = 64;

/// The default path of the daemon's socket.
pub const DEFAULT_SOCKET_PATH: &str = "/run/adaptnet/daemon.sock";

/// The environment variable that names another socket path.
pub const SOCKET_ENV: &str = "ADAPTNET_DAEMON_SOCKET";
