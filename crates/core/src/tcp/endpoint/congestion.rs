//! Which congestion controller a new connection of an endpoint gets, and the CM flow's life
//! beside the connection's (papers/003 §3.2.1: TCP/CM opens a CM flow per connection, seeds
//! it with the handshake's RTT, closes it when the connection goes).

use super::EndpointAddr;
use crate::adtcp::{AdtcpSender, SenderConfig};
use crate::cc::CongestionController;
use crate::cm::{CmController, CmHandle, FlowId, FlowKey};
use crate::tcp::{Connection, TcpConfig};
use crate::time::Time;
use std::time::Duration;

/// Congestion control of an endpoint's connections.
#[derive(Clone, Debug)]
pub enum Congestion {
    /// Core's NewReno, one window per connection.
    NewReno,
    /// ADTCP (papers/004): the sender policy reacts to the network state the receiver
    /// reports. Set `TcpConfig::adtcp` too, so the option is spoken.
    Adtcp(SenderConfig),
    /// TCP/CM (papers/003 §3.2.1): every connection is a flow of the host's CM, one
    /// macroflow per destination host, keyed by its port pair.
    Cm(CmHandle),
}

impl Congestion {
    /// The controller of a new connection, and its CM flow. A CM that refuses the flow (too
    /// many flows) leaves the connection on NewReno, which is logged by the engine's
    /// counters, not here.
    pub(super) fn open<A: EndpointAddr>(
        &self,
        now: Time,
        remote: A,
        local_port: u16,
        remote_port: u16,
        tcp: &TcpConfig,
    ) -> (Box<dyn CongestionController>, Option<FlowId>) {
        match self {
            Congestion::NewReno => (Connection::newreno(tcp), None),
            Congestion::Adtcp(config) => (AdtcpSender::for_tcp(tcp, *config), None),
            Congestion::Cm(cm) => {
                let key = FlowKey((u64::from(local_port) << 16) | u64::from(remote_port));
                match CmController::open(cm, now, remote.cm_peer(), key) {
                    Ok((cc, flow)) => (cc, Some(flow)),
                    Err(_) => (Connection::newreno(tcp), None),
                }
            }
        }
    }

    /// The connection of `flow` completed its handshake, which measured `rtt`: the CM learns
    /// the path's RTT before the first data (the stream does not pass it to the controller).
    pub(super) fn connected(&self, now: Time, flow: FlowId, rtt: Option<Duration>) {
        if let (Congestion::Cm(cm), Some(rtt)) = (self, rtt) {
            // A flow closed meanwhile needs no seed.
            let _ = CmController::seed_rtt(cm, now, flow, rtt);
        }
    }

    /// The connection of `flow` is gone: `cm_close`.
    pub(super) fn close(&self, now: Time, flow: FlowId) {
        if let Congestion::Cm(cm) = self {
            let _ = cm.borrow_mut().close(now, flow);
        }
    }
}
