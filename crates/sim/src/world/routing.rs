//! Routes: shortest paths by hop count, computed once before the run.

use super::*;

#[allow(
    clippy::indexing_slicing,
    reason = "node, link, agent and flow ids are indices the world issued into its own vectors, \
              which only grow"
)]
impl World {
    /// Checks that every flow's endpoints can reach each other.
    pub fn check_routes(&mut self) -> Result<(), WorldError> {
        self.compute_routes();
        for f in &self.flows {
            let a = self.agents[f.sender.0 as usize].node;
            let b = self.agents[f.receiver.0 as usize].node;
            for (x, y) in [(a, b), (b, a)] {
                if x != y && self.nodes[x.0 as usize].next_hop[y.0 as usize].is_none() {
                    return Err(WorldError::NoRoute {
                        from: self.node_name(x).to_string(),
                        to: self.node_name(y).to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Shortest paths by hop count (BFS from every node); ties go to the link added first.
    pub(super) fn compute_routes(&mut self) {
        if self.routes_ready {
            return;
        }
        let n = self.nodes.len();
        for src in 0..n {
            let mut first: Vec<Option<LinkId>> = vec![None; n];
            let mut seen = vec![false; n];
            seen[src] = true;
            let mut queue = VecDeque::new();
            for &l in &self.nodes[src].egress {
                let to = self.links[l.0 as usize].to.0 as usize;
                if !seen[to] {
                    seen[to] = true;
                    first[to] = Some(l);
                    queue.push_back(to);
                }
            }
            while let Some(u) = queue.pop_front() {
                for &l in &self.nodes[u].egress {
                    let to = self.links[l.0 as usize].to.0 as usize;
                    if !seen[to] {
                        seen[to] = true;
                        first[to] = first[u];
                        queue.push_back(to);
                    }
                }
            }
            self.nodes[src].next_hop = first;
        }
        self.routes_ready = true;
    }
}
