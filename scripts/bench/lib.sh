# What the benchmark scripts share; sourced, not run. Expects ROOT (the
# repository) and, for the topology helpers, root privileges.

log() { printf '%s\n' "$*" >&2; }

# skip WHY: the script says, loudly, that it is SKIPPED and why, and ends
# with status 1 (its EXIT trap still cleans up).
skip() {
    log "$(basename "$0"): SKIPPED: $*"
    exit 1
}

# need_root_and_tools WHAT TOOL...: skips unless run as root (WHAT: what
# root is needed for) with every TOOL installed.
need_root_and_tools() {
    local what=$1 tool
    shift
    [[ $(id -u) -eq 0 ]] || skip "needs root ($what)"
    for tool in "$@"; do
        command -v "$tool" >/dev/null || skip "$tool is missing (scripts/install-test-deps.sh)"
    done
}

# stop_pid PID: SIGTERM, up to 5 s for it to go, then SIGKILL; reaps it.
stop_pid() {
    local pid=$1
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    return 0
}

# find_nagare: sets NAGARE to the release binary ($NAGARE if given),
# building it if missing; exits if there is none.
find_nagare() {
    NAGARE="${NAGARE:-$ROOT/target/release/nagare}"
    if [[ ! -x "$NAGARE" ]]; then
        log "building $NAGARE"
        (cd "$ROOT" && cargo build --release -p nagare-cli)
        if [[ -n "${CARGO_TARGET_DIR:-}" && ! -x "$NAGARE" ]]; then
            NAGARE="$CARGO_TARGET_DIR/release/nagare"
        fi
    fi
    [[ -x "$NAGARE" ]] || { log "no nagare binary at $NAGARE"; exit 1; }
}

# find_preload: sets PRELOAD to the preload library beside $NAGARE,
# building it if missing; skips if there is none.
find_preload() {
    PRELOAD="$(dirname "$NAGARE")/libnagare_preload.so"
    if [[ ! -f "$PRELOAD" ]]; then
        (cd "$ROOT" && cargo build --release -p nagare-preload)
    fi
    [[ -f "$PRELOAD" ]] || skip "no $PRELOAD"
}
# make_namespaces NS...: new namespaces, loopback up.
make_namespaces() {
    local ns
    for ns in "$@"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
}

# delete_namespaces NS...: those that exist go (with their devices).
delete_namespaces() {
    local ns
    for ns in "$@"; do
        ip netns list 2>/dev/null | grep -qw -- "$ns" && ip netns del "$ns"
    done
    return 0
}

# make_tap NS ADDR/PREFIX: TAP tap0 in NS, its kernel side at ADDR, up.
make_tap() {
    ip netns exec "$1" ip tuntap add dev tap0 mode tap
    ip -n "$1" addr add "$2" dev tap0
    ip -n "$1" link set tap0 up
}

# make_veth TAG NS_B ADDR_B NS_C ADDR_C: veth0 in each namespace, joined, up.
make_veth() {
    ip link add "$1-vb" netns "$2" type veth peer name "$1-vc" netns "$4"
    ip -n "$2" link set "$1-vb" name veth0
    ip -n "$4" link set "$1-vc" name veth0
    ip -n "$2" addr add "$3" dev veth0
    ip -n "$4" addr add "$5" dev veth0
    ip -n "$2" link set veth0 up
    ip -n "$4" link set veth0 up
}

# start_netd_on_tap NS NETD_ADDR KERNEL_ADDR SOCKET LOGFILE [ARGS...]:
# `nagare netd --tap tap0 --addr NETD_ADDR ARGS` in NS (netd makes the
# TAP), its socket at SOCKET; once netd listens and the TAP exists, the
# TAP's kernel side gets KERNEL_ADDR and goes up. Sets NETD_PID.
start_netd_on_tap() {
    local ns=$1 netd_addr=$2 kernel_addr=$3 socket=$4 logfile=$5
    shift 5
    rm -f "$socket"
    ip netns exec "$ns" "$NAGARE" netd --tap tap0 --addr "$netd_addr" "$@" --socket "$socket" >>"$logfile" 2>&1 &
    NETD_PID=$!
    for _ in $(seq 1 100); do
        if [[ -S "$socket" ]] && ip -n "$ns" link show tap0 >/dev/null 2>&1; then
            ip -n "$ns" addr replace "$kernel_addr" dev tap0
            ip -n "$ns" link set tap0 up
            return 0
        fi
        kill -0 "$NETD_PID" 2>/dev/null || { log "netd exited at start ($logfile)"; return 1; }
        sleep 0.1
    done
    log "netd did not start ($logfile)"
    return 1
}

# show_logs DIR LINES: the last LINES lines of every non-empty DIR/*.log,
# each under its name (a failed run's cleanup shows them).
show_logs() {
    local f
    for f in "$1"/*.log; do
        [[ -s "$f" ]] || continue
        log "--- $(basename "$f") ---"
        tail -n "$2" "$f" >&2
    done
}

# parse_counts NAME LIST MAX: the counts in LIST (comma or space
# separated), each 1 to MAX, into COUNTS; exits with a message naming
# NAME if one is not, or if there is none.
parse_counts() {
    local n
    COUNTS=()
    for n in ${2//,/ }; do
        [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le "$3" ]] || { log "$1: $n is not a count from 1 to $3"; exit 1; }
        COUNTS+=("$((10#$n))")
    done
    [[ ${#COUNTS[@]} -gt 0 ]] || { log "$1 names no count"; exit 1; }
}
