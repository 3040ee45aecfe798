//! TCP actions applied through the environment-action hooks of the one TCP
//! ([`crate::tcp::Connection`]); no TCP variant is forked (papers/001 §4, §5.3, §5.4).

use super::actions::TcpAction;
use super::error::EnvError;
use crate::tcp::Connection;
use crate::time::Time;

impl TcpAction {
    /// Performs the action on `conn` at `now`.
    ///
    /// - `ResetTimers`: [`Connection::reset_rto`] (clears backoff, retransmits now);
    /// - `DupAcks(n)`: [`Connection::request_extra_acks`];
    /// - `DelayedAckTimer(d)`: [`Connection::set_delayed_ack`].
    /// - `DelayedAckCount(n)`: [`Connection::set_delayed_ack_count`];
    /// - `ReviseRtt(r)`: [`Connection::revise_rtt`];
    /// - `ReviseMss(m)`: [`Connection::set_mss`].
    pub fn apply(&self, now: Time, conn: &mut Connection) -> Result<(), EnvError> {
        match *self {
            TcpAction::ResetTimers => conn.reset_rto(now),
            TcpAction::DupAcks(n) => conn.request_extra_acks(n),
            TcpAction::DelayedAckTimer(d) => conn.set_delayed_ack(d),
            TcpAction::DelayedAckCount(n) => conn.set_delayed_ack_count(n),
            TcpAction::ReviseRtt(rtt) => conn.revise_rtt(rtt),
            TcpAction::ReviseMss(mss) => conn.set_mss(mss),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TcpConfig;
    use std::time::Duration;

    #[test]
    fn test_every_action_reaches_the_connection() {
        let config = TcpConfig::default();
        let mut conn = Connection::connect(config.clone(), 1, 2, 0, Connection::newreno(&config));
        let now = Time::ZERO;
        assert_eq!(TcpAction::ResetTimers.apply(now, &mut conn), Ok(()));
        assert_eq!(TcpAction::DupAcks(5).apply(now, &mut conn), Ok(()));
        let timer = TcpAction::DelayedAckTimer(Some(Duration::from_millis(400)));
        assert_eq!(timer.apply(now, &mut conn), Ok(()));
        assert_eq!(TcpAction::DelayedAckCount(3).apply(now, &mut conn), Ok(()));
        let rtt = Duration::from_millis(600);
        assert_eq!(TcpAction::ReviseRtt(rtt).apply(now, &mut conn), Ok(()));
        assert_eq!(conn.rtt().srtt(), Some(rtt));
        assert_eq!(conn.rtt().rttvar(), rtt / 2);
        assert_eq!(TcpAction::ReviseMss(536).apply(now, &mut conn), Ok(()));
    }
}
