//! Identification of the network state from the four metrics' levels: Table 2 of papers/004
//! ("metrics patterns of network states"), §3.
//!
//! | state | IDD | STT | POR | PLR |
//! |---|---|---|---|---|
//! | congestion | high | low | * | * |
//! | route change | * | * | high | * |
//! | channel error | * | * | * | high |
//! | disconnection | (the sender: a retransmission timeout without congestion) ||||
//! | normal | default |||
//!
//! The receiver evaluates every row on each sampling interval and reports every state that
//! holds (papers/004 §3: "the network may be in a state of high channel error and route
//! change, identified by high values of PLR and POR"). The sender then acts on the most
//! important one, [`StateReport::primary`]: congestion first, because "the goal is to be TCP
//! friendly: congestion has the highest priority in identification" (§3).

use super::rsd::Level;

/// A network state of papers/004 §2.1, as the sender acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NetworkState {
    /// None of the other states was identified.
    Normal,
    /// Queues build up and drop packets: react as TCP does.
    Congestion,
    /// Random loss on the wireless channel: retransmit without slowing down.
    ChannelError,
    /// The delivery path changed (out-of-order bursts): re-estimate the new path's bandwidth.
    RouteChange,
    /// The path is interrupted long enough for a retransmission timeout: freeze and probe.
    Disconnection,
}

/// What the receiver identified over its latest sampling interval: the states of Table 2
/// that hold, as carried in the ADTCP option (one bit each, see [`super::option`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct StateReport {
    /// IDD high and STT low.
    pub congestion: bool,
    /// PLR high.
    pub channel_error: bool,
    /// POR high.
    pub route_change: bool,
}

impl StateReport {
    /// No state identified: normal.
    pub const NORMAL: StateReport = StateReport {
        congestion: false,
        channel_error: false,
        route_change: false,
    };

    /// The state to act on: congestion above all (TCP-friendliness), then route change, then
    /// channel error, else normal. Route change ranks above channel error because its action
    /// (retransmit and continue in congestion avoidance with `ssthresh = cwnd`) is the more
    /// conservative of the two and includes the retransmission that channel error asks for.
    pub fn primary(self) -> NetworkState {
        if self.congestion {
            NetworkState::Congestion
        } else if self.route_change {
            NetworkState::RouteChange
        } else if self.channel_error {
            NetworkState::ChannelError
        } else {
            NetworkState::Normal
        }
    }
}

/// The level of each metric over one sampling interval (see [`super::rsd`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Levels {
    /// Inter-packet delay difference.
    pub idd: Level,
    /// Short-term throughput.
    pub stt: Level,
    /// Packet out-of-order ratio.
    pub por: Level,
    /// Packet loss ratio.
    pub plr: Level,
}

/// Table 2's receiver-side rules. A metric that could not be judged ([`Level::Unknown`]: too
/// little history, or no sample in the interval) satisfies no rule.
pub fn identify(levels: Levels) -> StateReport {
    StateReport {
        congestion: levels.idd == Level::High && levels.stt == Level::Low,
        channel_error: levels.plr == Level::High,
        route_change: levels.por == Level::High,
    }
}

/// Table 2's sender-side rule, applied when the retransmission timer fires: "disconnection is
/// identified when the sender's current state estimation is non-congestion and a
/// retransmission timeout is triggered" (papers/004 §3). With no report from the receiver at
/// all (a conventional receiver), the answer is congestion, so the sender falls back to
/// standard TCP (§4 "backward compatibility").
pub fn on_retransmission_timeout(last: Option<StateReport>) -> NetworkState {
    match last {
        Some(report) if !report.congestion => NetworkState::Disconnection,
        _ => NetworkState::Congestion,
    }
}

/// Table 2's sender-side reading of a third duplicate ACK: the receiver's latest report
/// decides; without one, congestion (standard TCP).
pub fn on_third_dup_ack(last: Option<StateReport>) -> NetworkState {
    last.map_or(NetworkState::Congestion, |r| match r.primary() {
        NetworkState::Normal => NetworkState::Congestion,
        state => state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Level::{High, Low, Medium, Unknown};

    const QUIET: Levels = Levels {
        idd: Medium,
        stt: Medium,
        por: Medium,
        plr: Medium,
    };

    #[test]
    fn test_congestion_needs_idd_high_and_stt_low() {
        let both = identify(Levels {
            idd: High,
            stt: Low,
            ..QUIET
        });
        assert_eq!(
            both,
            StateReport {
                congestion: true,
                ..StateReport::NORMAL
            }
        );
        assert_eq!(both.primary(), NetworkState::Congestion);
        // One metric alone is not enough: that is the point of joint identification.
        for levels in [
            Levels { idd: High, ..QUIET },
            Levels { stt: Low, ..QUIET },
            Levels {
                idd: High,
                stt: High,
                ..QUIET
            },
            Levels {
                idd: Low,
                stt: Low,
                ..QUIET
            },
            Levels {
                idd: High,
                stt: Unknown,
                ..QUIET
            },
        ] {
            assert!(!identify(levels).congestion, "{levels:?}");
        }
    }

    #[test]
    fn test_channel_error_when_plr_high() {
        let r = identify(Levels { plr: High, ..QUIET });
        assert_eq!(
            r,
            StateReport {
                channel_error: true,
                ..StateReport::NORMAL
            }
        );
        assert_eq!(r.primary(), NetworkState::ChannelError);
        assert!(!identify(Levels { plr: Low, ..QUIET }).channel_error);
    }

    #[test]
    fn test_route_change_when_por_high() {
        let r = identify(Levels { por: High, ..QUIET });
        assert_eq!(
            r,
            StateReport {
                route_change: true,
                ..StateReport::NORMAL
            }
        );
        assert_eq!(r.primary(), NetworkState::RouteChange);
    }

    #[test]
    fn test_normal_otherwise() {
        assert_eq!(identify(QUIET), StateReport::NORMAL);
        let unknown = Levels {
            idd: Unknown,
            stt: Unknown,
            por: Unknown,
            plr: Unknown,
        };
        assert_eq!(identify(unknown).primary(), NetworkState::Normal);
    }

    #[test]
    fn test_several_states_reported_and_congestion_has_priority() {
        let all = identify(Levels {
            idd: High,
            stt: Low,
            por: High,
            plr: High,
        });
        assert!(all.congestion && all.route_change && all.channel_error);
        assert_eq!(all.primary(), NetworkState::Congestion);
        let two = identify(Levels {
            por: High,
            plr: High,
            ..QUIET
        });
        assert_eq!(two.primary(), NetworkState::RouteChange);
    }

    #[test]
    fn test_disconnection_is_a_timeout_without_congestion() {
        assert_eq!(
            on_retransmission_timeout(Some(StateReport::NORMAL)),
            NetworkState::Disconnection
        );
        let err = StateReport {
            channel_error: true,
            ..StateReport::NORMAL
        };
        assert_eq!(
            on_retransmission_timeout(Some(err)),
            NetworkState::Disconnection
        );
        let cong = StateReport {
            congestion: true,
            ..StateReport::NORMAL
        };
        assert_eq!(
            on_retransmission_timeout(Some(cong)),
            NetworkState::Congestion
        );
        assert_eq!(on_retransmission_timeout(None), NetworkState::Congestion);
    }

    #[test]
    fn test_third_dup_ack_normal_or_unreported_is_congestion() {
        assert_eq!(on_third_dup_ack(None), NetworkState::Congestion);
        assert_eq!(
            on_third_dup_ack(Some(StateReport::NORMAL)),
            NetworkState::Congestion
        );
        let rc = StateReport {
            route_change: true,
            ..StateReport::NORMAL
        };
        assert_eq!(on_third_dup_ack(Some(rc)), NetworkState::RouteChange);
    }
}
