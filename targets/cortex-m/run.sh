#!/usr/bin/env bash
# Runs the traced firmware on QEMU's mps2-an386 board and captures its UART with `socscope collect`.
#
#   targets/cortex-m/run.sh --seconds N --dir DIR [--tcp | --probe] [--baud B] [--mode run|flood|postmortem]
#                           [--dump-after S] [--icount SHIFT] [--uart-log FILE]
#
# Builds the image (installing Debian's rustc-web and qemu-system-arm if missing), starts QEMU with the UART
# on a pseudo-terminal (default: `socscope collect --serial /dev/pts/N`, the serial port path) or, with
# --tcp, on a TCP connection to a collector listening on loopback (`socscope collect --listen`), and leaves
# the trace in the catalog DIR. The firmware runs N seconds of board time and sends Bye; the collector ends
# after that one session, and this script then stops QEMU. Prints the collector's lines and the firmware's own counters
# (lines starting `socscope-board:`).
#
#   --probe       probe mode: the firmware built with its `probe` feature only records; QEMU's gdbstub
#                 (-gdb) is the debug probe, and `socscope collect --probe` reads the rings through it and
#                 frames them (no UART); modes run and flood.
#   --baud B      the UART's modelled speed (default 921600; 0: as fast as QEMU takes bytes). QEMU's UART
#                 has no speed of its own: the firmware moves B/10 bytes per second into it.
#   --mode M      run: the scheduler, tasks and interrupts (default); flood: thread mode records as fast
#                 as it can (the UART's sustained event rate); postmortem: the agent's rings overwrite
#                 their oldest records and nothing is sent until the vsync job's deadline check dumps
#                 them (its first missed deadline after --dump-after S seconds, default 2); the run
#                 ends there.
#   --icount S    QEMU -icount shift=S,sleep=off: one instruction takes 2^S ns of board time, and the run is
#                 deterministic and independent of the host's load (default: real time).
#   --uart-log F  also write every byte the board's UART sent to F (QEMU's chardev log, written as the
#                 UART hands bytes to the pty): what the board sent, whatever the host's pty then delivers;
#                 except that QEMU 7.2 logs a byte twice when its write to a full pty was retried (a
#                 stalled reader; the board prints `uart-bytes`, the count it sent, to tell).
#   --session N   the session id in Hello (default: the current time).
# Environment: SOCSCOPE=path of a socscope binary (default: built with cargo, release).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"

seconds=5 dir=socscope-traces tcp=0 probe=0 baud=921600 mode=run icount="" session="$(date +%s)" dump_after=2 uart_log=""
usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --dir) dir="${2:?--dir needs a value}"; shift 2 ;;
    --tcp) tcp=1; shift ;;
    --probe) probe=1; shift ;;
    --baud) baud="${2:?--baud needs a value}"; shift 2 ;;
    --mode) mode="${2:?--mode needs a value}"; shift 2 ;;
    --icount) icount="${2:?--icount needs a value}"; shift 2 ;;
    --dump-after) dump_after="${2:?--dump-after needs a value}"; shift 2 ;;
    --session) session="${2:?--session needs a value}"; shift 2 ;;
    --uart-log) uart_log="${2:?--uart-log needs a file}"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for v in seconds baud session dump_after; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "run.sh: --$v '${!v}' is not a whole number" >&2; exit 2; }
done
[ "$seconds" -gt 0 ] || { echo "run.sh: --seconds must be at least 1" >&2; exit 2; }
case "$mode" in run|flood|postmortem) ;; *) echo "run.sh: --mode '$mode': expected run, flood or postmortem" >&2; exit 2 ;; esac
[ -z "$icount" ] || [[ "$icount" =~ ^[0-9]+$ ]] || { echo "run.sh: --icount '$icount' is not a whole number" >&2; exit 2; }

if ! command -v qemu-system-arm >/dev/null; then
  echo "run.sh: installing qemu-system-arm" >&2
  if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends qemu-system-arm >/dev/null
fi
[ "$probe" = 0 ] || [ "$mode" != postmortem ] || { echo "run.sh: --probe runs modes run and flood" >&2; exit 2; }
[ "$probe" = 0 ] || [ "$tcp" = 0 ] || { echo "run.sh: --probe and --tcp exclude each other" >&2; exit 2; }
if [ "$probe" = 1 ]; then
  elf="$("$root/targets/cortex-m/build.sh" probe)"
else
  elf="$("$root/targets/cortex-m/build.sh")"
fi
socscope="${SOCSCOPE:-}"
if [ -z "$socscope" ]; then
  (cd "$root" && cargo build -q --release -p socscope-analyzer --bin socscope)
  socscope="$root/target/release/socscope"
fi

work="$(mktemp -d)"
qemu_pid="" collector_pid=""
cleanup() {
  for p in $qemu_pid $collector_pid; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

qemu=(qemu-system-arm -M mps2-an386 -nographic
  -semihosting-config "enable=on,target=native,arg=socscope-board,arg=seconds=$seconds,arg=baud=$baud,arg=mode=$mode,arg=session=$session,arg=dump_after=$dump_after,arg=linger=1"
  -kernel "$elf")
[ -z "$icount" ] || qemu+=(-icount "shift=$icount,sleep=off")

# Waits until FILE has a line matching REGEX (or PID died, or 60 s passed); prints the line.
wait_line() {
  local file="$1" regex="$2" pid="$3" line
  for _ in $(seq 600); do
    line="$(grep -m1 -E "$regex" "$file" 2>/dev/null || true)"
    if [ -n "$line" ]; then echo "$line"; return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

if [ "$probe" = 1 ]; then
  # QEMU starts paused (-S) with its gdbstub on a loopback port; the collector connects to it, finds the
  # agent's control block once the firmware has filled it, and reads the rings until the board finishes.
  started=0
  for _ in $(seq 20); do
    port=$((20000 + RANDOM % 40000))
    "${qemu[@]}" -S -monitor none -serial null -gdb "tcp:127.0.0.1:$port" >"$work/qemu.out" 2>&1 &
    qemu_pid=$!
    for _ in $(seq 50); do
      kill -0 "$qemu_pid" 2>/dev/null || break
      # Until QEMU listens, the collector fails to connect and exits: then try again.
      "$socscope" collect --probe "127.0.0.1:$port" --no-listen --dir "$dir" --sessions 1 \
        >"$work/collector.out" 2>&1 &
      collector_pid=$!
      if wait_line "$work/collector.out" '^reading a board' "$collector_pid" >/dev/null; then
        started=1
        break
      fi
      wait "$collector_pid" 2>/dev/null || true
      collector_pid=""
      sleep 0.1
    done
    [ "$started" = 1 ] && break
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
    qemu_pid=""
  done
  [ "$started" = 1 ] || { cat "$work/qemu.out" "$work/collector.out" >&2; echo "run.sh: the collector could not reach QEMU's gdbstub" >&2; exit 1; }
elif [ "$tcp" = 1 ]; then
  "$socscope" collect --listen 127.0.0.1:0 --dir "$dir" --sessions 1 >"$work/collector.out" 2>&1 &
  collector_pid=$!
  line="$(wait_line "$work/collector.out" '^listening on ' "$collector_pid")" || {
    cat "$work/collector.out" >&2; echo "run.sh: the collector did not start listening" >&2; exit 1; }
  address="$(echo "$line" | sed -E 's/^listening on ([^,]+),.*/\1/')"
  # QEMU connects before the CPU starts, so the collector sees every byte.
  "${qemu[@]}" -monitor none -serial "tcp:$address" >"$work/qemu.out" 2>&1 &
  qemu_pid=$!
else
  # QEMU starts paused (-S) so that nothing is sent before the collector has opened the pty (QEMU drops
  # what it writes to a pty nobody has open); its monitor on a loopback port resumes it.
  port=""
  for _ in $(seq 20); do
    candidate=$((20000 + RANDOM % 40000))
    serial=(-serial pty)
    [ -z "$uart_log" ] || serial=(-chardev "pty,id=uart0,logfile=$uart_log,logappend=off" -serial chardev:uart0)
    "${qemu[@]}" -S -monitor "tcp:127.0.0.1:$candidate,server=on,wait=off" "${serial[@]}" \
      >"$work/qemu.out" 2>&1 &
    qemu_pid=$!
    if wait_line "$work/qemu.out" 'char device redirected to /dev/pts/[0-9]+' "$qemu_pid" >/dev/null; then
      port=$candidate; break
    fi
    wait "$qemu_pid" 2>/dev/null || true
    qemu_pid=""
  done
  [ -n "$port" ] || { cat "$work/qemu.out" >&2; echo "run.sh: QEMU did not start" >&2; exit 1; }
  pty="$(grep -m1 -oE '/dev/pts/[0-9]+' "$work/qemu.out")"
  "$socscope" collect --serial "$pty:115200" --no-listen --dir "$dir" --sessions 1 \
    >"$work/collector.out" 2>&1 &
  collector_pid=$!
  wait_line "$work/collector.out" '^reading serial port ' "$collector_pid" >/dev/null || {
    cat "$work/collector.out" >&2; echo "run.sh: the collector did not open $pty" >&2; exit 1; }
  # The monitor: read its banner, say `cont`, and wait for its echo before closing (a command followed at
  # once by the end of the connection is not run).
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  IFS= read -r -t 10 _ <&3 || true
  printf 'cont\n' >&3
  while IFS= read -r -t 10 line <&3; do
    case "$line" in *cont*) break ;; esac
  done
  exec 3>&-
fi

# Board time runs at host speed without --icount, slower with it: allow for both. The collector ends after
# the board's Bye; the firmware then idles (linger=1) until QEMU is stopped here, so that no byte still in
# the pty is lost when QEMU closes it.
limit=$((60 + seconds * 20))
status=0
for _ in $(seq $((limit * 10))); do
  kill -0 "$collector_pid" 2>/dev/null || break
  kill -0 "$qemu_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$collector_pid" 2>/dev/null; then
  echo "run.sh: the collector did not end its session within $limit s; stopping it" >&2
  kill -INT "$collector_pid" 2>/dev/null || true
  status=1
fi
wait "$collector_pid" || status=$?
collector_pid=""
# The firmware printed its counters before its last bytes left the UART.
wait_line "$work/qemu.out" '^socscope-board: mode' "$qemu_pid" >/dev/null || true
kill "$qemu_pid" 2>/dev/null || true
wait "$qemu_pid" 2>/dev/null || true
qemu_pid=""
cat "$work/collector.out"
grep '^socscope-board:' "$work/qemu.out" || {
  cat "$work/qemu.out" >&2; echo "run.sh: the firmware printed no counters" >&2; status=1; }
grep -q 'agent-agrees' "$work/qemu.out" || status=1
exit "$status"
