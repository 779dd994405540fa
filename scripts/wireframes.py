# Hand-made wire frames for the hostile-input scripts (zstd-bomb.py, attacks.py): COBS framing with a
# CRC-32C, as protocols/wire/SPEC.md describes (version 2). Only what those scripts send.
import struct


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(x):
    x = x.encode()
    return varint(len(x)) + x


# CRC-32C (Castagnoli), reflected, polynomial 0x82F63B78.
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def cobs(data):
    out = bytearray()
    block = bytearray()
    for b in data:
        if b == 0:
            out.append(len(block) + 1)
            out += block
            block = bytearray()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255)
                out += block
                block = bytearray()
    out.append(len(block) + 1)
    out += block
    return bytes(out) + b"\x00"


def frame(kind, body):
    d = bytes([kind]) + body
    return cobs(d + struct.pack("<I", crc32c(d)))


def hello(board, session_id=7, token=""):
    """A version-2 Hello: one CPU, 1 MHz ticks."""
    body = (varint(2) + string("9.9") + string(board) + string("soc") + string("os") + string("app")
            + varint(1) + varint(1000000) + varint(session_id) + varint(0) + string(token))
    return frame(1, body)


def zstd_events(first_seq, count, raw_len, compressed):
    """An Events frame on CPU 0 whose zstd section says it expands to `raw_len` bytes."""
    body = (bytes([1]) + varint(0) + varint(first_seq) + varint(first_seq) + varint(count)
            + varint(raw_len) + compressed)
    return frame(3, body)
