#!/usr/bin/env bash
# Takes the README's screenshots (docs/screenshots/NAME.png) from the current GUI: a demo capture
# (zapping, a CPU stress, so the Gantt's CPU tracks and every view have something to show), each
# view opened on it in a real window under Xvfb, `socscope view --screenshot` (which moves the
# pointer out of the window first). The spatiotemporal Ocelotl picture is the GUI test's snapshot
# (analyzer/app/tests/snapshots/ocelotl_spatiotemporal_dark.png, 60 slices, taken once settled and
# without the pointer by `UPDATE_SNAPSHOTS=1 cargo test --test gui_analysis_views`): in a window
# (`view --view ocelotl --aggregation spatiotemporal`) its bisection over 200 slices had not settled
# within the screenshot's wait in a debug build.
#
# Usage: scripts/readme-screenshots.sh [OUT_DIR]   (default docs/screenshots)
# Needs Xvfb and a built `socscope` (SOCSCOPE=path, default target/release/socscope).
set -euo pipefail

cd "$(dirname "$0")/.."
out=${1:-docs/screenshots}
socscope=${SOCSCOPE:-target/release/socscope}
display=${SCREENSHOT_DISPLAY:-:91}

[ -x "$socscope" ] || { echo "no $socscope: build it (cargo build --release -p socscope-analyzer --bin socscope) or set SOCSCOPE" >&2; exit 1; }
command -v Xvfb >/dev/null || { echo "Xvfb is missing: scripts/install-test-deps.sh installs it" >&2; exit 1; }

work=$(mktemp -d)
xvfb_pid=
cleanup() {
    [ -n "$xvfb_pid" ] && kill "$xvfb_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$socscope" demo --headless --json --duration 6 --seed 3 --zap-every 2 --cpu-stress 3:1 \
    --dir "$work" >"$work/demo.json"
trace=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file"])' "$work/demo.json")

Xvfb "$display" -screen 0 1400x900x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 50); do
    [ -e "/tmp/.X11-unix/X${display#:}" ] && break
    sleep 0.1
done
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$work/xdg}
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

shot() { # NAME VIEW [ARGS...]
    local name=$1 view=$2
    shift 2
    DISPLAY=$display "$socscope" view "$trace" --view "$view" --size 1280x760 --light \
        --screenshot "$out/$name.png" "$@"
    echo "$out/$name.png"
}
mkdir -p "$out"
shot gantt gantt
shot table table
shot statistics statistics
shot density density
shot traceviz traceviz
shot ocelotl ocelotl
cp analyzer/app/tests/snapshots/ocelotl_spatiotemporal_dark.png "$out/ocelotl-spatiotemporal.png"
echo "$out/ocelotl-spatiotemporal.png (the GUI test's snapshot)"
