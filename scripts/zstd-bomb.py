#!/usr/bin/env python3
# A "zstd bomb" on the wire (issue 10, row 10): a version-2 Hello, then FRAMES Events frames whose zstd
# section expands to RAW_LEN bytes of `mark` records (3 bytes each). Writes the capture to standard output:
#   scripts/zstd-bomb.py 48 > bomb.wire            (48 frames of 1 MiB - 1: 16.7 M records in 6 KB)
#   scripts/zstd-bomb.py 3 16777215 > bomb16.wire  (3 frames of 16 MiB - 1: what the format allows)
# Needs the zstd command.
import os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wireframes import hello, zstd_events
raw_len = int(sys.argv[2]) if len(sys.argv) > 2 else (1 << 20) - 1
n = raw_len // 3
raw = bytes([10, 1, 0]) * n

raw_len = len(raw)
z = subprocess.run(["zstd", "-19", "-c"], input=raw, capture_output=True, check=True).stdout
frames = int(sys.argv[1])
out = bytearray(hello("bomb"))
for k in range(frames):
    out += zstd_events(k * n, n, raw_len, z)
sys.stdout.buffer.write(out)
sys.stderr.write(f"{frames} frames of {n} records ({raw_len} bytes raw, {len(z)} bytes zstd); total {len(out)} bytes\n")
