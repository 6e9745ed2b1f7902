#!/usr/bin/env bash
# Unmodified programs through netd (`nagare run`) beside the same programs
# on the kernel's stack, in one run: iperf3 both ways, redis-benchmark
# against redis-server, ab against nginx, and pgbench against PostgreSQL.
#
# Usage (root; the release binary and preload library are built if
# missing):
#
#   sudo DURATION=5 scripts/bench/programs.sh
#
#   namespace N: `nagare netd --tap tap0 --addr 10.95.0.2/24` (its kernel
#                side 10.95.0.1/24); the program through netd runs under
#                `nagare run --via SOCKET`, its peer is the kernel's.
#   namespaces B and C: veth pair, 10.96.0.1/24 <-> 10.96.0.2/24, the
#                same programs kernel to kernel.
#
# Rows: iperf3 with its client through netd (to the kernel's server), its
# server through netd (from the kernel's client), and kernel to kernel;
# the receiver's Gbit/s, one TCP stream for DURATION seconds. redis:
# redis-server through netd or on the kernel, the kernel's
# redis-benchmark (-t set,get, -n REQUESTS) with each count of
# REDIS_CONNECTIONS (1, 10 and 300 connections): requests/s of SET and
# GET. nginx (where `nginx` and `ab` are installed): a master and two
# worker processes, which share the listener, serving a 1 KiB file
# through netd or on the kernel; the kernel's `ab -n HTTP_REQUESTS` with 1
# and 10 requests at a time, a connection per request and kept alive
# (`-k`): requests/s. PostgreSQL (where `postgres`, `initdb` and `pgbench` are
# installed; the rows say so when they are not): a server
# through netd or on the kernel, each run as user nobody (a daemon with a
# user of its own, which reaches netd through its opened socket), the
# kernel's `pgbench -S` (read-only transactions on a scale-4 table) with
# 1 and 8 clients for DURATION seconds, and with one client and a new
# connection for each transaction (`-C`: the server forks a backend for
# each): transactions/s.
#
# netd runs with its default budgets and --socket-mode 666. Traffic stays
# inside the namespaces this script creates; everything it creates is
# removed on exit, and every process it starts is ended by its pid.
#
# Environment: NAGARE (binary; default target/release/nagare), DURATION
# (seconds per iperf3 run, 5), REQUESTS (per redis-benchmark run, 100000),
# REDIS_CONNECTIONS ("1 10 300"), HTTP_REQUESTS (per ab run, 10000),
# NETD_ARGS (more options for netd, e.g.
# "--realtime 1").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DURATION="${DURATION:-5}"
REQUESTS="${REQUESTS:-100000}"
TAG="pg$$"
NS_N="${TAG}-n"
NS_B="${TAG}-b"
NS_C="${TAG}-c"
WORK="$(mktemp -d /tmp/nagare-programs.XXXXXX)"
SOCKET="$WORK/netd.sock"
NETD_PID=""
PIDS=()

# shellcheck source=scripts/bench/lib.sh
. "$ROOT/scripts/bench/lib.sh"

cleanup() {
    local rc=$?
    set +e
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid"
    done
    stop_pid "$NETD_PID"
    delete_namespaces "$NS_N" "$NS_B" "$NS_C"
    [[ $rc -eq 0 ]] || show_logs "$WORK" 20
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need_root_and_tools "namespaces, TAP devices, veth" ip timeout python3 iperf3 redis-server redis-benchmark
find_nagare
find_preload

make_namespaces "$NS_N" "$NS_B" "$NS_C"
make_veth "$TAG" "$NS_B" 10.96.0.1/24 "$NS_C" 10.96.0.2/24
# nobody reaches netd's socket in it (postgres runs as nobody).
chmod 711 "$WORK"
read -r -a NETD_EXTRA <<<"${NETD_ARGS:-}"
start_netd_on_tap "$NS_N" 10.95.0.2/24 10.95.0.1/24 "$SOCKET" "$WORK/netd.log" --socket-mode 666 "${NETD_EXTRA[@]}"
echo "netd options: --socket-mode 666${NETD_ARGS:+ $NETD_ARGS}"
echo
sleep 0.5

# "${THROUGH[@]}" CMD...: CMD in namespace N through netd.
THROUGH=(ip netns exec "$NS_N" "$NAGARE" run --via "$SOCKET" --)

# background NAME CMD...: CMD started in the background, its pid kept.
background() {
    local name=$1
    shift
    "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
}

# iperf3_gbit: the receiver's Gbit/s from iperf3's JSON on stdin (or its
# error, on stderr, and a failure).
iperf3_gbit() {
    python3 -c '
import json, sys
s = json.load(sys.stdin)
if "error" in s:
    sys.exit("iperf3: " + s["error"])
print("%.2f" % (s["end"]["sum_received"]["bits_per_second"] / 1e9))'
}

# iperf3_row NAME LABEL SERVER_CMD... :: CLIENT_CMD...
iperf3_row() {
    local name=$1 label=$2 server=() client=()
    shift 2
    while [[ $1 != :: ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    background "iperf3-$name" "${server[@]}" -s -1
    sleep 1
    local g
    g=$(timeout $((DURATION + 20)) "${client[@]}" -t "$DURATION" --json 2>>"$WORK/iperf3-client.log" |
        iperf3_gbit 2>>"$WORK/iperf3-client.log") || { g=fail; tail -n 5 "$WORK/iperf3-client.log" >&2; }
    printf '| iperf3: %s | %s |\n' "$label" "$g"
}

echo "| test | result |"
echo "|---|---:|"
iperf3_row netd-client "client through netd, kernel server (Gbit/s)" ip netns exec "$NS_N" iperf3 -B 10.95.0.1 -p 5301 \
    :: "${THROUGH[@]}" iperf3 -c 10.95.0.1 -p 5301
iperf3_row netd-server "kernel client, server through netd (Gbit/s)" "${THROUGH[@]}" iperf3 -B 10.95.0.2 -p 5302 \
    :: ip netns exec "$NS_N" iperf3 -c 10.95.0.2 -p 5302
iperf3_row kernel "kernel to kernel over veth (Gbit/s)" ip netns exec "$NS_C" iperf3 -B 10.96.0.2 -p 5303 \
    :: ip netns exec "$NS_B" iperf3 -c 10.96.0.2 -p 5303

REDIS_ARGS=(--save "" --appendonly no --protected-mode no)
background redis-netd "${THROUGH[@]}" redis-server --bind 10.95.0.2 --port 6379 "${REDIS_ARGS[@]}"
background redis-kernel ip netns exec "$NS_C" redis-server --bind 10.96.0.2 --port 6379 "${REDIS_ARGS[@]}"
sleep 1
# redis_row LABEL NS HOST CONNECTIONS
redis_row() {
    local out
    out=$(timeout 120 ip netns exec "$2" redis-benchmark -h "$3" -q -n "$REQUESTS" -c "$4" -t set,get 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | awk '{printf "%s %s, ", $1, $2}') || out=fail
    printf '| redis %s, %s connections (requests/s) | %s |\n' "$1" "$4" "${out%, }"
}
for c in ${REDIS_CONNECTIONS:-1 10 300}; do
    redis_row "through netd" "$NS_N" 10.95.0.2 "$c"
    redis_row "kernel over veth" "$NS_B" 10.96.0.2 "$c"
done

# nginx_start NAME ADDR CMD...: nginx (a master, two workers) serving
# WORK/www on ADDR port 8080, its files in WORK/NAME, run by CMD.
nginx_start() {
    local name=$1 addr=$2 dir="$WORK/$1"
    shift 2
    mkdir -p "$dir/temp"
    cat >"$dir/nginx.conf" <<EOF
daemon off; master_process on; worker_processes 2; error_log stderr; pid $dir/nginx.pid;
events { worker_connections 1024; }
http { access_log off; sendfile on; client_body_temp_path $dir/temp/body; proxy_temp_path $dir/temp/proxy;
  fastcgi_temp_path $dir/temp/fcgi; uwsgi_temp_path $dir/temp/uwsgi; scgi_temp_path $dir/temp/scgi;
  server { listen $addr:8080; root $WORK/www; } }
EOF
    background "$name" "$@" nginx -c "$dir/nginx.conf"
}
# nginx_row LABEL NS HOST CONCURRENCY [-k]
nginx_row() {
    local rps
    rps=$(timeout 120 ip netns exec "$2" ab -q ${5:-} -n "${HTTP_REQUESTS:-10000}" -c "$4" "http://$3:8080/small.html" \
        2>>"$WORK/ab.log" | awk '/^Requests per second/ {printf "%.0f", $4}') || rps=""
    printf '| nginx %s, ab%s, %s at a time (requests/s) | %s |\n' "$1" "${5:+ $5}" "$4" "${rps:-fail}"
}
if command -v nginx >/dev/null && command -v ab >/dev/null; then
    mkdir -p "$WORK/www"
    head -c 1024 /dev/zero | tr '\0' x >"$WORK/www/small.html"
    nginx_start nginx-netd 10.95.0.2 "${THROUGH[@]}"
    nginx_start nginx-kernel 10.96.0.2 ip netns exec "$NS_C"
    sleep 1
    for k in "" -k; do
        for c in 1 10; do
            nginx_row "through netd" "$NS_N" 10.95.0.2 "$c" $k
            nginx_row "kernel over veth" "$NS_B" 10.96.0.2 "$c" $k
        done
    done
else
    echo "| nginx | not installed (nginx, ab) |"
fi

if ! command -v postgres >/dev/null || ! command -v initdb >/dev/null || ! command -v pgbench >/dev/null ||
    ! command -v setpriv >/dev/null; then
    echo "| postgres | not installed (postgres, initdb, pgbench, setpriv) |"
    exit 0
fi
AS_NOBODY=(setpriv --reuid 65534 --regid 65534 --clear-groups --)
# postgres_start NAME NS ADDR [THROUGH...]: a fresh cluster in WORK/NAME,
# served on ADDR by user nobody, in NS (through netd when THROUGH is set).
postgres_start() {
    local name=$1 ns=$2 addr=$3 dir="$WORK/$1"
    shift 3
    mkdir -m 700 "$dir"
    chown 65534:65534 "$dir"
    "${AS_NOBODY[@]}" initdb -D "$dir" -A trust -U postgres >"$WORK/$name-initdb.log" 2>&1
    echo "host all all 0.0.0.0/0 trust" >>"$dir/pg_hba.conf"
    background "$name" ip netns exec "$ns" "${AS_NOBODY[@]}" "$@" postgres -D "$dir" -h "$addr" -k "$dir" \
        -c shared_buffers=64MB -c fsync=off
}
postgres_start pg-netd "$NS_N" 10.95.0.2 "$NAGARE" run --via "$SOCKET" --
postgres_start pg-kernel "$NS_C" 10.96.0.2
# pgbench_init NS HOST: the scale-4 tables, once the server answers
# (at most 40 tries of at most 20 s).
pgbench_init() {
    for _ in $(seq 1 40); do
        timeout 20 ip netns exec "$1" pgbench -h "$2" -U postgres -i -s 4 postgres >>"$WORK/pgbench-init.log" 2>&1 &&
            return 0
        sleep 0.5
    done
    return 1
}
# postgres_row LABEL NS HOST CLIENTS [-C]
postgres_row() {
    local tps
    tps=$(timeout $((DURATION + 30)) ip netns exec "$2" pgbench -h "$3" -U postgres -S -c "$4" -j "$4" ${5:-} \
        -T "$DURATION" postgres 2>>"$WORK/pgbench.log" | awk '/^tps/ {printf "%.0f", $3}') || tps=""
    printf '| postgres %s, pgbench -S%s, %s clients (transactions/s) | %s |\n' "$1" "${5:+ $5}" "$4" "${tps:-fail}"
}
pgbench_init "$NS_N" 10.95.0.2 || log "postgres through netd did not answer"
pgbench_init "$NS_B" 10.96.0.2 || log "postgres on the kernel did not answer"
for c in 1 8; do
    postgres_row "through netd" "$NS_N" 10.95.0.2 "$c"
    postgres_row "kernel over veth" "$NS_B" 10.96.0.2 "$c"
done
postgres_row "through netd" "$NS_N" 10.95.0.2 1 -C
postgres_row "kernel over veth" "$NS_B" 10.96.0.2 1 -C
