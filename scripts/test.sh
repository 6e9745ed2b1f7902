#!/usr/bin/env bash
# The whole test suite: unit, property, integration, simulation and (as
# root) interop tests against the Linux kernel in network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh
cargo build --workspace --all-targets --locked
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
