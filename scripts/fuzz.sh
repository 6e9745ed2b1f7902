#!/usr/bin/env bash
# Coverage-guided fuzzing on the stable toolchain: libFuzzer (linked by
# libfuzzer-sys) with LLVM's SanitizerCoverage instrumentation, which stable
# rustc accepts through -C passes / -C llvm-args. The --target flag keeps
# the instrumentation away from build scripts. Rust's own checks (bounds,
# overflow, debug assertions) stand in for AddressSanitizer.
#
#   scripts/fuzz.sh TARGET [SECONDS] [LIBFUZZER FLAGS...]
#   TARGET: iface_receive | wire_parsers | netd_requests | datagram_records |
#   dns_answers;
#   e.g. -len_control=0
#   to try long inputs (netd_requests' scripts) from the start.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

target=${1:?usage: scripts/fuzz.sh iface_receive|wire_parsers|netd_requests|datagram_records|dns_answers [seconds]}
seconds=${2:-300}
triple=$(rustc -vV | sed -n 's/^host: //p')

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
cargo build --release --target "$triple" --bin "$target"

mkdir -p "corpus/$target" "artifacts/$target"
exec "$CARGO_TARGET_DIR/$triple/release/$target" "corpus/$target" \
    -artifact_prefix="artifacts/$target/" -max_total_time="$seconds" -max_len=8192 "${@:3}"
