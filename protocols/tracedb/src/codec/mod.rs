//! The event chunk encoding: columns of varints, then zstd where it pays (byte layout in
//! `SCHEMA.md`).

mod cursor;
mod decode;
mod encode;

// Every item keeps its `crate::codec::` path.
pub(crate) use cursor::*;
pub(crate) use decode::*;
pub(crate) use encode::*;

use crate::model::{
    Cpu, Event, EventCategory, EventKind, ParamValue, ProducerId, Timestamp, TypeId,
};

/// Version byte at the start of every chunk blob the writer makes. Format 3 names the zstd
/// dictionary of its stream the blocks were compressed with (or none); format 2 may store a
/// block as is (its stored length then equals its body length); format 1 has a zstd frame for
/// every block. Readers accept all three.
pub const CHUNK_FORMAT: u8 = 3;

/// Events per block of a chunk compressed with its stream's dictionary: the dictionary holds
/// the entropy tables and the byte strings common to the stream's blocks, so a small block
/// costs few bytes, and a reader that needs a few events decompresses a quarter of what a
/// dictionary-less block holds.
pub const DICT_BLOCK_EVENTS: usize = 128;

/// A zstd decompression context (one per reader or writer, reused for every block).
pub(crate) struct Decompressor(zstd::zstd_safe::DCtx<'static>);

impl Decompressor {
    pub(crate) fn new() -> std::io::Result<Self> {
        zstd::zstd_safe::DCtx::try_create()
            .map(Self)
            .ok_or_else(|| std::io::Error::other("zstd cannot create a decompression context"))
    }

    /// Decompresses one frame made without a dictionary into `dst` (its capacity the bound).
    pub(crate) fn decompress_to_buffer(
        &mut self,
        src: &[u8],
        dst: &mut Vec<u8>,
    ) -> Result<usize, &'static str> {
        self.0
            .decompress(dst, src)
            .map_err(|_| "zstd cannot decompress a block")
    }

    /// Decompresses one frame made with `dict`.
    pub(crate) fn decompress_with(
        &mut self,
        src: &[u8],
        dst: &mut Vec<u8>,
        dict: &ReadDictionary,
    ) -> Result<usize, &'static str> {
        self.0
            .decompress_using_ddict(dst, src, &dict.ddict)
            .map_err(|_| "zstd cannot decompress a block with its stream's dictionary")
    }

    /// Decompresses one frame of at most `capacity` bytes.
    pub(crate) fn decompress(&mut self, src: &[u8], capacity: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(capacity);
        self.0
            .decompress(&mut out, src)
            .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
        Ok(out)
    }
}

impl std::fmt::Debug for Decompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decompressor")
    }
}

/// A stream's zstd dictionary, digested for decompression (shared by the cursors of a reader).
pub(crate) struct DictionaryData {
    pub(crate) id: u64,
    ddict: zstd::zstd_safe::DDict<'static>,
}

/// What cursors hold of a dictionary.
pub(crate) type ReadDictionary = std::sync::Arc<DictionaryData>;

impl DictionaryData {
    /// Digests a stored dictionary (an error for bytes zstd cannot use).
    pub(crate) fn new(id: u64, bytes: &[u8]) -> Result<ReadDictionary, String> {
        let ddict = zstd::zstd_safe::DDict::try_create(bytes)
            .ok_or_else(|| format!("zstd cannot use dictionary {id}"))?;
        Ok(std::sync::Arc::new(Self { id, ddict }))
    }
}

impl std::fmt::Debug for DictionaryData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DictionaryData({})", self.id)
    }
}

/// Where a reader finds the dictionary a chunk names (format 3).
pub(crate) trait Dictionaries {
    /// The dictionary stored under `id` (never 0).
    fn dictionary(&self, id: u64) -> Result<ReadDictionary, String>;
}

/// For blobs read on their own: a chunk that names a dictionary is refused.
pub(crate) struct NoDictionaries;

impl Dictionaries for NoDictionaries {
    fn dictionary(&self, id: u64) -> Result<ReadDictionary, String> {
        Err(format!(
            "the chunk names dictionary {id}, and none is available here"
        ))
    }
}

/// A stream's zstd dictionary, digested for compression at the writer's level.
pub(crate) struct WriteDictionary {
    pub(crate) id: u64,
    pub(crate) cdict: zstd::zstd_safe::CDict<'static>,
}

/// A block body up to this size is stored as is: zstd's per-frame tables would cost a reader
/// more than the few bytes they save.
pub const RAW_BLOCK_MAX_BYTES: usize = 1024;

/// A chunk never holds more events than this (event ids reserve 12 bits for the index).
pub const MAX_CHUNK_EVENTS: usize = 4096;

/// Largest decompressed body a reader accepts (guards against garbage lengths).
const MAX_BODY_BYTES: u64 = 256 << 20;

/// Parameter value tags inside the params column.
const TAG_SIGNED: u8 = 0;
const TAG_UNSIGNED: u8 = 1;
const TAG_FLOAT: u8 = 2;
const TAG_STRING: u8 = 3;
const TAG_ADDRESS: u8 = 4;

/// Number of state/link duration classes per CPU (see [`stream_id`]).
pub const DURATION_CLASSES: u32 = 5;

/// Duration class of a state or link: long states go to their own streams so that a query
/// near a time `t` only has to look back a bounded span in each stream.
pub fn duration_class(duration: i64) -> u32 {
    let d = duration.max(0) as u64;
    match d {
        0..0x1_0000 => 0,                // < 65 µs
        0x1_0000..0x40_0000 => 1,        // < 4.2 ms
        0x40_0000..0x1000_0000 => 2,     // < 268 ms
        0x1000_0000..0x4_0000_0000 => 3, // < 17 s
        _ => 4,
    }
}

/// The longest duration of a state or link of this class (`None` for the last, unbounded one).
pub(crate) fn longest_of_class(class: u32) -> Option<i64> {
    match class {
        0 => Some(0xFFFF),
        1 => Some(0x3F_FFFF),
        2 => Some(0xFFF_FFFF),
        3 => Some(0x3_FFFF_FFFF),
        _ => None,
    }
}

/// Default longest trace time one chunk may span (2^36 ns ≈ 69 s): long enough that a slow
/// stream still fills its chunks (a set-top box's sparse streams send a few events a second),
/// short enough that the `max_span` window of a stream's lookups holds few chunks. Readers decode
/// only the 512-event blocks they reach, so a long chunk costs them nothing more.
pub const DEFAULT_MAX_CHUNK_SPAN: i64 = 1 << 36;

/// The stream of an event: `category << 24 | class << 16 | cpu` (cpu `0xFFFF` = none).
pub fn stream_id(category: EventCategory, class: u32, cpu: Option<Cpu>) -> i64 {
    (i64::from(category.code()) << 24) | (i64::from(class) << 16) | i64::from(cpu.unwrap_or(0xFFFF))
}

/// Splits a stream id into category, class and CPU.
pub fn split_stream(stream: i64) -> Option<(EventCategory, u32, Option<Cpu>)> {
    let cat = EventCategory::from_code(u8::try_from((stream >> 24) & 0xFF).ok()?)?;
    let class = ((stream >> 16) & 0xFF) as u32;
    let cpu = (stream & 0xFFFF) as u16;
    Some((cat, class, if cpu == 0xFFFF { None } else { Some(cpu) }))
}

// ---------------------------------------------------------------------------------------------
// varints

#[inline]
pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A bounds-checked reader over a byte slice.
pub(crate) struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub(crate) fn uvarint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(format!("varint runs past the end at byte {}", self.pos));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(format!("varint overflows 64 bits at byte {}", self.pos));
            }
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(format!("varint longer than 10 bytes at byte {}", self.pos));
            }
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| format!("byte expected at {}", self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("{n} bytes expected at {}", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

// ---------------------------------------------------------------------------------------------
// parameters

pub(crate) fn encode_params(out: &mut Vec<u8>, params: &[ParamValue]) {
    put_uvarint(out, params.len() as u64);
    for p in params {
        match p {
            ParamValue::Signed(v) => {
                out.push(TAG_SIGNED);
                put_uvarint(out, zigzag(*v));
            }
            ParamValue::Unsigned(v) => {
                out.push(TAG_UNSIGNED);
                put_uvarint(out, *v);
            }
            ParamValue::Float(v) => {
                out.push(TAG_FLOAT);
                out.extend_from_slice(&v.to_le_bytes());
            }
            ParamValue::String(s) => {
                out.push(TAG_STRING);
                put_uvarint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            ParamValue::Address(v) => {
                out.push(TAG_ADDRESS);
                put_uvarint(out, *v);
            }
        }
    }
}

/// Walks one event's parameter record, checking it; returns the values if `keep`.
fn walk_params(
    r: &mut ByteReader<'_>,
    mut keep: Option<&mut Vec<ParamValue>>,
) -> Result<(), String> {
    let n = r.uvarint()?;
    for _ in 0..n {
        let tag = r.u8()?;
        let v = match tag {
            TAG_SIGNED => ParamValue::Signed(unzigzag(r.uvarint()?)),
            TAG_UNSIGNED => ParamValue::Unsigned(r.uvarint()?),
            TAG_FLOAT => {
                let b = r.bytes(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                ParamValue::Float(f64::from_le_bytes(a))
            }
            TAG_STRING => {
                let len = usize::try_from(r.uvarint()?).map_err(|_| "string too long")?;
                let b = r.bytes(len)?;
                let s = std::str::from_utf8(b).map_err(|e| format!("parameter string: {e}"))?;
                ParamValue::String(s.to_string())
            }
            TAG_ADDRESS => ParamValue::Address(r.uvarint()?),
            other => return Err(format!("unknown parameter tag {other}")),
        };
        if let Some(out) = keep.as_deref_mut() {
            out.push(v);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// the lazy reader side: one cursor per chunk, decoding only what a query walks over

/// Error of the lazy decoder (turned into `StoreError::CorruptChunk` by the reader).
pub(crate) type LazyResult<T> = Result<T, &'static str>;

#[inline(always)]
pub(crate) fn get_uvarint(buf: &[u8], pos: &mut usize) -> LazyResult<u64> {
    // Fast paths: one byte (most type ids, producers), two bytes (small parameter values, time
    // deltas of busy streams) and three (time deltas and durations under 2 ms: most of a set-top
    // box's).
    let p = *pos;
    match buf.get(p) {
        Some(&b) if b < 0x80 => {
            *pos = p + 1;
            Ok(u64::from(b))
        }
        Some(&b) => match buf.get(p + 1) {
            Some(&c) if c < 0x80 => {
                *pos = p + 2;
                Ok(u64::from(b & 0x7F) | u64::from(c) << 7)
            }
            Some(&c) => match buf.get(p + 2) {
                Some(&d) if d < 0x80 => {
                    *pos = p + 3;
                    Ok(u64::from(b & 0x7F) | u64::from(c & 0x7F) << 7 | u64::from(d) << 14)
                }
                _ => get_uvarint_slow(buf, pos),
            },
            None => Err("varint runs past the end of its column"),
        },
        None => Err("varint runs past the end of its column"),
    }
}

#[inline(never)]
fn get_uvarint_slow(buf: &[u8], pos: &mut usize) -> LazyResult<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(&b) = buf.get(*pos) else {
            return Err("varint runs past the end of its column");
        };
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err("varint overflows 64 bits");
        }
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err("varint longer than 10 bytes");
        }
    }
}

#[inline]
fn get_bytes<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> LazyResult<&'a [u8]> {
    let end = pos
        .checked_add(n)
        .filter(|&e| e <= buf.len())
        .ok_or("value runs past the end of its column")?;
    let s = &buf[*pos..end];
    *pos = end;
    Ok(s)
}

#[inline]
fn get_f64(buf: &[u8], pos: &mut usize) -> LazyResult<f64> {
    let b = get_bytes(buf, pos, 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(f64::from_le_bytes(a))
}

/// Skips one event's parameter record.
#[inline]
fn skip_params(buf: &[u8], pos: &mut usize) -> LazyResult<()> {
    let n = get_uvarint(buf, pos)?;
    for _ in 0..n {
        let tag = *buf.get(*pos).ok_or("parameter tag runs past the end")?;
        *pos += 1;
        match tag {
            TAG_SIGNED | TAG_UNSIGNED | TAG_ADDRESS => {
                get_uvarint(buf, pos)?;
            }
            TAG_FLOAT => {
                get_bytes(buf, pos, 8)?;
            }
            TAG_STRING => {
                let len = usize::try_from(get_uvarint(buf, pos)?).map_err(|_| "string too long")?;
                get_bytes(buf, pos, len)?;
            }
            _ => return Err("unknown parameter tag"),
        }
    }
    Ok(())
}

/// Parses one event's parameter record.
#[inline]
fn parse_params(buf: &[u8], pos: &mut usize) -> LazyResult<Vec<ParamValue>> {
    let n = get_uvarint(buf, pos)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    // Every value takes at least two bytes: a count beyond what is left cannot be parsed.
    if n > (buf.len().saturating_sub(*pos) / 2) as u64 {
        return Err("parameter tag runs past the end");
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push(parse_param(buf, pos)?);
    }
    Ok(out)
}

#[inline(always)]
fn parse_param(buf: &[u8], pos: &mut usize) -> LazyResult<ParamValue> {
    let tag = *buf.get(*pos).ok_or("parameter tag runs past the end")?;
    *pos += 1;
    Ok(match tag {
        TAG_SIGNED => ParamValue::Signed(unzigzag(get_uvarint(buf, pos)?)),
        TAG_UNSIGNED => ParamValue::Unsigned(get_uvarint(buf, pos)?),
        TAG_FLOAT => ParamValue::Float(get_f64(buf, pos)?),
        TAG_STRING => parse_string(buf, pos)?,
        TAG_ADDRESS => ParamValue::Address(get_uvarint(buf, pos)?),
        _ => return Err("unknown parameter tag"),
    })
}

#[inline(never)]
fn parse_string(buf: &[u8], pos: &mut usize) -> LazyResult<ParamValue> {
    let len = usize::try_from(get_uvarint(buf, pos)?).map_err(|_| "string too long")?;
    let b = get_bytes(buf, pos, len)?;
    let s = std::str::from_utf8(b).map_err(|_| "parameter string is not UTF-8")?;
    Ok(ParamValue::String(s.to_owned()))
}

/// The blob of `buf` as the writer encodes it (zstd level 1).
#[cfg(test)]
fn encode_for_test(buf: &ColumnBuffer, category: EventCategory, cpu: Option<Cpu>) -> Vec<u8> {
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    encode_chunk(
        buf,
        category,
        cpu,
        &mut EncodeScratch::default(),
        &mut comp,
        None,
        None,
    )
    .unwrap()
    .0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_uvarint(&mut b, v);
            assert_eq!(ByteReader::new(&b).uvarint().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert!(ByteReader::new(&[0x80, 0x80]).uvarint().is_err());
        assert!(ByteReader::new(&[0xFF; 11]).uvarint().is_err());
    }

    /// The column reader's fast paths (1, 2 and 3 bytes) and its general path read every length
    /// as the checked header reader does, leave the position after the varint, and refuse a
    /// varint cut short.
    #[test]
    fn column_varints_of_every_length() {
        let mut values: Vec<u64> = vec![0, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) + 1]);
        }
        for v in values {
            let mut b = vec![0xAA];
            put_uvarint(&mut b, v);
            let len = b.len() - 1;
            b.push(0x05);
            let mut pos = 1;
            assert_eq!(get_uvarint(&b, &mut pos), Ok(v), "{v}");
            assert_eq!(pos, 1 + len, "{v}");
            assert_eq!(ByteReader::new(&b[1..]).uvarint().unwrap(), v);
            for cut in 1..=len {
                let mut pos = 1;
                assert!(
                    get_uvarint(&b[..cut], &mut pos).is_err(),
                    "{v} cut at {cut}"
                );
            }
        }
    }
}
