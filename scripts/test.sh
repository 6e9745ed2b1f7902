#!/usr/bin/env bash
# The whole test suite: unit, property, integration, simulation and (as
# root) interop tests against the Linux kernel in network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh
cargo fmt --all --check
rustfmt --check --edition 2021 fuzz/fuzz_targets/*.rs
cargo build --workspace --all-targets --locked
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
# nagare-tokio's futures_io traits, behind their feature.
cargo clippy --locked -p nagare-tokio --features futures-io --all-targets -- -D warnings
cargo test --locked -p nagare-tokio --features futures-io --test futures_io
# The TCP simulation campaign: 1000 seeded transfers of 1-10 MB each way
# under loss, reordering, duplication and corruption (release mode: about a
# minute). A failing seed prints itself and how to replay it.
NAGARE_SIM_RUNS=1000 cargo test --release --locked -p nagare-dev --test tcp_sim seeded_transfers_deliver_every_byte
# Four VNI instances in separate processes: 100 MB between every pair in
# both directions at once, then one killed with SIGKILL mid-transfer and
# restarted (release mode, no root).
NAGARE_VNI_FULL=1 cargo test --release --locked -p nagare-cli --test vni_mesh
