#!/usr/bin/env bash
# Installs the system packages the tests need (Debian), skipping those already present.
#   rustc-web, rust-web-src, cargo-web: build `core` for thumbv7em-none-eabihf (scripts/build-bare-metal.sh)
#   xvfb, x11-apps (xwd), libgl1-mesa-dri, libegl1, libxkbcommon-x11-0: the GUI in a virtual X server
#     (analyzer/app/tests/gui_window.rs); mesa-vulkan-drivers: lavapipe, the software Vulkan that
#     egui_kittest's wgpu snapshot renderer uses (analyzer/app/tests/gui_snapshots.rs)
#   qemu-system-arm: the mps2-an386 board the firmware of targets/cortex-m runs on
#     (analyzer/app/tests/cortex_m_qemu.rs), installed without its recommends (audio, video, network boot
#     ROMs: a few hundred MB the board does not use)
#   cc (gcc, on the machine already): examples/c/player.c and the C API's header checks (agent/capi)
#   pajeng (pj_dump): reads socscope's Pajé exports back (analyzer/app/tests/import_export.rs); installed
#     without its recommendations (R and a terminal emulator), which it does not need
#   openjdk-17-jre-headless and a Python virtual environment (target/python-venv) with pyspark: the fleet
#     report on Spark in local mode (analyzer/app/tests/fleet_spark.rs, scripts/fleet/spark_report.py);
#     python3-venv to create it. duckdb there too: the anchor of `socscope bench fleet`.
#   trace-cmd, babeltrace2: the reference readers of trace-cmd .dat files and CTF traces, which the
#     binary importers are checked against (protocols/formats/tests/{tracecmd,ctf}_reference.rs,
#     collector/tests/import_tracecmd.rs)
set -euo pipefail
packages=(rustc-web rust-web-src cargo-web xvfb x11-apps libgl1-mesa-dri libegl1 libxkbcommon-x11-0 mesa-vulkan-drivers)
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
if ! dpkg -s qemu-system-arm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  echo "install-test-deps: installing qemu-system-arm" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends qemu-system-arm >/dev/null
fi
if ! dpkg -s pajeng >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  echo "install-test-deps: installing pajeng" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends pajeng >/dev/null
fi
# Fleet scale: Spark needs a Java runtime (17 or later) and pyspark, which goes into a virtual environment
# of the checkout (PyPI), not into the system's Python.
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  echo "install-test-deps: installing openjdk-17-jre-headless" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  echo "install-test-deps: installing python3-venv" >&2
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq python3-venv >/dev/null
fi
venv="$(cd "$(dirname "$0")/.." && pwd)/target/python-venv"
if ! "$venv/bin/python" -c 'import pyspark, duckdb' >/dev/null 2>&1; then
  echo "install-test-deps: creating $venv with pyspark and duckdb" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'pyspark>=3.5,<5' 'duckdb>=1.1,<3'
fi
for p in trace-cmd babeltrace2; do
  if ! dpkg -s "$p" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
    echo "install-test-deps: installing $p" >&2
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$p" >/dev/null
  fi
done
