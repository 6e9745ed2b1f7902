#!/usr/bin/env bash
# TCP over IPv6 beside TCP over IPv4, in one run: nagare's engine inside
# the application (`nagare perf client --tap`, with the TAP's offloads and
# without) against the kernel's `nagare perf server` on the TAP's far
# side, and Linux to Linux over a veth pair, each path measured over both
# families.
#
# Usage (root; the binary is built if missing):
#
#   sudo NAGARE=target/release/nagare DURATION=5 ROUNDS=3 scripts/bench/ipv6_tcp.sh
#
# It prints one markdown table: for each path, TCP bulk throughput both
# ways (`perf client --mode stream`, the client sends; `--mode reverse`,
# the server sends; the receiver's Gbit/s) and 64-byte TCP
# request/response (`--mode rr --len 64`: transactions/s, p50 and p99 in
# µs), over IPv4 and over IPv6, with IPv6's figure over IPv4's. A test
# that fails shows "failed" (or, with ROUNDS above 1, the rounds its
# median comes from, "(2 of 3)"); then the script ends with status 1 and
# the logs.
#
#   namespace E: TAP tap0, its kernel side 10.96.0.1/24 and fd00:96::1/64,
#                with the perf server (one, dual stack); the client is
#                `nagare perf client --tap tap0 --addr 10.96.0.2/24 --addr
#                fd00:96::2/64 [--no-offload] SERVER`, the same link for
#                both families: only the server's address differs.
#   namespaces B and C: veth pair, 10.97.0.1/24 and fd00:97::1/64 <->
#                10.97.0.2/24 and fd00:97::2/64; the kernel's perf client
#                in B, its server in C.
#
# The kernel's IPv6 addresses skip duplicate address detection (nodad);
# nagare's IPv6 client waits for its own to pass it (about two seconds)
# before each test, outside the measured time.
#
# Needs root, ip, sysctl, timeout and python3
# (scripts/install-test-deps.sh installs them). Traffic stays inside the
# namespaces this script creates; everything it creates is removed on
# exit, also on failure or Ctrl-C, and every process it starts is ended
# by its pid. Each test is bounded by DURATION plus 20 s.
#
# Environment: NAGARE (binary; default target/release/nagare, built if
# missing), DURATION (seconds per test, 5), ROUNDS (1; with more, every
# test is measured ROUNDS times, interleaved: in each round, each path's
# test runs over IPv4 and then at once over IPv6, and the median of each
# figure is kept), ONLY (paths to run, comma or space separated, from
# engine, engine-no-offload, linux; default all).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-1}"
ONLY="${ONLY:-engine engine-no-offload linux}"
for v in DURATION ROUNDS; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -gt 0 ]] || { echo "$v must be a positive number" >&2; exit 1; }
done
ALL_ROWS=(engine engine-no-offload linux)
ROWS=()
for row in ${ONLY//,/ }; do
    [[ " ${ALL_ROWS[*]} " == *" $row "* ]] || { echo "ONLY: unknown path $row (paths: ${ALL_ROWS[*]})" >&2; exit 1; }
    [[ " ${ROWS[*]} " == *" $row "* ]] || ROWS+=("$row")
done
[[ ${#ROWS[@]} -gt 0 ]] || { echo "ONLY names no path" >&2; exit 1; }

TAG="v6$$"
NS_E="${TAG}-e"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
PORT=5201
WORK="$(mktemp -d /tmp/nagare-ipv6-tcp.XXXXXX)"
CLIENT_PID=""
SERVER_PIDS=()

# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    stop_pid "$CLIENT_PID"
    for pid in "${SERVER_PIDS[@]}"; do
        stop_pid "$pid"
    done
    delete_namespaces "$NS_E" "$NS_B" "$NS_C"
    [[ $rc -eq 0 ]] || show_logs "$WORK" 40
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP devices, veth" ip sysctl timeout python3
[[ -e /proc/net/if_inet6 ]] || skip "the kernel has no IPv6"

find_nagare

wants() { [[ " ${ROWS[*]} " == *" $1 "* ]]; }

# --- topology ---------------------------------------------------------------
# add_ipv6 NS DEV ADDR/PREFIX: ADDR on DEV, usable at once (no duplicate
# address detection).
add_ipv6() {
    ip netns exec "$1" sysctl -q -w "net.ipv6.conf.$2.accept_dad=0"
    ip -n "$1" -6 addr add "$3" dev "$2" nodad
}

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

if wants engine || wants engine-no-offload; then
    make_namespaces "$NS_E"
    ip netns exec "$NS_E" ip tuntap add dev tap0 mode tap
    add_ipv6 "$NS_E" tap0 fd00:96::1/64
    ip -n "$NS_E" addr add 10.96.0.1/24 dev tap0
    ip -n "$NS_E" link set tap0 up
    start_perf_server "$NS_E" server-engine
fi
if wants linux; then
    make_namespaces "$NS_B" "$NS_C"
    make_veth "$TAG" "$NS_B" 10.97.0.1/24 "$NS_C" 10.97.0.2/24
    add_ipv6 "$NS_B" veth0 fd00:97::1/64
    add_ipv6 "$NS_C" veth0 fd00:97::2/64
    start_perf_server "$NS_C" server-linux
fi

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

# perf ROW FAMILY MODE: appends "ROW FAMILY MODE gbit" (stream, reverse)
# or "ROW FAMILY MODE tps p50 p99" (rr), or "ROW FAMILY MODE fail", to
# the results; a summary whose server is not of FAMILY is a failure.
# Runs in the script's own shell, not a command substitution, so that the
# trap knows the client's pid.
perf() {
    local row=$1 family=$2 mode=$3 ns server args=()
    case $row in
        engine | engine-no-offload)
            ns=$NS_E
            args=(--tap tap0 --addr 10.96.0.2/24 --addr fd00:96::2/64)
            [[ $row == engine-no-offload ]] && args+=(--no-offload)
            server=$([[ $family == 4 ]] && echo 10.96.0.1 || echo fd00:96::1)
            ;;
        linux)
            ns=$NS_B
            server=$([[ $family == 4 ]] && echo 10.97.0.2 || echo fd00:97::2)
            ;;
    esac
    case $mode in
        stream | reverse) args+=(--mode "$mode") ;;
        rr) args+=(--mode rr --len 64) ;;
    esac
    echo "--- $row IPv$family $mode" >>"$WORK/client.log"
    if ! bounded perf ip netns exec "$ns" "$NAGARE" perf client "${args[@]}" "$server" --port "$PORT" \
        --time "$DURATION" --timeout $((DURATION + 15)) --json --quiet; then
        log "  $row IPv$family $mode failed"
        echo "$row $family $mode fail" >>"$WORK/results"
        return
    fi
    printf '%s %s %s ' "$row" "$family" "$mode" >>"$WORK/results"
    FAMILY=$family python3 -c '
import json, os, sys
s = json.loads(sys.stdin.read().strip().splitlines()[-1])
v6 = s["server"].startswith("[")
if v6 != (os.environ["FAMILY"] == "6"):
    sys.exit("the test ran over the other family: " + s["server"])
if s["mode"] == "rr":
    print("%.1f %.1f %.1f" % (s["transactions_per_s"], s["latency_us"]["p50"], s["latency_us"]["p99"]))
else:
    print("%.3f" % s["receiver"]["gbit_per_s"])
' <"$WORK/perf.out" >>"$WORK/results" 2>>"$WORK/client.log" || echo fail >>"$WORK/results"
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
: >"$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
    for row in "${ROWS[@]}"; do
        for mode in stream reverse rr; do
            for family in 4 6; do
                perf "$row" "$family" "$mode"
            done
        done
        log "  round $round: $row done"
    done
done
for pid in "${SERVER_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || { log "a perf server died during the run"; exit 1; }
done

# --- report -----------------------------------------------------------------
echo "TCP bulk throughput and 64-byte TCP request/response over IPv4 and IPv6, nagare perf client -> the kernel's nagare perf server;"
echo "$DURATION s per test, $([[ $ROUNDS -gt 1 ]] && echo "median of each figure over $ROUNDS rounds" || echo "1 round")."
echo "nagare $("$NAGARE" --version 2>/dev/null | awk '{ print $NF }')$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /');" \
    "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo
echo "| path | measurement | IPv4 | IPv6 | IPv6/IPv4 |"
echo "|---|---|---:|---:|---:|"
for row in "${ROWS[@]}"; do
    case $row in
        engine) label="engine in the application, perf --tap (offloads)" ;;
        engine-no-offload) label="engine in the application, perf --tap --no-offload" ;;
        linux) label="Linux over veth, kernel to kernel" ;;
    esac
    awk -v row="$row" -v label="$label" '
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    # figure(family, test, field): the median over the rounds that gave
    # one ("" if none); counted[] and given[] say over how many of how many.
    function figure(f, test, k,   i, n, v) {
        n = 0
        for (i = 1; i <= cnt[f, test]; i++) if (val[f, test, i, 1] != "fail") v[++n] = val[f, test, i, k]
        given[f] = n
        counted[f] = cnt[f, test]
        return n ? median(v, n) : ""
    }
    function cell(x, f, fmt, scale) {
        if (counted[f] == 0) return "–"
        if (x == "") return "failed"
        return sprintf(fmt, x / scale) (given[f] < counted[f] ? sprintf(" (%d of %d)", given[f], counted[f]) : "")
    }
    # line(name, test, field, format, scale): one row of the table.
    function line(name, test, k, fmt, scale,   a, b) {
        a = figure(4, test, k)
        b = figure(6, test, k)
        printf "| %s | %s | %s | %s | %s |\n", label, name, cell(a, 4, fmt, scale), cell(b, 6, fmt, scale),
            (a != "" && b != "" && a + 0 > 0) ? sprintf("%.2f", b / a) : "–"
    }
    $1 == row {
        c = ++cnt[$2, $3]
        for (k = 4; k <= NF; k++) val[$2, $3, c, k - 3] = $k
    }
    END {
        line("TCP stream (Gbit/s)", "stream", 1, "%.2f", 1)
        line("TCP reverse (Gbit/s)", "reverse", 1, "%.2f", 1)
        line("TCP RR 64 B (k/s)", "rr", 1, "%.1f", 1000)
        line("TCP RR 64 B p50 (µs)", "rr", 2, "%.0f", 1)
        line("TCP RR 64 B p99 (µs)", "rr", 3, "%.0f", 1)
    }' "$WORK/results"
done
echo
echo "IPv6/IPv4: the IPv6 figure over the IPv4 one (above 1 is more for IPv6: more throughput, or more latency in the p50 and p99 rows)."
if wants linux; then
    echo "The Linux figures are nagare perf with the kernel's stack at both ends (client in namespace B, server in C)."
fi
if grep -q ' fail$' "$WORK/results"; then
    log "ipv6_tcp.sh: $(grep -c ' fail$' "$WORK/results") test(s) failed (the logs follow)"
    exit 1
fi
