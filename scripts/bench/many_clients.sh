#!/usr/bin/env bash
# Many clients at once through netd beside Linux: for each client count,
# that many `nagare perf client` processes run the same test at the same
# time, and the table shows what they got together (the sum of their
# rates) and how evenly it was shared (the least and the most any one
# client got, and the ratio of the two).
#
# Usage (root; the binary is built if missing):
#
#   sudo NAGARE=target/release/nagare DURATION=5 CLIENTS="1 2 5 10 20 50" scripts/bench/many_clients.sh
#
# It prints one markdown table per test, 64-byte TCP request/response
# (`perf client --mode rr --len 64`: transactions/s, in thousands) and
# TCP bulk (`--mode stream`, the client sends: the receiver's Gbit/s),
# with a row per client count and, for netd and for Linux, the aggregate,
# the least and the most one client got, and most/least; then netd's
# aggregate over Linux's. A client that fails or times out counts as 0
# in every figure (its least is then 0 and most/least "∞"), the aggregate
# cell says how many failed, and each failure is listed under the table
# with the last line its client wrote; then the script ends with status 1
# and the logs.
#
#   namespace N: one `nagare netd --tap tap0 --addr 10.95.0.2/24` for the
#                whole run (netd makes the TAP; PLACEMENT picks its
#                placement, else netd's own choice), its kernel side
#                10.95.0.1/24 with one kernel `nagare perf server` per
#                client (a perf server runs one test at a time), client i
#                on port 5201+i; the clients are `nagare perf client --via
#                SOCKET 10.95.0.1`.
#                With SERVERS=netd the perf servers are netd's clients
#                too (`perf server --via SOCKET`), and the clients reach
#                them at netd's own address 10.95.0.2: both ends of every
#                connection go through netd, and no kernel stack is on
#                the path.
#   namespaces B and C: veth pair, 10.96.0.1/24 <-> 10.96.0.2/24; the
#                kernel's perf clients in B, as many perf servers in C on
#                the same ports.
#
# The clients of a round are started together: each waits, already inside
# its namespace, on a FIFO that opens for all of them at once. Each then
# measures its own DURATION from its own start (after its connect), so the
# aggregate is the sum of rates over windows that overlap nearly, not
# exactly. For each
# client count and test the netd round runs, then the Linux one. If netd
# dies in a round it is reported (its log follows at the end) and started
# again for the next round.
#
# Needs root, ip, timeout, mkfifo and python3. Traffic stays inside the
# namespaces this script creates; everything it creates is removed on
# exit, also on failure or Ctrl-C, and every process it starts is ended by
# its pid. Each round is bounded by DURATION plus 30 s.
#
# Environment: NAGARE (binary; default target/release/nagare, built if
# missing), DURATION (seconds per test, 5), CLIENTS (client counts, comma
# or space separated, each 1 to 100; default "1 2 5 10 20 50"), PLACEMENT
# (split, single or inline: `nagare netd --placement`; default netd's
# choice), SERVERS (kernel, the default: netd's clients talk to kernel
# perf servers across the TAP; netd: the servers are netd's clients too),
# NETD_ARGS (more options for netd, e.g. "--nice 0").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"
DURATION="${DURATION:-5}"
CLIENTS="${CLIENTS:-1 2 5 10 20 50}"
PLACEMENT="${PLACEMENT:-}"
SERVERS="${SERVERS:-kernel}"
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -gt 0 ]] || { echo "DURATION must be a positive number" >&2; exit 1; }
parse_counts CLIENTS "$CLIENTS" 100
case "$PLACEMENT" in
    "" | split | single | inline) ;;
    *) echo "PLACEMENT must be split, single or inline" >&2; exit 1 ;;
esac
case "$SERVERS" in
    kernel | netd) ;;
    *) echo "SERVERS must be kernel or netd" >&2; exit 1 ;;
esac
MAX_CLIENTS=0
for n in "${COUNTS[@]}"; do
    [[ $n -gt $MAX_CLIENTS ]] && MAX_CLIENTS=$n
done

TAG="mc$$"
NS_N="${TAG}-n"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
BASE_PORT=5201
WORK="$(mktemp -d /tmp/nagare-many-clients.XXXXXX)"
SOCKET="$WORK/netd.sock"
FIFO="$WORK/start"
NETD_PID=""
CLIENT_PIDS=()
SERVER_PIDS=()
FAILED=0


# stop_all PID...: SIGTERM to all at once (so they end side by side, not
# one after another), then each waited for as stop_pid does.
stop_all() {
    local pid
    for pid in "$@"; do
        # One gone already is no failure (under `set -e` it would end the run).
        [[ -n "$pid" ]] && { kill -TERM "$pid" 2>/dev/null || true; }
    done
    for pid in "$@"; do
        stop_pid "$pid"
    done
    return 0
}

cleanup() {
    local rc=$?
    set +e
    exec 4>&-
    stop_all "${CLIENT_PIDS[@]}"
    stop_pid "$NETD_PID"
    stop_all "${SERVER_PIDS[@]}"
    delete_namespaces "$NS_N" "$NS_B" "$NS_C"
    if [[ $rc -ne 0 ]]; then
        for f in "$WORK"/netd.log "$WORK"/clients.log; do
            [[ -s "$f" ]] || continue
            log "--- $(basename "$f") (last 60 lines) ---"
            tail -n 60 "$f" >&2
        done
        # Of the perf servers' logs, the lines that are not the usual ones.
        for f in "$WORK"/server-*.log*; do
            [[ -f "$f" ]] || continue
            grep -Ev 'listening on|: test [0-9]+ from|stopping' "$f" | sed "s|^|$(basename "$f"): |" >&2
        done
    fi
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP devices, veth" ip timeout mkfifo python3

find_nagare

# --- topology ---------------------------------------------------------------
# start_perf_servers NS NAME [ARGS...]: MAX_CLIENTS perf servers in NS
# (`perf server ARGS`: on the kernel's stack without), on ports
# BASE_PORT.., each waited for (all started first, then each looked at:
# at most 10 s in all).
STARTS=0
start_perf_servers() {
    local ns=$1 name=$2 i logfile pid deadline=$((SECONDS + 10))
    shift 2
    STARTS=$((STARTS + 1))
    for ((i = 0; i < MAX_CLIENTS; i++)); do
        # Started again (with a netd that died): the old log is kept.
        if [[ -e "$WORK/$name-$i.log" ]]; then
            mv "$WORK/$name-$i.log" "$WORK/$name-$i.log.$STARTS"
        fi
        ip netns exec "$ns" "$NAGARE" perf server "$@" --port $((BASE_PORT + i)) >"$WORK/$name-$i.log" 2>&1 &
        SERVER_PIDS+=("$!")
    done
    for ((i = 0; i < MAX_CLIENTS; i++)); do
        logfile="$WORK/$name-$i.log"
        pid=${SERVER_PIDS[${#SERVER_PIDS[@]} - MAX_CLIENTS + i]}
        until grep -q 'listening' "$logfile" 2>/dev/null; do
            kill -0 "$pid" 2>/dev/null || { log "perf server $i in $ns exited"; return 1; }
            [[ $SECONDS -lt $deadline ]] || { log "perf server $i in $ns did not start"; return 1; }
            sleep 0.1
        done
    done
}

make_namespaces "$NS_N" "$NS_B" "$NS_C"
make_veth "$TAG" "$NS_B" 10.96.0.1/24 "$NS_C" 10.96.0.2/24
start_perf_servers "$NS_C" server-linux

# start_netd: netd on a TAP it makes in namespace N (in PLACEMENT, if set).
start_netd() {
    local args=()
    [[ -n "$PLACEMENT" ]] && args=(--placement "$PLACEMENT")
    local extra=()
    read -r -a extra <<<"${NETD_ARGS:-}"
    args+=("${extra[@]}")
    start_netd_on_tap "$NS_N" 10.95.0.2/24 10.95.0.1/24 "$SOCKET" "$WORK/netd.log" "${args[@]}"
}

# start_netd_servers: netd's perf servers, on the kernel or through netd.
# Those through netd are started again with it (the old ones are ended
# first: their netd is gone).
NETD_SERVER_PIDS=()
start_netd_servers() {
    local before pid keep=()
    if [[ $SERVERS == netd ]]; then
        stop_all "${NETD_SERVER_PIDS[@]}"
        for pid in "${SERVER_PIDS[@]}"; do
            [[ " ${NETD_SERVER_PIDS[*]} " == *" $pid "* ]] || keep+=("$pid")
        done
        SERVER_PIDS=("${keep[@]}")
    fi
    before=${#SERVER_PIDS[@]}
    if [[ $SERVERS == netd ]]; then
        start_perf_servers "$NS_N" server-netd --via "$SOCKET"
    else
        start_perf_servers "$NS_N" server-netd
    fi
    NETD_SERVER_PIDS=("${SERVER_PIDS[@]:$before}")
}

start_netd
start_netd_servers
NETD_PLACEMENT="$(grep -o 'placement [a-z]*' "$WORK/netd.log" | head -n 1 | cut -d' ' -f2)"

# --- measurement ------------------------------------------------------------
# round PATH TEST N: N clients of PATH (netd or linux) run TEST (rr or
# stream) at once; appends "PATH TEST N I VALUE" per client to the
# results, VALUE the client's transactions/s or Gbit/s, or "fail" with
# the reason after it.
round() {
    local path=$1 test=$2 n=$3 i ns server args=() pids=() rcs=() rc out err
    case $path in
        netd) ns=$NS_N; server=10.95.0.1; args=(--via "$SOCKET")
            [[ $SERVERS == netd ]] && server=10.95.0.2 ;;
        linux) ns=$NS_B; server=10.96.0.2 ;;
    esac
    args+=(--mode "$test")
    [[ $test == rr ]] && args+=(--len 64)
    rm -f "$FIFO"
    mkfifo "$FIFO"
    for ((i = 0; i < n; i++)); do
        out="$WORK/$path-$test-$n-$i.out"
        err="$WORK/$path-$test-$n-$i.err"
        # Opening the FIFO to read blocks until the script opens it too.
        timeout --kill-after=5 $((DURATION + 30)) ip netns exec "$ns" \
            bash -c ': <"$1"; shift; exec "$@"' start "$FIFO" \
            "$NAGARE" perf client "${args[@]}" --port $((BASE_PORT + i)) "$server" \
            --time "$DURATION" --timeout $((DURATION + 25)) --json --quiet >"$out" 2>"$err" &
        pids+=("$!")
        CLIENT_PIDS+=("$!")
    done
    # Open for reading and writing: does not block, and lets every reader
    # through, also one that reaches its open later.
    exec 4<>"$FIFO"
    for pid in "${pids[@]}"; do
        rc=0
        wait "$pid" || rc=$?
        rcs+=("$rc")
    done
    exec 4>&-
    CLIENT_PIDS=()
    for ((i = 0; i < n; i++)); do
        out="$WORK/$path-$test-$n-$i.out"
        err="$WORK/$path-$test-$n-$i.err"
        # A client that succeeded (with --quiet) writes nothing to stderr.
        if [[ ${rcs[$i]} -ne 0 || -s "$err" ]]; then
            {
                echo "--- $path $test $n clients, client $i (port $((BASE_PORT + i))): exit ${rcs[$i]}"
                sed '/^Stack backtrace:/,$d' "$err"
            } >>"$WORK/clients.log"
        fi
        printf '%s %s %s %s ' "$path" "$test" "$n" "$i" >>"$WORK/results"
        python3 - "$test" "${rcs[$i]}" "$out" "$err" >>"$WORK/results" <<'EOF'
import json, sys
test, rc, out, err = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def lines(path):
    try:
        return [l.strip() for l in open(path, errors="replace") if l.strip()]
    except OSError:
        return []
def reason(path):
    # The error and its innermost cause, without the backtrace after them.
    text = []
    for l in lines(path):
        if l.startswith("Stack backtrace:"):
            break
        text.append(l)
    errors = [l for l in text if l.startswith("Error:")]
    if not text:
        return "nothing on stderr"
    if errors and text[-1] != errors[-1]:
        return errors[-1] + " / " + text[-1].split(": ", 1)[-1]
    return text[-1]
if rc in (124, 137):
    print("fail killed at the round's bound:", reason(err)[:300])
    sys.exit()
try:
    s = json.loads(lines(out)[-1])
    v = s["transactions_per_s"] if test == "rr" else s["receiver"]["gbit_per_s"]
    if rc != 0 or v is None:
        raise ValueError
    print("%.6f" % v)
except Exception:
    print("fail exit %d:" % rc, reason(err)[:300])
EOF
    done
    rm -f "$FIFO"
    rm -f "$WORK/$path-$test-$n-"*
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
: >"$WORK/results"
: >"$WORK/events"
for n in "${COUNTS[@]}"; do
    for test in rr stream; do
        round netd "$test" "$n"
        if ! kill -0 "$NETD_PID" 2>/dev/null; then
            rc=0
            wait "$NETD_PID" || rc=$?
            log "  netd died during the round of $n clients, $test (status $rc); starting it again"
            echo "netd died during the round of $n clients, $test (status $rc): see its log" >>"$WORK/events"
            NETD_PID=""
            FAILED=1
            start_netd
            [[ $SERVERS == netd ]] && start_netd_servers
        elif [[ $SERVERS == netd ]]; then
            # A server through netd that died alone is started again
            # (with the others), so the next rounds have all of theirs.
            for pid in "${NETD_SERVER_PIDS[@]}"; do
                if ! kill -0 "$pid" 2>/dev/null; then
                    log "  a perf server through netd (pid $pid) died during the round of $n clients, $test; starting them again"
                    echo "a perf server through netd (pid $pid) died during the round of $n clients, $test" >>"$WORK/events"
                    FAILED=1
                    start_netd_servers
                    break
                fi
            done
        fi
        round linux "$test" "$n"
        log "  $n clients, $test: done"
    done
done
for pid in "${SERVER_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "a perf server (pid $pid) died during the run" >>"$WORK/events"; FAILED=1; }
done

# --- report -----------------------------------------------------------------
if [[ $SERVERS == netd ]]; then
    echo "Many clients at once: N nagare perf clients, each to its own nagare perf server, $DURATION s per test."
    echo "netd: one \`nagare netd --tap\`, placement ${NETD_PLACEMENT:-unknown}$([[ -z "$PLACEMENT" ]] && echo " (its own choice)")${NETD_ARGS:+, options $NETD_ARGS}, clients \`perf client --via\` to servers \`perf server --via\` at netd's own address; Linux: kernel to kernel over a veth pair."
else
    echo "Many clients at once: N nagare perf clients, each to its own kernel nagare perf server, $DURATION s per test."
    echo "netd: one \`nagare netd --tap\`, placement ${NETD_PLACEMENT:-unknown}$([[ -z "$PLACEMENT" ]] && echo " (its own choice)")${NETD_ARGS:+, options $NETD_ARGS}, clients \`perf client --via\`; Linux: kernel to kernel over a veth pair."
fi
echo "nagare $("$NAGARE" --version 2>/dev/null | awk '{ print $NF }')$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null | sed 's/^/ at /');" \
    "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
python3 - "$WORK/results" "${COUNTS[@]}" <<'EOF' || FAILED=1
import sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split(None, 5)
    if len(f) < 5:
        continue
    path, test, n, i, v = f[0], f[1], int(f[2]), int(f[3]), f[4]
    reason = f[5].strip() if len(f) > 5 else ""
    rows.setdefault((path, test, n), []).append((i, None if v == "fail" else float(v), reason))
counts = [int(c) for c in sys.argv[2:]]
failures = []

def figures(path, test, n, scale):
    got = rows.get((path, test, n), [])
    if not got:
        return None
    vals = [(v or 0.0) / scale for _, v, _ in got]
    failed = [(i, r) for i, v, r in got if v is None]
    for i, r in failed:
        failures.append("%s, %d clients, client %d: %s" % (path, n, i, r))
    total, lo, hi = sum(vals), min(vals), max(vals)
    return total, lo, hi, len(failed), len(got)

def cells(fig, fmt):
    if fig is None:
        return ["—"] * 3
    total, lo, hi, nfailed, ngot = fig
    agg = fmt % total + (" (%d of %d failed)" % (nfailed, ngot) if nfailed else "")
    ratio = "∞" if lo == 0 else "%.2f" % (hi / lo)
    return [agg, (fmt + " / " + fmt) % (lo, hi), ratio]

for test, title, unit, scale, fmt in (
    ("rr", "TCP request/response, 64 bytes each way (`--mode rr --len 64`)", "k transactions/s", 1000.0, "%.1f"),
    ("stream", "TCP bulk, the client sends (`--mode stream`)", "Gbit/s at the receiver", 1.0, "%.2f"),
):
    print()
    print("%s: %s" % (title, unit))
    print()
    print("| clients | netd aggregate | netd min / max per client | netd max/min | Linux aggregate | Linux min / max per client | Linux max/min | netd / Linux |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in counts:
        nf = figures("netd", test, n, scale)
        lf = figures("linux", test, n, scale)
        ratio = "%.2f" % (nf[0] / lf[0]) if nf and lf and lf[0] > 0 else "—"
        print("| %d | %s | %s |" % (n, " | ".join(cells(nf, fmt) + cells(lf, fmt)), ratio))
if failures:
    print()
    print("Failed clients (each counts as 0 above):")
    print()
    for f in failures:
        print("- " + f)
    sys.exit(1)
EOF
if [[ -s "$WORK/events" ]]; then
    echo
    sed 's/^/- /' "$WORK/events"
fi
if [[ $FAILED -ne 0 ]]; then
    log "many_clients.sh: something failed (above); the logs follow"
    exit 1
fi
