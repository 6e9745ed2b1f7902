#!/usr/bin/env bash
# TCP throughput and request/response through netd beside its peers, in
# one run: an application of `nagare netd --tap` (split and single
# placement), the same engine inside the application (`nagare perf client
# --tap`), and Linux to Linux over a veth pair. The server of every row
# is the kernel: `nagare perf server` on the kernel's stack.
#
# Usage (root; the binary is built if missing):
#
#   sudo NAGARE=target/release/nagare DURATION=5 ROUNDS=3 scripts/bench/netd_tcp.sh
#
# It prints a markdown table: TCP bulk throughput both ways (`perf client
# --mode stream`, the client sends; `--mode reverse`, the server sends;
# the receiver's Gbit/s), 64-byte TCP request/response (`--mode rr --len
# 64`: transactions/s, p50 and p99 in µs) and 64-byte UDP
# request/response (`--udp --mode rr --len 64`, the same figures; requests
# lost, if any, are said under the table). A test that fails shows "failed" (or, with ROUNDS above 1, the rounds its
# median comes from, "(2 of 3)"); then the script ends with status 1 and
# the logs.
#
#   namespace N: `nagare netd --tap tap0 --addr 10.92.0.2/24 --placement P`
#                (netd makes the TAP, multi-queue, and steers client
#                ports), its kernel side 10.92.0.1/24 with the perf server;
#                the client is `nagare perf client --via SOCKET`. netd is
#                started for each placement's tests and stopped after them.
#   namespace E: TAP tap0 (kernel side 10.93.0.1/24) with the perf server;
#                `nagare perf client --tap tap0 --addr 10.93.0.2/24`.
#   namespaces B and C: veth pair, 10.94.0.1/24 <-> 10.94.0.2/24; the
#                kernel's perf client in B, its server in C.
#
# Needs root, ip, timeout and python3 (scripts/install-test-deps.sh
# installs them).
# Traffic stays inside the namespaces this script creates; everything it
# creates is removed on exit, also on failure or Ctrl-C, and every
# process it starts is ended by its pid. Each test is bounded by DURATION
# plus 20 s.
#
# Environment: NAGARE (binary; default target/release/nagare, built if
# missing), DURATION (seconds per test, 5), ROUNDS (1; with more, every
# row is measured ROUNDS times, rows interleaved, and the median of each
# figure kept), ONLY (rows to run, comma or space separated, from split,
# single, netd-inline, split-zc, single-zc, netd-inline-zc, engine, linux;
# default split, single, engine and linux). The -zc rows are the same
# placements with `perf --via --zero-copy`: the bulk data through the
# client library's zero-copy calls (alloc_tx/send_buf/recv_buf), as the
# engine row lends and takes its buffers; they measure stream and reverse
# only (request/response is the same call either way). NETD_ARGS: more
# options for every netd (e.g. "--tcp-recv-buffer 1048576").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-1}"
ONLY="${ONLY:-split single engine linux}"
for v in DURATION ROUNDS; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -gt 0 ]] || { echo "$v must be a positive number" >&2; exit 1; }
done
ALL_ROWS=(split single netd-inline split-zc single-zc netd-inline-zc engine linux)
ROWS=()
for row in ${ONLY//,/ }; do
    [[ " ${ALL_ROWS[*]} " == *" $row "* ]] || { echo "ONLY: unknown row $row (rows: ${ALL_ROWS[*]})" >&2; exit 1; }
    [[ " ${ROWS[*]} " == *" $row "* ]] || ROWS+=("$row")
done
[[ ${#ROWS[@]} -gt 0 ]] || { echo "ONLY names no row" >&2; exit 1; }

TAG="nt$$"
NS_N="${TAG}-n"
NS_E="${TAG}-e"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
PORT=5201
WORK="$(mktemp -d /tmp/nagare-netd-tcp.XXXXXX)"
SOCKET="$WORK/netd.sock"
NETD_PID=""
CLIENT_PID=""
SERVER_PIDS=()

# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    stop_pid "$CLIENT_PID"
    stop_pid "$NETD_PID"
    for pid in "${SERVER_PIDS[@]}"; do
        stop_pid "$pid"
    done
    delete_namespaces "$NS_N" "$NS_E" "$NS_B" "$NS_C"
    [[ $rc -eq 0 ]] || show_logs "$WORK" 40
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP devices, veth" ip timeout python3

find_nagare

wants() { [[ " ${ROWS[*]} " == *" $1 "* ]]; }
wants_netd() { wants split || wants single || wants netd-inline || wants split-zc || wants single-zc || wants netd-inline-zc; }

# --- topology ---------------------------------------------------------------
# start_perf_server NS LOGNAME: the kernel's perf server in NS, waited for.
start_perf_server() {
    local ns=$1 logfile="$WORK/$2.log" pid
    ip netns exec "$ns" "$NAGARE" perf server --port "$PORT" >"$logfile" 2>&1 &
    pid=$!
    SERVER_PIDS+=("$pid")
    for _ in $(seq 1 50); do
        grep -q 'listening' "$logfile" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || { log "perf server in $ns exited"; return 1; }
        sleep 0.1
    done
    log "perf server in $ns did not start"
    return 1
}

if wants_netd; then
    make_namespaces "$NS_N"
    start_perf_server "$NS_N" server-netd
fi
if wants engine; then
    make_namespaces "$NS_E"
    make_tap "$NS_E" 10.93.0.1/24
    start_perf_server "$NS_E" server-engine
fi
if wants linux; then
    make_namespaces "$NS_B" "$NS_C"
    make_veth "$TAG" "$NS_B" 10.94.0.1/24 "$NS_C" 10.94.0.2/24
    start_perf_server "$NS_C" server-linux
fi

# start_netd PLACEMENT: netd on a TAP it makes in namespace N.
start_netd() {
    # shellcheck disable=SC2086 # NETD_ARGS is a list of options
    start_netd_on_tap "$NS_N" 10.92.0.2/24 10.92.0.1/24 "$SOCKET" "$WORK/netd-$1.log" --placement "$1" ${NETD_ARGS:-}
}

# stop_netd: netd (and with it its TAP and driver) goes.
stop_netd() {
    stop_pid "$NETD_PID"
    NETD_PID=""
    rm -f "$SOCKET"
}

# --- measurement ------------------------------------------------------------
# bounded NAME CMD...: runs CMD in the background (so a signal ends the
# script at once), at most DURATION + 20 s, its stdout to $WORK/NAME.out.
bounded() {
    local name=$1 rc=0
    shift
    timeout --kill-after=5 $((DURATION + 20)) "$@" >"$WORK/$name.out" 2>>"$WORK/client.log" &
    CLIENT_PID=$!
    wait "$CLIENT_PID" || rc=$?
    CLIENT_PID=""
    return $rc
}

# perf ROW MODE: appends "ROW MODE gbit" (stream, reverse), "ROW MODE
# tps p50 p99" (rr) or "ROW MODE tps p50 p99 lost" (udp-rr), or "ROW MODE
# fail", to the results. Runs in the script's own shell, not a command
# substitution, so that the trap knows the client's pid.
perf() {
    local row=$1 mode=$2 ns args=()
    case $row in
        split | single | netd-inline) ns=$NS_N; args=(--via "$SOCKET" 10.92.0.1) ;;
        *-zc) ns=$NS_N; args=(--via "$SOCKET" --zero-copy 10.92.0.1) ;;
        engine) ns=$NS_E; args=(--tap tap0 --addr 10.93.0.2/24 10.93.0.1) ;;
        linux) ns=$NS_B; args=(10.94.0.2) ;;
    esac
    case $mode in
        stream | reverse) args+=(--mode "$mode") ;;
        rr) args+=(--mode rr --len 64) ;;
        udp-rr) args+=(--udp --mode rr --len 64) ;;
    esac
    echo "--- $row $mode" >>"$WORK/client.log"
    if ! bounded perf ip netns exec "$ns" "$NAGARE" perf client "${args[@]}" --port "$PORT" \
        --time "$DURATION" --timeout $((DURATION + 15)) --json --quiet; then
        log "  $row $mode failed"
        echo "$row $mode fail" >>"$WORK/results"
        return
    fi
    printf '%s %s ' "$row" "$mode" >>"$WORK/results"
    python3 -c '
import json, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
if s["mode"] == "rr":
    print("%.1f %.1f %.1f" % (s["transactions_per_s"], s["latency_us"]["p50"], s["latency_us"]["p99"]), end="")
    print(" %d" % s["lost"] if "lost" in s else "")
else:
    print("%.3f" % s["receiver"]["gbit_per_s"])
' <"$WORK/perf.out" >>"$WORK/results" 2>>"$WORK/client.log" || echo fail >>"$WORK/results"
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
: >"$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
    for row in "${ROWS[@]}"; do
        case $row in
            split | single | split-zc | single-zc) start_netd "${row%-zc}" ;;
            netd-inline | netd-inline-zc) start_netd inline ;;
        esac
        modes=(stream reverse rr udp-rr)
        [[ $row == *-zc ]] && modes=(stream reverse)
        for mode in "${modes[@]}"; do
            perf "$row" "$mode"
        done
        if [[ -n "$NETD_PID" ]]; then
            kill -0 "$NETD_PID" 2>/dev/null || { log "netd ($row) died during the run"; exit 1; }
            stop_netd
        fi
        log "  round $round: $row done"
    done
done
for pid in "${SERVER_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || { log "a perf server died during the run"; exit 1; }
done

# --- report -----------------------------------------------------------------
echo "TCP bulk throughput and 64-byte TCP and UDP request/response, nagare perf client -> the kernel's nagare perf server;"
echo "$DURATION s per test, $([[ $ROUNDS -gt 1 ]] && echo "median of each figure over $ROUNDS rounds" || echo "1 round")."
echo "nagare $("$NAGARE" --version 2>/dev/null | awk '{ print $NF }')$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /');" \
    "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo
echo "| path | TCP stream (Gbit/s) | TCP reverse (Gbit/s) | TCP RR 64 B (k/s) | p50 (µs) | p99 (µs) | UDP RR 64 B (k/s) | p50 (µs) | p99 (µs) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for row in "${ROWS[@]}"; do
    case $row in
        split) label="netd split (driver process), perf --via" ;;
        single) label="netd single (driver thread), perf --via" ;;
        netd-inline) label="netd inline (device in netd's loop), perf --via" ;;
        split-zc) label="netd split, perf --via --zero-copy" ;;
        single-zc) label="netd single, perf --via --zero-copy" ;;
        netd-inline-zc) label="netd inline, perf --via --zero-copy" ;;
        engine) label="engine in the application, perf --tap" ;;
        linux) label="Linux over veth, kernel to kernel" ;;
    esac
    awk -v row="$row" -v label="$label" -v rounds="$ROUNDS" '
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    # cell(test, field, format, scale): the median over the rounds that
    # gave a figure, divided by scale.
    function cell(test, k, fmt, scale,   i, n, v) {
        if (cnt[test] == 0) return "–"
        n = 0
        for (i = 1; i <= cnt[test]; i++) if (val[test, i, 1] != "fail") v[++n] = val[test, i, k]
        if (n == 0) return "failed"
        return sprintf(fmt, median(v, n) / scale) (n < cnt[test] ? sprintf(" (%d of %d)", n, cnt[test]) : "")
    }
    $1 == row {
        c = ++cnt[$2]
        for (k = 3; k <= NF; k++) val[$2, c, k - 2] = $k
    }
    END {
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label,
            cell("stream", 1, "%.2f", 1), cell("reverse", 1, "%.2f", 1),
            cell("rr", 1, "%.1f", 1000), cell("rr", 2, "%.0f", 1), cell("rr", 3, "%.0f", 1),
            cell("udp-rr", 1, "%.1f", 1000), cell("udp-rr", 2, "%.0f", 1), cell("udp-rr", 3, "%.0f", 1)
    }' "$WORK/results"
done
echo
echo "The UDP request/response figures, the Linux row's included, are nagare perf's (\`--udp --mode rr --len 64\`: one request in flight, a request not answered within 200 ms counted as lost and the next one sent)."
awk '$2 == "udp-rr" { r = ++round[$1]; if ($6 > 0) printf "UDP requests lost: %s, %d in round %d.\n", $1, $6, r }' "$WORK/results"
if wants linux; then
    echo "The Linux figures are nagare perf with the kernel's stack at both ends (client in namespace B, server in C)."
fi
if grep -q ' fail$' "$WORK/results"; then
    log "netd_tcp.sh: $(grep -c ' fail$' "$WORK/results") test(s) failed (the logs follow)"
    exit 1
fi
