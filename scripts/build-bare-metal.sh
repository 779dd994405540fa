#!/usr/bin/env bash
# Builds socscope-wire and socscope-agent for thumbv7em-none-eabihf, links the footprint image (which fails
# to link if any panicking path remains in the agent) and prints the agent's flash footprint; builds the
# mps2-an386 firmware (targets/cortex-m, same proof).
#
# rustup's thumbv7em-none-eabihf standard library cannot be downloaded on machines that only reach
# crates.io and Debian: scripts/bare-metal-env.sh then uses Debian's rustc-web with -Zbuild-std.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bare-metal-env.sh
out=target/bare-metal

"${cargo[@]}" build -q --release -p socscope-wire -p socscope-agent --target "$target" \
  "${build_std[@]}" --target-dir "$out"
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/footprint/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out"

elf="$out/$target/release/socscope-footprint"
size_tool=$(command -v llvm-size || ls /usr/lib/llvm-*/bin/llvm-size 2>/dev/null | head -n 1)
# The probe mode's image (no drain on the board), same proof; built second and copied aside, then the
# streaming image again so that $elf stays the streaming one.
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/footprint/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out" --features probe
cp "$elf" "$elf-probe"
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/footprint/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out"
echo "bare-metal build OK ($target); footprint image: $elf"
"$size_tool" -A "$elf" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  %-8s %6d bytes\n", $1, $2 }'
echo "footprint image in probe mode: $elf-probe"
"$size_tool" -A "$elf-probe" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  %-8s %6d bytes\n", $1, $2 }'
# The variants are copies; the default image last, so that its path holds it.
firmware="$(targets/cortex-m/build.sh untimed)"
echo "mps2-an386 firmware, masked sections untimed (measure.sh's record counts), OK: $firmware"
firmware="$(targets/cortex-m/build.sh probe)"
echo "mps2-an386 firmware in probe mode OK: $firmware"
firmware="$(targets/cortex-m/build.sh probe-app)"
echo "mps2-an386 firmware in probe mode as an application ships it (no bench mode) OK: $firmware"
firmware="$(targets/cortex-m/build.sh)"
echo "mps2-an386 firmware OK: $firmware"

# The C API's static library, and its link-time proof: every exported function kept, everything else
# garbage-collected; a panicking path still reachable from one of them references the panic handler, which
# calls the undefined socscope_agent_must_not_panic, and the link fails.
"${cargo[@]}" build -q --release -p socscope-agent-capi --target "$target" "${build_std[@]}" --target-dir "$out"
capi="$out/$target/release/libsocscope_agent_capi.a"
nm_tool=$(command -v llvm-nm || ls /usr/lib/llvm-*/bin/llvm-nm 2>/dev/null | head -n 1)
mapfile -t exported < <("$nm_tool" --defined-only -g "$capi" 2>/dev/null | awk '$2 == "T" && $3 ~ /^socscope_/ { print $3 }')
[ "${#exported[@]}" -ge 26 ] || { echo "build-bare-metal: only ${#exported[@]} socscope_ functions in $capi" >&2; exit 1; }
keep=()
for s in "${exported[@]}"; do keep+=(-u "$s"); done
"$lld" -flavor gnu --gc-sections -e socscope_agent_size "${keep[@]}" "$capi" -o "$out/capi-proof.elf"
echo "C API static library OK (no panicking path from its ${#exported[@]} functions): $capi"
"$size_tool" -A "$out/capi-proof.elf" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  %-8s %6d bytes\n", $1, $2 }'
