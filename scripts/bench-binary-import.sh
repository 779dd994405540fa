#!/usr/bin/env bash
# Import speed of the binary captures (BENCHMARKS.md, "Import": trace-cmd .dat and CTF) against the
# reference readers' own reading speed in the same run: `trace-cmd report > /dev/null` and
# `babeltrace2 DIR > /dev/null`, alternated with `socscope import`, RUNS times each; wall time and peak
# RSS from /usr/bin/time. Inputs: the shared files, and larger ones made from them (N copies:
# protocols/formats/examples/larger_inputs.rs).
#   scripts/bench-binary-import.sh [RUNS] [N]
set -euo pipefail
runs=${1:-3}
n=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$(cd "$root/../shared/data/traces" && pwd)
cargo build --release -q -p socscope-analyzer
cargo run --release -q -p socscope-formats --example larger_inputs -- "$shared" "${TMPDIR:-/tmp}/socscope-bench-binary" "$n"
work=${TMPDIR:-/tmp}/socscope-bench-binary
socscope="$root/target/release/socscope"
measure() { # label, command...
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; return 1; }
  read -r secs rss < "$work/time"
  echo "$label $secs $rss"
}
inputs=(
  "dat $shared/trace-cmd/lisa-example_rtapp-v6.dat"
  "dat $work/lisa-x$n.dat"
  "ctf $shared/ctf/lttng-kernel-arm-bug446190"
  "ctf $shared/ctf/lttng-ust-ros2"
  "ctf $work/lttng-kernel-arm-bug446190-x$n"
  "ctf $work/lttng-ust-ros2-x$n"
)
echo "# load: $(cat /proc/loadavg)"
echo "# input bytes events reader run seconds peak_rss_kb"
for entry in "${inputs[@]}"; do
  read -r kind path <<<"$entry"
  bytes=$(du -sb "$path" | cut -f1)
  for run in $(seq "$runs"); do
    rm -rf "$work/db"; mkdir -p "$work/db"
    if [ "$kind" = dat ]; then
      ref=$(measure ref trace-cmd report "$path")
      events=$(trace-cmd report "$path" 2>/dev/null | grep -c '^ *.*\[[0-9]*\] [0-9.]*: ')
    else
      ref=$(measure ref babeltrace2 "$path")
      events=$(babeltrace2 "$path" | wc -l)
    fi
    ours=$(measure socscope "$socscope" import "$path" --format "$( [ "$kind" = dat ] && echo trace-cmd || echo ctf )" --dir "$work/db")
    echo "$(basename "$path") $bytes $events $ref run$run"
    echo "$(basename "$path") $bytes $events $ours run$run"
  done
done
echo "# load: $(cat /proc/loadavg)"
