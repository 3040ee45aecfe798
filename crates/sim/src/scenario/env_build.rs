//! Building a scenario's `[env]` into a world: the host's [`EnvTable`] and source agent, the
//! action tables of its sockets (which replace the plain flow agents), and the link outages
//! the environment implies (handoffs, `outage_below`).

use super::env::{EnvDef, merge_outages};
use super::{FlowType, ScenarioError};
use crate::agent::Agent;
use crate::agents::env_flows::{EnvActions, EnvCbrSender, EnvTcp};
use crate::agents::env_host::{EnvHost, EnvPoint, EnvSource, EnvState};
use crate::agents::tcp::{TcpReceiver, TcpSender};
use crate::link::Outage;
use crate::packet::{Addr, Proto};
use crate::world::{World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::env::{ActionTable, EnvTable, Param};

/// The port the environment source is bound to on its host (it never receives).
pub const ENV_PORT: u16 = 3_125;

/// The environment of one run while its world is built.
pub(super) struct EnvBuild<'a> {
    def: Option<&'a EnvDef>,
    host: Option<EnvHost>,
    points: Vec<EnvPoint>,
}

impl<'a> EnvBuild<'a> {
    /// Prepares the host's table and timeline for `seed`.
    pub(super) fn new(
        file: &str,
        def: Option<&'a EnvDef>,
        seed: u64,
        end: Time,
    ) -> Result<EnvBuild<'a>, ScenarioError> {
        let Some(d) = def else {
            return Ok(EnvBuild {
                def,
                host: None,
                points: Vec::new(),
            });
        };
        let err = |e: adaptnet_core::env::EnvError| ScenarioError::Invalid {
            file: file.to_string(),
            field: "env.params".into(),
            message: format!("{e}; use fewer parameters or levels"),
        };
        let mut table = EnvTable::new();
        for p in &d.params {
            table
                .set_dev_param_wms(&d.device, &p.param, p.watermarks.clone())
                .map_err(err)?;
            table
                .set_hysteresis(&d.device, &p.param, p.hysteresis)
                .map_err(err)?;
        }
        let params: Vec<Param> = d.params.iter().map(|p| p.param.clone()).collect();
        let host = EnvState::new(table, &d.device, &params, d.subscribers).map_err(err)?;
        let points = d
            .timeline(seed, end)
            .points
            .into_iter()
            .map(|(at, param, value)| EnvPoint {
                at,
                device: d.device.clone(),
                param,
                value,
            })
            .collect();
        Ok(EnvBuild {
            def,
            host: Some(host),
            points,
        })
    }

    fn actions(&self, flow: usize) -> Option<(EnvActions, &'a super::env::EnvSocketDef)> {
        let def = self.def?;
        let host = self.host.as_ref()?;
        let s = def.sockets.iter().find(|s| s.flow == flow)?;
        let mut table = ActionTable::new(def.device.clone());
        for a in &s.actions {
            // Validated: the levels exist and the table is within its bounds.
            let _ = if a.complex {
                table.set_complex_action(a.action, &a.inputs)
            } else if let Some((p, l)) = a.inputs.first() {
                table.set_simple_action(p.clone(), *l, a.action)
            } else {
                continue;
            };
        }
        Some((EnvActions::new(host.clone(), table), s))
    }

    /// Replaces flow `index`'s agents by environment-aware ones if it has an action table.
    pub(super) fn wrap(
        &self,
        index: usize,
        kind: &FlowType,
        local: Addr,
        remote: Addr,
        isn: u32,
        agents: (Box<dyn Agent>, Box<dyn Agent>),
    ) -> (Box<dyn Agent>, Box<dyn Agent>) {
        let (sender, receiver) = agents;
        let Some((actions, s)) = self.actions(index) else {
            return (sender, receiver);
        };
        match kind {
            FlowType::Cbr {
                rate_bytes_per_s,
                packet_bytes,
            } => match EnvCbrSender::new(
                local,
                remote,
                *rate_bytes_per_s,
                *packet_bytes,
                s.packets,
                s.buffer_datagrams,
                actions,
            ) {
                Ok(a) => (Box::new(a), receiver),
                Err(_) => (sender, receiver), // validated: the bound is at least 1
            },
            // The same endpoints `add_flow` builds (same ISNs), with an action table.
            FlowType::Tcp { bytes, config } if s.sender_side => {
                let tx = TcpSender::newreno(local, remote, config.clone(), *bytes, isn);
                (Box::new(EnvTcp::new(tx, actions)), receiver)
            }
            FlowType::Tcp { config, .. } => {
                let rx = TcpReceiver::new(remote, local, config.clone(), isn ^ 0x5555_5555);
                (sender, Box::new(EnvTcp::new(rx, actions)))
            }
            _ => (sender, receiver),
        }
    }

    /// Adds the host's source agent (after the flows) and the links' radio blackouts.
    pub(super) fn install(self, world: &mut World, seed: u64, end: Time) -> Result<(), WorldError> {
        let (Some(def), Some(host)) = (self.def, self.host) else {
            return Ok(());
        };
        let outages = def.timeline(seed, end).outages;
        let mut links: Vec<&str> = outages.iter().map(|(n, _)| n.as_str()).collect();
        links.sort_unstable();
        links.dedup();
        for name in links {
            let mut list = Vec::new();
            let extra: Vec<Outage> = outages
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, o)| *o)
                .collect();
            merge_outages(&mut list, &extra);
            world.set_blackouts(name, &list)?;
        }
        let node = world
            .node_by_name(&def.host)
            .ok_or_else(|| WorldError::NoRoute {
                from: def.host.clone(),
                to: def.host.clone(),
            })?;
        world.add_agent(
            node,
            Proto::Udp,
            ENV_PORT,
            Box::new(EnvSource::new(host, self.points)),
        )?;
        Ok(())
    }
}
