#!/usr/bin/env bash
# The test command (README quick start; .ci/run calls exactly this): installs what the tests need, checks
# formatting and lints, runs every test of the workspace, and builds the agent for a bare-metal target.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
scripts/build-bare-metal.sh
