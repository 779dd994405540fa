#!/usr/bin/env bash
# Builds the mps2-an386 firmware and prints its path. The link fails if any panicking path remains in the
# firmware or the agent.
#
#   targets/cortex-m/build.sh            the default image (target/.../release/socscope-cortex-m)
#   targets/cortex-m/build.sh VARIANT    another image, copied to target/.../release/socscope-cortex-m-VARIANT
#                                        (the default path then holds that variant until the next default build):
#     untimed   masked sections not timed (the plain PRIMASK critical section): measure.sh's record counts
#     probe     probe mode: the board only records; the host reads its rings (socscope collect --probe)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bare-metal-env.sh
out=target/bare-metal
variant="${1:-}"
case "$variant" in
  "") features=() ;;
  untimed) features=(--no-default-features) ;;
  probe) features=(--features probe) ;;
  *) echo "build.sh: unknown variant '$variant' (expected untimed or probe)" >&2; exit 2 ;;
esac
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/cortex-m/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out" "${features[@]}"
elf="$PWD/$out/$target/release/socscope-cortex-m"
if [ -n "$variant" ]; then
  cp "$elf" "$elf-$variant"
  elf="$elf-$variant"
fi
echo "$elf"
