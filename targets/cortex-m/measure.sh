#!/usr/bin/env bash
# The figures of BENCHMARKS.md's issue 13 section, on the emulated mps2-an386:
#   1. instructions per recorded event: the firmware's `bench` mode under QEMU -icount shift=0 (one
#      instruction = 1 ns of board time; the timer counts 25 MHz, so one tick = 40 instructions);
#   2. the agent's flash and RAM in the firmware image (symbol sizes, llvm-nm);
#   3. the UART's sustained events/s: `flood` mode (thread mode records user-function entries, marks and
#      exits as fast as it can) at 115 200 and 921 600 baud equivalents, 5 s of board time each, under
#      -icount shift=4 (62.5 M instructions per second, near a Cortex-M4 at 64 MHz): records delivered / s.
# Usage: targets/cortex-m/measure.sh [RUNS]   (default 3 runs of each measurement)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-3}"
elf="$("$root/targets/cortex-m/build.sh")"
qemu() {
  qemu-system-arm -M mps2-an386 -nographic -monitor none "$@" -kernel "$elf"
}

echo "== instructions per recorded event (-icount shift=0; ticks x 40), $runs runs"
for run in $(seq "$runs"); do
  qemu -icount shift=0,sleep=off -serial null \
    -semihosting-config enable=on,target=native,arg=fw,arg=mode=bench 2>&1 |
    awk -v run="$run" '
      /^bench empty-loop/ { empty = $6 / $4 }
      /^bench record / { printf "run %s  record %-20s %7.1f instructions/event\n", run, $3, ($7 / $5 - empty) * 40 }
      /^bench drain / { printf "run %s  drain  %-20s %7.1f instructions/event\n", run, "(COBS, CRC, frame)", $7 / $5 * 40 }
      /^bench firmware / { printf "run %s  firmware path (critical section + counters) %7.1f instructions/event\n", run, ($7 / $5 - empty) * 40 }'
done

echo "== agent flash and RAM in $elf"
llvm-size -A "$elf" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  image %-8s %6d bytes\n", $1, $2 }'
llvm-nm -C --size-sort -S --radix=d "$elf" | awk '
  { size = $2 + 0; kind = $3; name = substr($0, index($0, $4)) }
  kind ~ /[tT]/ && name ~ /socscope_agent|socscope_wire|postcard|serde|cobs|crc::/ { code += size }
  kind ~ /[rR]/ && size == 1028 { table += size }
  name == "socscope_cortex_m::AGENT" { agent = size }
  END {
    printf "  agent code (agent, wire, postcard, cobs, crc symbols): %d bytes\n", code
    printf "  agent constant data (CRC-32C table): %d bytes\n", table
    printf "  agent state (one CPU ring of 8 x 256-byte blocks, frame buffer, dictionary): %d bytes of RAM (.bss)\n", agent
  }'

echo "== UART sustained events/s (flood, 5 s of board time, -icount shift=4), $runs runs"
for baud in 115200 921600; do
  for run in $(seq "$runs"); do
    qemu -icount shift=4,sleep=off -serial null \
      -semihosting-config "enable=on,target=native,arg=fw,arg=mode=flood,arg=seconds=5,arg=baud=$baud" 2>&1 |
      awk -v baud="$baud" -v run="$run" '/^socscope-board: mode/ {
        for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
        printf "run %s  %7d baud: %8.0f events/s delivered, %5.2f bytes/event on the wire, %d dropped of %d made\n",
          run, baud, v["records"] / v["seconds"], v["bytes"] / v["records"], v["dropped"], v["records"] + v["dropped"] }'
  done
done
