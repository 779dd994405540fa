#!/usr/bin/env python3
"""Attributes every byte of a firmware image's code and constant tables to the crate it comes from.

measure.sh's flash figure for "the agent in the firmware image". Symbol names alone miss what LTO
inlines across crates (an agent record method inlined into the firmware's call site) and wrongly count
what the board supplies inside the agent's functions (its clock and critical section, inlined into the
record paths). So each instruction is attributed through the image's DWARF line tables with inlining
(the firmware is built with `debug = "line-tables-only"`, which changes no code):

* `llvm-symbolizer --inlines` gives, for every instruction, the chain of functions inlined at that
  address, innermost first, each with its source file and line;
* the innermost frame whose file is the project's own source decides: `agent/src/` or
  `protocols/wire/src/` -> the agent, `targets/*/src/` -> the board (firmware or footprint harness). Frames of libraries (core,
  compiler_builtins, critical-section, cortex-m, heapless: /usr/lib/rustlib, ~/.cargo/registry) and
  frames at line 0 (compiler-generated, whose file is unreliable) are skipped: a `core::ptr::write`
  inlined into the agent is the agent's; the board's `Clock::now` inlined into an agent function is
  the board's;
* an instruction with no project frame at all (memcpy, 64-bit division, the runtime's reset code) is
  the runtime library's, reported on its own line;
* the agent's code inlined into the firmware's measurement harness (its `bench` mode: the function
  `socscope_cortex_m::bench` and the closures it times, each one record call) is reported on its own
  line, `harness-code-agent`, and not counted as the agent's: no application ships that mode, and
  its call sites would otherwise count once more every record kind the firmware already calls. The
  agent's functions those call sites reach are counted as usual, and a constant only those call
  sites use (the bench's marker text) is not the agent's. Everywhere else the firmware's call sites
  (its `rec` closures) stay the agent's.

Constant tables: a named `.rodata` symbol of the agent or wire crate is the agent's; an anonymous one
(a string, a slice of definitions: LTO merges their names) is the agent's when an agent instruction
builds its address (a `movw`/`movt` pair or a `ldr` from the literal pool), also when board code
refers to it too (reported as shared).

Usage: flash-owners.py ELF
Prints `key value` lines (bytes) that measure.sh formats.
"""

import bisect
import collections
import os
import re
import signal
import subprocess
import sys


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def owner_of_file(path):
    # By the path inside the repository, wherever it was built (a worktree, a clean clone).
    if not path or path.startswith("/usr/lib/rustlib") or "/.cargo/" in path or path.startswith("/rustc/"):
        return None
    if re.search(r"(^|/)(agent|protocols/wire)/src/", path):
        return "agent"
    if re.search(r"(^|/)targets/[^/]+/src/", path):
        return "board"
    return None


def agent_symbol(name):
    return re.match(r"^<?(socscope_agent|socscope_wire)::", name) is not None


def board_symbol(name):
    # The firmware's and the footprint harness's functions, and the exception handlers cortex-m-rt
    # names after the board's `#[exception]` functions.
    return re.match(r"^<?(socscope_cortex_m|socscope_footprint)::", name) is not None or name in (
        "SysTick", "PendSV", "DefaultHandler", "HardFault", "main", "reset")


def harness_symbol(name):
    # The firmware's `bench` mode and the closures it times (`<socscope_cortex_m::bench::{closure#N}
    # as FnOnce<…>>::call_once`).
    return re.match(r"^<?socscope_cortex_m::bench(::|$)", name) is not None


def main():
    # Piped into `head` or `awk` that stops early: end quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    elf = sys.argv[1]

    # Every instruction (and data word in the code: jump tables, literal pools), its size and text.
    insns = []
    line_re = re.compile(r"^\s+([0-9a-f]+):\s((?:[0-9a-f]{2} )+)\s*\t?(.*)$")
    for line in run("llvm-objdump", "-d", "--no-leading-headers", elf).splitlines():
        m = line_re.match(line)
        if m:
            insns.append((int(m.group(1), 16), len(m.group(2).split()), m.group(3)))
    if not insns:
        sys.exit(f"flash-owners: no code disassembled in {elf}")

    # The inlining chain of every instruction, in one symbolizer run.
    query = "".join(f"0x{a:x}\n" for a, _, _ in insns)
    out = subprocess.run(
        ["llvm-symbolizer", f"--obj={elf}", "--inlines", "--functions=linkage", "--no-demangle"],
        input=query, check=True, capture_output=True, text=True,
    ).stdout
    blocks = out.strip("\n").split("\n\n")
    if len(blocks) != len(insns):
        sys.exit(f"flash-owners: {len(insns)} addresses, {len(blocks)} answers from llvm-symbolizer")

    # The image's symbols: for the instructions with no project frame, and the tables.
    symbols = []
    for line in run("llvm-nm", "-S", "--defined-only", "-C", elf).splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2] in "tTrR":
            symbols.append((int(parts[0], 16), int(parts[1], 16), parts[2], parts[3]))

    code_syms = sorted((s for s in symbols if s[2] in "tT"), key=lambda s: s[0])
    starts = [s[0] for s in code_syms]

    def enclosing(addr):
        i = bisect.bisect_right(starts, addr & ~1) - 1
        if i >= 0 and code_syms[i][0] <= (addr & ~1) < code_syms[i][0] + code_syms[i][1]:
            return code_syms[i][3]
        return None

    owner = {}
    bytes_by = collections.Counter()
    harness_agent = 0
    has_lines = False
    for (addr, size, _), block in zip(insns, blocks):
        lines = block.splitlines()
        who = None
        for i in range(1, len(lines), 2):
            loc = lines[i].rsplit(":", 2)
            if len(loc) != 3:
                continue
            path, line_no = loc[0], loc[1]
            if path != "??":
                has_lines = True
            if line_no == "0":
                continue
            o = owner_of_file(path)
            if o:
                who = o
                break
        if who is None:
            # Only library frames or line 0 (a prologue, an epilogue, a spill): the enclosing
            # function's crate.
            name = enclosing(addr) or ""
            who = "agent" if agent_symbol(name) else "board" if board_symbol(name) else "runtime"
        if who == "agent" and harness_symbol(enclosing(addr) or ""):
            harness_agent += size
            who = "harness"
        owner[addr] = who
        bytes_by[who] += size
    if not has_lines:
        sys.exit(f"flash-owners: {elf} has no line tables (build it with debug = \"line-tables-only\")")

    # The board's code inside the agent's functions (its clock, its critical section).
    board_in_agent = 0
    by_symbol = collections.Counter()
    for addr, size, _ in insns:
        name = enclosing(addr)
        if name and agent_symbol(name) and owner[addr] == "board":
            board_in_agent += size
        by_symbol[(name or "?", owner[addr])] += size

    if os.environ.get("FLASH_OWNERS_LIST"):
        for (name, who), n in sorted(by_symbol.items(), key=lambda kv: -kv[1]):
            print(f"  code {n:6} {who:8} {name[:150]}", file=sys.stderr)

    # Constant tables.
    ro_syms = sorted((s for s in symbols if s[2] in "rR" and s[1] > 0), key=lambda s: s[0])
    tables = collections.Counter()
    refs = collections.defaultdict(set)
    movw = {}
    mov_re = re.compile(r"^(movw|movt)\s+(r\d+|r1[0-2]|lr|sb|sl|fp|ip), #(\d+)")
    ldr_re = re.compile(r"ldr(?:\.w)?\s+\S+, \[pc, #-?\d+\]\s+@ (0x[0-9a-f]+)")
    words = {}
    for addr, size, text in insns:
        if text.startswith(".word"):
            m = re.match(r"\.word\s+(0x[0-9a-f]+)", text)
            if m:
                words[addr] = int(m.group(1), 16)
    for addr, size, text in insns:
        text = text.strip()
        target = None
        m = mov_re.match(text)
        if m:
            op, reg, imm = m.group(1), m.group(2), int(m.group(3))
            if op == "movw":
                movw[reg] = imm
            elif reg in movw:
                target = movw.pop(reg) | (imm << 16)
        m = ldr_re.search(text)
        if m:
            target = words.get(int(m.group(1), 16))
        if target is None:
            continue
        for s in ro_syms:
            if s[0] <= target < s[0] + s[1]:
                refs[s[3] + f"@{s[0]:x}"].add(owner[addr])
                break
    shared = 0
    for s in ro_syms:
        key = s[3] + f"@{s[0]:x}"
        users = refs.get(key, set())
        if s[3].startswith("__"):
            continue
        if agent_symbol(s[3]):
            who = "agent"
        elif s[3].startswith(".L") and "agent" in users:
            # An anonymous constant the agent's code uses (its version string, a board's name it
            # publishes): the agent's, also when board code uses it too (counted as shared).
            who = "agent"
            if "board" in users:
                shared += s[1]
        elif board_symbol(s[3]) and "agent" in users:
            # The board's own declarations (its dictionary image, its types), read by the agent.
            who = "board-read-by-agent"
        else:
            who = "other"
        tables[who] += s[1]
        if os.environ.get("FLASH_OWNERS_LIST") and who != "other":
            print(f"  table {s[1]:6} {who:8} {s[3]} used by {sorted(users)}", file=sys.stderr)

    print(f"agent-code {bytes_by['agent']}")
    print(f"agent-tables {tables['agent']}")
    print(f"agent-tables-shared {shared}")
    print(f"harness-code-agent {harness_agent}")
    print(f"board-code {bytes_by['board']}")
    print(f"board-code-in-agent-functions {board_in_agent}")
    print(f"runtime-code {bytes_by['runtime']}")
    print(f"board-tables-read-by-agent {tables['board-read-by-agent']}")
    print(f"other-tables {tables['other']}")


if __name__ == "__main__":
    main()
