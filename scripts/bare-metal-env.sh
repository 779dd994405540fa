# Sourced by the bare-metal builds (scripts/build-bare-metal.sh, targets/cortex-m/build.sh): picks how to
# build for thumbv7em-none-eabihf and sets `cargo` and `build_std` (arrays) and `lld` (the linker).
#
# rustup's thumbv7em-none-eabihf standard library cannot be downloaded on machines that only reach
# crates.io and Debian; then Debian's rustc-web and its library sources build `core` from source
# (-Zbuild-std), with rustup's rust-lld as the linker.
target=thumbv7em-none-eabihf
if rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  cargo=(cargo)
  build_std=()
else
  if [ ! -x /usr/bin/rustc ] || [ ! -d /usr/lib/rustlib/src/rust/library ]; then
    echo "bare-metal: installing Debian's rustc-web and rust-web-src (for -Zbuild-std)" >&2
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
