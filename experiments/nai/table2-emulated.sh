#!/usr/bin/env bash
# NAI Table 2 on real packets: `adaptnet send` workloads with ATP, NAI-TCP and NAI-MTCP1 over
# the link emulator (`adaptnet link`) running one of the traces `adaptnet exp nai-table2`
# simulates — by default the paper's synthetic trace, the one `--quick` runs — beside the
# simulator's table for the same trace and seed (`nai-table2`: ATP with the paper's estimator,
# the baselines) and its ATP with the runtime's default rate control (`nai-estimators`'
# ATP-default). Needs root (namespaces, TUN devices), a
# release build and python3.
#
#   experiments/nai/table2-emulated.sh [--trace NAME] [OUT] [SECONDS]
#
# --trace NAME (or TRACE=NAME) picks a trace of experiments/nai/table2.params: synthetic-5min
# (default), cellular-synth, or verizon-evdo (Verizon EVDO while driving, a Mahimahi trace
# read from $ADAPTNET_TRACES, default ../shared/traces). The simulator then runs that trace
# alone (seed 1, --quick) from a copy of the parameters in OUT/experiments.
# OUT (default out/nai-table2-emulated, or out/nai-table2-emulated-NAME for another trace)
# receives sim/ and sim-control/ (the simulator's runs and the trace), one directory per workload × transport
# (send's summary.json and the link's log), and table2-emulated.md. SECONDS (default 300, the
# paper's five minutes) is each workload's length; the trace is the one the simulator used
# (300 s). Runs go in parallel (JOBS, default 3), each on its own pair of namespaces: at
# 200 KB/s they load the machine little, and each link's emulator reports its own lateness in
# its log.
#
# Both ends wait PEER_TIMEOUT seconds (default 300) for a silent peer before ending a
# connection (`--peer-timeout-s`: ATP's silent timeout, kernel TCP's TCP_USER_TIMEOUT): the
# synthetic trace carries nothing from 150 s to 180 s, and with the runtime's default 8 s every
# connection, ATP's and kernel TCP's, would end there as if the peer had died. (60 s was not
# enough for kernel TCP: its retransmission timer, backed off through the stretch, next
# fired after the 60 s had run out, and two NAI-MTCP1 runs ended at 219 s.) The server's
# idle timeout outlasts the run: NAI-MTCPk keeps one TCP connection per level, and one that
# carries nothing (uniform's unused low level) would be closed after serve's default 60 s,
# taking the whole NAI-MTCPk connection with it.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRACE="${TRACE:-synthetic-5min}"
if [ "${1:-}" = "--trace" ]; then
  TRACE="${2:?--trace needs a name}"
  shift 2
fi
ADAPTNET="${ADAPTNET:-target/release/adaptnet}"
if [ "$TRACE" = synthetic-5min ]; then
  OUT="${1:-out/nai-table2-emulated}"
else
  OUT="${1:-out/nai-table2-emulated-$TRACE}"
fi
SECONDS_RUN="${2:-300}"
JOBS="${JOBS:-3}"
PEER_TIMEOUT="${PEER_TIMEOUT:-300}"
TRACES_DIR="${ADAPTNET_TRACES:-../shared/traces}"
WORKLOADS="${WORKLOADS:-uniform prioritised reversed filesystem overload random}"
TRANSPORTS="${TRANSPORTS:-atp nai-tcp nai-mtcp1}"
# (WORKLOADS and TRANSPORTS may be narrowed to rerun some cells; TABLE_WORKLOADS then names
# every workload the table should show.)

mkdir -p "$OUT"
if [ ! -f "$OUT/sim/table2-$TRACE.csv" ]; then
  # The simulator's --quick runs the first trace of the parameters: a copy holding only the
  # chosen trace (a file trace's path made absolute) runs that one.
  mkdir -p "$OUT/experiments/nai"
  python3 - experiments/nai/table2.params "$OUT/experiments/nai/table2.params" "$TRACE" \
    "$(realpath -m "$TRACES_DIR")" <<'PY'
import re, sys
src, dst, name, traces = sys.argv[1:]
blocks = re.split(r"(?m)^(?=\[)", open(src).read())
keep, found = [], False
for b in blocks:
    if b.startswith("[[traces]]"):
        if not re.search(r'(?m)^name = "%s"' % re.escape(name), b):
            continue
        found = True
        b = re.sub(r'(?m)^path = "\.\./shared/traces/', 'path = "%s/' % traces, b)
        b = b.replace("optional = true", "optional = false")
    keep.append(b)
if not found:
    sys.exit(f"no trace named {name} in {src}")
open(dst, "w").write("".join(keep))
# nai-estimators runs the same workloads with ATP's default control (the runtime's) too.
traces_only = "".join(b for b in keep if b.startswith("[[traces]]"))
open(dst.replace("table2.params", "estimators.params"), "w").write("seeds = [1]\n\n" + traces_only)
PY
  "$ADAPTNET" exp nai-table2 --quick --experiments "$OUT/experiments" --out "$OUT/sim" \
    >"$OUT/sim.log" 2>&1
fi
if [ ! -f "$OUT/sim-control/estimators-$TRACE.csv" ]; then
  "$ADAPTNET" exp nai-estimators --quick --experiments "$OUT/experiments" \
    --out "$OUT/sim-control" >"$OUT/sim-control.log" 2>&1
fi
trace_format=piecewise
trace="$OUT/sim/trace-$TRACE.piecewise"
if [ ! -f "$trace" ]; then
  trace_format=mahimahi
  trace="$OUT/sim/trace-$TRACE.mahimahi"
fi
[ -f "$trace" ] || { echo "no trace at $OUT/sim/trace-$TRACE.*" >&2; exit 1; }

run_one() {
  local w="$1" t="$2" name="emut2$$-$3"
  local dir="$OUT/$w-$t"
  mkdir -p "$dir"
  # testbed of experiments/nai/table2.params: the trace on the data direction (the sender is
  # on the emulated side, so its uplink), 610 KB/s back, 2 ms each way, 50-packet queues.
  "$ADAPTNET" link up "$name" --uplink-trace "$trace" --trace-format "$trace_format" \
    --downlink-mbps 4.997 --delay-ms 2 --queue-packets 50 --json >/dev/null
  ip netns exec "$name-far" "$ADAPTNET" serve --listen 10.250.0.1:7700 \
    -t $((SECONDS_RUN + 60)) --peer-timeout-s "$PEER_TIMEOUT" \
    --idle-timeout-s $((SECONDS_RUN + 120)) >"$dir/serve.log" 2>&1 &
  local server=$!
  sleep 1
  ip netns exec "$name" "$ADAPTNET" send --to 10.250.0.1:7700 --workload "$w" \
    --transport "$t" -t "$SECONDS_RUN" --seed 1 --peer-timeout-s "$PEER_TIMEOUT" --json \
    --out "$dir" >"$dir/report.json" \
    2>"$dir/send.log" || echo "send $w $t failed (see $dir/send.log)" >&2
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  cp "/run/adaptnet-link/$name.log" "$dir/link.log" 2>/dev/null || true
  "$ADAPTNET" link down "$name" >"$dir/link-summary.json" || true
}

# RUN=0: only rebuild the table from the runs already in OUT.
i=0
[ "${RUN:-1}" = 0 ] && WORKLOADS_RUN="" || WORKLOADS_RUN="$WORKLOADS"
for w in $WORKLOADS_RUN; do
  for t in $TRANSPORTS; do
    i=$((i + 1))
    run_one "$w" "$t" "$i" &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  done
done
wait

python3 - "$OUT" "${TABLE_WORKLOADS:-$WORKLOADS}" "$TRANSPORTS" "$TRACE" <<'PY'
import csv, json, sys, pathlib
out, workloads, transports = pathlib.Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3].split()
sim = {}
with open(out / "sim" / f"table2-{sys.argv[4]}.csv") as f:
    for row in csv.DictReader(f):
        sim[(row["workload"], row["priority"])] = row
# The simulator's ATP with the runtime's default rate control (nai-estimators' ATP-default).
control = {}
try:
    with open(out / "sim-control" / f"estimators-{sys.argv[4]}.csv") as f:
        for row in csv.DictReader(f):
            control[(row["workload"], row["priority"])] = row["ATP-default %"]
except OSError:
    pass
names = {"atp": "ATP", "nai-tcp": "NAI-TCP", "nai-mtcp1": "NAI-MTCP1", "nai-mtcp2": "NAI-MTCP2",
         "nai-mtcp3": "NAI-MTCP3"}
def heads(t):
    if t == "atp":
        return ["ATP emulated", "ATP sim (control)", "ATP sim (paper)"]
    return [f"{names[t]} emulated", f"{names[t]} sim"]
cols = [h for t in transports for h in heads(t)]
lines = ["| workload | priority | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
for w in workloads:
    reports = {}
    for t in transports:
        try:
            reports[t] = json.loads((out / f"{w}-{t}" / "report.json").read_text())
        except (OSError, ValueError):
            reports[t] = None
    levels = next((r["levels"] for r in reports.values() if r), [])
    seen = set()
    for i, level in enumerate(levels):
        if level["name"] in seen:
            continue
        seen.add(level["name"])
        if not any(r and i < len(r["levels"]) and r["levels"][i]["submitted"] for r in reports.values()):
            continue
        cells = []
        for t in transports:
            r = reports[t]
            if r and i < len(r["levels"]) and r["levels"][i]["submitted"]:
                lv = r["levels"][i]
                cells.append(f"{100 * lv['on_time'] / lv['submitted']:.1f}")
            else:
                cells.append("—")
            if t == "atp":
                cells.append(control.get((w, level["name"]), "—"))
            s = sim.get((w, level["name"]), {})
            cells.append(s.get(f"{names[t]} %", "—"))
        lines.append(f"| {w} | {level['name']} | " + " | ".join(cells) + " |")
(out / "table2-emulated.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
