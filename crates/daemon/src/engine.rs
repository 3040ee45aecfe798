//! The daemon's state and decisions, without sockets: the host's Congestion Manager and
//! receiver CM, the environment table and event hub, the interface estimators, and the table
//! of clients with what each one owns.
//!
//! Who may do what (issue 20, item 2) is decided here:
//!
//! * a flow belongs to the connection that opened it; every other client gets `UnknownFlow`
//!   for it (the same answer as for a flow that does not exist, so ids leak nothing);
//! * a flow's scheduler weight is its user's configured share divided among that user's flows
//!   in the macroflow in proportion to the weights they asked for, so no client takes more
//!   than its user's share by asking for a large weight or by opening many flows;
//! * setting device parameters and watermarks is for privileged callers (uid 0 or the
//!   daemon's own uid): they change every application's events;
//! * every per-client table is bounded, with `LimitExceeded` at the bound;
//! * events go to a client's bounded queue without waiting: when it is full the event is
//!   dropped *for that client* and counted, and the count reaches it as a `Lost` event.
//!
//! Every method takes `now`; the server reads the clock.

use crate::config::DaemonConfig;
use crate::estimator::Estimator;
use adaptnet_core::Time;
use adaptnet_core::cm::receiver::CmReceiver;
use adaptnet_core::cm::{
    CmConfig, CmError, CmEvent, CmTransmit, CongestionManager, FlowId, FlowOptions, MacroflowId,
    Thresholds,
};
use adaptnet_core::daemon::{DevParam, ErrorCode, MAX_READINGS, Message, encode_frame};
use adaptnet_core::env::{EnvError, EnvTable, EventHub, SubscriberId, Watermarks};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use tokio::sync::mpsc;

/// Most CM control packets waiting for the UDP socket; beyond, they are dropped as a
/// congested network would drop them (the probe protocol tolerates it, papers/003 §2.2.3).
const MAX_OUT_PACKETS: usize = 1024;

/// Who is calling, from `SO_PEERCRED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Caller {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Process id (0 if unknown).
    pub pid: i32,
}

/// A client's event queue: encoded frames for its connection task.
pub type EventSender = mpsc::Sender<Vec<u8>>;

struct Client {
    caller: Caller,
    name: String,
    flows: BTreeSet<FlowId>,
    subscriber: Option<SubscriberId>,
    env_requests: BTreeSet<(String, String)>,
    estimators: BTreeSet<String>,
    events: EventSender,
    /// Events dropped since the last `Lost` the client was sent.
    lost_pending: u64,
    lost_total: u64,
    delivered: u64,
}

impl Client {
    fn subscriptions(&self) -> usize {
        self.env_requests.len() + self.estimators.len()
    }
}

struct FlowOwner {
    client: u32,
    uid: u32,
    /// The weight the client asked for (clamped to `max_flow_weight`).
    asked: f64,
}

/// Daemon-wide counters, for `adaptnet monitor`.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DaemonStats {
    /// Clients accepted since start.
    pub clients_accepted: u64,
    /// Clients refused (`max_clients`).
    pub clients_refused: u64,
    /// Requests served.
    pub requests: u64,
    /// Requests answered with an error (malformed ones included).
    pub errors: u64,
    /// Events delivered to client queues.
    pub events_delivered: u64,
    /// Events dropped because a client's queue was full.
    pub events_dropped: u64,
    /// Flows freed because their client went away.
    pub flows_reclaimed: u64,
    /// CM control packets dropped (the outgoing queue was full).
    pub packets_dropped: u64,
    /// Status messages accepted from configured peers.
    pub status_accepted: u64,
    /// Status datagrams rejected (unknown peer, bad key or HMAC, replay, bad value).
    pub status_rejected: u64,
}

/// The daemon's state.
pub struct Engine {
    config: DaemonConfig,
    daemon_uid: u32,
    cm: CongestionManager,
    receiver: CmReceiver,
    env: EnvTable,
    hub: EventHub,
    clients: BTreeMap<u32, Client>,
    owners: BTreeMap<FlowId, FlowOwner>,
    estimators: BTreeMap<String, Estimator>,
    out: VecDeque<CmTransmit>,
    next_client: u32,
    stats: DaemonStats,
}

fn cm_error(e: CmError) -> Message {
    let code = match e {
        CmError::UnknownFlow(_) | CmError::UnknownMacroflow(_) => ErrorCode::UnknownFlow,
        CmError::TooManyFlows(_) => ErrorCode::LimitExceeded,
        CmError::InvalidArgument(_) => ErrorCode::InvalidArgument,
    };
    error(code, e.to_string())
}

fn env_error(e: EnvError) -> Message {
    let code = match e {
        EnvError::LimitExceeded { .. } => ErrorCode::LimitExceeded,
        _ => ErrorCode::Environment,
    };
    error(code, e.to_string())
}

/// An error reply.
pub fn error(code: ErrorCode, message: impl Into<String>) -> Message {
    Message::Error {
        code,
        message: message.into(),
    }
}

fn done<E>(r: Result<(), E>, map: fn(E) -> Message) -> Message {
    r.map_or_else(map, |()| Message::Ok)
}

impl Engine {
    /// A daemon with no clients. `daemon_uid` is the daemon's own uid (privileged callers).
    pub fn new(config: DaemonConfig, daemon_uid: u32) -> Engine {
        let cm = CongestionManager::new(CmConfig {
            mtu_bytes: config.cm.mtu_bytes,
            burst_bytes: config.cm.burst_bytes,
            feedback_floor: config.feedback_floor(),
            ..CmConfig::default()
        });
        let env = EnvTable::with_event_capacity(config.env.event_capacity)
            .unwrap_or_else(|_| EnvTable::new());
        Engine {
            config,
            daemon_uid,
            cm,
            receiver: CmReceiver::new(),
            env,
            hub: EventHub::new(),
            clients: BTreeMap::new(),
            owners: BTreeMap::new(),
            estimators: BTreeMap::new(),
            out: VecDeque::new(),
            next_client: 1,
            stats: DaemonStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DaemonConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &DaemonStats {
        &self.stats
    }

    /// Mutable counters (the server counts status datagrams).
    pub fn stats_mut(&mut self) -> &mut DaemonStats {
        &mut self.stats
    }

    /// Connected clients.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Open flows, all clients.
    pub fn flow_count(&self) -> usize {
        self.owners.len()
    }

    /// A new client, or `None` at `max_clients`.
    pub fn connect(&mut self, caller: Caller, events: EventSender) -> Option<u32> {
        if self.clients.len() >= self.config.limits.max_clients {
            self.stats.clients_refused += 1;
            return None;
        }
        let id = self.next_client;
        self.next_client = self.next_client.wrapping_add(1).max(1);
        self.clients.insert(
            id,
            Client {
                caller,
                name: String::new(),
                flows: BTreeSet::new(),
                subscriber: None,
                env_requests: BTreeSet::new(),
                estimators: BTreeSet::new(),
                events,
                lost_pending: 0,
                lost_total: 0,
                delivered: 0,
            },
        );
        self.stats.clients_accepted += 1;
        Some(id)
    }

    /// The client went away (closed, crashed or killed): frees its flows, grants and
    /// subscriptions.
    pub fn disconnect(&mut self, now: Time, client: u32) {
        let Some(c) = self.clients.remove(&client) else {
            return;
        };
        let mut touched: BTreeSet<(u32, MacroflowId)> = BTreeSet::new();
        for flow in &c.flows {
            if let Ok(mf) = self.cm.getmacroflow(*flow) {
                touched.insert((c.caller.uid, mf));
            }
            let _ = self.cm.close(now, *flow);
            self.owners.remove(flow);
            self.stats.flows_reclaimed += 1;
        }
        if let Some(sub) = c.subscriber {
            let _ = self.hub.unsubscribe(sub);
        }
        for iface in &c.estimators {
            self.unsubscribe_estimator(client, iface);
        }
        for (uid, mf) in touched {
            self.reweight(now, uid, mf);
        }
        self.pump(now);
    }

    /// Serves one request of `client`; the reply to send back.
    pub fn handle(&mut self, now: Time, client: u32, msg: Message) -> Message {
        self.stats.requests += 1;
        let reply = self.serve(now, client, msg);
        if matches!(reply, Message::Error { .. }) {
            self.stats.errors += 1;
        }
        self.pump(now);
        reply
    }

    /// The refusal to send if `flow` is not `client`'s.
    fn not_owned(&self, client: u32, flow: FlowId) -> Option<Message> {
        match self.owners.get(&flow) {
            Some(o) if o.client == client => None,
            _ => Some(error(
                ErrorCode::UnknownFlow,
                format!("no flow {} on this connection", flow.0),
            )),
        }
    }

    /// The refusal to send if `client` may not set device parameters.
    fn not_privileged(&self, client: u32) -> Option<Message> {
        match self.clients.get(&client) {
            Some(c) if c.caller.uid == 0 || c.caller.uid == self.daemon_uid => None,
            _ => Some(error(
                ErrorCode::NotAllowed,
                "device parameters and watermarks are set by root or the daemon's user",
            )),
        }
    }

    fn serve(&mut self, now: Time, client: u32, msg: Message) -> Message {
        let Some(c) = self.clients.get_mut(&client) else {
            return error(ErrorCode::Unavailable, "client not registered");
        };
        let caller = c.caller;
        match msg {
            Message::Hello { name } => {
                c.name = name;
                Message::Welcome {
                    client,
                    uid: caller.uid,
                    share: self.config.weights.share(caller.uid),
                    max_flows: u32::try_from(self.config.limits.max_flows_per_client)
                        .unwrap_or(u32::MAX),
                }
            }
            Message::Open {
                dest,
                key,
                weight,
                feedback,
            } => {
                if c.flows.len() >= self.config.limits.max_flows_per_client {
                    return error(
                        ErrorCode::LimitExceeded,
                        format!(
                            "at most {} flows per client",
                            self.config.limits.max_flows_per_client
                        ),
                    );
                }
                if !(weight.is_finite() && weight > 0.0) {
                    return error(ErrorCode::InvalidArgument, "weight must be positive");
                }
                let asked = weight.min(self.config.weights.max_flow_weight);
                let options = FlowOptions {
                    weight: 1.0,
                    feedback,
                    thresholds: Thresholds::default(),
                };
                let flow = match self.cm.open(now, dest, key, options) {
                    Ok(f) => f,
                    Err(e) => return cm_error(e),
                };
                c.flows.insert(flow);
                self.owners.insert(
                    flow,
                    FlowOwner {
                        client,
                        uid: caller.uid,
                        asked,
                    },
                );
                let macroflow = self.cm.getmacroflow(flow).unwrap_or(MacroflowId(0));
                self.reweight(now, caller.uid, macroflow);
                Message::Opened { flow, macroflow }
            }
            Message::Close { flow } => {
                if let Some(e) = self.not_owned(client, flow) {
                    return e;
                }
                let mf = self.cm.getmacroflow(flow).ok();
                let r = self.cm.close(now, flow);
                self.owners.remove(&flow);
                if let Some(c) = self.clients.get_mut(&client) {
                    c.flows.remove(&flow);
                }
                if let Some(mf) = mf {
                    self.reweight(now, caller.uid, mf);
                }
                done(r, cm_error)
            }
            Message::Request { flow, request } => match self.not_owned(client, flow) {
                Some(e) => e,
                None => done(self.cm.request_with(now, flow, request), cm_error),
            },
            Message::Notify { flow, nsent } => match self.not_owned(client, flow) {
                Some(e) => e,
                None => done(self.cm.notify(now, flow, nsent), cm_error),
            },
            Message::Update { flow, feedback } => match self.not_owned(client, flow) {
                Some(e) => e,
                None => done(self.cm.update(now, flow, feedback), cm_error),
            },
            Message::Query { flow } => match self.not_owned(client, flow) {
                Some(e) => e,
                None => self
                    .cm
                    .query(flow)
                    .map_or_else(cm_error, Message::QueryReply),
            },
            Message::Thresh { flow, thresholds } => match self.not_owned(client, flow) {
                Some(e) => e,
                None => done(self.cm.thresh(now, flow, thresholds), cm_error),
            },
            Message::Received {
                from,
                key,
                bytes,
                ce,
            } => {
                self.receiver.handle_data(now, from, key, bytes, ce);
                Message::Ok
            }
            Message::SetDevParam {
                device,
                param,
                value,
            } => match self.not_privileged(client) {
                Some(e) => e,
                None => done(
                    self.env.set_dev_param(now, &device, &param, value),
                    env_error,
                ),
            },
            Message::SetDevParamWms {
                device,
                param,
                levels,
            } => match self.not_privileged(client) {
                Some(e) => e,
                None => match Watermarks::new(levels) {
                    Err(e) => env_error(e),
                    Ok(w) => done(self.env.set_dev_param_wms(&device, &param, w), env_error),
                },
            },
            Message::GetDevParams { device } => {
                let readings = self
                    .env
                    .get_dev_params(&device)
                    .into_iter()
                    .take(MAX_READINGS)
                    .map(|r| DevParam {
                        param: r.param,
                        raw: r.raw,
                        effective: r.effective,
                        updated_ns: r.updated_at.as_nanos(),
                        violated: r.violated,
                    })
                    .collect();
                Message::DevParams { device, readings }
            }
            Message::RequestEvent {
                device,
                param,
                levels,
            } => {
                let key = (device.as_str().to_owned(), param.name().to_owned());
                let max = self.config.limits.max_subscriptions_per_client;
                if !c.env_requests.contains(&key) && c.subscriptions() >= max {
                    return error(
                        ErrorCode::LimitExceeded,
                        format!("at most {max} subscriptions per client"),
                    );
                }
                let sub = match c.subscriber {
                    Some(s) => s,
                    None => match self.hub.subscribe(self.config.limits.max_queued_events) {
                        Ok(s) => {
                            c.subscriber = Some(s);
                            s
                        }
                        Err(e) => return env_error(e),
                    },
                };
                match self.hub.request_event(sub, &device, &param, levels) {
                    Ok(()) => {
                        c.env_requests.insert(key);
                        Message::Ok
                    }
                    Err(e) => env_error(e),
                }
            }
            Message::CancelEvent { device, param } => {
                let key = (device.as_str().to_owned(), param.name().to_owned());
                c.env_requests.remove(&key);
                if let Some(sub) = c.subscriber {
                    let _ = self.hub.cancel_event(sub, &device, &param);
                }
                Message::Ok
            }
            Message::SubscribeEstimator { iface } => {
                let max = self.config.limits.max_subscriptions_per_client;
                if !crate::estimator::valid_iface_name(&iface) {
                    return error(ErrorCode::InvalidArgument, "not an interface name");
                }
                if !c.estimators.contains(&iface) && c.subscriptions() >= max {
                    return error(
                        ErrorCode::LimitExceeded,
                        format!("at most {max} subscriptions per client"),
                    );
                }
                c.estimators.insert(iface.clone());
                let gain = self.config.estimator.gain;
                self.estimators
                    .entry(iface)
                    .or_insert_with(|| Estimator::new(gain))
                    .subscribers
                    .insert(client);
                Message::Ok
            }
            Message::UnsubscribeEstimator { iface } => {
                c.estimators.remove(&iface);
                self.unsubscribe_estimator(client, &iface);
                Message::Ok
            }
            Message::StatusRequest => match crate::status::snapshot_json(self, now) {
                Ok(json) => Message::Status { json },
                Err(e) => error(ErrorCode::Unavailable, e),
            },
            other => error(
                ErrorCode::NotAllowed,
                format!("kind {:#04x} is not a request", other.kind()),
            ),
        }
    }

    fn unsubscribe_estimator(&mut self, client: u32, iface: &str) {
        if let Some(e) = self.estimators.get_mut(iface) {
            e.subscribers.remove(&client);
            if e.subscribers.is_empty() {
                self.estimators.remove(iface);
            }
        }
    }

    /// Sets the weight of each of `uid`'s flows in macroflow `mf`: the user's share divided in
    /// proportion to what the flows asked for.
    fn reweight(&mut self, now: Time, uid: u32, mf: MacroflowId) {
        let share = self.config.weights.share(uid);
        let flows: Vec<(FlowId, f64)> = self
            .owners
            .iter()
            .filter(|(f, o)| o.uid == uid && self.cm.getmacroflow(**f).ok() == Some(mf))
            .map(|(f, o)| (*f, o.asked))
            .collect();
        let total: f64 = flows.iter().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return;
        }
        for (f, w) in flows {
            let _ = self.cm.set_weight(now, f, share * w / total);
        }
    }

    /// When [`Engine::handle_timeout`] should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        [self.cm.poll_timeout(), self.env.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs due timers and routes what they produced.
    pub fn handle_timeout(&mut self, now: Time) {
        self.pump(now);
    }

    /// A CM control packet from host `from` (a probe for the receiver CM or a response for
    /// the sender CM).
    pub fn handle_cm_packet(
        &mut self,
        now: Time,
        from: adaptnet_core::cm::PeerAddr,
        packet: &adaptnet_core::cm::probe::CmPacket,
    ) {
        self.cm.handle_packet(now, from, packet);
        self.receiver.handle_packet(now, from, packet);
        self.pump(now);
    }

    /// Sets a device parameter from an authenticated status message.
    pub fn set_from_status(
        &mut self,
        now: Time,
        msg: &adaptnet_core::env::StatusMessage,
    ) -> Result<(), EnvError> {
        let r = self
            .env
            .set_dev_param(now, &msg.device, &msg.param, msg.value);
        self.pump(now);
        r
    }

    /// The next CM control packet to send.
    pub fn poll_transmit(&mut self) -> Option<CmTransmit> {
        self.out.pop_front()
    }

    /// Interfaces with subscribers (the server reads their counters).
    pub fn estimator_ifaces(&self) -> Vec<String> {
        self.estimators.keys().cloned().collect()
    }

    /// The counters of `iface` read `total_bytes` at `now`: updates its estimate and sends it
    /// to the subscribers.
    pub fn on_iface_counters(&mut self, now: Time, iface: &str, total_bytes: u64) {
        let Some(e) = self.estimators.get_mut(iface) else {
            return;
        };
        let Some(bytes_per_s) = e.on_counters(now, total_bytes) else {
            return;
        };
        let subs: Vec<u32> = e.subscribers.iter().copied().collect();
        let msg = Message::Estimate {
            iface: iface.to_owned(),
            bytes_per_s,
            total_bytes,
            at_ns: now.as_nanos(),
        };
        for c in subs {
            self.deliver(c, &msg);
        }
    }

    /// Estimates, for the status snapshot.
    pub(crate) fn estimates(&self) -> impl Iterator<Item = (&String, &Estimator)> {
        self.estimators.iter()
    }

    pub(crate) fn cm(&self) -> &CongestionManager {
        &self.cm
    }

    /// The receiver CM (it answers other hosts' probes).
    pub(crate) fn receiver(&self) -> &CmReceiver {
        &self.receiver
    }

    pub(crate) fn env(&self) -> &EnvTable {
        &self.env
    }

    /// (client id, caller, name, flows, subscriptions, lost events, delivered events).
    pub(crate) fn clients(
        &self,
    ) -> impl Iterator<Item = (u32, Caller, &str, &BTreeSet<FlowId>, usize, u64, u64)> {
        self.clients.iter().map(|(id, c)| {
            (
                *id,
                c.caller,
                c.name.as_str(),
                &c.flows,
                c.subscriptions(),
                c.lost_total,
                c.delivered,
            )
        })
    }

    /// Runs due CM and environment timers, queues CM packets and routes every event to its
    /// client's queue.
    fn pump(&mut self, now: Time) {
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now);
        }
        if self.env.poll_timeout().is_some_and(|t| t <= now) {
            self.env.handle_timeout(now);
        }
        while let Some(t) = self.cm.poll_transmit(now) {
            self.queue_packet(t);
        }
        while let Some(t) = self.receiver.poll_transmit(now) {
            self.queue_packet(t);
        }
        while let Some(ev) = self.cm.poll_event() {
            let (flow, msg) = match ev {
                CmEvent::Grant { flow, bytes } => (flow, Message::Grant { flow, bytes }),
                CmEvent::RequestExpired { flow, bytes } => {
                    (flow, Message::RequestExpired { flow, bytes })
                }
                CmEvent::RateChange {
                    flow,
                    rate_bytes_per_s,
                    srtt,
                    rttvar,
                } => (
                    flow,
                    Message::RateChange {
                        flow,
                        rate_bytes_per_s,
                        srtt,
                        rttvar,
                    },
                ),
            };
            if let Some(client) = self.owners.get(&flow).map(|o| o.client) {
                self.deliver(client, &msg);
            }
        }
        let mut published = false;
        while let Some(ev) = self.env.poll_event() {
            self.hub.publish(&ev);
            published = true;
        }
        if published {
            let subs: Vec<(u32, SubscriberId)> = self
                .clients
                .iter()
                .filter_map(|(id, c)| c.subscriber.map(|s| (*id, s)))
                .collect();
            for (client, sub) in subs {
                while let Ok(Some(d)) = self.hub.poll(sub) {
                    let msg = Message::EnvEvent {
                        device: d.event.device,
                        param: d.event.param,
                        value: d.event.value,
                        violated: d.event.violated,
                        cleared: d.event.cleared,
                        highs: d.event.highs,
                        at_ns: d.event.at.as_nanos(),
                        lost_before: d.lost_before,
                    };
                    self.deliver(client, &msg);
                }
            }
        }
    }

    fn queue_packet(&mut self, t: CmTransmit) {
        if self.out.len() >= MAX_OUT_PACKETS {
            self.stats.packets_dropped += 1;
        } else {
            self.out.push_back(t);
        }
    }

    /// Puts an event in `client`'s queue without waiting; a full queue drops it for this
    /// client only and counts it. The count goes out (as `Lost`) before the next event that
    /// fits.
    fn deliver(&mut self, client: u32, msg: &Message) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        if c.lost_pending > 0 {
            let mut lost = Vec::new();
            if encode_frame(
                0,
                &Message::Lost {
                    events: c.lost_pending,
                },
                &mut lost,
            )
            .is_ok()
                && c.events.try_send(lost).is_ok()
            {
                c.lost_pending = 0;
            }
        }
        let mut frame = Vec::with_capacity(48);
        if encode_frame(0, msg, &mut frame).is_err() {
            return;
        }
        // A pending lost count goes first; an event that would overtake it waits behind it
        // (is dropped and counted too), so the client learns of the gap in order.
        if c.lost_pending == 0 && c.events.try_send(frame).is_ok() {
            c.delivered += 1;
            self.stats.events_delivered += 1;
        } else {
            c.lost_pending += 1;
            c.lost_total += 1;
            self.stats.events_dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_core::daemon::parse_body;
    use adaptnet_core::env::{Level, Name, Param};

    fn caller(uid: u32) -> Caller {
        Caller {
            uid,
            gid: uid,
            pid: 1,
        }
    }

    fn decode(frame: &[u8]) -> Message {
        parse_body(&frame[4..]).expect("valid frame").1
    }

    #[test]
    fn test_only_root_or_the_daemons_user_sets_device_parameters() {
        let mut e = Engine::new(DaemonConfig::default(), 500);
        let (tx, _rx) = mpsc::channel(8);
        let user = e.connect(caller(1000), tx.clone()).expect("room");
        let daemon_user = e.connect(caller(500), tx.clone()).expect("room");
        let root = e.connect(caller(0), tx).expect("room");
        let set = || Message::SetDevParam {
            device: Name::new("wlan0").expect("name"),
            param: Param::Bandwidth,
            value: 1.0,
        };
        assert!(matches!(
            e.handle(Time::ZERO, user, set()),
            Message::Error {
                code: ErrorCode::NotAllowed,
                ..
            }
        ));
        assert_eq!(e.handle(Time::ZERO, daemon_user, set()), Message::Ok);
        assert_eq!(e.handle(Time::ZERO, root, set()), Message::Ok);
        // Reading is for everyone.
        assert!(matches!(
            e.handle(
                Time::ZERO,
                user,
                Message::GetDevParams {
                    device: Name::new("wlan0").expect("name")
                }
            ),
            Message::DevParams { .. }
        ));
    }

    #[test]
    fn test_a_full_queue_drops_and_counts_then_reports_the_loss_first() {
        let mut e = Engine::new(DaemonConfig::default(), 0);
        let (tx, mut rx) = mpsc::channel(2);
        let c = e.connect(caller(0), tx).expect("room");
        let dev = Name::new("wlan0").expect("name");
        e.handle(
            Time::ZERO,
            c,
            Message::SetDevParamWms {
                device: dev.clone(),
                param: Param::Cost,
                levels: vec![Level::low(10.0), Level::high(50.0)],
            },
        );
        e.handle(
            Time::ZERO,
            c,
            Message::RequestEvent {
                device: dev.clone(),
                param: Param::Cost,
                levels: adaptnet_core::env::LevelMask::ALL,
            },
        );
        let set = |e: &mut Engine, v: f64| {
            e.handle(
                Time::ZERO,
                c,
                Message::SetDevParam {
                    device: dev.clone(),
                    param: Param::Cost,
                    value: v,
                },
            )
        };
        for i in 0..5 {
            set(&mut e, if i % 2 == 0 { 100.0 } else { 0.0 });
        }
        // The first set is the baseline (no crossing): four events, two fit.
        assert_eq!(e.stats().events_delivered, 2);
        assert_eq!(e.stats().events_dropped, 2);
        // The client catches up: the next event is preceded by the count of what it lost.
        assert!(matches!(
            decode(&rx.try_recv().expect("1")),
            Message::EnvEvent { .. }
        ));
        assert!(matches!(
            decode(&rx.try_recv().expect("2")),
            Message::EnvEvent { .. }
        ));
        set(&mut e, 0.0);
        assert_eq!(
            decode(&rx.try_recv().expect("lost")),
            Message::Lost { events: 2 }
        );
        assert!(matches!(
            decode(&rx.try_recv().expect("3")),
            Message::EnvEvent { .. }
        ));
    }

    #[test]
    fn test_disconnect_frees_flows_and_reweights_the_users_others() {
        let mut e = Engine::new(DaemonConfig::default(), 0);
        let (tx, _rx) = mpsc::channel(8);
        let a = e.connect(caller(7), tx.clone()).expect("room");
        let b = e.connect(caller(7), tx).expect("room");
        let open = |e: &mut Engine, c: u32| match e.handle(
            Time::ZERO,
            c,
            Message::Open {
                dest: adaptnet_core::cm::PeerAddr(1),
                key: adaptnet_core::cm::FlowKey(u64::from(c)),
                weight: 1.0,
                feedback: adaptnet_core::cm::FeedbackSource::Implicit,
            },
        ) {
            Message::Opened { flow, .. } => flow,
            other => panic!("{other:?}"),
        };
        let fa = open(&mut e, a);
        let _fb = open(&mut e, b);
        e.disconnect(Time::ZERO, b);
        assert_eq!(e.flow_count(), 1);
        assert_eq!(e.stats().flows_reclaimed, 1);
        // a's flow now holds the user's whole share: its rate is the macroflow's.
        e.handle(
            Time::ZERO,
            a,
            Message::Update {
                flow: fa,
                feedback: adaptnet_core::cm::Feedback::received(
                    0,
                    Some(std::time::Duration::from_millis(10)),
                ),
            },
        );
        let Message::QueryReply(q) = e.handle(Time::ZERO, a, Message::Query { flow: fa }) else {
            panic!("query");
        };
        assert_eq!(q.rate_bytes_per_s, Some(q.macroflow_rate_bytes_per_s));
    }
}
