//! Tools on real networks: `adaptnet send` runs a Table-2-style message workload to an
//! `adaptnet serve` ([`super::serve`]) over ATP, NAI-TCP or NAI-MTCPk — one message interface
//! for all three ([`adaptnet_runtime::message`]) — shaped like iperf3: `-t` duration, a line
//! per second while running, `--json` output.

use adaptnet_core::Time;
use adaptnet_core::nai::app::{Ledger, MessageRecord, MessageSpec};
use adaptnet_core::nai::{
    MessageId, NaiError, NaiEvent, OnExpiry, Outcome, Priority, SendOptions, ServiceOrder,
};
use adaptnet_experiments::nai::params::{WorkloadParams, load};
use adaptnet_experiments::nai::table2::{PARAMS, Table2Params};
use adaptnet_experiments::nai::workloads::{level_name, messages};
use adaptnet_experiments::report::plot::line_chart_of;
use adaptnet_experiments::report::table::Table;
use adaptnet_runtime::SendError;
use adaptnet_runtime::message::{
    Connection, Endpoint, EndpointOptions, Transport, unspecified_for,
};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The messages of workload `name` (from `experiments/nai/table2.params`) or of a file holding
/// one `[[workloads]]` entry, cut to the first `duration`.
pub fn workload(
    experiments: &Path,
    name_or_file: &str,
    seed: u64,
    duration: Duration,
) -> Result<(WorkloadParams, Vec<MessageSpec>)> {
    let params: Table2Params = if Path::new(name_or_file).is_file() {
        #[derive(serde::Deserialize)]
        struct One {
            workloads: Vec<WorkloadParams>,
        }
        let text = std::fs::read_to_string(name_or_file)
            .with_context(|| format!("reading {name_or_file}"))?;
        let one: One = toml::from_str(&text).with_context(|| format!("parsing {name_or_file}"))?;
        let mut p: Table2Params = load(experiments, PARAMS)?;
        p.workloads = one.workloads;
        p
    } else {
        load(experiments, PARAMS)?
    };
    let names: Vec<&str> = params.workloads.iter().map(|w| w.name.as_str()).collect();
    let w = if Path::new(name_or_file).is_file() {
        params.workloads.first().cloned()
    } else {
        params
            .workloads
            .iter()
            .find(|w| w.name == name_or_file)
            .cloned()
    };
    let Some(w) = w else {
        bail!(
            "no workload {name_or_file:?}: known are {names:?}, or give a file with one [[workloads]] entry"
        );
    };
    let end = Time::ZERO + duration;
    let specs = messages(&w, seed)?
        .into_iter()
        .filter(|m| m.at < end)
        .collect();
    Ok((w, specs))
}

/// What one workload run over a real connection gave.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// Per level: (name, submitted, on time, late, expired, rejected, cancelled, abandoned).
    pub levels: Vec<LevelTally>,
    /// Message bytes delivered.
    pub delivered_bytes: u64,
    /// Wall-clock seconds from the first submission to the last outcome.
    pub seconds: f64,
    /// (seconds, planning estimate in bytes/s), once a second.
    pub estimate: Vec<(f64, f64)>,
    /// Every message of the workload, in submission order (written as `messages.csv`; not
    /// in the JSON summary, which stays one screen long).
    #[serde(skip)]
    pub messages: Vec<MessageRow>,
}

/// One message of a workload run: what was asked of it and what became of it, so that a
/// miss can be placed in time (after an outage, at the start, behind a large message).
#[derive(Clone, Debug, PartialEq)]
pub struct MessageRow {
    /// The message's id; `None` for a message never submitted (the connection ended first).
    pub id: Option<u64>,
    /// Priority level name.
    pub level: String,
    /// Bytes.
    pub size_bytes: u64,
    /// Seconds from the run's start to the submission (or to when it was due, if unsent).
    pub submitted_s: f64,
    /// Callback timer, milliseconds.
    pub timer_ms: Option<f64>,
    /// `on_time`, `late`, `expired`, `expired_early`, `rejected`, `cancelled`, `abandoned`,
    /// `no_outcome` (none came before the run's drain ended) or `unsent`.
    pub outcome: &'static str,
    /// For a delivered message with a timer: milliseconds before its deadline (negative:
    /// after it).
    pub margin_ms: Option<f64>,
    /// Seconds from the run's start to when the outcome reached the application.
    pub outcome_s: Option<f64>,
}

impl MessageRow {
    /// The CSV header matching [`MessageRow::csv`].
    pub const CSV_HEADER: &'static str =
        "id,level,size_bytes,submitted_s,timer_ms,outcome,margin_ms,outcome_s\n";

    /// The row as a CSV line (empty fields for `None`).
    pub fn csv(&self) -> String {
        let opt =
            |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
        format!(
            "{},{},{},{:.6},{},{},{},{}\n",
            self.id.map_or(String::new(), |i| i.to_string()),
            self.level,
            self.size_bytes,
            self.submitted_s,
            opt(self.timer_ms, 3),
            self.outcome,
            opt(self.margin_ms, 3),
            opt(self.outcome_s, 6),
        )
    }
}

/// Outcomes of one priority level.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LevelTally {
    /// Level name.
    pub name: String,
    /// Messages submitted.
    pub submitted: u64,
    /// Delivered before their timer.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Expired (early or at the deadline).
    pub expired: u64,
    /// Refused by admission control.
    pub rejected: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Connection ended first.
    pub abandoned: u64,
}

/// Runs `specs` on `conn` in wall-clock time: each message submitted at its time with its
/// priority and callback timer (discarded on expiry, as in the paper's experiments); waits
/// up to `drain` after the last submission for outcomes.
pub(crate) async fn run_workload(
    conn: &Connection,
    specs: &[MessageSpec],
    levels: u8,
    drain: Duration,
) -> Result<WorkloadReport> {
    let (report, lost) = run_workload_to_end(conn, specs, levels, drain).await?;
    match lost {
        Some(e) => Err(e).context("submitting a message"),
        None => Ok(report),
    }
}

/// [`run_workload`], but a connection that ends mid-run ends the run with its tally and the
/// reason instead of an error: the messages not yet submitted count as submitted and
/// abandoned (they could not be on time), the submitted ones keep their outcomes.
pub(crate) async fn run_workload_to_end(
    conn: &Connection,
    specs: &[MessageSpec],
    levels: u8,
    drain: Duration,
) -> Result<(WorkloadReport, Option<SendError>)> {
    let start = Instant::now();
    // Where the connection was lost: the first message not submitted, and why.
    let mut lost: Option<(usize, SendError)> = None;
    // One task per live message awaiting its outcome (bounded by the workload's messages).
    let mut pending: JoinSet<(MessageId, Outcome)> = JoinSet::new();
    let mut ledger = Ledger::default();
    let mut estimate = Vec::new();
    let mut next_sample = Duration::ZERO;
    let total = specs.len();
    // When each outcome reached this task, seconds from `start` (one entry per outcome).
    let mut arrived: HashMap<MessageId, f64> = HashMap::new();
    let at_time = |d: Duration| Time::ZERO + d;
    for (index, spec) in specs.iter().enumerate() {
        let due = Duration::from_nanos(spec.at.as_nanos());
        while start.elapsed() < due {
            // Sample the estimate and report progress once a second while waiting.
            if start.elapsed() >= next_sample {
                estimate.push((next_sample.as_secs_f64(), conn.bandwidth()));
                eprintln!(
                    "{:6.1} s  {:6} submitted  {:6} outcomes  estimate {:8.3} Mbit/s",
                    start.elapsed().as_secs_f64(),
                    ledger.messages().len(),
                    arrived.len(),
                    conn.bandwidth() * 8.0 / 1e6
                );
                next_sample += Duration::from_secs(1);
            }
            let wait = due
                .saturating_sub(start.elapsed())
                .min(next_sample.saturating_sub(start.elapsed()));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                Some(Ok((id, outcome))) = pending.join_next() => {
                    record_outcome(&mut ledger, &mut arrived, start, id, outcome);
                }
            }
        }
        let opts = SendOptions {
            priority: spec.priority,
            timer: spec.timer,
            on_expiry: OnExpiry::Discard,
        };
        let size = usize::try_from(spec.size_bytes).unwrap_or(usize::MAX);
        let now = at_time(start.elapsed());
        match conn.send(vec![0x5a; size], opts).await {
            Ok(h) => {
                let id = h.id();
                ledger.submitted(id, now, spec.size_bytes, &opts);
                pending.spawn(async move { (id, h.outcome().await) });
            }
            Err(SendError::Nai(NaiError::Rejected { id, reason })) => {
                ledger.submitted(id, now, spec.size_bytes, &opts);
                let outcome = Outcome::Rejected(reason);
                record_outcome(&mut ledger, &mut arrived, start, id, outcome);
            }
            Err(e @ SendError::ConnectionLost(_)) => {
                lost = Some((index, e));
                break;
            }
            Err(e) => return Err(e).context("submitting a message"),
        }
    }
    let unsent = lost
        .as_ref()
        .and_then(|&(index, _)| specs.get(index..))
        .unwrap_or_default();
    let total = total - unsent.len();
    let deadline = tokio::time::Instant::now() + drain;
    while arrived.len() < total {
        match tokio::time::timeout_at(deadline, pending.join_next()).await {
            Ok(Some(Ok((id, outcome)))) => {
                record_outcome(&mut ledger, &mut arrived, start, id, outcome);
            }
            _ => break,
        }
    }
    estimate.push((start.elapsed().as_secs_f64(), conn.bandwidth()));
    let mut report = tally(&ledger, levels, start.elapsed().as_secs_f64(), estimate);
    report.messages = message_rows(&ledger, &arrived, levels);
    for spec in unsent {
        if let Some(row) = report.levels.get_mut(usize::from(spec.priority.0)) {
            row.submitted += 1;
            row.abandoned += 1;
        }
        report.messages.push(MessageRow {
            id: None,
            level: level_name(spec.priority, levels).to_owned(),
            size_bytes: spec.size_bytes,
            submitted_s: Duration::from_nanos(spec.at.as_nanos()).as_secs_f64(),
            timer_ms: spec.timer.map(|t| t.as_secs_f64() * 1e3),
            outcome: OutcomeKind::Unsent.name(),
            margin_ms: None,
            outcome_s: None,
        });
    }
    Ok((report, lost.map(|(_, e)| e)))
}

/// Gives `ledger` a message's outcome and notes when it reached the application.
fn record_outcome(
    ledger: &mut Ledger,
    arrived: &mut HashMap<MessageId, f64>,
    start: Instant,
    id: MessageId,
    outcome: Outcome,
) {
    ledger.on_event(&NaiEvent::Outcome { id, outcome });
    arrived.insert(id, start.elapsed().as_secs_f64());
}

/// Every submitted message's row, in submission order (ids are handed out in that order).
fn message_rows(ledger: &Ledger, arrived: &HashMap<MessageId, f64>, levels: u8) -> Vec<MessageRow> {
    ledger
        .messages()
        .iter()
        .map(|(id, r)| {
            let margin_ms = match r.outcome {
                Some(Outcome::Delivered {
                    margin: Some(m), ..
                }) => Some(m.signed_secs() * 1e3),
                _ => None,
            };
            MessageRow {
                id: Some(id.0),
                level: level_name(r.priority, levels).to_owned(),
                size_bytes: r.size_bytes,
                submitted_s: (r.submitted - Time::ZERO).as_secs_f64(),
                timer_ms: r.timer.map(|t| t.as_secs_f64() * 1e3),
                outcome: OutcomeKind::of(r).name(),
                margin_ms,
                outcome_s: arrived.get(id).copied(),
            }
        })
        .collect()
}

/// What became of a message, as `messages.csv` names it and the per-level tally counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutcomeKind {
    OnTime,
    Late,
    Expired,
    ExpiredEarly,
    Rejected,
    Cancelled,
    Abandoned,
    /// No outcome came before the run's drain ended.
    NoOutcome,
    /// Never submitted: the connection ended first.
    Unsent,
}

impl OutcomeKind {
    /// The kind of a submitted message's outcome so far.
    fn of(r: &MessageRecord) -> OutcomeKind {
        match r.outcome {
            _ if r.on_time() => OutcomeKind::OnTime,
            Some(Outcome::Delivered { .. }) => OutcomeKind::Late,
            Some(Outcome::Expired { early: true }) => OutcomeKind::ExpiredEarly,
            Some(Outcome::Expired { early: false }) => OutcomeKind::Expired,
            Some(Outcome::Rejected(_)) => OutcomeKind::Rejected,
            Some(Outcome::Cancelled) => OutcomeKind::Cancelled,
            Some(Outcome::Abandoned) => OutcomeKind::Abandoned,
            None => OutcomeKind::NoOutcome,
        }
    }

    /// The name in `messages.csv`.
    fn name(self) -> &'static str {
        match self {
            OutcomeKind::OnTime => "on_time",
            OutcomeKind::Late => "late",
            OutcomeKind::Expired => "expired",
            OutcomeKind::ExpiredEarly => "expired_early",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::Cancelled => "cancelled",
            OutcomeKind::Abandoned => "abandoned",
            OutcomeKind::NoOutcome => "no_outcome",
            OutcomeKind::Unsent => "unsent",
        }
    }
}

fn tally(ledger: &Ledger, levels: u8, seconds: f64, estimate: Vec<(f64, f64)>) -> WorkloadReport {
    let mut rows: Vec<LevelTally> = (0..levels)
        .map(|l| LevelTally {
            name: level_name(Priority(l), levels).to_owned(),
            ..LevelTally::default()
        })
        .collect();
    let mut delivered_bytes = 0;
    for r in ledger.messages().values() {
        let Some(t) = rows.get_mut(usize::from(r.priority.0)) else {
            continue;
        };
        t.submitted += 1;
        match OutcomeKind::of(r) {
            OutcomeKind::OnTime => t.on_time += 1,
            OutcomeKind::Late => t.late += 1,
            OutcomeKind::Expired | OutcomeKind::ExpiredEarly => t.expired += 1,
            OutcomeKind::Rejected => t.rejected += 1,
            OutcomeKind::Cancelled => t.cancelled += 1,
            OutcomeKind::Abandoned | OutcomeKind::NoOutcome | OutcomeKind::Unsent => {
                t.abandoned += 1
            }
        }
        if matches!(r.outcome, Some(Outcome::Delivered { .. })) {
            delivered_bytes += r.size_bytes;
        }
    }
    WorkloadReport {
        levels: rows,
        delivered_bytes,
        seconds,
        estimate,
        messages: Vec::new(),
    }
}

/// The per-level table of a report.
pub fn report_table(r: &WorkloadReport) -> Table {
    let mut t = Table::new([
        "priority",
        "messages",
        "on time",
        "on time %",
        "late",
        "expired",
        "rejected",
        "cancelled",
        "no outcome",
    ]);
    for l in &r.levels {
        let pct = if l.submitted == 0 {
            "-".to_owned()
        } else {
            format!("{:.1}", 100.0 * l.on_time as f64 / l.submitted as f64)
        };
        t.row([
            l.name.clone(),
            l.submitted.to_string(),
            l.on_time.to_string(),
            pct,
            l.late.to_string(),
            l.expired.to_string(),
            l.rejected.to_string(),
            l.cancelled.to_string(),
            l.abandoned.to_string(),
        ]);
    }
    t
}

/// Writes `summary.json`, `levels.csv`, `messages.csv` (one row per message, see
/// [`MessageRow`]), `estimate.csv` and `estimate.svg` into `out`.
pub fn write_report(r: &WorkloadReport, out: &Path) -> Result<()> {
    let mut csv = String::from("seconds,estimate_bytes_per_s\n");
    for (t, e) in &r.estimate {
        csv.push_str(&format!("{t:.3},{e:.1}\n"));
    }
    let mbit: Vec<(f64, f64)> = r
        .estimate
        .iter()
        .map(|(t, e)| (*t, e * 8.0 / 1e6))
        .collect();
    let svg = line_chart_of(
        "ATP bandwidth estimate (planning rate)",
        "time (s)",
        "Mbit/s",
        &[("estimate", mbit)],
    )?;
    super::write_files(
        out,
        &[
            ("summary.json".into(), serde_json::to_vec_pretty(r)?),
            ("levels.csv".into(), report_table(r).to_csv().into_bytes()),
            (
                "messages.csv".into(),
                messages_csv(&r.messages).into_bytes(),
            ),
            ("estimate.csv".into(), csv.into_bytes()),
            ("estimate.svg".into(), svg.into_bytes()),
        ],
    )
}

/// `messages.csv`: the header and one line per row.
pub fn messages_csv(rows: &[MessageRow]) -> String {
    let mut csv = String::from(MessageRow::CSV_HEADER);
    for r in rows {
        csv.push_str(&r.csv());
    }
    csv
}

/// Options of `adaptnet send`.
pub struct SendArgs<'a> {
    /// The server, `HOST:PORT`.
    pub to: &'a str,
    /// Workload name or file.
    pub workload: &'a str,
    /// Transport.
    pub transport: Transport,
    /// Run length.
    pub duration: Duration,
    /// Workload seed (phases).
    pub seed: u64,
    /// Print JSON instead of a table.
    pub json: bool,
    /// Output directory.
    pub out: &'a Path,
    /// Experiments directory.
    pub experiments: &'a Path,
    /// Kernel TCP's congestion control for the baselines (`None`: the host's default).
    pub congestion: Option<&'a str>,
    /// How long the server may leave the connection unanswered before it ends (`None`: the
    /// runtime's default).
    pub peer_timeout: Option<Duration>,
    /// ATP's order between priority levels (`None`: the library's default).
    pub priorities: Option<ServiceOrder>,
    /// ATP's lending share under the slack order, percent (`None`: the library's default).
    pub lend_at_percent: Option<u8>,
}

/// Parses `--priorities`: `strict` or `slack`.
pub(crate) fn parse_priorities(s: &str) -> Result<ServiceOrder, String> {
    match s {
        "strict" => Ok(ServiceOrder::Strict),
        "slack" => Ok(ServiceOrder::Slack),
        _ => Err(format!("{s:?}: expected strict or slack")),
    }
}

/// Lets a connection of `o` wait `t` for a silent peer before ending it as dead: ATP's
/// `silent_timeout` (and its idle timeout, at least as long, since a side that hears nothing
/// would otherwise give up first) and kernel TCP's `TCP_USER_TIMEOUT`. A path that is up but
/// carries nothing cannot be told from a dead peer, so riding out an outage of the link takes
/// a timeout longer than the outage.
pub(crate) fn set_peer_timeout(o: &mut EndpointOptions, t: Duration) {
    if let Some(atp) = o.atp_mut() {
        let l = &mut atp.core.liveness;
        l.silent_timeout = t;
        l.idle_timeout = l.idle_timeout.max(t);
    }
    if let Some(b) = o.baseline_mut() {
        b.peer_timeout = t;
    }
}

/// `adaptnet send --to ADDR --workload NAME|FILE`.
pub fn send(a: &SendArgs<'_>) -> Result<ExitCode> {
    let (w, specs) = workload(a.experiments, a.workload, a.seed, a.duration)?;
    let report = runtime()?.block_on(async {
        let to = super::addr::resolve(a.to).await?;
        let mut options = EndpointOptions::client(a.transport).with_levels(w.levels);
        if let Some(t) = a.peer_timeout {
            set_peer_timeout(&mut options, t);
        }
        if let Some(order) = a.priorities {
            let Some(atp) = options.atp_mut() else {
                bail!("--priorities applies to ATP; the baselines order levels by connection");
            };
            atp.core.atp.nai.service = order;
        }
        if let Some(percent) = a.lend_at_percent {
            let lends = a.priorities.unwrap_or_default() == ServiceOrder::Slack;
            let Some(atp) = options.atp_mut().filter(|_| lends) else {
                bail!("--lend-at-percent applies to ATP under --priorities slack");
            };
            atp.core.atp.nai.lend_at_percent = percent;
        }
        if let Some(b) = options.baseline_mut() {
            let cc = super::bulk::congestion_in_use(a.congestion)?;
            eprintln!("adaptnet: kernel TCP runs congestion control {cc}");
            b.congestion = a.congestion.map(str::to_owned);
        } else if a.congestion.is_some() {
            bail!("--congestion applies to kernel TCP (nai-tcp, nai-mtcpK); ATP has its own");
        }
        let endpoint =
            Endpoint::bind(unspecified_for(to), options).context("binding the client endpoint")?;
        let conn = if a.transport == Transport::Atp {
            super::addr::connect_udp(to, "atp", endpoint.connect(to)).await?
        } else {
            endpoint
                .connect(to)
                .await
                .with_context(|| format!("connecting ({}) to {to}", a.transport))?
        };
        eprintln!(
            "adaptnet: workload {:?}: {} messages over {:.0} s to {to} ({})",
            w.name,
            specs.len(),
            a.duration.as_secs_f64(),
            a.transport
        );
        let r = run_workload(&conn, &specs, w.levels, Duration::from_secs(30)).await?;
        conn.close(Duration::from_secs(2)).await;
        endpoint.close();
        endpoint.wait_idle().await;
        anyhow::Ok(r)
    })?;
    print_report(&report, a.json)?;
    write_report(&report, a.out)?;
    eprintln!("adaptnet: wrote {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// Prints a report as a table (with throughput) or JSON.
pub fn print_report(r: &WorkloadReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        print!("{}", report_table(r).render());
        println!(
            "delivered {:.2} MB in {:.1} s ({:.3} Mbit/s); final estimate {:.3} Mbit/s",
            r.delivered_bytes as f64 / 1e6,
            r.seconds,
            r.delivered_bytes as f64 * 8.0 / 1e6 / r.seconds.max(1e-9),
            r.estimate.last().map_or(0.0, |e| e.1 * 8.0 / 1e6)
        );
    }
    Ok(())
}

/// The demo's real part: an ATP server and client in this process on loopback UDP, running
/// a short two-priority workload (4 KB urgent messages with 200 ms timers every 50 ms under
/// 256 KB bulk messages with 2 s timers every 100 ms).
pub fn demo_loopback(out: &Path) -> Result<()> {
    let specs = demo_specs(Duration::from_secs(3));
    let report = runtime()?.block_on(async {
        let loopback: SocketAddr = "127.0.0.1:0".parse()?;
        let server = Endpoint::bind(loopback, EndpointOptions::server(Transport::Atp))?;
        let client = Endpoint::bind(loopback, EndpointOptions::client(Transport::Atp))?;
        let conn = client.connect(server.local_addr()).await?;
        let incoming = server.accept().await.context("server stopped")?;
        tokio::spawn(async move { while incoming.recv().await.is_ok() {} });
        let r = run_workload(&conn, &specs, 2, Duration::from_secs(10)).await?;
        conn.close(Duration::from_secs(1)).await;
        for endpoint in [&client, &server] {
            endpoint.close();
            endpoint.wait_idle().await;
        }
        anyhow::Ok(r)
    })?;
    println!("\nreal ATP over loopback UDP (3 s, urgent 4 KB / 200 ms under bulk 256 KB / 2 s):");
    print_report(&report, false)?;
    write_report(&report, &out.join("loopback"))?;
    Ok(())
}

fn demo_specs(span: Duration) -> Vec<MessageSpec> {
    let mut specs = Vec::new();
    let mut t = Duration::from_millis(100);
    while t < span {
        specs.push(MessageSpec {
            at: Time::ZERO + t,
            size_bytes: 4096,
            priority: Priority(0),
            timer: Some(Duration::from_millis(200)),
        });
        if t.as_millis().is_multiple_of(100) {
            specs.push(MessageSpec {
                at: Time::ZERO + t,
                size_bytes: 256 << 10,
                priority: Priority(1),
                timer: Some(Duration::from_secs(2)),
            });
        }
        t += Duration::from_millis(50);
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_core::nai::DeadlineMargin;

    #[test]
    fn every_message_gets_a_row_with_its_outcome_margin_and_arrival() {
        let mut ledger = Ledger::default();
        let opts = |p: u8| SendOptions {
            priority: Priority(p),
            timer: Some(Duration::from_millis(100)),
            on_expiry: OnExpiry::Discard,
        };
        for (id, at_ms) in [(0, 0), (1, 10), (2, 20), (3, 30)] {
            ledger.submitted(
                MessageId(id),
                Time::from_millis(at_ms),
                1000,
                &opts((id % 2) as u8),
            );
        }
        let delivered = |margin| Outcome::Delivered {
            at: Time::ZERO,
            margin: Some(margin),
        };
        let mut arrived = HashMap::new();
        for (id, outcome) in [
            (
                0,
                delivered(DeadlineMargin::Early(Duration::from_millis(5))),
            ),
            (1, delivered(DeadlineMargin::Late(Duration::from_millis(3)))),
            (2, Outcome::Expired { early: true }),
        ] {
            ledger.on_event(&NaiEvent::Outcome {
                id: MessageId(id),
                outcome,
            });
            arrived.insert(MessageId(id), 0.5 + id as f64);
        }
        let rows = message_rows(&ledger, &arrived, 2);
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.id, r.outcome, r.margin_ms.map(f64::round), r.outcome_s))
            .collect();
        assert_eq!(
            got,
            [
                (Some(0), "on_time", Some(5.0), Some(0.5)),
                (Some(1), "late", Some(-3.0), Some(1.5)),
                (Some(2), "expired_early", None, Some(2.5)),
                (Some(3), "no_outcome", None, None),
            ]
        );
        assert_eq!(rows[1].submitted_s, 0.010);
        assert_eq!(
            messages_csv(&rows[3..]),
            format!(
                "{}3,{},1000,0.030000,100.000,no_outcome,,\n",
                MessageRow::CSV_HEADER,
                rows[3].level
            )
        );
    }

    #[test]
    fn peer_timeout_reaches_atps_liveness_and_kernel_tcps_user_timeout() {
        let t = Duration::from_secs(60);
        let mut atp = EndpointOptions::client(Transport::Atp);
        set_peer_timeout(&mut atp, t);
        let l = &atp.atp_mut().expect("ATP options").core.liveness;
        assert_eq!(l.silent_timeout, t);
        // The side that hears nothing must not give up first on its idle timeout.
        assert!(l.idle_timeout >= t, "idle {:?}", l.idle_timeout);
        assert!(l.keepalive < l.idle_timeout);

        let mut tcp = EndpointOptions::client(Transport::NaiTcp);
        set_peer_timeout(&mut tcp, t);
        assert_eq!(tcp.baseline_mut().expect("baseline").peer_timeout, t);
    }

    #[test]
    fn a_short_peer_timeout_keeps_a_longer_idle_timeout() {
        let mut atp = EndpointOptions::client(Transport::Atp);
        let idle = atp
            .atp_mut()
            .expect("ATP options")
            .core
            .liveness
            .idle_timeout;
        set_peer_timeout(&mut atp, Duration::from_secs(2));
        let l = &atp.atp_mut().expect("ATP options").core.liveness;
        assert_eq!(l.silent_timeout, Duration::from_secs(2));
        assert_eq!(l.idle_timeout, idle);
    }
}
