#!/usr/bin/env bash
# Import speed of the binary captures (BENCHMARKS.md, "Import": trace-cmd .dat and CTF) against the
# reference readers' own reading speed in the same run: `trace-cmd report > /dev/null` and
# `babeltrace2 DIR > /dev/null`, alternated with `socscope import` (which order goes first alternates
# from run to run), RUNS times each; wall time, user+system CPU time and peak RSS from /usr/bin/time.
# Inputs: the shared files, and larger ones made from them (N times as long:
# protocols/formats/examples/larger_inputs.rs).
#   [SOCSCOPE_BIN=path] [SOCSCOPE_BEFORE=path] [LARGER_INPUTS_BIN=path] scripts/bench-binary-import.sh [RUNS] [N]
# SOCSCOPE_BEFORE: another socscope binary (an earlier commit's) measured in the same run, as
# `before`; the readers' order rotates from run to run. LARGER_INPUTS_BIN: the larger_inputs example
# already built (else it is built and run with cargo).
# Output: one line per measure, `input bytes events reader wall_s cpu_s peak_rss_kb run`
# (cpu_s: perf's task-clock where perf runs, else user + system time from /usr/bin/time).
set -euo pipefail
runs=${1:-3}
n=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$(cd "$root/../shared/data/traces" && pwd)
work=${TMPDIR:-/tmp}/socscope-bench-binary
# SOCSCOPE_BIN: a socscope binary already built (release) to measure instead of building one.
socscope=${SOCSCOPE_BIN:-$root/target/release/socscope}
[ -n "${SOCSCOPE_BIN:-}" ] || cargo build --release -q -p socscope-analyzer --bin socscope
rm -rf "$work" && mkdir -p "$work"
if [ -n "${LARGER_INPUTS_BIN:-}" ]; then
  "$LARGER_INPUTS_BIN" "$shared" "$work" "$n"
else
  cargo run --release -q -p socscope-formats --example larger_inputs -- "$shared" "$work" "$n"
fi
# CPU time from `perf stat` (task-clock, to the microsecond) where perf is there: /usr/bin/time
# gives it to 10 ms, the whole cost of importing the smallest shared file. perf and time count
# themselves in (well under a millisecond), for every reader alike.
perf_ok=false
perf stat -x, -e task-clock -o /dev/null true 2>/dev/null && perf_ok=true
measure() { # label, command...
  local label=$1; shift
  local pre=()
  $perf_ok && pre=(perf stat -x, -e task-clock -o "$work/perf" --)
  "${pre[@]}" /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; return 1; }
  read -r secs user sys rss < "$work/time"
  local cpu
  if $perf_ok; then
    cpu=$(awk -F, '/task-clock/ {printf "%.4f", $1 / 1000}' "$work/perf")
  else
    cpu=$(awk "BEGIN {print $user + $sys}")
  fi
  echo "$label $secs $cpu $rss"
}
inputs=(
  "dat $shared/trace-cmd/lisa-example_rtapp-v6.dat"
  "dat $work/lisa-x$n.dat"
  "ctf $shared/ctf/lttng-kernel-arm-bug446190"
  "ctf $shared/ctf/lttng-ust-ros2"
  "ctf $shared/ctf/perf-ctf-taskset2"
  "ctf $work/lttng-kernel-arm-bug446190-x$n"
  "ctf $work/lttng-ust-ros2-x$n"
)
echo "# commit $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)"
echo "# load: $(cat /proc/loadavg)"
echo "# input bytes events reader wall_s cpu_s peak_rss_kb run"
for entry in "${inputs[@]}"; do
  read -r kind path <<<"$entry"
  if [ "$kind" = dat ]; then
    bytes=$(stat -c %s "$path")
    ref=(trace-cmd report "$path")
    events=$(trace-cmd report "$path" 2>/dev/null | grep -c '^ *.*\[[0-9]*\] [0-9.]*: ' || true)
    format=trace-cmd
  else
    # Stream bytes (metadata and index files left out).
    bytes=$(find "$path" -type f ! -name metadata ! -name '*.idx' -printf '%s\n' | awk '{s+=$1} END {print s}')
    ref=(babeltrace2 "$path")
    events=$(babeltrace2 "$path" 2>/dev/null | wc -l)
    format=ctf
  fi
  readers=(ref socscope)
  [ -z "${SOCSCOPE_BEFORE:-}" ] || readers+=(before)
  for run in $(seq "$runs"); do
    # Rotate which reader goes first.
    k=$(( (run - 1) % ${#readers[@]} ))
    order=("${readers[@]:$k}" "${readers[@]:0:$k}")
    for reader in "${order[@]}"; do
      rm -rf "$work/db"; mkdir -p "$work/db"
      case $reader in
        ref) line=$(measure ref "${ref[@]}") ;;
        socscope) line=$(measure socscope "$socscope" import "$path" --format "$format" --dir "$work/db") ;;
        before) line=$(measure before "$SOCSCOPE_BEFORE" import "$path" --format "$format" --dir "$work/db") ;;
      esac
      echo "$(basename "$path") $bytes $events $line run$run"
    done
  done
  echo "# load: $(cat /proc/loadavg)"
done
