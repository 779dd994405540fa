#!/usr/bin/env python3
# A "zstd bomb" on the wire (issue 10, row 10): a version-2 Hello, then FRAMES Events frames whose zstd
# section expands to RAW_LEN bytes of `mark` records (3 bytes each). Writes the capture to standard output:
#   scripts/zstd-bomb.py 48 > bomb.wire            (48 frames of 1 MiB - 1: 16.7 M records in 6 KB)
#   scripts/zstd-bomb.py 3 16777215 > bomb16.wire  (3 frames of 16 MiB - 1: what the format allows)
# Needs the zstd command.
import subprocess, struct, sys
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f; v >>= 7
        if v: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def s(x): x = x.encode(); return varint(len(x)) + x
# CRC-32C (Castagnoli), reflected, poly 0x82F63B78
T = []
for i in range(256):
    c = i
    for _ in range(8): c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data: c = T[(c ^ b) & 0xff] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
def cobs(data):
    out = bytearray(); block = bytearray()
    for b in data:
        if b == 0:
            out.append(len(block) + 1); out += block; block = bytearray()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255); out += block; block = bytearray()
    out.append(len(block) + 1); out += block
    return bytes(out) + b"\x00"
def frame(kind, body):
    d = bytes([kind]) + body
    return cobs(d + struct.pack("<I", crc32c(d)))
def hello(board):
    body = varint(2) + s("9.9") + s(board) + s("soc") + s("os") + s("app") + varint(1) + varint(1000000) + varint(7) + varint(0) + s("")
    return frame(1, body)
raw_len = int(sys.argv[2]) if len(sys.argv) > 2 else (1 << 20) - 1
n = raw_len // 3
raw = bytes([10, 1, 0]) * n

raw_len = len(raw)
z = subprocess.run(["zstd", "-19", "-c"], input=raw, capture_output=True, check=True).stdout
frames = int(sys.argv[1])
out = bytearray(hello("bomb"))
for k in range(frames):
    body = bytes([1]) + varint(0) + varint(k * n) + varint(k * n) + varint(n) + varint(raw_len) + z
    out += frame(3, body)
sys.stdout.buffer.write(out)
sys.stderr.write(f"{frames} frames of {n} records ({raw_len} bytes raw, {len(z)} bytes zstd); total {len(out)} bytes\n")
