#!/usr/bin/env bash
# The test command (README quick start; .ci/run calls exactly this): installs what the tests need, checks
# formatting and lints, runs every test of the workspace, and builds the agent for a bare-metal target.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# The GUI tests' graphics stack (Mesa, winit) wants a runtime directory; CI shells have none.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d)
  chmod 700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
cargo test --workspace --all-features
scripts/build-bare-metal.sh
