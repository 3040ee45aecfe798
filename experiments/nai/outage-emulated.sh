#!/usr/bin/env bash
# One Table 2 workload across a stretch of zero rate on the sender's direction of an emulated
# link (`adaptnet link`), the return direction left up — the synthetic trace's 150-180 s in
# small: what a connection does while the path is up but carries nothing one way, and how
# fast it is back once the rate returns. Needs root (namespaces, TUN devices) and a release
# build.
#
#   experiments/nai/outage-emulated.sh [OUT]
#
# TRANSPORT (default atp), WORKLOAD (uniform), RATE_KBYTES (200 KB/s: the trace's rate around
# the stretch), START (8 s), GAP (15 s of zero rate), RUN_SECONDS (40), PEER_TIMEOUT (seconds a
# silent peer is waited for, default 60; `default` keeps the runtime's 8 s), LINK_NAME (the
# link's name, default emut2-outage-PID) override.
# OUT (default out/nai-outage-emulated) receives send's report and per-second estimate, both
# ends' logs, the link's per-second log, its packet captures (pcap/), and outage.txt: per
# second, the estimate send printed, the packets and bytes the link delivered each way, and
# the bytes the sender offered to its direction; then, for the stretch of zero rate, what the
# sender sent into it by kind (DATA, PROBE — the filler's trains and pings —, PING, ...) and
# how many of its PROBE datagrams were full-size.
set -euo pipefail
cd "$(dirname "$0")/../.."
ADAPTNET="${ADAPTNET:-target/release/adaptnet}"
OUT="${1:-out/nai-outage-emulated}"
TRANSPORT="${TRANSPORT:-atp}"
WORKLOAD="${WORKLOAD:-uniform}"
RATE_KBYTES="${RATE_KBYTES:-200}"
START="${START:-8}"
GAP="${GAP:-15}"
SECONDS_RUN="${RUN_SECONDS:-40}"
PEER_TIMEOUT="${PEER_TIMEOUT:-60}"

mkdir -p "$OUT"
rate=$((RATE_KBYTES * 1024))
printf '0 %d\n%d 0\n%d %d\n' "$rate" "$START" $((START + GAP)) "$rate" >"$OUT/trace.piecewise"
opt=()
[ "$PEER_TIMEOUT" = default ] || opt=(--peer-timeout-s "$PEER_TIMEOUT")
name="${LINK_NAME:-emut2-outage-$$}"
rm -rf "$OUT/pcap"
mkdir -p "$OUT/pcap"
# The captures' clock starts with the link: the time just before it comes up (within a few
# milliseconds) places their packets in the trace's seconds.
epoch=$(date +%s.%N)
"$ADAPTNET" link up "$name" --uplink-trace "$OUT/trace.piecewise" --trace-format piecewise \
  --downlink-mbps 4.997 --delay-ms 2 --queue-packets 50 --pcap "$OUT/pcap" --json >/dev/null
cleanup() {
  "$ADAPTNET" link down "$name" >"$OUT/link-summary.json" 2>/dev/null || true
}
trap cleanup EXIT
ip netns exec "$name-far" "$ADAPTNET" serve --listen 10.250.0.1:7700 \
  -t $((SECONDS_RUN + 20)) --idle-timeout-s $((SECONDS_RUN + 60)) "${opt[@]}" \
  >"$OUT/serve.log" 2>&1 &
server=$!
sleep 1
ip netns exec "$name" "$ADAPTNET" send --to 10.250.0.1:7700 --workload "$WORKLOAD" \
  --transport "$TRANSPORT" -t "$SECONDS_RUN" --seed 1 "${opt[@]}" --json --out "$OUT" \
  >"$OUT/report.json" 2>"$OUT/send.log" || echo "send failed: $(tail -1 "$OUT/send.log")" >&2
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
cp "/run/adaptnet-link/$name.log" "$OUT/link.log" 2>/dev/null || true

python3 - "$OUT" "$START" "$GAP" "$epoch" <<'PY'
import json, re, struct, sys, pathlib
out, start, gap = pathlib.Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
epoch = float(sys.argv[4])
# The sender's packets (source 10.250.0.2) in the emulated side's capture: (seconds since
# the link came up, IP bytes, kind by the SPP / session type byte of the UDP payload).
KINDS = {1: "DATA", 2: "CANCEL", 3: "ACK", 4: "PROBE", 5: "REPORT", 6: "ACK", 0x24: "PING"}
sent = []
try:
    cap = (out / "pcap" / "emulated.pcap").read_bytes()
except OSError:
    cap = b""
pos = 24
while pos + 16 <= len(cap):
    sec, nsec, incl, orig = struct.unpack_from("<IIII", cap, pos)
    ip = cap[pos + 16:pos + 16 + incl]
    pos += 16 + incl
    if len(ip) < 20 or ip[0] >> 4 != 4 or ip[12:16] != bytes([10, 250, 0, 2]):
        continue
    ihl = (ip[0] & 15) * 4
    payload = ip[ihl + 8:] if ip[9] == 17 else b""
    kind = KINDS.get(payload[1], "other") if len(payload) > 1 else "other"
    sent.append((sec + nsec / 1e9 - epoch, orig, kind))
offered = {}
for t, n, _ in sent:
    offered[int(t) + 1] = offered.get(int(t) + 1, 0) + n
est = {}
for line in (out / "send.log").read_text().splitlines():
    m = re.match(r"\s*([0-9.]+) s .*estimate\s+([0-9.]+) Mbit/s", line)
    if m:
        est[int(float(m.group(1)))] = float(m.group(2))
rows = ["second  estimate_kbit/s  up_packets  up_bytes  down_packets  down_bytes  up_offered_bytes"]
for line in (out / "link.log").read_text().splitlines():
    try:
        s = json.loads(line)["second"]
    except (ValueError, KeyError):
        continue
    t, u, d = s["t_s"], s["uplink"], s["downlink"]
    mark = " (zero rate)" if start < t <= start + gap else ""
    e = est.get(t)
    rows.append(f"{t:6d}  {e * 1000 if e is not None else float('nan'):15.1f}  "
                f"{u['delivered_packets']:10d}  {u['delivered_bytes']:8d}  "
                f"{d['delivered_packets']:12d}  {d['delivered_bytes']:10d}  "
                f"{offered.get(t, 0):16d}{mark}")
dead = [(t, n, k) for t, n, k in sent if start <= t < start + gap]
if sent:
    rows.append(f"into the zero-rate direction ({start:g}-{start + gap:g} s): "
                f"{len(dead)} packets, {sum(n for _, n, _ in dead)} bytes "
                f"({sum(n for _, n, _ in dead) / gap:.0f} B/s)")
    for kind in sorted({k for _, _, k in dead}):
        ps = [(t, n) for t, n, k in dead if k == kind]
        rows.append(f"  {kind}: {len(ps)} packets, {sum(n for _, n in ps)} bytes, "
                    f"{sum(1 for _, n in ps if n >= 1000)} of them full-size "
                    f"({sum(1 for t, n in ps if n >= 1000 and t >= start + 1)} after its first second)")
try:
    r = json.loads((out / "report.json").read_text())
    for lv in r["levels"]:
        if lv["submitted"]:
            rows.append(f"{lv['name']}: {lv['on_time']} of {lv['submitted']} on time")
except (OSError, ValueError):
    rows.append("no report (the connection ended; see send.log)")
(out / "outage.txt").write_text("\n".join(rows) + "\n")
print("\n".join(rows))
PY
