#!/usr/bin/env bash
# Bulk throughput on loopback in separate processes: ATP (`adaptnet serve` + `adaptnet bulk
# --transport atp`, 64 KB messages) against quinn's own perf tool with `--no-protection`
# (QUIC without encryption: ATP encrypts nothing, so that is the fair peer). Runs alternate
# (ATP, quinn, ATP, quinn, …) so that both see the same machine; every run is one client and
# one server process, each timed by GNU time.
#
#   benches/quinn-perf/run.sh QUINN_PERF [RUNS] [SECONDS] [OUT]
#
# QUINN_PERF is the `quinn-perf` binary of quinn's `perf` crate, built with JSON output:
#
#   git clone https://github.com/quinn-rs/quinn && cd quinn
#   cargo build --release -p perf --no-default-features --features json-output
#   # → target/release/quinn-perf
#
# RUNS (default 8) runs of SECONDS (default 5) each per transport. ADAPTNET (default
# target/release/adaptnet, built if missing) overrides the adaptnet binary. OUT (default
# out/quinn-perf) receives runs.csv (one row per run) and summary.txt (the table printed).
#
# Reported per transport: Gbit/s min / median / max (the client's bytes over its run: for ATP
# the bytes of messages delivered, for quinn the bytes its client wrote to the stream, which
# runs ahead of what was acknowledged by at most the send window, a few MB of the GBs), CPU
# seconds per GB (user + system of both processes) and context switches per GB (voluntary +
# involuntary, both processes), and ATP's median over quinn's.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() {
  sed -n '2,/^set -e/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2
  exit 2
}
[ $# -ge 1 ] || usage
QUINN_PERF="$1"
RUNS="${2:-8}"
SECS="${3:-5}"
OUT="${4:-out/quinn-perf}"
ADAPTNET="${ADAPTNET:-target/release/adaptnet}"
[[ "$RUNS" =~ ^[1-9][0-9]*$ && "$SECS" =~ ^[1-9][0-9]*$ ]] || usage
[ -x "$QUINN_PERF" ] || { echo "no quinn-perf binary at $QUINN_PERF" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time; Debian: apt install time)" >&2; exit 2; }
if [ ! -x "$ADAPTNET" ]; then
  cargo build --release -p adaptnet-cli
  ADAPTNET=target/release/adaptnet
fi
mkdir -p "$OUT"
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# A free port pair on loopback (serve takes P and P+1).
port=$((20000 + RANDOM % 20000))
TIMEFMT='%U %S %w %c'

# Starts a server under GNU time in the background; sets server_pid to the server itself
# (time's child), which is what must be stopped so that time reports.
start_server() {
  local timefile="$1"
  shift
  /usr/bin/time -f "$TIMEFMT" -o "$timefile" "$@" >"$tmp/server.log" 2>&1 &
  local time_pid=$!
  for _ in $(seq 50); do
    server_pid="$(pgrep -P "$time_pid" || true)"
    [ -n "$server_pid" ] && break
    sleep 0.02
  done
  [ -n "$server_pid" ] || { echo "server did not start" >&2; cat "$tmp/server.log" >&2; exit 1; }
  sleep 0.5
  wait_for=$time_pid
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$wait_for" || true
  server_pid=""
}

# Prints "bytes seconds" of one client's run.
atp_run() {
  start_server "$tmp/s.time" "$ADAPTNET" serve --listen "127.0.0.1:$port" -t $((SECS + 30))
  /usr/bin/time -f "$TIMEFMT" -o "$tmp/c.time" \
    "$ADAPTNET" bulk --to "127.0.0.1:$port" --transport atp -t "$SECS" --json >"$tmp/c.json" 2>"$tmp/c.err"
  stop_server
  jq -r '.results[0] | "\(.bytes) \(.seconds)"' "$tmp/c.json"
}

quinn_run() {
  start_server "$tmp/s.time" "$QUINN_PERF" server --listen "127.0.0.1:$((port + 2))" --no-protection
  /usr/bin/time -f "$TIMEFMT" -o "$tmp/c.time" \
    "$QUINN_PERF" client "127.0.0.1:$((port + 2))" --no-protection --duration "$SECS" \
    --download-size 0 --upload-size 1G --json "$tmp/c.json" >"$tmp/c.out" 2>"$tmp/c.err"
  stop_server
  jq -r '[.intervals[].sum.bytes] | add as $b | "\($b) '"$SECS"'"' "$tmp/c.json"
}

echo "transport,run,bytes,seconds,gbit_per_s,cpu_s,ctx_switches" >"$OUT/runs.csv"
for run in $(seq "$RUNS"); do
  for t in atp quinn; do
    read -r bytes seconds < <("${t}_run")
    # user sys voluntary involuntary, for both processes.
    read -r cpu ctx < <(cat "$tmp/s.time" "$tmp/c.time" | grep -E '^[0-9.]+ [0-9.]+ [0-9]+ [0-9]+$' |
      awk '{cpu += $1 + $2; ctx += $3 + $4} END {print cpu, ctx}')
    gbps="$(awk -v b="$bytes" -v s="$seconds" 'BEGIN {printf "%.3f", b * 8 / s / 1e9}')"
    echo "$t,$run,$bytes,$seconds,$gbps,$cpu,$ctx" >>"$OUT/runs.csv"
    echo "run $run $t: $gbps Gbit/s, cpu $cpu s, $ctx context switches" >&2
  done
done

python3 - "$OUT/runs.csv" "$SECS" <<'PY' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(f"loopback bulk, separate processes, {sys.argv[2]} s runs")
print(f"{'transport':<28} {'runs':>4} {'min':>7} {'median':>7} {'max':>7} {'CPU s/GB':>9} {'ctx sw/GB':>10}")
medians = {}
for t, name in (("atp", "ATP (adaptnet serve/bulk)"), ("quinn", "quinn perf --no-protection")):
    rs = [r for r in rows if r["transport"] == t]
    g = [float(r["gbit_per_s"]) for r in rs]
    gb = sum(int(r["bytes"]) for r in rs) / 1e9
    cpu = sum(float(r["cpu_s"]) for r in rs) / gb
    ctx = sum(int(r["ctx_switches"]) for r in rs) / gb
    medians[t] = statistics.median(g)
    print(f"{name:<28} {len(g):>4} {min(g):>7.2f} {medians[t]:>7.2f} {max(g):>7.2f} {cpu:>9.3f} {ctx:>10.0f}")
    print(f"{'':<28} min/median {min(g) / medians[t]:.2f}")
print(f"ATP median / quinn median: {medians['atp'] / medians['quinn']:.2f}")
PY
