#!/usr/bin/env bash
# Ping RTT from the Linux kernel to nagare over a TAP device, beside
# Linux-to-Linux over a veth pair, measured in the same run.
#
#   namespace A: TAP tap0 (kernel side 10.77.0.1/24), `nagare up` at 10.77.0.2
#   namespaces B and C: veth pair, 10.78.0.1/24 <-> 10.78.0.2/24
#
# For each path and each payload size (56 and 1472 bytes):
#   paced: ping -c 1000 -i 0.002 -q
#   flood: ping -f -c 5000 -q      (the next request leaves when the reply comes)
# and prints a markdown table with min/avg/max/mdev and nagare/veth ratios.
#
# Needs root (namespaces, TAP, intervals under 0.2 s). Traffic stays
# inside the namespaces this script creates; everything it creates is
# removed on exit, also on failure or Ctrl-C.
#
# Environment: NAGARE (binary; default target/release/nagare, built if
# missing), PING_COUNT (1000), FLOOD_COUNT (5000), SIZES ("56 1472"),
# RT_PRIO (unset: normal scheduling; N: run nagare under SCHED_FIFO
# priority N, so it gets a CPU as soon as a frame wakes it: this tells
# scheduling delay on a busy machine from the stack's own cost; the
# kernel's RT throttling still applies), PIN_CPU (unset, or a CPU number:
# run nagare and every ping on that CPU), HOGS (0; N: run N busy-loop
# processes, each capped at 300 s, during the measurement, to see the
# RTT on a machine whose CPUs are all busy), TARGET (up: `nagare up`,
# the default; netd-inline, netd-single or netd-split: `nagare netd` in
# that placement, pinged at its own address), NETD_ARGS (more options for
# netd, e.g. "--nice -10").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PING_COUNT="${PING_COUNT:-1000}"
FLOOD_COUNT="${FLOOD_COUNT:-5000}"
SIZES="${SIZES:-56 1472}"
RT_PRIO="${RT_PRIO:-}"
HOGS="${HOGS:-0}"
[[ "$HOGS" =~ ^[0-9]+$ ]] || { echo "HOGS must be a number" >&2; exit 1; }
TARGET="${TARGET:-up}"
case "$TARGET" in
    up) RUN=(up --tap tap0 --addr 10.77.0.2/24) ;;
    netd-inline | netd-single | netd-split) ;;
    *) echo "TARGET must be up, netd-inline, netd-single or netd-split" >&2; exit 1 ;;
esac
read -r -a EXTRA_NETD_ARGS <<<"${NETD_ARGS:-}"
[[ "$TARGET" != up || ${#EXTRA_NETD_ARGS[@]} -eq 0 ]] || { echo "NETD_ARGS needs a netd TARGET" >&2; exit 1; }
HOG_PIDS=()
PIN_CPU="${PIN_CPU:-}"
PIN=()     # prefix for nagare and ping
NAG_RT=()  # prefix for nagare only
SCHED="normal (CFS)"
if [[ -n "$RT_PRIO" ]]; then
    [[ "$RT_PRIO" =~ ^[0-9]+$ ]] || { echo "RT_PRIO must be a number" >&2; exit 1; }
    NAG_RT=(chrt -f "$RT_PRIO")
    SCHED="nagare SCHED_FIFO priority $RT_PRIO, ping normal (CFS)"
fi
if [[ -n "$PIN_CPU" ]]; then
    [[ "$PIN_CPU" =~ ^[0-9]+$ ]] || { echo "PIN_CPU must be a CPU number" >&2; exit 1; }
    PIN=(taskset -c "$PIN_CPU")
    SCHED="$SCHED, nagare and ping on CPU $PIN_CPU"
fi
TAG="nb$$"
NS_A="${TAG}-a"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
WORK="$(mktemp -d /tmp/nagare-ping-rtt.XXXXXX)"
NAGARE_PID=""
# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    for pid in "${HOG_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    stop_pid "$NAGARE_PID"
    delete_namespaces "$NS_A" "$NS_B" "$NS_C"
    if [[ -s "$WORK/nagare.log" && $rc -ne 0 ]]; then
        log "--- nagare output ---"
        cat "$WORK/nagare.log" >&2
    fi
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[[ $(id -u) -eq 0 ]] || { log "ping_rtt.sh: needs root"; exit 1; }

find_nagare

# --- topology ---------------------------------------------------------------
make_namespaces "$NS_A" "$NS_B" "$NS_C"
make_tap "$NS_A" 10.77.0.1/24
make_veth "$TAG" "$NS_B" 10.78.0.1/24 "$NS_C" 10.78.0.2/24

if [[ "$TARGET" != up ]]; then
    RUN=(netd --tap tap0 --addr 10.77.0.2/24 --placement "${TARGET#netd-}" --socket "$WORK/netd.sock" "${EXTRA_NETD_ARGS[@]}")
fi
ip netns exec "$NS_A" "${PIN[@]}" "${NAG_RT[@]}" "$NAGARE" "${RUN[@]}" >"$WORK/nagare.log" 2>&1 &
NAGARE_PID=$!

# Wait (bounded) until both paths answer; this also resolves ARP.
wait_for() {
    local ns=$1 dst=$2
    for _ in $(seq 1 50); do
        if ip netns exec "$ns" ping -c 1 -W 0.2 -q "$dst" >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "$NAGARE_PID" 2>/dev/null || { log "nagare exited early"; return 1; }
        sleep 0.1
    done
    log "no answer from $dst"
    return 1
}
wait_for "$NS_A" 10.77.0.2
wait_for "$NS_B" 10.78.0.2

# --- measurement ------------------------------------------------------------
# run_ping NS DST SIZE MODE -> "tx rx min avg max mdev" (ms)
run_ping() {
    local ns=$1 dst=$2 size=$3 mode=$4 out
    if [[ $mode == flood ]]; then
        out=$(timeout 120 ip netns exec "$ns" "${PIN[@]}" ping -f -c "$FLOOD_COUNT" -q -s "$size" -w 100 "$dst" 2>&1) || true
    else
        out=$(timeout 120 ip netns exec "$ns" "${PIN[@]}" ping -c "$PING_COUNT" -i 0.002 -q -s "$size" -w 100 "$dst" 2>&1) || true
    fi
    local tx rx stats
    tx=$(sed -nE 's/^([0-9]+) packets transmitted.*/\1/p' <<<"$out")
    rx=$(sed -nE 's/.* ([0-9]+) (packets )?received.*/\1/p' <<<"$out")
    stats=$(sed -nE 's#^rtt min/avg/max/mdev = ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms.*#\1 \2 \3 \4#p' <<<"$out")
    if [[ -z "$tx" || -z "$rx" || -z "$stats" ]]; then
        log "ping $mode -s $size $dst in $ns failed:"
        log "$out"
        echo "${tx:-0} ${rx:-0} nan nan nan nan"
        return
    fi
    echo "$tx $rx $stats"
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq 1 "$HOGS"); do
    timeout 300 bash -c 'while :; do :; done' &
    HOG_PIDS+=($!)
done
[[ "$HOGS" -gt 0 ]] && SCHED="$SCHED; $HOGS busy-loop processes running"
results="$WORK/results"
: >"$results"
for mode in paced flood; do
    for size in $SIZES; do
        # Interleave the two paths so drifting machine load touches both.
        read -r ntx nrx nmin navg nmax nmdev < <(run_ping "$NS_A" 10.77.0.2 "$size" "$mode")
        read -r vtx vrx vmin vavg vmax vmdev < <(run_ping "$NS_B" 10.78.0.2 "$size" "$mode")
        echo "$mode $size $ntx $nrx $nmin $navg $nmax $nmdev $vtx $vrx $vmin $vavg $vmax $vmdev" >>"$results"
        log "  $mode -s $size done"
    done
done

kill -0 "$NAGARE_PID" 2>/dev/null || { log "nagare died during the run"; exit 1; }
for pid in "${HOG_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
HOG_PIDS=()

# --- report -----------------------------------------------------------------
echo "Ping RTT in microseconds: Linux -> nagare ($TARGET${NETD_ARGS:+, netd $NETD_ARGS}) over TAP (namespace A) beside Linux -> Linux over veth (B -> C)."
echo "scheduling: $SCHED; load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo "paced: ping -c $PING_COUNT -i 0.002 -q -s SIZE; flood: ping -f -c $FLOOD_COUNT -q -s SIZE"
echo
echo "| mode | size (B) | path | received | min | avg | max | mdev | avg ratio nagare/veth |"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|"
awk '
function us(x) { return (x == "nan") ? "n/a" : sprintf("%.0f", x * 1000) }
{
    ratio = ($12 == "nan" || $6 == "nan" || $12 + 0 == 0) ? "n/a" : sprintf("%.2f", $6 / $12)
    printf "| %s | %s | nagare (TAP) | %s/%s | %s | %s | %s | %s | %s |\n", $1, $2, $4, $3, us($5), us($6), us($7), us($8), ratio
    printf "| %s | %s | Linux (veth) | %s/%s | %s | %s | %s | %s | |\n", $1, $2, $10, $9, us($11), us($12), us($13), us($14)
}' "$results"
