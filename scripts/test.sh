#!/usr/bin/env bash
# The test command (README quick start; .ci/run calls exactly this): installs what the tests need, checks
# formatting and lints, runs every test of the workspace, and builds the agent for a bare-metal target.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
# A clean build gains nothing from incremental caches, which would double the target directory's size.
if [ "${CI:-}" = "true" ]; then
  export CARGO_INCREMENTAL=0
fi
# A full build needs a few GB; say so plainly rather than failing later inside a linker. Measured: the debug
# test build and the bare-metal build take 3.8 GB, 5.6 GB with the quick start's release build beside them.
avail_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${avail_kb:-0}" -lt 6000000 ]; then
  echo "warning: only $((avail_kb / 1024)) MiB free on $(df -P . | awk 'NR == 2 { print $6 }'); the test build needs about 4 GB, 6 GB with the quick start's release build" >&2
fi
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
