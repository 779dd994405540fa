#!/usr/bin/env bash
# The figures of BENCHMARKS.md's "Agent on the board" section, on the emulated mps2-an386:
#   1. instructions per recorded event, by kind: the firmware's `bench` mode under QEMU -icount shift=0, in
#      the image built without `timed-masking` (build.sh untimed: the plain PRIMASK critical section, as
#      the `cortex-m` crate's single-core one; the default image times every masked section for part 3,
#      in every mode: its counts are the agent's plus that timing, printed after)
#      (one instruction = 1 ns of board time; the timer counts 25 MHz, so one tick = 40 instructions);
#      the drain (framing: header, CRC-32C, COBS) per event; the firmware's path; and `loaded`: thread mode
#      recording while SysTick and a 10 kHz timer interrupt record too and PendSV drains (all included);
#   2. the agent's flash: the footprint image (targets/footprint: the agent alone, every record kind, the
#      drain); in the firmware images, the agent's symbols and, exactly, its code and tables with every
#      instruction attributed through the line tables' inlining (flash-owners.py: the agent's inlined
#      parts included, the board's clock and critical section inlined into the agent excluded, and the
#      agent's code inlined into the bench mode's call sites reported on a line of its own); its RAM:
#      the size of the firmware's agent (`size_of`, printed by the firmware), of its state besides the
#      ring blocks, and the agent's symbols in the image's .bss (its slot, the probe control block);
#   3. the longest time interrupts stayed masked and the vsync interrupt's longest latency (the firmware
#      times every masked section with its clock) in `run` mode, 3 s of board time at -icount shift=4;
#   4. the UART's sustained events/s: `flood` mode at 115 200 and 921 600 baud equivalents, 5 s of board
#      time each, under -icount shift=4 (62.5 M instructions per second, near a Cortex-M4 at 64 MHz).
# Usage: targets/cortex-m/measure.sh [RUNS]   (default 3 runs of each measurement)
# Environment: ELF=firmware image, BENCH_ELF=the image of parts 1 (default: build.sh untimed, or $ELF when
# ELF is given) and FOOTPRINT=footprint image to measure another build (e.g. one built from an earlier
# commit in another worktree); default: build this tree's.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
runs="${1:-3}"
footprint="${FOOTPRINT:-}"
if [ -z "$footprint" ]; then
  "$root/scripts/build-bare-metal.sh" >/dev/null
  footprint="$root/target/bare-metal/thumbv7em-none-eabihf/release/socscope-footprint"
fi
# Probe mode (the board only records; the host frames): its footprint image and firmware, when this tree
# has them (PROBE_FOOTPRINT= and PROBE_ELF= to measure others; empty: skipped).
probe_footprint="${PROBE_FOOTPRINT-$footprint-probe}"
probe_elf="${PROBE_ELF-}"
if [ -z "${PROBE_ELF+set}" ] && [ -z "${ELF:-}" ] && grep -q '^probe' "$root/targets/cortex-m/Cargo.toml"; then
  probe_elf="$("$root/targets/cortex-m/build.sh" probe)"
fi
# The variants are copies (build.sh VARIANT); the default image is built last, at its own path.
if [ -n "${ELF:-}" ]; then
  elf="$ELF"
  bench_elf="${BENCH_ELF:-$ELF}"
else
  bench_elf="${BENCH_ELF:-$("$root/targets/cortex-m/build.sh" untimed)}"
  elf="$("$root/targets/cortex-m/build.sh")"
fi
qemu() {
  qemu-system-arm -M mps2-an386 -nographic -monitor none "$@" -kernel "$elf"
}
qemu_bench() {
  qemu-system-arm -M mps2-an386 -nographic -monitor none "$@" -kernel "$bench_elf"
}

echo "== instructions per recorded event (-icount shift=0; ticks x 40), $runs runs; image $(basename "$bench_elf")"
for run in $(seq "$runs"); do
  qemu_bench -icount shift=0,sleep=off -serial null \
    -semihosting-config enable=on,target=native,arg=fw,arg=mode=bench 2>&1 |
    awk -v run="$run" '
      /^bench empty-loop/ { empty = $6 / $4 }
      /^bench record / { printf "run %s  record %-20s %7.1f instructions/event\n", run, $3, ($7 / $5 - empty) * 40 }
      /^bench drain / { printf "run %s  drain  %-20s %7.1f instructions/event\n", run, "(header, check, COBS; a frame per 32 records)", $7 / $5 * 40 }
      /^bench drain-full / { printf "run %s  drain  %-20s %7.1f instructions/event\n", run, "(full blocks)", $6 / $4 * 40 }
      /^bench firmware / { printf "run %s  firmware path (record + the firmware counters) %7.1f instructions/event\n", run, ($7 / $5 - empty) * 40 }
      /^bench loaded / { printf "run %s  loaded (thread mode + SysTick + 10 kHz timer + PendSV drain) %7.1f instructions/event, %d events\n", run, $6 / $4 * 40, $4 }
      /agent-ram/ { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1); ram = v["agent-ram"]; state = v["agent-state"] }
      END { if (ram != "") printf "run %s  agent RAM (size_of, printed by the firmware): %d bytes, of which %d besides the ring blocks\n", run, ram, state }'
done

if [ "$bench_elf" != "$elf" ]; then
  echo "== the same in the default image $(basename "$elf") (every masked section timed: the timer read at each end, the longest kept), 1 run"
  qemu -icount shift=0,sleep=off -serial null \
    -semihosting-config enable=on,target=native,arg=fw,arg=mode=bench 2>&1 |
    awk '/^bench empty-loop/ { empty = $6 / $4 }
      /^bench record / { line = line sprintf(" %s %.1f", $3, ($7 / $5 - empty) * 40) }
      END { printf " %s\n", line }' | fold -s -w 110
fi

echo "== post-mortem mode against streaming mode, record path per kind (-icount shift=0), same run"
# Not grep -q: it would stop reading early, and strings killed by SIGPIPE fails the pipeline (pipefail).
if strings "$bench_elf" | grep 'player-post-mortem' >/dev/null; then
  for m in 0 1; do
    qemu_bench -icount shift=0,sleep=off -serial null \
      -semihosting-config "enable=on,target=native,arg=fw,arg=mode=bench,arg=postmortem=$m" 2>&1 |
      awk -v m="$m" '
        /^bench empty-loop/ { empty = $6 / $4 }
        /^bench record / { n++; total += ($7 / $5 - empty) * 40; line = line sprintf(" %s %.0f", $3, ($7 / $5 - empty) * 40) }
        /^bench firmware / { fw = ($7 / $5 - empty) * 40 }
        END { printf "  %s: mean of the %d kinds %.1f instructions/event, firmware path %.1f;%s\n", m ? "post-mortem" : "streaming  ", n, total / n, fw, line }'
  done
else
  echo "  (this build has no post-mortem mode)"
fi

# The agent's code and tables in a firmware image, every instruction attributed through the image's line
# tables with inlining (flash-owners.py says how); an image without line tables is reported as such.
agent_flash() {
  local image="$1" label="$2" out
  if ! out="$(python3 "$root/targets/cortex-m/flash-owners.py" "$image" 2>&1)"; then
    echo "  $label: agent code + tables not attributed ($out)"
    return 0
  fi
  echo "$out" | awk -v label="$label" '{ v[$1] = $2 }
    END {
      printf "  %s: agent code + tables, attributed by DWARF inlining: %d + %d = %d bytes (target 4 096)\n", label,
        v["agent-code"], v["agent-tables"], v["agent-code"] + v["agent-tables"]
      printf "  %s:   not counted: the board'"'"'s clock and critical section inlined in the agent'"'"'s functions %d, the board'"'"'s tables the agent reads (dictionary, declarations) %d; of the agent'"'"'s tables %d also used by the board\n", label,
        v["board-code-in-agent-functions"], v["board-tables-read-by-agent"], v["agent-tables-shared"]
      printf "  %s:   not counted either: the agent'"'"'s code inlined into the bench mode'"'"'s call sites (measurement harness, no application ships it) %d\n", label,
        v["harness-code-agent"]
    }'
}

# The agent's RAM as the linker placed it: the symbols of the agent's slot and its probe control block.
agent_ram() {
  local image="$1" label="$2"
  llvm-nm -C -S --radix=d "$image" | awk -v label="$label" '
    { size = $2 + 0; name = substr($0, index($0, $4)) }
    name ~ /^socscope_cortex_m::AGENT$/ { slot = size }
    name ~ /^(socscope_cortex_m::)?SOCSCOPE_PROBE$/ { control = size }
    END { printf "  %s: RAM in the image'"'"'s symbols: the AGENT slot %d bytes (the agent and its ready flag, padded), the probe control block %d bytes\n", label, slot, control }'
}

echo "== agent flash"
llvm-size -A "$footprint" | awk '$1 ~ /^\.(text|rodata)$/ { printf "  footprint image (the agent alone, every record kind) %-8s %6d bytes\n", $1, $2 }'
llvm-nm -C --size-sort -S --radix=d "$footprint" | awk '
  { size = $2 + 0; name = substr($0, index($0, $4)) }
  name ~ /^reset$/ { printf "  of which the harness loop (16 record calls inlined) %d bytes\n", size }'
llvm-size -A "$elf" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf "  firmware image %-8s %6d bytes\n", $1, $2 }'
llvm-nm -C --size-sort -S --radix=d "$elf" | awk '
  { size = $2 + 0; kind = $3; name = substr($0, index($0, $4)) }
  # The agent code: its own functions, not the firmware closures whose signatures mention its types.
  kind ~ /[tT]/ && name ~ /^<?(socscope_agent|socscope_wire|postcard|serde|cobs|crc)::/ { code += size }
  kind ~ /[rR]/ && size == 1028 { table += size }
  name ~ /^socscope_cortex_m::AGENT$/ { agent = size }
  END {
    printf "  firmware: agent code by symbol names (agent, wire, postcard, cobs, crc symbols; earlier passes'"'"' figure): %d bytes\n", code
    printf "  firmware: agent constant data (CRC-32C table): %d bytes\n", table
    if (agent > 0) printf "  firmware: the AGENT static: %d bytes of RAM (.bss)\n", agent
  }'
agent_flash "$elf" "firmware"
agent_ram "$elf" "firmware"

echo "== probe mode (the board records only; the host reads its rings through a debug port and frames them)"
if [ -n "$probe_footprint" ] && [ -f "$probe_footprint" ]; then
  llvm-size -A "$probe_footprint" | awk '$1 ~ /^\.(text|rodata)$/ { printf "  footprint image in probe mode %-8s %6d bytes\n", $1, $2 }'
  llvm-nm -C --size-sort -S --radix=d "$probe_footprint" | awk '
    { size = $2 + 0; kind = $3; name = substr($0, index($0, $4)) }
    kind ~ /[tT]/ && name ~ /^<?(socscope_agent|socscope_wire)::/ { agent += size }
    kind ~ /[tT]/ && name ~ /compiler_builtins|__aeabi/ { mem += size }
    name ~ /^reset$/ { reset = size }
    END { printf "  of which the agent'"'"'s functions %d, the harness loop (16 record calls, the constructor, attach_probe, probe_close_blocks inlined) %d, memcpy/memset (the constructor'"'"'s) %d bytes\n", agent, reset, mem }'
else
  echo "  (no probe-mode footprint image)"
fi
if [ -n "$probe_elf" ] && [ -f "$probe_elf" ]; then
  llvm-nm -C --size-sort -S --radix=d "$probe_elf" | awk '
    { size = $2 + 0; kind = $3; name = substr($0, index($0, $4)) }
    kind ~ /[tT]/ && name ~ /^<?(socscope_agent|socscope_wire|postcard|serde|cobs|crc)::/ { code += size }
    name ~ /^socscope_cortex_m::DICTIONARY$/ { dict = size }
    END { printf "  firmware in probe mode: agent code by symbol names %d bytes (custom records and stats included), dictionary image in flash %d bytes\n", code, dict }'
  agent_flash "$probe_elf" "firmware in probe mode"
  qemu-system-arm -M mps2-an386 -nographic -monitor none -icount shift=4,sleep=off -serial null \
    -semihosting-config "enable=on,target=native,arg=fw,arg=mode=run,arg=seconds=1" -kernel "$probe_elf" 2>&1 |
    awk '/agent-ram/ || /probe-control/ { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) }
      END { printf "  firmware in probe mode: agent RAM %d bytes (size_of), of which %d besides the ring blocks, + control block %d bytes = ring + %d\n",
        v["agent-ram"], v["agent-state"], v["bytes"], v["agent-state"] + v["bytes"] }'
  agent_ram "$probe_elf" "firmware in probe mode"
else
  echo "  (no probe-mode firmware)"
fi

echo "== masked sections and interrupt latency (run, 3 s of board time, -icount shift=4: 16 ns/instruction), $runs runs"
for run in $(seq "$runs"); do
  qemu -icount shift=4,sleep=off -serial null \
    -semihosting-config "enable=on,target=native,arg=fw,arg=mode=run,arg=seconds=3,arg=baud=921600" 2>&1 |
    awk -v run="$run" '/^socscope-board: mode/ {
      for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
      m = ("masked-max-ticks" in v) ? v["masked-max-ticks"] : v["drain-masked-max-ticks"]
      printf "run %s  longest masked section %d ticks = %.2f us; vsync latency max %s\n", run, m, m * 0.04,
        ("irq-latency-max-ticks" in v) ? sprintf("%d ticks = %.2f us", v["irq-latency-max-ticks"], v["irq-latency-max-ticks"] * 0.04) : "(not measured)" }'
done

echo "== UART sustained events/s (flood, 5 s of board time, -icount shift=4), $runs runs"
for baud in 115200 921600; do
  for run in $(seq "$runs"); do
    qemu -icount shift=4,sleep=off -serial null \
      -semihosting-config "enable=on,target=native,arg=fw,arg=mode=flood,arg=seconds=5,arg=baud=$baud" 2>&1 |
      awk -v baud="$baud" -v run="$run" '/^socscope-board: mode/ {
        for (i = 2; i < NF; i += 2) v[$i] = $(i + 1)
        m = ("masked-max-ticks" in v) ? v["masked-max-ticks"] : v["drain-masked-max-ticks"]
        printf "run %s  %7d baud: %8.0f events/s delivered, %5.2f bytes/event on the wire, %d dropped of %d made, masked max %d ticks\n",
          run, baud, v["records"] / v["seconds"], v["bytes"] / v["records"], v["dropped"], v["records"] + v["dropped"], m }'
  done
done
