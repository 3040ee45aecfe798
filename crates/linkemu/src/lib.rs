//! adaptnet-linkemu: the simulator's link model on real packets.
//!
//! An emulated link joins two network namespaces — or a namespace and this host — through two
//! TUN devices. One thread reads each IP packet the kernel routes into either device, offers
//! it to that direction's [`adaptnet_sim::link::Link`] — the simulator's own link model, the
//! same code: a rate from a constant, a piecewise trace or Mahimahi delivery opportunities,
//! one-way delay, a drop-tail queue in packets or bytes, Bernoulli and Gilbert–Elliott loss,
//! outages, reordering — at the time it was read, and writes it to the other device at the
//! time the model says it arrives. The link is described by the scenarios' link table
//! ([`adaptnet_sim::scenario::link_table`]). `adaptnet link` is the command on top.
//!
//! # Why TUN devices, not veth with a packet socket
//!
//! A TUN device hands over exactly the IP packets the kernel routes into it and takes back
//! IP packets to deliver, with no link layer: no ARP or neighbour discovery to pass through
//! the model (and be delayed or lost by it), no MAC addresses, and nothing else in the kernel
//! sees the packets on the way (a veth end read with `AF_PACKET` is still an interface the
//! host stack receives on, so its packets must be hidden from it with a namespace and
//! filters). Devices are made with the `tun-rs` crate.
//!
//! # Offloads: many packets per system call
//!
//! Every packet the model serialises is one MTU-sized IP packet, as in the simulator and in
//! Mahimahi (whose shells are built the same way). Without offloads the kernel segments
//! TSO/GSO bursts before the device, and each packet costs one `read(2)` and one `write(2)`.
//! With offloads (`EmulatorOptions::offload`, the default: `IFF_VNET_HDR` and TSO/USO on
//! both devices) a TCP burst or a `UDP_SEGMENT` send arrives as one super-packet that the
//! emulator splits into the MTU-sized packets it stands for before the model sees them, and
//! packets due together are written back through `tun-rs`'s GRO, consecutive segments of a
//! flow as one super-packet (`device_io`). The measured gain is in `EXPERIMENTS.md`
//! (`adaptnet bench link`).
//!
//! # Exactness
//!
//! The emulator measures itself: for every packet, how long after the model's arrival time it
//! was written to the far device ([`lateness`]); it reports p50/p99/max and counts the
//! packets later than a bound (`EmulatorOptions::late_bound`) — it never silently slows the
//! link down. The time a packet is offered is when the emulator read it, so a backlog in
//! reading would delay it unseen; reading always precedes writing in the loop, and reads are
//! bounded per turn, so that backlog is at most one turn of the loop.
//!
//! # Modules
//!
//! - [`emulator`]: [`EmulatedLink`], the library API;
//! - [`netns`]: namespaces and TUN devices;
//! - [`stats`]: per-second and final reports; [`lateness`]: the lateness histogram;
//! - [`measure`]: paced UDP, arrival times, a saturating flow against the model's capacity;
//! - `driver`: the model driver loop; `device_io`: batched reads and writes on the devices;
//!   `schedule_log`: the per-packet CSV log.

#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod device_io;
mod driver;
pub mod emulator;
mod error;
pub mod lateness;
pub mod measure;
pub mod netns;
mod packet;
pub mod schedule_log;
pub mod stats;

pub use emulator::{EmulatedLink, EmulatorOptions, FarSide};
pub use error::LinkEmuError;
pub use stats::{DirectionReport, DirectionSecond, LinkReport, SecondStats};
