#!/usr/bin/env bash
# One client that fills every buffer netd lets it have, beside another
# client's transfer: the other's TCP stream and 64-byte request/response
# through the same netd with the greedy client idle and with it holding
# its whole budget, in one run.
#
# Usage (root; the release binary and preload library are built if
# missing):
#
#   sudo DURATION=3 ROUNDS=3 scripts/bench/memory_hog.sh
#
#   namespace N: `nagare netd --tap tap0 --addr 10.97.0.2/24` (its kernel
#                side 10.97.0.1/24) with the kernel's `nagare perf server`
#                and a silent server (python3: accepts, never reads) on
#                the kernel's side.
#   the greedy client: python3 under `nagare run --via SOCKET`, opening
#                connections to the silent server, each written to until
#                it would block, until netd refuses a connection
#                (ENOBUFS: its budget is spent) or CONNECTIONS are open;
#                then it holds them, idle.
#   the measured client: `nagare perf client --via SOCKET` to the kernel's
#                perf server, `--mode stream` and `--mode rr --len 64`.
#
# Rows, each the median of ROUNDS: the measured client alone, and while
# the greedy client holds its buffers; the last column is the second over
# the first. Under the table: what the greedy client opened and queued,
# and netd's accounts (`nagare stat`) while it held them.
#
# Traffic stays inside the namespace this script creates; everything it
# creates is removed on exit, and every process it starts is ended by its
# pid. Each client run is bounded by DURATION plus 20 s, the servers and
# the greedy client by the time all the runs may take.
#
# Environment: NAGARE (binary; default target/release/nagare), DURATION
# (seconds per run, 3), ROUNDS (3), CONNECTIONS (the greedy client's most,
# 2000), NETD_ARGS (more options for netd, e.g. "--client-memory 16777216").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-3}"
ROUNDS="${ROUNDS:-3}"
CONNECTIONS="${CONNECTIONS:-2000}"
TAG="mh$$"
NS_N="${TAG}-n"
WORK="$(mktemp -d /tmp/nagare-memory-hog.XXXXXX)"
SOCKET="$WORK/netd.sock"
NETD_PID=""
HOG_PID=""
PIDS=()
# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"
cleanup() {
    local rc=$?
    set +e
    stop_pid "$HOG_PID"
    for pid in ${PIDS[@]+"${PIDS[@]}"}; do
        stop_pid "$pid"
    done
    stop_pid "$NETD_PID"
    delete_namespaces "$NS_N"
    [[ $rc -eq 0 ]] || show_logs "$WORK" 20
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP devices" ip timeout python3 ss
find_nagare
find_preload

# The helpers' lifetime: both rounds of measurements with room to spare.
LIFETIME=$((4 * ROUNDS * (DURATION + 20) + 120))
make_namespaces "$NS_N"
# shellcheck disable=SC2086 # NETD_ARGS is a list of options
start_netd_on_tap "$NS_N" 10.97.0.2/24 10.97.0.1/24 "$SOCKET" "$WORK/netd.log" ${NETD_ARGS:-}
ip netns exec "$NS_N" "$NAGARE" perf server --port 5201 >"$WORK/perf-server.log" 2>&1 &
PIDS+=($!)
# The silent server: accepts and keeps every connection, reads nothing.
ip netns exec "$NS_N" timeout "$LIFETIME" python3 -c '
import socket, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("10.97.0.1", 7000)); l.listen(4096)
kept = []
while True:
    c, _ = l.accept()
    kept.append(c)
' >"$WORK/silent.log" 2>&1 &
PIDS+=($!)
# Both servers listening (bounded).
for _ in $(seq 1 100); do
    listening=$(ip netns exec "$NS_N" ss -Htln 2>/dev/null | grep -cE ':(5201|7000) ' || true)
    [[ $listening -ge 2 ]] && break
    sleep 0.1
done
[[ $listening -ge 2 ]] || { log "the servers did not start"; exit 1; }

# measure MODE: "gbit" or "tps" of one run of the measured client.
measure() {
    local args=(--mode "$1")
    [[ $1 == rr ]] && args+=(--len 64)
    timeout --kill-after=5 $((DURATION + 20)) ip netns exec "$NS_N" "$NAGARE" perf client --via "$SOCKET" \
        10.97.0.1 --port 5201 "${args[@]}" --time "$DURATION" --json --quiet 2>>"$WORK/client.log" |
        python3 -c '
import json, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
print("%.2f" % s["receiver"]["gbit_per_s"] if s["mode"] != "rr" else "%.1f" % (s["transactions_per_s"] / 1000))'
}

# median VALUES...
median() {
    printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# runs MODE: the median of the ROUNDS runs that gave a figure ("failed"
# if none did; each failure is said on stderr).
runs() {
    local values=() r v
    for r in $(seq 1 "$ROUNDS"); do
        if v=$(measure "$1") && [[ $v =~ ^[0-9.]+$ ]]; then
            values+=("$v")
        else
            log "memory_hog.sh: $1 run $r failed (see the client log)"
        fi
    done
    if [[ ${#values[@]} -eq 0 ]]; then
        echo failed
        return
    fi
    median "${values[@]}"
}

ALONE_STREAM=$(runs stream)
ALONE_RR=$(runs rr)

# The greedy client, through netd; it says what it holds, then idles.
ip netns exec "$NS_N" timeout "$LIFETIME" "$NAGARE" run --via "$SOCKET" -- python3 -c '
import socket, sys, time
conns, queued, why = [], 0, "the most asked for"
for i in range(int(sys.argv[1])):
    try:
        s = socket.create_connection(("10.97.0.1", 7000), timeout=5)
    except OSError as e:
        why = "the next connect: %s" % (e.strerror or type(e).__name__)
        break
    s.setblocking(False)
    chunk = b"x" * 65536
    while True:
        try:
            queued += s.send(chunk)
        except OSError:
            break
    conns.append(s)
print("holding %d connections, %d bytes written to them (%s)" % (len(conns), queued, why), flush=True)
time.sleep(int(sys.argv[2]))
' "$CONNECTIONS" "$LIFETIME" >"$WORK/hog.log" 2>&1 &
HOG_PID=$!
for _ in $(seq 1 600); do
    grep -q '^holding' "$WORK/hog.log" && break
    kill -0 "$HOG_PID" 2>/dev/null || { log "the greedy client exited"; exit 1; }
    sleep 0.1
done
grep -q '^holding' "$WORK/hog.log" || { log "the greedy client did not fill its buffers in 60 s"; exit 1; }
HOG_STAT=$(ip netns exec "$NS_N" "$NAGARE" stat --via "$SOCKET" 2>&1 | grep -E '^(client |memory |netd (memory_refused|buffers_shrunk) )' || true)

HOG_STREAM=$(runs stream)
HOG_RR=$(runs rr)
kill -0 "$HOG_PID" 2>/dev/null || { log "the greedy client ended before the measurements did"; exit 1; }

ratio() {
    python3 -c "
import sys
try:
    a, b = float(sys.argv[1]), float(sys.argv[2])
    print('%.2f' % (b / a) if a > 0 else '-')
except ValueError:
    print('-')" "$1" "$2"
}
echo "A client's transfer through netd alone and beside a client holding every buffer its budget allows; median of $ROUNDS runs of ${DURATION} s, load average $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| measured client | alone | beside the greedy client | beside / alone |"
echo "|---|---:|---:|---:|"
echo "| TCP stream (Gbit/s) | $ALONE_STREAM | $HOG_STREAM | $(ratio "$ALONE_STREAM" "$HOG_STREAM") |"
echo "| TCP request/response, 64 B (k/s) | $ALONE_RR | $HOG_RR | $(ratio "$ALONE_RR" "$HOG_RR") |"
echo
echo "The greedy client: $(head -n 1 "$WORK/hog.log")."
echo
echo "netd while it held them:"
echo
echo '```'
echo "$HOG_STAT" | cut -c1-240
echo '```'
