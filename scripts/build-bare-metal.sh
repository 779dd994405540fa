#!/usr/bin/env bash
# Builds socscope-wire and socscope-agent for thumbv7em-none-eabihf, links the footprint image (which fails
# to link if any panicking path remains in the agent) and prints the agent's flash footprint.
#
# rustup's thumbv7em-none-eabihf standard library cannot be downloaded on machines that only reach
# crates.io and Debian; then Debian's rustc-web and its library sources build `core` from source
# (-Zbuild-std), with rustup's rust-lld as the linker.
set -euo pipefail
cd "$(dirname "$0")/.."
target=thumbv7em-none-eabihf
out=target/bare-metal

if rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  cargo=(cargo)
  build_std=()
else
  if [ ! -x /usr/bin/rustc ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
    echo "build-bare-metal: installing Debian's rustc-web and rust-web-src (for -Zbuild-std)" >&2
    if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq rustc-web rust-web-src cargo-web >/dev/null
  fi
  export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
  cargo=(/usr/bin/cargo)
  build_std=(-Zbuild-std=core)
fi
lld="$(rustup which rustc 2>/dev/null | xargs dirname)/../lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"
[ -x "$lld" ] || lld=rust-lld

"${cargo[@]}" build -q --release -p socscope-wire -p socscope-agent --target "$target" \
  "${build_std[@]}" --target-dir "$out"
CARGO_TARGET_THUMBV7EM_NONE_EABIHF_LINKER="$lld" \
  "${cargo[@]}" build -q --release --manifest-path targets/footprint/Cargo.toml --target "$target" \
  "${build_std[@]}" --target-dir "$out"

elf="$out/$target/release/socscope-footprint"
size_tool=$(command -v llvm-size || ls /usr/lib/llvm-*/bin/llvm-size 2>/dev/null | head -n 1)
echo "bare-metal build OK ($target); footprint image: $elf"
"$size_tool" -A "$elf" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  %-8s %6d bytes\n", $1, $2 }'
