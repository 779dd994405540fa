#!/usr/bin/env bash
# Installs the system packages the tests need (Debian), skipping those already present.
#   rustc-web, rust-web-src, cargo-web: build `core` for thumbv7em-none-eabihf (scripts/build-bare-metal.sh)
set -euo pipefail
packages=(rustc-web rust-web-src cargo-web)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  echo "install-test-deps: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
