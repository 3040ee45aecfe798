//! The emulated testbed of §5.1 and one run of an NAI implementation on it.
//!
//! The paper shaped the *sender's* interface with Dummynet, so the queue ATP's estimator reads
//! is the bottleneck queue. We model exactly that: two hosts joined by one duplex link,
//!
//! ```text
//! sender —[trace-driven rate, one-way delay, drop-tail queue of 50 packets]→ receiver
//! sender ←[constant rate (unshaped 802.11b return path), same delay]— receiver
//! ```
//!
//! and the world reports the sender's interface counters (queue length, bytes sent plus
//! received) to ATP before every input.

use super::params::{KB, TestbedParams, positive};
use crate::ExpError;
use adaptnet_core::Time;
use adaptnet_core::atp::AtpConfig;
use adaptnet_core::atp::EstimatorMode;
use adaptnet_core::atp::endpoint::EndpointConfig;
use adaptnet_core::nai::baseline::BaselineKind;
use adaptnet_core::nai::{NaiConfig, ServiceOrder};
use adaptnet_core::session::LivenessConfig;
use adaptnet_sim::agents::atp::{self, AtpAgent, AtpSink, RateFeed};
use adaptnet_sim::agents::atp_endpoint::{self, AtpClientAgent, AtpServerAgent, Faults};
use adaptnet_sim::agents::atp_tcp::{self, AtpTcpAgent, AtpTcpSink};
use adaptnet_sim::agents::message_bytes::{MessageData, PayloadCheck};
use adaptnet_sim::agents::nai_app::{Ledger, NaiApp};
use adaptnet_sim::agents::nai_tcp::{self, NaiTcpAgent, NaiTcpSink};
use adaptnet_sim::link::{Bandwidth, LinkConfig, LossModel, QueueLimit};
use adaptnet_sim::world::{AgentId, World, WorldError};
use std::time::Duration;

/// UDP payload share of a full-size datagram's link bytes (1472 of 1500): what the oracle
/// scales the true link rate by, so that it paces ATP at exactly the link's capacity.
pub const PAYLOAD_FRACTION: f64 = 1472.0 / 1500.0;

/// The testbed: the sender's shaped interface and the return path.
#[derive(Clone, Debug)]
pub struct Testbed {
    /// Sender → receiver capacity (the trace).
    pub bandwidth: Bandwidth,
    /// One-way delay, each direction.
    pub delay: Duration,
    /// The sender's interface queue, in packets.
    pub queue_packets: u32,
    /// Receiver → sender capacity.
    pub reverse_bytes_per_s: f64,
    /// Oracle update period.
    pub oracle_period: Duration,
    /// Whether messages carry bytes.
    pub data: MessageData,
}

impl Testbed {
    /// A testbed from parameters and a trace; errors name the field.
    pub fn new(p: &TestbedParams, bandwidth: Bandwidth, file: &str) -> Result<Testbed, ExpError> {
        Ok(Testbed {
            bandwidth,
            delay: Duration::from_secs_f64(positive(p.delay_ms, "testbed.delay_ms", file)? / 1e3),
            queue_packets: p.queue_packets.max(1),
            reverse_bytes_per_s: positive(
                p.reverse_kbytes_per_s,
                "testbed.reverse_kbytes_per_s",
                file,
            )? * KB,
            oracle_period: Duration::from_secs_f64(positive(
                p.oracle_period_s,
                "testbed.oracle_period_s",
                file,
            )?),
            data: if p.message_bytes {
                MessageData::Bytes
            } else {
                MessageData::Sizes
            },
        })
    }
}

/// The NAI implementations compared (§5.2), plus ATP over TCP and the oracle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Implementation {
    /// ATP over SPP with its estimator (the paper's ATP: Figure 3 as printed).
    Atp,
    /// ATP over SPP with the library's defaults: the rate control (`EstimatorMode::Control`)
    /// and the slack order between priority levels (`ServiceOrder::Slack`).
    AtpDefault,
    /// ATP (its configuration as given: the paper's estimator in the reproductions) through
    /// core's endpoint, as the runtime runs it: handshake with a retry token, keep-alive,
    /// CLOSE, message bytes in every datagram (`adaptnet_sim::agents::atp_endpoint`).
    AtpEndpoint,
    /// ATP over one TCP connection with its estimator.
    AtpTcp,
    /// ATP over SPP fed the true link rate.
    Oracle,
    /// NAI-TCP.
    NaiTcp,
    /// NAI-MTCPk.
    Mtcp(u8),
}

impl Implementation {
    /// Name in tables.
    pub fn label(self) -> String {
        match self {
            Implementation::Atp => "ATP".into(),
            Implementation::AtpDefault => "ATP-default".into(),
            Implementation::AtpEndpoint => "ATP-endpoint".into(),
            Implementation::AtpTcp => "ATP/TCP".into(),
            Implementation::Oracle => "oracle".into(),
            Implementation::NaiTcp => "NAI-TCP".into(),
            Implementation::Mtcp(k) => format!("NAI-MTCP{k}"),
        }
    }
}

fn world_err(e: WorldError) -> ExpError {
    ExpError::Input(format!("building the testbed: {e}"))
}

/// The endpoint's session ([`Implementation::AtpEndpoint`]): when its client closes and
/// its keep-alive.
#[derive(Clone, Debug)]
pub struct Session {
    /// The client closes its connection then (never by default).
    pub close_at: Time,
    /// How long the close waits for live messages to become final.
    pub linger: Duration,
    /// Keep-alive and idle timeout (core's defaults: 10 s and 30 s).
    pub liveness: LivenessConfig,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            close_at: Time::MAX,
            linger: Duration::ZERO,
            liveness: LivenessConfig::default(),
        }
    }
}

/// One implementation on the testbed, with its application.
pub struct Run {
    /// The world.
    pub world: World,
    /// The sending agent.
    pub sender: AgentId,
    /// The receiving agent.
    pub receiver: AgentId,
    /// Which implementation.
    pub implementation: Implementation,
}

const PORT: u16 = 5000;

/// ATP's configuration for a workload with `levels` priority levels; `poll_delay_s` is the
/// estimator's poll delay (§4.2).
pub fn atp_config(levels: u8, poll_delay_s: u32) -> AtpConfig {
    let mut c = AtpConfig {
        nai: NaiConfig {
            levels,
            // The paper's strict priorities (§3.1), not the library's slack order.
            service: ServiceOrder::Strict,
            ..NaiConfig::default()
        },
        ..AtpConfig::default()
    };
    c.estimator.poll_delay_s = poll_delay_s;
    // The reproductions run the paper's estimator (Figure 3 as printed), not the library's
    // bounded default.
    c.estimator.mode = EstimatorMode::Paper;
    c
}

impl Run {
    /// Builds the testbed with `implementation` sending for `app` from time 0.
    pub fn new(
        testbed: &Testbed,
        implementation: Implementation,
        atp: AtpConfig,
        app: Box<dyn NaiApp>,
        seed: u64,
    ) -> Result<Run, ExpError> {
        let session = Session::default();
        Run::with_session(testbed, implementation, atp, app, seed, &session)
    }

    /// [`Run::new`], with the endpoint's session settings: [`Implementation::AtpEndpoint`]
    /// only, the other implementations have no session.
    pub fn with_session(
        testbed: &Testbed,
        implementation: Implementation,
        atp: AtpConfig,
        app: Box<dyn NaiApp>,
        seed: u64,
        session: &Session,
    ) -> Result<Run, ExpError> {
        let mut world = World::new(seed);
        let s = world.add_node("sender").map_err(world_err)?;
        let r = world.add_node("receiver").map_err(world_err)?;
        let fwd = LinkConfig {
            bandwidth: testbed.bandwidth.clone(),
            delay: testbed.delay,
            queue: QueueLimit::Packets(testbed.queue_packets),
            loss: LossModel::None,
            outages: Vec::new(),
            reorders: Vec::new(),
        };
        let rev = LinkConfig {
            bandwidth: Bandwidth::Constant {
                rate_bytes_per_s: testbed.reverse_bytes_per_s,
            },
            ..fwd.clone()
        };
        world.add_link("wlan", s, r, fwd, rev).map_err(world_err)?;
        let name = implementation.label();
        let (start, stop) = (Time::ZERO, Time::MAX);
        let oracle = RateFeed::Oracle {
            bandwidth: testbed.bandwidth.clone(),
            period: testbed.oracle_period,
            payload_fraction: PAYLOAD_FRACTION,
        };
        let levels = atp.nai.levels;
        let data = testbed.data;
        let (sender, receiver) = match implementation {
            Implementation::Atp => atp::install(
                &mut world,
                &name,
                atp,
                RateFeed::Estimated,
                s,
                r,
                PORT,
                app,
                start,
                stop,
                data,
            ),
            Implementation::AtpDefault => {
                let atp = AtpConfig {
                    estimator: adaptnet_core::atp::EstimatorConfig {
                        mode: EstimatorMode::Control,
                        ..atp.estimator.clone()
                    },
                    nai: NaiConfig {
                        service: ServiceOrder::default(),
                        ..atp.nai.clone()
                    },
                    ..atp
                };
                let feed = RateFeed::Estimated;
                atp::install(
                    &mut world, &name, atp, feed, s, r, PORT, app, start, stop, data,
                )
            }
            Implementation::AtpEndpoint => {
                let config = EndpointConfig {
                    atp,
                    liveness: session.liveness.clone(),
                    ..EndpointConfig::client()
                };
                let faults = Faults {
                    close_linger: session.linger,
                    ..Faults::default()
                };
                atp_endpoint::install(
                    &mut world,
                    &name,
                    config,
                    s,
                    r,
                    PORT,
                    app,
                    start,
                    session.close_at,
                    faults,
                    Faults::default(),
                )
            }
            Implementation::Oracle => atp::install(
                &mut world, &name, atp, oracle, s, r, PORT, app, start, stop, data,
            ),
            Implementation::AtpTcp => atp_tcp::install(
                &mut world,
                &name,
                atp.nai,
                atp.estimator,
                RateFeed::Estimated,
                s,
                r,
                PORT,
                app,
                start,
                stop,
                data,
            ),
            Implementation::NaiTcp | Implementation::Mtcp(_) => {
                let kind = match implementation {
                    Implementation::Mtcp(k) => BaselineKind::Mtcp {
                        high_connections: k,
                    },
                    _ => BaselineKind::NaiTcp,
                };
                nai_tcp::install(
                    &mut world, &name, kind, levels, s, r, PORT, app, start, stop, data,
                )
            }
        }
        .map_err(world_err)?;
        world.check_routes().map_err(world_err)?;
        Ok(Run {
            world,
            sender,
            receiver,
            implementation,
        })
    }

    /// Advances the world to `end`.
    pub fn run_until(&mut self, end: Time) {
        self.world.run_until(end, &mut |_| {});
    }

    /// Ends the run: the baselines give every live message its final outcome (see
    /// `BaselineSender::finish_all`); returns how many messages were still live, for every
    /// implementation (ATP's stay pending in its ledger).
    pub fn finish(&mut self) -> usize {
        let now = self.world.now();
        if let Some(a) = self.world.agent_mut::<NaiTcpAgent>(self.sender) {
            return a.finish_all(now);
        }
        self.ledger().map_or(0, Ledger::pending)
    }

    /// The sender's ledger of submissions and outcomes.
    pub fn ledger(&self) -> Option<&Ledger> {
        let w = &self.world;
        let id = self.sender;
        w.agent::<AtpAgent>(id)
            .map(AtpAgent::ledger)
            .or_else(|| w.agent::<AtpClientAgent>(id).map(AtpClientAgent::ledger))
            .or_else(|| w.agent::<NaiTcpAgent>(id).map(NaiTcpAgent::ledger))
            .or_else(|| w.agent::<AtpTcpAgent>(id).map(AtpTcpAgent::ledger))
    }

    /// The sender's application, typed.
    pub fn app<T: 'static>(&self) -> Option<&T> {
        let w = &self.world;
        let id = self.sender;
        let app = w
            .agent::<AtpAgent>(id)
            .map(AtpAgent::app)
            .or_else(|| w.agent::<AtpClientAgent>(id).map(AtpClientAgent::app))
            .or_else(|| w.agent::<NaiTcpAgent>(id).map(NaiTcpAgent::app))
            .or_else(|| w.agent::<AtpTcpAgent>(id).map(AtpTcpAgent::app))?;
        (app as &dyn std::any::Any).downcast_ref::<T>()
    }

    /// With message bytes on ([`Testbed::data`]), every delivery checked against what the
    /// sender sent; `None` when messages carry sizes only.
    pub fn payload_check(&self) -> Option<PayloadCheck> {
        let w = &self.world;
        let (s, r) = (self.sender, self.receiver);
        if let (Some(a), Some(k)) = (w.agent::<AtpAgent>(s), w.agent::<AtpSink>(r)) {
            return a.message_bytes().map(|b| k.payload_check(b));
        }
        if let (Some(a), Some(k)) = (w.agent::<AtpClientAgent>(s), w.agent::<AtpServerAgent>(r)) {
            let conn = k.connections().next()?;
            return a.message_bytes().map(|b| conn.payload_check(b));
        }
        if let (Some(a), Some(k)) = (w.agent::<AtpTcpAgent>(s), w.agent::<AtpTcpSink>(r)) {
            return a.message_bytes().map(|b| k.payload_check(b));
        }
        let (a, k) = (w.agent::<NaiTcpAgent>(s)?, w.agent::<NaiTcpSink>(r)?);
        a.message_bytes().map(|b| k.payload_check(b))
    }

    /// The ATP sender agent, for ATP and the oracle.
    pub fn atp(&self) -> Option<&AtpAgent> {
        self.world.agent::<AtpAgent>(self.sender)
    }

    /// The endpoint's client and server agents, for [`Implementation::AtpEndpoint`].
    pub fn endpoint(&self) -> Option<(&AtpClientAgent, &AtpServerAgent)> {
        let w = &self.world;
        Some((
            w.agent::<AtpClientAgent>(self.sender)?,
            w.agent::<AtpServerAgent>(self.receiver)?,
        ))
    }
}
