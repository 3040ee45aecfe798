//! Building a world: nodes, links, captures, agents, ports and flows.

use super::events::Event;
use super::*;

#[allow(
    clippy::indexing_slicing,
    reason = "node, link, agent and flow ids are indices the world issued into its own vectors, \
              which only grow"
)]
impl World {
    /// An empty world.
    pub fn new(seed: u64) -> World {
        World {
            now: Time::ZERO,
            seed,
            heap: BinaryHeap::new(),
            seq: 0,
            events: 0,
            nodes: Vec::new(),
            links: Vec::new(),
            agents: Vec::new(),
            flows: Vec::new(),
            captures: Vec::new(),
            routes_ready: false,
            sample_period: Duration::from_secs(1),
            sample_times: Vec::new(),
            unroutable: 0,
            unbound: 0,
            dirty: Vec::new(),
            arrivals: VecDeque::new(),
            drop_log: None,
        }
    }

    /// Starts recording every packet the links lose (queue overflow, random loss, outage) in
    /// [`World::drop_log`]. Off by default; recording changes nothing else.
    pub fn enable_drop_log(&mut self) {
        self.drop_log.get_or_insert_with(Vec::new);
    }

    /// The losses recorded since [`World::enable_drop_log`], in the order they were reported.
    pub fn drop_log(&self) -> &[DropRecord] {
        self.drop_log.as_deref().unwrap_or(&[])
    }

    /// Current virtual time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The world's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A seed for a component, derived from the world seed and a tag.
    pub fn derive_seed(&self, tag: u64) -> u64 {
        mix_seed(self.seed, tag)
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Sets the sampling period of goodput and queue series (default 1 s).
    pub fn set_sample_period(&mut self, period: Duration) {
        self.sample_period = period.max(Duration::from_micros(1));
    }

    /// Adds a host or router.
    pub fn add_node(&mut self, name: &str) -> Result<NodeId, WorldError> {
        if self.node_by_name(name).is_some() {
            return Err(WorldError::DuplicateNode(name.to_string()));
        }
        self.nodes.push(Node {
            name: name.to_string(),
            agents: Vec::new(),
            ports: Vec::new(),
            egress: Vec::new(),
            next_hop: Vec::new(),
            rx_bytes: 0,
        });
        self.routes_ready = false;
        Ok(NodeId(adaptnet_core::convert::usize_u32_sat(
            self.nodes.len() - 1,
        )))
    }

    /// The node with this name.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(adaptnet_core::convert::usize_u32_sat(i)))
    }

    /// A node's name.
    pub fn node_name(&self, id: NodeId) -> &str {
        self.nodes
            .get(id.0 as usize)
            .map_or("?", |n| n.name.as_str())
    }

    /// Adds a duplex link `name` between `a` and `b` with a configuration per direction.
    /// The directions are named `name:a->b` and `name:b->a`.
    pub fn add_link(
        &mut self,
        name: &str,
        a: NodeId,
        b: NodeId,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<(LinkId, LinkId), WorldError> {
        if self.links.iter().any(|l| l.duplex == name) {
            return Err(WorldError::DuplicateLink(name.to_string()));
        }
        let ab = self.add_direction(name, a, b, a_to_b);
        let ba = self.add_direction(name, b, a, b_to_a);
        self.routes_ready = false;
        Ok((ab, ba))
    }

    fn add_direction(&mut self, duplex: &str, from: NodeId, to: NodeId, cfg: LinkConfig) -> LinkId {
        let id = LinkId(adaptnet_core::convert::usize_u32_sat(self.links.len()));
        let seed = self.derive_seed(0x4c49_4e4b_0000_0000 | u64::from(id.0));
        let name = format!("{duplex}:{}->{}", self.node_name(from), self.node_name(to));
        self.links.push(LinkSlot {
            link: Link::new(cfg, seed),
            duplex: duplex.to_string(),
            name,
            to,
            wake: None,
            capture: None,
            queue_series: Vec::new(),
        });
        self.nodes[from.0 as usize].egress.push(id);
        id
    }

    /// The link direction with this full name (`name:a->b`).
    pub fn link_by_name(&self, name: &str) -> Option<LinkId> {
        self.links
            .iter()
            .position(|l| l.name == name)
            .map(|i| LinkId(adaptnet_core::convert::usize_u32_sat(i)))
    }

    /// A link direction.
    pub fn link(&self, id: LinkId) -> &Link<Packet> {
        &self.links[id.0 as usize].link
    }

    /// Captures both directions of duplex link `name` into one pcap.
    pub fn capture(&mut self, name: &str) -> Result<(), WorldError> {
        let idx = self.captures.len();
        let mut found = false;
        for slot in self.links.iter_mut().filter(|l| l.duplex == name) {
            slot.link.enable_capture();
            slot.capture = Some(idx);
            found = true;
        }
        if !found {
            return Err(WorldError::UnknownLink(name.to_string()));
        }
        self.captures.push((name.to_string(), PcapWriter::new()));
        Ok(())
    }

    /// The captures: (duplex link name, pcap).
    pub fn captures(&self) -> &[(String, PcapWriter)] {
        &self.captures
    }

    /// Binds an agent to `(proto, port)` on `node`.
    pub fn add_agent(
        &mut self,
        node: NodeId,
        proto: Proto,
        port: u16,
        agent: Box<dyn Agent>,
    ) -> Result<AgentId, WorldError> {
        let id = AgentId(adaptnet_core::convert::usize_u32_sat(self.agents.len()));
        let n = &mut self.nodes[node.0 as usize];
        if n.ports.iter().any(|(k, _)| *k == (proto, port)) {
            return Err(WorldError::PortInUse {
                node: n.name.clone(),
                proto,
                port,
            });
        }
        n.ports.push(((proto, port), id));
        n.agents.push(id);
        self.agents.push(AgentSlot {
            agent,
            node,
            wake: None,
            flow: None,
            sent: 0,
            received: 0,
        });
        Ok(id)
    }

    /// Binds one more `(proto, port)` on the agent's node to an existing agent, for agents
    /// that own several connections (each with its own port). The agent tells its
    /// connections apart by the packets' destination port.
    pub fn add_port(&mut self, agent: AgentId, proto: Proto, port: u16) -> Result<(), WorldError> {
        let node = self.agents[agent.0 as usize].node;
        let n = &mut self.nodes[node.0 as usize];
        if n.ports.iter().any(|(k, _)| *k == (proto, port)) {
            return Err(WorldError::PortInUse {
                node: n.name.clone(),
                proto,
                port,
            });
        }
        n.ports.push(((proto, port), agent));
        Ok(())
    }

    /// Typed access to an agent.
    pub fn agent<T: Agent>(&self, id: AgentId) -> Option<&T> {
        self.agents
            .get(id.0 as usize)
            .and_then(|s| (s.agent.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// Typed mutable access to an agent. The caller should not change what the agent
    /// transmits without the world re-polling it; prefer inputs through flows.
    pub fn agent_mut<T: Agent>(&mut self, id: AgentId) -> Option<&mut T> {
        self.agents
            .get_mut(id.0 as usize)
            .and_then(|s| (s.agent.as_mut() as &mut dyn Any).downcast_mut::<T>())
    }

    /// Registers a flow: schedules its agents' start and the sender's stop, and tags their
    /// packets for per-flow accounting.
    pub fn add_flow(&mut self, spec: FlowSpec) -> FlowId {
        let id = adaptnet_core::convert::usize_u32_sat(self.flows.len());
        self.agents[spec.sender.0 as usize].flow = Some((id, false));
        self.agents[spec.receiver.0 as usize].flow = Some((id, true));
        self.push(spec.start, Event::Start(spec.receiver.0));
        self.push(spec.start, Event::Start(spec.sender.0));
        self.push(spec.stop, Event::Stop(spec.sender.0));
        self.flows.push(FlowSlot {
            name: spec.name,
            kind: spec.kind,
            sender: spec.sender,
            receiver: spec.receiver,
            start: spec.start,
            stop: spec.stop,
            lost: 0,
            reverse_lost: 0,
            last_delivered: 0,
            series_bps: Vec::new(),
            rtt: Vec::new(),
        });
        FlowId(id)
    }

    /// A flow's (sender, receiver) agents, for typed inspection with [`World::agent`].
    pub fn flow_agents(&self, flow: FlowId) -> Option<(AgentId, AgentId)> {
        self.flows
            .get(flow.0 as usize)
            .map(|f| (f.sender, f.receiver))
    }
}
