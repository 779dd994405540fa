#!/usr/bin/env bash
# Builds the mps2-an386 firmware (target/bare-metal/thumbv7em-none-eabihf/release/socscope-cortex-m) and
# prints its path. The link fails if any panicking path remains in the firmware or the agent.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bare-metal-env.sh
out=target/bare-metal
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/cortex-m/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out"
echo "$PWD/$out/$target/release/socscope-cortex-m"
