//! When a baseline's kernel TCP connection counts as dead: nothing at all heard from the peer
//! for the peer timeout while the connection waits for an answer — checked by the driver on
//! a timer from `TCP_INFO`. The kernel's `TCP_USER_TIMEOUT` is not set.
//!
//! # Why not `TCP_USER_TIMEOUT`
//! `man 7 tcp` defines the user timeout as how long "transmitted data may remain
//! unacknowledged, or buffered data may remain untransmitted (due to zero window size)". It
//! measures the age of data, not the silence of the peer, and it ended live connections:
//! on the table2-netns stepped link (tbf on the sender's own interface, where a packet that
//! does not fit is dropped before it leaves, so TCP sees it at once and enters CWR) the
//! connections that ended with `ETIMEDOUT` had never retransmitted, had nothing in flight,
//! and had heard their peer 0.7 s earlier (EXPERIMENTS.md, "The baselines' dead-peer
//! timeout"). Nothing in flight and a send queue that cannot go out is the kernel's
//! probe timer, whose user-timeout clock runs from its first probe and is reset by the window
//! opening or a probe getting out, not by acknowledgements of other data; we read this from
//! the documented semantics and the `TCP_INFO` of the ends, not from the kernel source. A
//! longer user timeout is no backstop: at four times the peer timeout it still ended a live
//! connection under heavy loss (the fault tests' heavy-loss run, 1 of 3).
//!
//! # What counts as life
//! Any acknowledgement (`tcpi_last_ack_recv`: duplicates and SACKs included — the peer's TCP
//! answers every segment that reaches it) or any data (`tcpi_last_data_recv`: records,
//! acknowledgement bytes), on any of the connection's TCP connections. A connection waits
//! for an answer while it has segments in flight (`tcpi_unacked`: sent, not dropped locally)
//! or keep-alive probes out (`tcpi_probes` with an empty send queue; with data queued the
//! probes are zero-window or local-congestion probes, which a live peer need not answer).
//! Keep-alives go after a quarter of the timeout of quiet, so an idle connection to a
//! vanished host is found too. A dead peer (host gone, link down for good) is therefore
//! noticed between the [peer timeout](super::BaselineOptions::peer_timeout) and one
//! [`check_period`] after its last word; a killed process at once (its kernel resets). The
//! kernel's own limits stay as the backstop: keep-alives unanswered
//! ([`keepalive_interval_and_count`]: well beyond the timeout) and `tcp_retries2` retransmissions.

use crate::tcpinfo::TcpInfo;
use std::time::Duration;

/// The most keep-alive probes Linux sends unanswered (`TCP_KEEPCNT` at most).
const MAX_KEEPALIVE_PROBES: u32 = 127;

/// The keep-alive interval and the probes the kernel sends unanswered before it ends a
/// connection itself (`TCP_KEEPINTVL`, `TCP_KEEPCNT`), after `idle` of quiet: probes a
/// second apart (further apart only where 127 of them would not outlast the timeout), and
/// enough of them to outlast four times the peer timeout, so the driver's check decides
/// first.
pub(crate) fn keepalive_interval_and_count(peer_timeout: Duration, idle: Duration) -> (u32, u32) {
    let span = peer_timeout
        .saturating_mul(4)
        .saturating_sub(idle)
        .as_secs();
    let interval = span.div_ceil(u64::from(MAX_KEEPALIVE_PROBES)).max(1);
    let count = span
        .div_ceil(interval)
        .clamp(5, u64::from(MAX_KEEPALIVE_PROBES));
    (
        u32::try_from(interval).unwrap_or(u32::MAX),
        u32::try_from(count).unwrap_or(MAX_KEEPALIVE_PROBES),
    )
}

/// How often the driver reads `TCP_INFO` of every connection: an eighth of the timeout,
/// between 50 ms and 1 s (a dead peer is noticed at most this late; a getsockopt per socket
/// per check costs next to nothing).
pub(crate) fn check_period(peer_timeout: Duration) -> Duration {
    (peer_timeout / 8).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// What the check reads of one TCP connection.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LinkState {
    /// Its `TCP_INFO`.
    pub(crate) info: TcpInfo,
    /// Bytes in its send queue, sent or not (`SIOCOUTQ`).
    pub(crate) queued_bytes: u64,
}

impl LinkState {
    /// Whether it waits for something from its peer: segments in flight, or keep-alive
    /// probes unanswered.
    pub(crate) fn awaits_answer(&self) -> bool {
        self.info.unacked_segments > 0 || (self.info.probes > 0 && self.queued_bytes == 0)
    }
}

/// Whether the peer of a connection whose TCP connections are in states `links` counts as
/// dead: one of them awaits an answer and nothing at all came on any of them for
/// `peer_timeout`. (NAI-MTCPk's connections all go to the same peer: one starved level under
/// heavy loss while another hears the peer is a slow level, not a dead peer.)
pub(crate) fn peer_silent(links: &[LinkState], peer_timeout: Duration) -> bool {
    let heard_ms = links.iter().map(|l| l.info.last_heard_ms()).min();
    links.iter().any(LinkState::awaits_answer)
        && heard_ms.is_some_and(|ms| Duration::from_millis(u64::from(ms)) >= peer_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info(unacked: u32, probes: u8, ack_ms: u32, data_ms: u32) -> LinkState {
        LinkState {
            info: TcpInfo {
                unacked_segments: unacked,
                probes,
                last_ack_recv_ms: ack_ms,
                last_data_recv_ms: data_ms,
                ..TcpInfo::default()
            },
            queued_bytes: u64::from(unacked) * 1448,
        }
    }

    #[test]
    fn a_connection_hearing_acknowledgements_lives_however_old_its_unacknowledged_data() {
        let t = Duration::from_secs(8);
        // The kernel's user timeout would look at the head's age; this looks at the peer.
        let mut busy = info(40, 0, 120, 60_000);
        busy.info.retransmits = 3;
        busy.info.backoff = 3;
        busy.info.total_retrans = 900;
        assert!(!peer_silent(&[busy], t));
        assert!(peer_silent(&[info(40, 0, 8_000, 8_000)], t));
        // Another level hearing the peer keeps a starved one.
        assert!(!peer_silent(
            &[info(40, 0, 9_000, 9_000), info(0, 0, 500, 900)],
            t
        ));
        assert!(peer_silent(
            &[info(40, 0, 9_000, 9_000), info(0, 0, 8_500, 9_900)],
            t
        ));
        assert!(!peer_silent(&[], t));
        // Data from the peer is life too (acknowledgement bytes with no ACK progress).
        assert!(!peer_silent(&[info(40, 0, 9_000, 10)], t));
    }

    #[test]
    fn a_quiet_connection_is_dead_only_once_its_probes_go_unanswered() {
        let t = Duration::from_secs(8);
        assert!(!peer_silent(&[info(0, 0, 30_000, 30_000)], t));
        assert!(peer_silent(&[info(0, 1, 8_000, 30_000)], t));
        assert!(!peer_silent(&[info(0, 1, 7_999, 30_000)], t));
    }

    #[test]
    fn a_starved_sender_with_nothing_in_flight_awaits_nothing() {
        // Data queued, nothing in flight, probes out: the probes could not leave (local
        // congestion) or meet a closed window; silence then says nothing of the peer.
        let starved = LinkState {
            queued_bytes: 8192,
            ..info(0, 3, 30_000, 30_000)
        };
        assert!(!peer_silent(&[starved], Duration::from_secs(8)));
    }

    #[test]
    fn the_kernel_gives_up_on_keepalives_only_well_after_the_check() {
        for s in [1, 2, 8, 60, 300, 3600] {
            let t = Duration::from_secs(s);
            let idle = (t / 4).clamp(Duration::from_secs(1), Duration::from_secs(10));
            let (interval, count) = keepalive_interval_and_count(t, idle);
            let kernel = idle + Duration::from_secs(u64::from(interval * count));
            assert!(kernel >= t * 2, "{s} s: {kernel:?}");
            assert!(count <= 127);
            // A live idle peer is still asked often enough to be heard within the timeout.
            assert!(
                idle + Duration::from_secs(u64::from(interval)) <= t.max(Duration::from_secs(2)),
                "{s} s"
            );
            assert!(check_period(t) <= t / 2, "{s} s");
        }
    }

    proptest! {
        /// Silence is monotone: a peer heard from more recently, or a connection awaiting
        /// less, is never deader; and nothing heard within the timeout is never dead.
        #[test]
        fn silence_is_monotone(
            unacked in 0u32..100, probes in 0u8..5, ack_ms in 0u32..100_000,
            data_ms in 0u32..100_000, less in 0u32..100_000, timeout_ms in 1u64..60_000,
        ) {
            let t = Duration::from_millis(timeout_ms);
            let i = info(unacked, probes, ack_ms, data_ms);
            let heard_sooner = info(unacked, probes, ack_ms.saturating_sub(less), data_ms);
            let quiet = info(0, 0, ack_ms, data_ms);
            if peer_silent(&[heard_sooner, quiet], t) {
                prop_assert!(peer_silent(&[i, quiet], t));
            }
            if u64::from(ack_ms.min(data_ms)) < timeout_ms {
                prop_assert!(!peer_silent(&[i], t));
                prop_assert!(!peer_silent(&[i, info(unacked, probes, 99_999, 99_999)], t));
            }
            prop_assert!(!peer_silent(&[info(0, 0, ack_ms, data_ms)], t));
        }
    }
}
