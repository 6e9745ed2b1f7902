#!/usr/bin/env bash
# Legitimate HTTP fetches during a SYN flood: nagare over a TAP beside the
# Linux kernel (nginx) over a veth pair, measured in the same run.
#
#   namespace A: TAP tap0 (kernel side 10.84.0.1/24), `nagare up --http`
#                at 10.84.0.2 with the kernel side as its gateway, so every
#                SYN-ACK to a spoofed source is written to the TAP
#   namespaces B and C: veth pair, 10.85.0.1/24 <-> 10.85.0.2/24, nginx
#                in C, its default route through B
#   namespace D: as A (10.87.0.0/24), nagare with its SYN guard off
#                (`--syn-budget 0`), the same engine before the guard
#
# For each server, quiet and then under `hping3 --flood --rand-source -S`
# from the client's namespace, ApacheBench fetches a 4 KiB file for
# DURATION seconds, one connection per request (`ab -t DURATION -c
# CONCURRENCY`). It prints a markdown table: requests per second quiet and
# under the flood, their ratio, failed requests, and the SYNs the flood
# offered and the server's link took.
#
# hping3 sends as fast as its CPU lets it. The TAP queues a frame in the
# sender's system call and the reader does the rest, so the flood into
# nagare runs several times faster than into the kernel, whose SYN
# processing runs inside the sender's call: the table shows both rates.
# FLOOD_INTERVAL (hping3's -i, e.g. u20) paces the flood instead.
#
# Needs root, hping3 and ab (scripts/install-test-deps.sh) and nginx (the
# Debian package nginx-light: not installed by the test set-up, since no
# test needs it and its package may start a server). Traffic
# stays inside the namespaces this script creates; everything it creates is
# removed on exit, also on failure or Ctrl-C. Every run is bounded by
# DURATION plus a few seconds.
#
# Environment: NAGARE (binary; default target/release/nagare, built if
# missing), DURATION (5), CONCURRENCY (1), ROUNDS (2: quiet and flood are
# measured ROUNDS times per server, interleaved, and the medians kept),
# FLOOD_INTERVAL (unset: --flood).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-5}"
CONCURRENCY="${CONCURRENCY:-1}"
ROUNDS="${ROUNDS:-2}"
FLOOD_INTERVAL="${FLOOD_INTERVAL:-}"
for v in DURATION CONCURRENCY ROUNDS; do
    [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -gt 0 ]] || { echo "$v must be a positive number" >&2; exit 1; }
done
if [[ -n "$FLOOD_INTERVAL" ]]; then
    [[ "$FLOOD_INTERVAL" =~ ^u?[0-9]+$ ]] || { echo "FLOOD_INTERVAL is hping3's -i: N seconds or uN microseconds" >&2; exit 1; }
    FLOOD_ARGS=(-i "$FLOOD_INTERVAL")
else
    FLOOD_ARGS=(--flood)
fi
TAG="sf$$"
NS_A="${TAG}-a"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
NS_D="${TAG}-d"
WORK="$(mktemp -d /tmp/nagare-syn-flood.XXXXXX)"
NAGARE_PID=""
UNGUARDED_PID=""
NGINX_PID=""
FLOOD_PID=""

# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    stop_pid "$FLOOD_PID"
    stop_pid "$NAGARE_PID"
    stop_pid "$UNGUARDED_PID"
    stop_pid "$NGINX_PID"
    delete_namespaces "$NS_A" "$NS_B" "$NS_C" "$NS_D"
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

[[ $(id -u) -eq 0 ]] || { log "syn_flood.sh: needs root"; exit 1; }
for tool in hping3 ab nginx ip; do
    command -v "$tool" >/dev/null || { log "syn_flood.sh: $tool is missing (scripts/install-test-deps.sh installs all but nginx: apt-get install nginx-light)"; exit 1; }
done

find_nagare

head -c 4096 /dev/urandom >"$WORK/index.html"

# --- topology ---------------------------------------------------------------
make_namespaces "$NS_A" "$NS_B" "$NS_C" "$NS_D"
make_tap "$NS_A" 10.84.0.1/24
make_tap "$NS_D" 10.87.0.1/24
make_veth "$TAG" "$NS_B" 10.85.0.1/24 "$NS_C" 10.85.0.2/24
ip -n "$NS_C" route add default via 10.85.0.1

ip netns exec "$NS_A" "$NAGARE" up --tap tap0 --addr 10.84.0.2/24 --gateway 10.84.0.1 --http "$WORK" \
    >"$WORK/nagare.log" 2>&1 &
NAGARE_PID=$!
ip netns exec "$NS_D" "$NAGARE" up --tap tap0 --addr 10.87.0.2/24 --gateway 10.87.0.1 --syn-budget 0 --http "$WORK" \
    >"$WORK/unguarded.log" 2>&1 &
UNGUARDED_PID=$!

cat >"$WORK/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
    access_log off;
    server { listen 10.85.0.2:80 backlog=128; root $WORK; }
}
EOF
ip netns exec "$NS_C" nginx -c "$WORK/nginx.conf" &
NGINX_PID=$!

# Wait (bounded) until both servers answer.
wait_http() {
    local ns=$1 url=$2
    for _ in $(seq 1 50); do
        if ip netns exec "$ns" ab -q -n 1 -s 1 "$url" 2>/dev/null | grep -q '^Complete requests: *1$'; then
            return 0
        fi
        sleep 0.1
    done
    log "no answer from $url"
    return 1
}
wait_http "$NS_A" http://10.84.0.2/index.html
wait_http "$NS_D" http://10.87.0.2/index.html
wait_http "$NS_B" http://10.85.0.2/index.html

# --- measurement ------------------------------------------------------------
# link_packets NS DEV -> "sent dropped" on the kernel's transmit side
link_packets() {
    ip -n "$1" -s link show "$2" | awk '/TX:/ { getline; print $2, $4; exit }'
}

# fetch NS URL -> "rps complete failed"
fetch() {
    local out
    out=$(timeout $((DURATION + 20)) ip netns exec "$1" ab -t "$DURATION" -n 10000000 -c "$CONCURRENCY" -s 5 "$2" 2>&1) || true
    awk '/^Requests per second:/ { r = $4 } /^Complete requests:/ { c = $3 } /^Failed requests:/ { f = $3 }
         END { printf "%s %s %s\n", (r == "" ? 0 : r), (c == "" ? 0 : c), (f == "" ? 0 : f) }' <<<"$out"
}

# run NAME NS URL DST DEV -> appends "NAME quiet_rps flood_rps complete failed offered_per_s link_per_s"
run() {
    local name=$1 ns=$2 url=$3 dst=$4 dev=$5
    local quiet flood complete failed s0 d0 s1 d1 t0 t1 h0 h1 sent
    read -r quiet _ _ < <(fetch "$ns" "$url")
    h0=$(date +%s.%N)
    ip netns exec "$ns" timeout $((DURATION + 3)) hping3 "${FLOOD_ARGS[@]}" --rand-source -S -p 80 "$dst" \
        >"$WORK/hping.log" 2>&1 &
    FLOOD_PID=$!
    sleep 1
    read -r s0 d0 < <(link_packets "$ns" "$dev")
    t0=$(date +%s.%N)
    read -r flood complete failed < <(fetch "$ns" "$url")
    t1=$(date +%s.%N)
    read -r s1 d1 < <(link_packets "$ns" "$dev")
    stop_pid "$FLOOD_PID"
    FLOOD_PID=""
    h1=$(date +%s.%N)
    sent=$(sed -nE 's/^([0-9]+) packets transmitted.*/\1/p' "$WORK/hping.log")
    echo "$name $quiet $flood $complete $failed ${sent:-0} $h0 $h1 $((d1 - d0)) $t0 $t1" >>"$WORK/results"
}

LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
: >"$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
    run nagare "$NS_A" http://10.84.0.2/index.html 10.84.0.2 tap0
    run nagare-unguarded "$NS_D" http://10.87.0.2/index.html 10.87.0.2 tap0
    run linux "$NS_B" http://10.85.0.2/index.html 10.85.0.2 veth0
    log "  round $round done"
done
kill -0 "$NAGARE_PID" 2>/dev/null || { log "nagare died during the run"; exit 1; }
kill -0 "$UNGUARDED_PID" 2>/dev/null || { log "nagare (guard off) died during the run"; exit 1; }

# --- report -----------------------------------------------------------------
echo "Legitimate fetches (4 KiB, ab -c $CONCURRENCY, one connection each, $DURATION s) quiet and under hping3 ${FLOOD_ARGS[*]} --rand-source -S,"
echo "nagare up --http over a TAP (with its SYN guard, and without: --syn-budget 0) beside Linux (nginx, 1 worker) over veth; median of $ROUNDS rounds."
echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo
echo "| server | quiet (req/s) | under flood (req/s) | flood/quiet | failed | flood offered (SYN/s) | dropped by the link (frames/s) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for name in nagare nagare-unguarded linux; do
    awk -v name="$name" '
    $1 == name { n++; q[n] = $2; f[n] = $3; c += $4; fl += $5; off[n] = $6 / ($8 - $7); dr[n] = $9 / ($11 - $10) }
    function median(a, n,   i, j, t) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        mq = median(q, n); mf = median(f, n)
        printf "| %s | %.0f | %.0f | %.2f | %d of %d | %.0f | %.0f |\n", name, mq, mf, (mq > 0 ? mf / mq : 0), fl, c, median(off, n), median(dr, n)
    }' "$WORK/results"
done
