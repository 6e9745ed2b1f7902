#!/usr/bin/env bash
# CPU time per 64-byte TCP request/response, by role, through netd and on
# Linux, in one run: where a transaction's cost goes, and so how far
# request/response through netd can go on this machine.
#
# Usage (root; the binary is built if missing):
#
#   sudo NAGARE=target/release/nagare DURATION=5 CLIENTS="1 5" scripts/bench/rr_cost.sh
#
# For each client count N, N `nagare perf client --mode rr --len 64`
# processes run at once, each against a kernel `nagare perf server` of its
# own, first through one `nagare netd` (PLACEMENT, default inline) on a
# TAP, then kernel to kernel over a veth pair. Over the middle of each
# test (from 1 s after the start to 1 s before the end) it reads the CPU
# time of every process (/proc/PID/stat, user and system: the kernel's
# network processing done in a process's context counts as that
# process's) and of the whole machine (/proc/stat, every CPU, all but
# idle and iowait), and prints a markdown table of microseconds of CPU
# per transaction for each role and the whole machine, with the
# transactions/s in all.
#
#   namespace N: netd on tap0 (10.97.0.2/24), kernel side 10.97.0.1/24
#                with the perf servers; clients `perf client --via`.
#   namespaces B and C: veth pair 10.98.0.1/24 <-> 10.98.0.2/24; kernel
#                perf clients in B, servers in C.
#
# Needs root, ip and python3. Traffic stays inside the namespaces
# this script creates; everything it creates is removed on exit, also on
# failure or Ctrl-C, and every process it starts is ended by its pid. Each
# test is bounded by DURATION plus 20 s. The "netd" and "clients" columns
# include their polling: a loop that polls while it waits is charged the
# CPU time it polled.
#
# Environment: NAGARE (binary), DURATION (seconds per test, at least 3;
# default 5), CLIENTS (client counts, each 1 to 50; default "1 5"),
# PLACEMENT (split, single or inline; default inline).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"
DURATION="${DURATION:-5}"
CLIENTS="${CLIENTS:-1 5}"
PLACEMENT="${PLACEMENT:-inline}"
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 3 ]] || { echo "DURATION must be a number of seconds, at least 3" >&2; exit 1; }
parse_counts CLIENTS "$CLIENTS" 50
case "$PLACEMENT" in
    split | single | inline) ;;
    *) echo "PLACEMENT must be split, single or inline" >&2; exit 1 ;;
esac

TAG="rc$$"
NS_N="${TAG}-n"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
BASE_PORT=5201
WORK="$(mktemp -d /tmp/nagare-rr-cost.XXXXXX)"
SOCKET="$WORK/netd.sock"
NETD_PID=""
SERVER_PIDS=()
CLIENT_PIDS=()


stop_all() {
    local pid
    for pid in "${CLIENT_PIDS[@]}" "${SERVER_PIDS[@]}"; do
        stop_pid "$pid"
    done
    CLIENT_PIDS=()
    SERVER_PIDS=()
}

cleanup() {
    local rc=$?
    set +e
    stop_all
    stop_pid "$NETD_PID"
    delete_namespaces "$NS_N" "$NS_B" "$NS_C"
    [[ $rc -eq 0 ]] || show_logs "$WORK" 20
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP, veth" ip python3
find_nagare

make_namespaces "$NS_N" "$NS_B" "$NS_C"
make_veth "$TAG" "$NS_B" 10.98.0.1/24 "$NS_C" 10.98.0.2/24
start_netd_on_tap "$NS_N" 10.97.0.2/24 10.97.0.1/24 "$SOCKET" "$WORK/netd.log" --placement "$PLACEMENT"

# snapshot PID...: "PID TICKS" per process (user and system), then
# "machine TICKS" (every CPU, all but idle and iowait).
snapshot() {
    local pid
    for pid in "$@"; do
        # Fields 14 and 15 of /proc/PID/stat (utime, stime), after the
        # command name in parentheses.
        if [[ -r /proc/$pid/stat ]]; then
            echo "$pid $(sed -E 's/^.*\) //' "/proc/$pid/stat" | awk '{print $12 + $13}')"
        fi
    done
    awk '/^cpu /{print "machine", $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

# measure PATH N: runs N servers and N clients on PATH (netd or linux);
# appends "PATH N tps netd servers clients machine" (µs per transaction)
# to the results.
measure() {
    local path=$1 n=$2 i server_ns client_ns target via=()
    case $path in
        netd) server_ns=$NS_N; client_ns=$NS_N; target=10.97.0.1; via=(--via "$SOCKET") ;;
        linux) server_ns=$NS_C; client_ns=$NS_B; target=10.98.0.2 ;;
    esac
    for i in $(seq 1 "$n"); do
        ip netns exec "$server_ns" "$NAGARE" perf server --port $((BASE_PORT + i)) >"$WORK/server-$i.log" 2>&1 &
        SERVER_PIDS+=($!)
    done
    for i in $(seq 1 "$n"); do
        for _ in $(seq 1 50); do
            grep -q listening "$WORK/server-$i.log" 2>/dev/null && break
            sleep 0.1
        done
    done
    for i in $(seq 1 "$n"); do
        # Not under timeout(1): the pid must be the client's own, for its
        # CPU time; the wait below is bounded instead.
        ip netns exec "$client_ns" "$NAGARE" perf client "${via[@]}" "$target" \
            --port $((BASE_PORT + i)) --mode rr --len 64 --time "$DURATION" --timeout $((DURATION + 15)) --json --quiet \
            >"$WORK/client-$i.json" 2>>"$WORK/client.log" &
        CLIENT_PIDS+=($!)
    done
    sleep 1
    snapshot "$NETD_PID" "${SERVER_PIDS[@]}" "${CLIENT_PIDS[@]}" >"$WORK/before"
    local t0 t1
    t0=$(date +%s.%N)
    sleep $((DURATION - 2))
    snapshot "$NETD_PID" "${SERVER_PIDS[@]}" "${CLIENT_PIDS[@]}" >"$WORK/after"
    t1=$(date +%s.%N)
    local pid
    for pid in "${CLIENT_PIDS[@]}"; do
        for _ in $(seq 1 $((10 * (DURATION + 20)))); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        stop_pid "$pid"
    done
    python3 - "$WORK" "$path" "$n" "$t0" "$t1" "$NETD_PID" "${SERVER_PIDS[*]}" "${CLIENT_PIDS[*]}" >>"$WORK/results" <<'PY'
import json, os, sys
work, path, n, t0, t1, netd = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
servers, clients = sys.argv[7].split(), sys.argv[8].split()
def read(name):
    d = {}
    for line in open(os.path.join(work, name)):
        k, v = line.split()
        d[k] = int(v)
    return d
before, after = read("before"), read("after")
tick = 1e6 / os.sysconf("SC_CLK_TCK")
def used(pids):
    return sum(after.get(p, 0) - before.get(p, 0) for p in pids) * tick
tps = 0.0
for i in range(1, n + 1):
    try:
        tps += json.load(open(os.path.join(work, f"client-{i}.json")))["transactions_per_s"]
    except (OSError, ValueError, KeyError):
        pass
count = tps * (t1 - t0)
if count <= 0:
    print(f"{path} {n} 0 nan nan nan nan")
    sys.exit(0)
netd_us = used([netd]) / count if path == "netd" else float("nan")
print(f"{path} {n} {tps:.0f} {netd_us:.2f} {used(servers) / count:.2f} {used(clients) / count:.2f} "
      f"{used(['machine']) / count:.2f}")
PY
    CLIENT_PIDS=()
    stop_all
}

for n in "${COUNTS[@]}"; do
    log "rr_cost.sh: $n client(s) through netd ($PLACEMENT), then over veth"
    measure netd "$n"
    measure linux "$n"
done

echo "64-byte TCP request/response, CPU time per transaction (µs), ${DURATION} s per test, measured over its middle $((DURATION - 2)) s;"
echo "nagare $("$NAGARE" --version 2>/dev/null | awk '{print $2}') at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); netd placement $PLACEMENT; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| path | clients | transactions/s | netd | kernel servers | clients | whole machine |"
echo "|---|---:|---:|---:|---:|---:|---:|"
while read -r path n tps netd servers clients machine; do
    name="through netd"
    [[ $path == linux ]] && name="Linux over veth"
    [[ $netd == nan ]] && netd="—"
    echo "| $name | $n | $tps | $netd | $servers | $clients | $machine |"
done <"$WORK/results"
