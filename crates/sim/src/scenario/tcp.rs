//! Validating a `tcp` flow's options into a [`TcpConfig`] (also used by `tcp-cm` flows).

use super::fields::*;
use super::schema::{InitialWindowSpec, TcpFlowSpec};
use super::{FlowType, ScenarioError};
use adaptnet_core::cc::InitialWindow;
use adaptnet_core::rtt::RtoConfig;
use adaptnet_core::tcp::{RecoverAfterRto, TcpConfig};

pub(super) fn tcp_flow(ctx: &Ctx, field: &str, s: &TcpFlowSpec) -> Result<FlowType, ScenarioError> {
    let mut config = TcpConfig::default();
    if let Some(mss) = s.mss {
        if !(64..=9000).contains(&mss) {
            return Err(ctx.invalid(
                format!("{field}.mss"),
                format!("must be in 64..=9000, got {mss}"),
            ));
        }
        config.mss = mss;
    }
    if let Some(ms) = s.delayed_ack_ms {
        let ms = time_ms(ctx, &format!("{field}.delayed_ack_ms"), ms, false)?;
        if ms > 500.0 {
            return Err(ctx.invalid(
                format!("{field}.delayed_ack_ms"),
                "RFC 5681 §4.2 caps the delayed-ACK timeout at 500 ms",
            ));
        }
        config.delayed_ack = Some(secs(ms / 1e3));
    }
    if let Some(ms) = s.rto_min_ms {
        let ms = time_ms(ctx, &format!("{field}.rto_min_ms"), ms, false)?;
        config.rto = RtoConfig {
            min: secs(ms / 1e3),
            ..config.rto
        };
    }
    if let Some(b) = s.recv_buffer_bytes {
        if b < u64::from(config.mss) {
            return Err(ctx.invalid(
                format!("{field}.recv_buffer_bytes"),
                "must hold at least one segment",
            ));
        }
        config.recv_buffer = b;
    }
    if let Some(iw) = &s.initial_window {
        config.initial_window = initial_window(ctx, &format!("{field}.initial_window"), iw)?;
    }
    config.limited_transmit = s.limited_transmit.unwrap_or(false);
    config.sack = s.sack.unwrap_or(false);
    config.timestamps = s.timestamps.unwrap_or(false);
    config.recover_after_rto = match s.recover_after_rto.as_deref() {
        None | Some("rfc6582") => RecoverAfterRto::Rfc6582,
        Some("reno") => RecoverAfterRto::Reno,
        Some(other) => {
            return Err(ctx.invalid(
                format!("{field}.recover_after_rto"),
                format!("must be \"rfc6582\" or \"reno\", got {other:?}"),
            ));
        }
    };
    if s.bytes == Some(0) {
        return Err(ctx.invalid(format!("{field}.bytes"), "must be at least 1"));
    }
    Ok(FlowType::Tcp {
        bytes: s.bytes,
        config,
    })
}

fn initial_window(
    ctx: &Ctx,
    field: &str,
    spec: &InitialWindowSpec,
) -> Result<InitialWindow, ScenarioError> {
    match spec {
        InitialWindowSpec::Name(n) if n == "rfc3390" => Ok(InitialWindow::Rfc3390),
        InitialWindowSpec::Name(n) if n == "iw10" => Ok(InitialWindow::Iw10),
        InitialWindowSpec::Segments(n) if (1..=1000).contains(n) => {
            Ok(InitialWindow::Segments(u32::try_from(*n).unwrap_or(1)))
        }
        InitialWindowSpec::Name(n) => Err(ctx.invalid(
            field,
            format!("unknown initial window {n:?}; use \"rfc3390\", \"iw10\" or a segment count"),
        )),
        InitialWindowSpec::Segments(n) => {
            Err(ctx.invalid(field, format!("must be 1..=1000 segments, got {n}")))
        }
    }
}
