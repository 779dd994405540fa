#!/usr/bin/env bash
# Builds the mps2-an386 firmware and prints its path. The link fails if any panicking path remains in the
# firmware or the agent.
#
#   targets/cortex-m/build.sh            the default image (target/.../release/socscope-cortex-m)
#   targets/cortex-m/build.sh VARIANT    another image, copied to target/.../release/socscope-cortex-m-VARIANT
#                                        (the default path then holds that variant until the next default build):
#   Every image is also printed as a copy of its own (`-default` for the default one), made under a lock:
#   tests run QEMU on several variants at once, and cargo puts every build at the same default path.
#     untimed   masked sections not timed (the plain PRIMASK critical section): measure.sh's record counts
#     probe     probe mode: the board only records; the host reads its rings (socscope collect --probe)
#     probe-app the probe image as an application ships it: without the `bench` mode (the measurement
#               harness); measure.sh's flash figure is this image's
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bare-metal-env.sh
out=target/bare-metal
variant="${1:-}"
case "$variant" in
  "") features=() ;;
  untimed) features=(--no-default-features --features bench) ;;
  probe) features=(--features probe) ;;
  probe-app) features=(--no-default-features --features timed-masking,probe) ;;
  *) echo "build.sh: unknown variant '$variant' (expected untimed, probe or probe-app)" >&2; exit 2 ;;
esac
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/cortex-m/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out" "${features[@]}"
elf="$PWD/$out/$target/release/socscope-cortex-m"
copy="$elf-${variant:-default}"
# Replaced by a rename: a QEMU that already loaded the previous copy is not disturbed.
cp "$elf" "$copy.tmp.$$"
mv -f "$copy.tmp.$$" "$copy"
echo "$copy"
