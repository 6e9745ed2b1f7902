#!/usr/bin/env bash
# One TCP stream's throughput on tokio: nagare-tokio through netd beside
# tokio on the kernel's sockets, in one run (`crates/nagare-tokio/examples/
# stream_bench.rs`). The receiver is always tokio on the kernel's sockets.
#
# Usage (root; the release binaries are built if missing):
#
#   sudo DURATION=5 ROUNDS=3 scripts/bench/tokio.sh
#
#   namespace N: `nagare netd --tap tap0 --addr 10.97.0.2/24` (its kernel
#                side 10.97.0.1/24, where the receiver listens); the
#                sender is stream_bench with --via netd's socket.
#   namespaces B and C: veth pair, 10.98.0.1/24 <-> 10.98.0.2/24; the
#                sender in B on tokio's kernel sockets, the receiver in C.
#
# It prints the receiver's Gbit/s of each row, ROUNDS rounds interleaved,
# and their median. Traffic stays inside the namespaces this script
# creates; everything it creates is removed on exit, and every process it
# starts is ended by its pid.
#
# Environment: NAGARE (binary; default target/release/nagare), DURATION
# (seconds per run, 5), ROUNDS (3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
TAG="tk$$"
NS_N="${TAG}-n"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
WORK="$(mktemp -d /tmp/nagare-tokio-bench.XXXXXX)"
SOCKET="$WORK/netd.sock"
NETD_PID=""
SINK_PID=""

# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    stop_pid "$SINK_PID"
    stop_pid "$NETD_PID"
    delete_namespaces "$NS_N" "$NS_B" "$NS_C"
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ $(id -u) -eq 0 ]] || { log "tokio.sh: SKIPPED: needs root (namespaces, TAP devices, veth)"; exit 1; }
find_nagare
BENCH="$(dirname "$NAGARE")/examples/stream_bench"
[[ -x "$BENCH" ]] || (cd "$ROOT" && cargo build --release -p nagare-tokio --example stream_bench)
[[ -x "$BENCH" ]] || { log "no $BENCH"; exit 1; }

make_namespaces "$NS_N" "$NS_B" "$NS_C"
make_veth "$TAG" "$NS_B" 10.98.0.1/24 "$NS_C" 10.98.0.2/24
start_netd_on_tap "$NS_N" 10.97.0.2/24 10.97.0.1/24 "$SOCKET" "$WORK/netd.log"
sleep 0.5

# run LABEL SINK_NS SINK_ADDR SEND_NS [SEND_ARGS...]: one measurement.
run() {
    local sink_ns=$2 addr=$3 send_ns=$4 g
    shift 4
    ip netns exec "$sink_ns" "$BENCH" sink "$addr" >"$WORK/sink.out" 2>>"$WORK/sink.log" &
    SINK_PID=$!
    for _ in $(seq 1 50); do
        grep -q listening "$WORK/sink.out" 2>/dev/null && break
        sleep 0.1
    done
    timeout $((DURATION + 20)) ip netns exec "$send_ns" "$BENCH" send "$addr" "$DURATION" "$@" 2>>"$WORK/send.log" || true
    wait "$SINK_PID" 2>/dev/null || true
    SINK_PID=""
    g=$(awk '/^gbit_per_s/ {print $4}' "$WORK/sink.out")
    echo "${g:-fail}"
}

declare -a NAGARE_ROWS KERNEL_ROWS
for _ in $(seq 1 "$ROUNDS"); do
    NAGARE_ROWS+=("$(run nagare "$NS_N" 10.97.0.1:5401 "$NS_N" --via "$SOCKET")")
    KERNEL_ROWS+=("$(run kernel "$NS_C" 10.98.0.2:5402 "$NS_B")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "fail")}'; }
echo "| sender | runs (Gbit/s) | median |"
echo "|---|---|---:|"
echo "| nagare-tokio through netd (TAP) | ${NAGARE_ROWS[*]} | $(median "${NAGARE_ROWS[@]}") |"
echo "| tokio on the kernel's sockets (veth) | ${KERNEL_ROWS[*]} | $(median "${KERNEL_ROWS[@]}") |"
