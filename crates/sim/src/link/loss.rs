//! Packet loss on a link: none, Bernoulli, Gilbert-Elliott (two-state bursty), or a fixed list
//! of packet numbers (for checks that need one exact loss pattern).

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// A loss model, applied to each packet as it leaves the link's transmitter.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability in [0, 1].
        p: f64,
    },
    /// Gilbert-Elliott: a Markov chain over a good and a bad state, stepped once per packet,
    /// with a loss probability in each state.
    GilbertElliott {
        /// Probability of moving from good to bad at each packet.
        p_good_to_bad: f64,
        /// Probability of moving from bad to good at each packet.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
    /// Exactly these packets are lost, numbered from 1 in the order they leave the
    /// transmitter (sorted, without duplicates). Draws nothing from the RNG.
    Packets {
        /// Packet numbers to lose.
        numbers: Vec<u64>,
    },
}

impl LossModel {
    /// The long-run loss probability.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let total = p_good_to_bad + p_bad_to_good;
                if total <= 0.0 {
                    return loss_good;
                }
                let pi_bad = p_good_to_bad / total;
                (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
            }
            // No long-run rate: a finite list.
            LossModel::Packets { .. } => 0.0,
        }
    }
}

/// The evolving state of a loss model.
#[derive(Clone, Debug, Default)]
pub(crate) struct LossState {
    bad: bool,
    /// Packets seen so far (for [`LossModel::Packets`]).
    seen: u64,
}

impl LossState {
    /// Decides whether the next packet is lost.
    pub(crate) fn lose(&mut self, model: &LossModel, rng: &mut ChaCha8Rng) -> bool {
        self.seen += 1;
        match *model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && rng.random::<f64>() < p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad {
                    p_bad_to_good
                } else {
                    p_good_to_bad
                };
                if rng.random::<f64>() < flip {
                    self.bad = !self.bad;
                }
                let p = if self.bad { loss_bad } else { loss_good };
                p > 0.0 && rng.random::<f64>() < p
            }
            LossModel::Packets { ref numbers } => numbers.binary_search(&self.seen).is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn loss_rate(model: &LossModel, n: usize) -> (f64, usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut st = LossState::default();
        let mut lost = 0;
        let mut longest = 0;
        let mut run = 0;
        for _ in 0..n {
            if st.lose(model, &mut rng) {
                lost += 1;
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        (lost as f64 / n as f64, longest)
    }

    #[test]
    fn listed_packets_are_lost_and_no_others() {
        let model = LossModel::Packets {
            numbers: vec![2, 5],
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut st = LossState::default();
        let lost: Vec<bool> = (0..6).map(|_| st.lose(&model, &mut rng)).collect();
        assert_eq!(lost, [false, true, false, false, true, false]);
    }

    #[test]
    fn bernoulli_matches_probability() {
        let (rate, _) = loss_rate(&LossModel::Bernoulli { p: 0.02 }, 200_000);
        assert!((rate - 0.02).abs() < 0.002, "{rate}");
    }

    #[test]
    fn gilbert_elliott_matches_stationary_mean_and_is_bursty() {
        let ge = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.2,
            loss_good: 0.0,
            loss_bad: 0.9,
        };
        let expected = ge.mean_loss();
        let (rate, longest) = loss_rate(&ge, 400_000);
        assert!(
            (rate - expected).abs() < 0.1 * expected,
            "{rate} vs {expected}"
        );
        let (_, bern_longest) = loss_rate(&LossModel::Bernoulli { p: expected }, 400_000);
        assert!(longest > bern_longest, "bursts {longest} vs {bern_longest}");
    }
}
