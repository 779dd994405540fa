//! The event chunk encoding: columns of varints, then zstd where it pays (byte layout in
//! `SCHEMA.md`).

use crate::model::{
    Cpu, Event, EventCategory, EventKind, ParamValue, ProducerId, Timestamp, TypeId,
};

/// Version byte at the start of every chunk blob the writer makes. Format 2 may store a block
/// as is (its stored length then equals its body length); readers also accept format 1, where
/// every block is a zstd frame.
pub const CHUNK_FORMAT: u8 = 2;

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
// the writer side

/// Column buffers of one stream, in arrival order; reused across chunks.
#[derive(Debug, Default)]
pub(crate) struct ColumnBuffer {
    pub(crate) ts: Vec<i64>,
    pub(crate) ty: Vec<u32>,
    pub(crate) producer: Vec<u32>,
    /// State/link end.
    pub(crate) end: Vec<i64>,
    /// State depth or link target.
    pub(crate) aux: Vec<u32>,
    pub(crate) value: Vec<f64>,
    pub(crate) params: Vec<u8>,
    pub(crate) param_off: Vec<u32>,
    min_ts: i64,
    max_ts: i64,
}

impl ColumnBuffer {
    pub(crate) fn len(&self) -> usize {
        self.ts.len()
    }

    /// Trace time between the earliest and the latest start buffered.
    #[inline]
    pub(crate) fn span(&self) -> i64 {
        self.max_ts.saturating_sub(self.min_ts)
    }

    pub(crate) fn clear(&mut self) {
        self.ts.clear();
        self.ty.clear();
        self.producer.clear();
        self.end.clear();
        self.aux.clear();
        self.value.clear();
        self.params.clear();
        self.param_off.clear();
    }

    #[inline]
    pub(crate) fn push(&mut self, e: &Event) {
        if self.ts.is_empty() {
            self.min_ts = e.ts;
            self.max_ts = e.ts;
        } else {
            self.min_ts = self.min_ts.min(e.ts);
            self.max_ts = self.max_ts.max(e.ts);
        }
        self.ts.push(e.ts);
        self.ty.push(e.type_id);
        self.producer.push(e.producer);
        match e.kind {
            EventKind::Punctual => {}
            EventKind::State { end, depth } => {
                self.end.push(end);
                self.aux.push(u32::from(depth));
            }
            EventKind::Link { end, target } => {
                self.end.push(end);
                self.aux.push(target);
            }
            EventKind::Variable { value } => self.value.push(value),
        }
        self.param_off.push(self.params.len() as u32);
        encode_params(&mut self.params, &e.params);
    }
}

/// Metadata of an encoded chunk (the `chunks` row without the blob).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChunkMeta {
    pub(crate) t_min: Timestamp,
    pub(crate) t_max: Timestamp,
    pub(crate) end_max: Timestamp,
    pub(crate) count: u32,
    pub(crate) types: Vec<TypeId>,
    pub(crate) producers: Vec<ProducerId>,
}

/// Events per independently compressed block of a chunk (the last block may hold fewer).
pub const BLOCK_EVENTS: usize = 512;

/// Scratch space reused by [`encode_chunk`].
#[derive(Default)]
pub(crate) struct EncodeScratch {
    order: Vec<u32>,
    body: Vec<u8>,
    col: Vec<u8>,
    frames: Vec<u8>,
    pub(crate) set: Vec<u32>,
}

/// Appends the column-encoded body of the events `order` (time-sorted) of `buf` to `body`.
fn encode_block(
    buf: &ColumnBuffer,
    category: EventCategory,
    order: &[u32],
    body: &mut Vec<u8>,
    col: &mut Vec<u8>,
) {
    let flush = |body: &mut Vec<u8>, col: &mut Vec<u8>| {
        put_uvarint(body, col.len() as u64);
        body.extend_from_slice(col);
        col.clear();
    };
    col.clear();
    let mut prev = 0i64;
    for (k, &i) in order.iter().enumerate() {
        let t = buf.ts[i as usize];
        if k == 0 {
            put_uvarint(col, zigzag(t));
        } else {
            put_uvarint(col, t.wrapping_sub(prev) as u64);
        }
        prev = t;
    }
    flush(body, col);
    for &i in order {
        put_uvarint(col, u64::from(buf.ty[i as usize]));
    }
    flush(body, col);
    for &i in order {
        put_uvarint(col, u64::from(buf.producer[i as usize]));
    }
    flush(body, col);
    match category {
        EventCategory::State | EventCategory::Link => {
            for &i in order {
                let i = i as usize;
                put_uvarint(col, zigzag(buf.end[i].wrapping_sub(buf.ts[i])));
            }
            flush(body, col);
            for &i in order {
                put_uvarint(col, u64::from(buf.aux[i as usize]));
            }
            flush(body, col);
        }
        EventCategory::Variable => {
            for &i in order {
                col.extend_from_slice(&buf.value[i as usize].to_le_bytes());
            }
            flush(body, col);
        }
        EventCategory::Punctual => {}
    }
    for &i in order {
        let i = i as usize;
        let from = buf.param_off[i] as usize;
        let to = buf
            .param_off
            .get(i + 1)
            .map_or(buf.params.len(), |&o| o as usize);
        col.extend_from_slice(&buf.params[from..to]);
    }
    flush(body, col);
}

/// Encodes a buffer as a chunk blob (sorting by timestamp, stable) and reports its metadata.
pub(crate) fn encode_chunk(
    buf: &ColumnBuffer,
    category: EventCategory,
    cpu: Option<Cpu>,
    scratch: &mut EncodeScratch,
    compressor: &mut zstd::bulk::Compressor<'static>,
) -> std::io::Result<(Vec<u8>, ChunkMeta)> {
    let n = buf.len();
    let order = &mut scratch.order;
    order.clear();
    order.extend(0..n as u32);
    if !buf.ts.windows(2).all(|w| w[0] <= w[1]) {
        order.sort_by_key(|&i| buf.ts[i as usize]);
    }
    let has_end = matches!(category, EventCategory::State | EventCategory::Link);
    let n_blocks = n.div_ceil(BLOCK_EVENTS);
    let mut blob = Vec::with_capacity(n * 6 + 64);
    blob.push(CHUNK_FORMAT);
    put_uvarint(&mut blob, n as u64);
    blob.push(category.code());
    put_uvarint(&mut blob, cpu.map_or(0, |c| u64::from(c) + 1));
    put_uvarint(&mut blob, n_blocks as u64);
    let frames = &mut scratch.frames;
    frames.clear();
    let mut prev_first = 0i64;
    for (b, block) in order.chunks(BLOCK_EVENTS).enumerate() {
        let body = &mut scratch.body;
        body.clear();
        encode_block(buf, category, block, body, &mut scratch.col);
        let frame = compressor.compress(body)?;
        // Stored as is when small, or when zstd saves nothing (a stored length equal to the
        // body length means "as is", so a frame that long is never written).
        let stored: &[u8] = if body.len() <= RAW_BLOCK_MAX_BYTES || frame.len() >= body.len() {
            body
        } else {
            &frame
        };
        let first = buf.ts[block[0] as usize];
        put_uvarint(&mut blob, block.len() as u64);
        if b == 0 {
            put_uvarint(&mut blob, zigzag(first));
        } else {
            put_uvarint(&mut blob, first.wrapping_sub(prev_first) as u64);
        }
        prev_first = first;
        put_uvarint(&mut blob, body.len() as u64);
        put_uvarint(&mut blob, stored.len() as u64);
        frames.extend_from_slice(stored);
    }
    blob.extend_from_slice(frames);

    let mut end_max = i64::MIN;
    for &i in order.iter() {
        let i = i as usize;
        let end = if has_end {
            buf.end[i].max(buf.ts[i])
        } else {
            buf.ts[i]
        };
        end_max = end_max.max(end);
    }

    let set = &mut scratch.set;
    set.clear();
    set.extend_from_slice(&buf.ty);
    set.sort_unstable();
    set.dedup();
    let types = set.clone();
    set.clear();
    set.extend_from_slice(&buf.producer);
    set.sort_unstable();
    set.dedup();
    let producers = set.clone();
    let meta = ChunkMeta {
        t_min: buf.ts[order[0] as usize],
        t_max: buf.ts[order[n - 1] as usize],
        end_max,
        count: n as u32,
        types,
        producers,
    };
    Ok((blob, meta))
}

// ---------------------------------------------------------------------------------------------
// the reader side

/// A decoded chunk: columns in time order.
#[derive(Debug, Default, Clone)]
pub(crate) struct DecodedChunk {
    pub(crate) id: i64,
    pub(crate) category: Option<EventCategory>,
    pub(crate) cpu: Option<Cpu>,
    pub(crate) ts: Vec<i64>,
    pub(crate) ty: Vec<u32>,
    pub(crate) producer: Vec<u32>,
    pub(crate) end: Vec<i64>,
    pub(crate) aux: Vec<u32>,
    pub(crate) value: Vec<f64>,
    pub(crate) params: Vec<u8>,
    pub(crate) param_off: Vec<u32>,
}

impl DecodedChunk {
    pub(crate) fn len(&self) -> usize {
        self.ts.len()
    }

    pub(crate) fn category(&self) -> EventCategory {
        self.category.unwrap_or(EventCategory::Punctual)
    }

    /// The parameter values of event `i` (already validated by [`decode_chunk`]).
    pub(crate) fn params_of(&self, i: usize) -> Vec<ParamValue> {
        let from = self.param_off[i] as usize;
        let mut out = Vec::new();
        let mut r = ByteReader::new(&self.params[from..]);
        // Validated at decode time, so this cannot fail; an empty list is the safe fallback.
        if walk_params(&mut r, Some(&mut out)).is_err() {
            out.clear();
        }
        out
    }

    /// Event `i` as a model value.
    pub(crate) fn event(&self, i: usize) -> Event {
        let kind = match self.category() {
            EventCategory::Punctual => EventKind::Punctual,
            EventCategory::State => EventKind::State {
                end: self.end[i],
                depth: self.aux[i].min(u32::from(u16::MAX)) as u16,
            },
            EventCategory::Link => EventKind::Link {
                end: self.end[i],
                target: self.aux[i],
            },
            EventCategory::Variable => EventKind::Variable {
                value: self.value[i],
            },
        };
        Event {
            ts: self.ts[i],
            type_id: self.ty[i],
            producer: self.producer[i],
            cpu: self.cpu,
            kind,
            params: self.params_of(i),
        }
    }
}

/// One block of a chunk, as described by the chunk header.
#[derive(Debug, Clone, Copy, Default)]
struct BlockRef {
    count: usize,
    first_ts: Timestamp,
    /// Index in the chunk of the block's first event.
    first_index: usize,
    body_len: usize,
    /// `[start, end)` of its stored bytes (a zstd frame, or the body itself) in the blob.
    frame: (usize, usize),
    /// Stored as is, not compressed.
    raw: bool,
}

/// Parses a chunk header: events, category, CPU and the block table (frames checked to tile
/// the rest of the blob exactly).
fn parse_header(
    blob: &[u8],
    blocks: &mut Vec<BlockRef>,
) -> Result<(usize, EventCategory, Option<Cpu>), String> {
    parse_header_of(blob, blob.len(), blocks)
}

/// [`parse_header`] from the first bytes `head` of a blob of `total` bytes.
fn parse_header_of(
    head: &[u8],
    total: usize,
    blocks: &mut Vec<BlockRef>,
) -> Result<(usize, EventCategory, Option<Cpu>), String> {
    let blob = head;
    let mut r = ByteReader::new(blob);
    let format = r.u8()?;
    if format != 1 && format != CHUNK_FORMAT {
        return Err(format!(
            "chunk format {format}, expected 1 to {CHUNK_FORMAT}"
        ));
    }
    let n = r.uvarint()?;
    if n as usize > MAX_CHUNK_EVENTS || n == 0 {
        return Err(format!("chunk claims {n} events"));
    }
    let n = n as usize;
    let cat_code = r.u8()?;
    let category =
        EventCategory::from_code(cat_code).ok_or_else(|| format!("unknown category {cat_code}"))?;
    let cpu = match r.uvarint()? {
        0 => None,
        c @ 1..=0x1_0000 => Some((c - 1) as u16),
        c => return Err(format!("cpu {c} out of range")),
    };
    let nb = r.uvarint()?;
    if nb == 0 || nb > n as u64 {
        return Err(format!("chunk of {n} events claims {nb} blocks"));
    }
    blocks.clear();
    let mut first_index = 0usize;
    let mut t = 0i64;
    let mut off = 0usize;
    for b in 0..nb {
        let count = r.uvarint()?;
        if count == 0 || count > (n - first_index) as u64 {
            return Err(format!("block {b} claims {count} events"));
        }
        let d = r.uvarint()?;
        t = if b == 0 {
            unzigzag(d)
        } else {
            t.wrapping_add(d as i64)
        };
        let body_len = r.uvarint()?;
        if body_len > MAX_BODY_BYTES {
            return Err(format!(
                "declared block body of {body_len} bytes is too large"
            ));
        }
        let frame_len = usize::try_from(r.uvarint()?).map_err(|_| "frame length overflows")?;
        let end = off
            .checked_add(frame_len)
            .ok_or_else(|| "frame length overflows".to_string())?;
        blocks.push(BlockRef {
            count: count as usize,
            first_ts: t,
            first_index,
            body_len: body_len as usize,
            frame: (off, end),
            raw: format >= 2 && frame_len as u64 == body_len,
        });
        first_index += count as usize;
        off = end;
    }
    if first_index != n {
        return Err(format!("blocks hold {first_index} events, chunk says {n}"));
    }
    let base = r.pos();
    if base.checked_add(off) != Some(total) {
        return Err(format!(
            "block frames take {off} bytes, {} are left",
            total - base
        ));
    }
    for b in blocks.iter_mut() {
        b.frame = (b.frame.0 + base, b.frame.1 + base);
    }
    Ok((n, category, cpu))
}

/// The fixed columns of one decoded block, and where its params column is in the body.
#[derive(Debug, Default)]
struct BlockCols {
    ts: Vec<i64>,
    ty: Vec<u32>,
    pr: Vec<u32>,
    end: Vec<i64>,
    aux: Vec<u32>,
    val: Vec<f64>,
    par: (usize, usize),
}

/// Decompresses block `b` of `frames` (the blob bytes from `frames_from` on) into `body`.
fn decompress_block(
    b: &BlockRef,
    frames: &[u8],
    frames_from: usize,
    body: &mut Vec<u8>,
    decompressor: &mut zstd::bulk::Decompressor<'static>,
) -> LazyResult<()> {
    let frame = frames
        .get(b.frame.0 - frames_from..b.frame.1 - frames_from)
        .ok_or("block frame out of range")?;
    body.clear();
    if b.raw {
        body.extend_from_slice(frame);
        return Ok(());
    }
    body.reserve(b.body_len);
    let got = decompressor
        .decompress_to_buffer(frame, body)
        .map_err(|_| "zstd cannot decompress a block")?;
    if got != b.body_len || body.len() != b.body_len {
        return Err("block body length differs from the chunk header");
    }
    Ok(())
}

/// Decodes the fixed columns of a block body (every byte checked).
fn decode_block(
    body: &[u8],
    b: &BlockRef,
    category: EventCategory,
    out: &mut BlockCols,
) -> LazyResult<()> {
    let n = b.count;
    let mut p = 0usize;
    fn column<'a>(body: &'a [u8], p: &mut usize) -> LazyResult<&'a [u8]> {
        let len = usize::try_from(get_uvarint(body, p)?).map_err(|_| "column length overflows")?;
        get_bytes(body, p, len).map_err(|_| "column runs past the end of its block")
    }
    let col = |p: &mut usize| column(body, p);
    fn done(c: &[u8], q: usize) -> LazyResult<()> {
        if q == c.len() {
            Ok(())
        } else {
            Err("trailing bytes in a column")
        }
    }
    out.ts.clear();
    out.ty.clear();
    out.pr.clear();
    out.end.clear();
    out.aux.clear();
    out.val.clear();
    out.ts.reserve(n);
    out.ty.reserve(n);
    out.pr.reserve(n);
    let c = col(&mut p)?;
    let mut q = 0;
    let mut t = unzigzag(get_uvarint(c, &mut q)?);
    if t != b.first_ts {
        return Err("block's first timestamp differs from the chunk header");
    }
    out.ts.push(t);
    for _ in 1..n {
        t = t.wrapping_add(get_uvarint(c, &mut q)? as i64);
        out.ts.push(t);
    }
    done(c, q)?;
    let c = col(&mut p)?;
    let mut q = 0;
    for _ in 0..n {
        out.ty
            .push(u32::try_from(get_uvarint(c, &mut q)?).map_err(|_| "type id overflows u32")?);
    }
    done(c, q)?;
    let c = col(&mut p)?;
    let mut q = 0;
    for _ in 0..n {
        out.pr
            .push(u32::try_from(get_uvarint(c, &mut q)?).map_err(|_| "producer id overflows u32")?);
    }
    done(c, q)?;
    match category {
        EventCategory::State | EventCategory::Link => {
            out.end.reserve(n);
            out.aux.reserve(n);
            let c = col(&mut p)?;
            let mut q = 0;
            for k in 0..n {
                let d = unzigzag(get_uvarint(c, &mut q)?);
                out.end.push(out.ts[k].wrapping_add(d));
            }
            done(c, q)?;
            let c = col(&mut p)?;
            let mut q = 0;
            for _ in 0..n {
                out.aux.push(
                    u32::try_from(get_uvarint(c, &mut q)?)
                        .map_err(|_| "depth/target overflows u32")?,
                );
            }
            done(c, q)?;
        }
        EventCategory::Variable => {
            let c = col(&mut p)?;
            if c.len() != n * 8 {
                return Err("value column has the wrong length");
            }
            out.val.extend(c.chunks_exact(8).map(|w| {
                let mut a = [0u8; 8];
                a.copy_from_slice(w);
                f64::from_le_bytes(a)
            }));
        }
        EventCategory::Punctual => {}
    }
    let c = col(&mut p)?;
    out.par = (p - c.len(), p);
    if p != body.len() {
        return Err("trailing bytes after the columns of a block");
    }
    Ok(())
}

/// Decodes a chunk blob; every byte is checked, so garbage gives an error, never a panic.
pub(crate) fn decode_chunk(
    blob: &[u8],
    decompressor: &mut zstd::bulk::Decompressor<'static>,
    out: &mut DecodedChunk,
) -> Result<(), String> {
    let mut blocks = Vec::new();
    let (n, category, cpu) = parse_header(blob, &mut blocks)?;
    out.category = Some(category);
    out.cpu = cpu;
    out.ts.clear();
    out.ty.clear();
    out.producer.clear();
    out.end.clear();
    out.aux.clear();
    out.value.clear();
    out.params.clear();
    out.param_off.clear();
    let mut body = Vec::new();
    let mut cols = BlockCols::default();
    for b in &blocks {
        decompress_block(b, blob, 0, &mut body, decompressor)?;
        decode_block(&body, b, category, &mut cols)?;
        out.ts.extend_from_slice(&cols.ts);
        out.ty.extend_from_slice(&cols.ty);
        out.producer.extend_from_slice(&cols.pr);
        out.end.extend_from_slice(&cols.end);
        out.aux.extend_from_slice(&cols.aux);
        out.value.extend_from_slice(&cols.val);
        let pbytes = &body[cols.par.0..cols.par.1];
        let base = out.params.len();
        let mut pr = ByteReader::new(pbytes);
        for _ in 0..b.count {
            out.param_off.push((base + pr.pos()) as u32);
            walk_params(&mut pr, None)?;
        }
        if !pr.is_empty() {
            return Err("trailing bytes in the params column".into());
        }
        out.params.extend_from_slice(pbytes);
    }
    debug_assert_eq!(out.ts.len(), n);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// the lazy reader side: one cursor per chunk, decoding only what a query walks over

/// Error of the lazy decoder (turned into `StoreError::CorruptChunk` by the reader).
pub(crate) type LazyResult<T> = Result<T, &'static str>;

#[inline(always)]
pub(crate) fn get_uvarint(buf: &[u8], pos: &mut usize) -> LazyResult<u64> {
    // Fast paths: one byte (most type ids, producers) and two bytes (most time deltas and
    // small parameter values).
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
            _ => get_uvarint_slow(buf, pos),
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

/// Bytes read first from a chunk blob to parse its header (the block table of a full chunk
/// takes well under this).
const HEADER_PREFIX: usize = 256;

/// Random access to a chunk blob: a byte slice, or an incremental SQLite blob handle.
pub(crate) trait BlobSource {
    /// Length of the blob.
    fn len(&self) -> usize;
    /// Fills `buf` from `offset` on (the range is within the blob).
    fn read_at(&mut self, buf: &mut [u8], offset: usize) -> Result<(), String>;
}

impl BlobSource for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: usize) -> Result<(), String> {
        let src = offset
            .checked_add(buf.len())
            .and_then(|end| self.get(offset..end))
            .ok_or("read past the end of the chunk blob")?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl BlobSource for rusqlite::blob::Blob<'_> {
    fn len(&self) -> usize {
        rusqlite::blob::Blob::len(self)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: usize) -> Result<(), String> {
        self.read_at_exact(buf, offset)
            .map_err(|e| format!("reading the chunk blob: {e}"))
    }
}

/// A chunk read sequentially, one block at a time: a block is decompressed (into buffers
/// reused across chunks) and its fixed columns decoded only when the cursor reaches it, and
/// seeking jumps over whole blocks by their first timestamps; parameters are parsed only for
/// the events returned.
///
/// Every read is bounds-checked, so a corrupt chunk gives an error, never a panic; the parts
/// of a chunk a query skips are checked only as far as skipping needs.
#[derive(Debug, Default)]
pub(crate) struct ChunkCursor {
    pub(crate) id: i64,
    /// The blob's frames from the first block the cursor may visit on.
    frames: Vec<u8>,
    /// Offset in the blob of `frames[0]`.
    frames_from: usize,
    blocks: Vec<BlockRef>,
    n: usize,
    category: Option<EventCategory>,
    cpu: Option<Cpu>,
    /// The current block (`blocks.len()` once exhausted).
    block: usize,
    body: Vec<u8>,
    /// Read positions in the columns of the current block's body.
    cols: ColPos,
    /// Events in the current block.
    bcount: usize,
    /// Index of the current event in its block.
    bidx: usize,
    /// Start of the current event's parameter record in `body`.
    par_pos: usize,
    /// End of the current event's parameter record, once known.
    par_end: Option<usize>,
    /// The walk never asks for parameters: their column is not followed (nor checked).
    ignore_params: bool,
    /// Start of the first block not loaded (`Timestamp::MAX` when the chunk's last block is).
    limit: Timestamp,
    /// The chunk's blocks after the loaded ones (see [`ChunkCursor::extend_to`]).
    rest: Vec<BlockRef>,
    /// Index of the current event in the chunk (`n` once exhausted).
    idx: usize,
    /// Fields of the current event.
    pub(crate) ts: Timestamp,
    pub(crate) ty: TypeId,
    pub(crate) producer: ProducerId,
    end: Timestamp,
    /// The current event's category-specific fields, built as they are decoded.
    kind: EventKind,
}

/// `(next entry, end)` in the block body of each fixed column: the cursor decodes one entry
/// of each as it moves, instead of the whole block up front.
#[derive(Debug, Default, Clone, Copy)]
struct ColPos {
    ts: (usize, usize),
    ty: (usize, usize),
    pr: (usize, usize),
    dur: (usize, usize),
    aux: (usize, usize),
    val: (usize, usize),
    /// `[start, end)` of the params column.
    par: (usize, usize),
}

/// Skips `k` varints of the column `c` of `body` (their values are not checked).
fn skip_varints(body: &[u8], c: &mut (usize, usize), k: usize) -> LazyResult<()> {
    let col = body
        .get(..c.1)
        .ok_or("column runs past the end of its block")?;
    let mut left = k;
    let mut p = c.0;
    while left > 0 {
        let b = *col.get(p).ok_or("varint runs past the end of its column")?;
        p += 1;
        if b < 0x80 {
            left -= 1;
        }
    }
    c.0 = p;
    Ok(())
}

/// Reads the next varint of the column `c` of `body`.
#[inline(always)]
fn col_uvarint(body: &[u8], c: &mut (usize, usize)) -> LazyResult<u64> {
    let col = body
        .get(..c.1)
        .ok_or("column runs past the end of its block")?;
    get_uvarint(col, &mut c.0)
}

impl ChunkCursor {
    /// [`Self::load_from`] a whole blob in memory, keeping every block.
    #[cfg(test)]
    pub(crate) fn load(
        &mut self,
        id: i64,
        blob: &[u8],
        from: Timestamp,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<(), String> {
        let mut src = blob;
        self.load_from(id, &mut src, from, Timestamp::MAX, decompressor)
    }

    /// Reads the chunk header from `src` and positions the cursor on its first event at or
    /// after `from`, keeping the blocks that start before `until`: blocks before the one
    /// holding `from` and from `until` on are neither read nor decompressed, and the cursor
    /// ends after the last block kept. Only the header and the kept blocks' frames are read
    /// from `src` (SQLite's incremental blob I/O: the rest of the chunk is never copied).
    pub(crate) fn load_from(
        &mut self,
        id: i64,
        src: &mut impl BlobSource,
        from: Timestamp,
        until: Timestamp,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<(), String> {
        self.id = id;
        let total = src.len();
        // The header is at most a few hundred bytes: read a prefix, the whole blob only if
        // the header turns out longer.
        let mut head = std::mem::take(&mut self.frames);
        head.resize(total.min(HEADER_PREFIX), 0);
        src.read_at(&mut head, 0)?;
        let mut parsed = parse_header_of(&head, total, &mut self.blocks);
        if parsed.is_err() && head.len() < total {
            head.resize(total, 0);
            src.read_at(&mut head, 0)?;
            parsed = parse_header_of(&head, total, &mut self.blocks);
        }
        self.frames = head;
        let (n, category, cpu) = parsed?;
        self.n = n;
        self.category = Some(category);
        self.cpu = cpu;
        let j = self
            .blocks
            .partition_point(|b| b.first_ts < from)
            .saturating_sub(1);
        let end = self
            .blocks
            .partition_point(|b| b.first_ts < until)
            .max(j + 1);
        self.limit = self.blocks.get(end).map_or(Timestamp::MAX, |b| b.first_ts);
        self.rest.clear();
        self.rest.extend_from_slice(&self.blocks[end..]);
        self.blocks.truncate(end);
        self.frames_from = self.blocks[j].frame.0;
        self.frames.clear();
        self.frames
            .resize(self.blocks[end - 1].frame.1 - self.frames_from, 0);
        src.read_at(&mut self.frames, self.frames_from)?;
        self.enter_block(j, decompressor)?;
        self.seek(from, decompressor)?;
        Ok(())
    }

    /// Decompresses block `j`, locates its columns and moves to its first event.
    fn enter_block(
        &mut self,
        j: usize,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> LazyResult<()> {
        // Until the block is checked, the cursor is past the end (and its column positions
        // empty), so nothing reads a stale position into a new body.
        self.cols = ColPos::default();
        self.bcount = 0;
        self.bidx = 0;
        self.par_pos = 0;
        self.par_end = None;
        self.idx = self.n;
        self.block = self.blocks.len();
        let b = self.blocks[j];
        decompress_block(
            &b,
            &self.frames,
            self.frames_from,
            &mut self.body,
            decompressor,
        )?;
        let body = &self.body[..];
        let mut p = 0usize;
        let mut col = || -> LazyResult<(usize, usize)> {
            let len = usize::try_from(get_uvarint(body, &mut p)?)
                .map_err(|_| "column length overflows")?;
            let start = p;
            get_bytes(body, &mut p, len).map_err(|_| "column runs past the end of its block")?;
            Ok((start, p))
        };
        let mut c = ColPos {
            ts: col()?,
            ty: col()?,
            pr: col()?,
            ..ColPos::default()
        };
        match self.category() {
            EventCategory::State | EventCategory::Link => {
                c.dur = col()?;
                c.aux = col()?;
            }
            EventCategory::Variable => {
                c.val = col()?;
                if c.val.1 - c.val.0 != b.count * 8 {
                    return Err("value column has the wrong length");
                }
            }
            EventCategory::Punctual => {}
        }
        c.par = col()?;
        if p != body.len() {
            return Err("trailing bytes after the columns of a block");
        }
        self.cols = c;
        self.block = j;
        self.bcount = b.count;
        self.idx = b.first_index;
        self.par_pos = c.par.0;
        let d = col_uvarint(&self.body, &mut self.cols.ts)?;
        self.ts = unzigzag(d);
        if self.ts != b.first_ts {
            self.idx = self.n;
            return Err("block's first timestamp differs from the chunk header");
        }
        self.read_fields()
    }

    /// Decodes the current event's fields after its timestamp from the column positions.
    #[inline]
    fn read_fields(&mut self) -> LazyResult<()> {
        let body = &self.body[..];
        let c = &mut self.cols;
        self.ty =
            u32::try_from(col_uvarint(body, &mut c.ty)?).map_err(|_| "type id overflows u32")?;
        self.producer = u32::try_from(col_uvarint(body, &mut c.pr)?)
            .map_err(|_| "producer id overflows u32")?;
        self.kind = match self.category {
            Some(cat @ (EventCategory::State | EventCategory::Link)) => {
                let d = unzigzag(col_uvarint(body, &mut c.dur)?);
                self.end = self.ts.wrapping_add(d);
                let aux = u32::try_from(col_uvarint(body, &mut c.aux)?)
                    .map_err(|_| "depth/target overflows u32")?;
                if cat == EventCategory::State {
                    EventKind::State {
                        end: self.end,
                        depth: aux.min(u32::from(u16::MAX)) as u16,
                    }
                } else {
                    EventKind::Link {
                        end: self.end,
                        target: aux,
                    }
                }
            }
            Some(EventCategory::Variable) => {
                let col = body.get(..c.val.1).ok_or("value column out of range")?;
                EventKind::Variable {
                    value: get_f64(col, &mut c.val.0)?,
                }
            }
            _ => EventKind::Punctual,
        };
        Ok(())
    }

    /// Number of events in the chunk.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Whether the cursor is on an event.
    #[inline]
    pub(crate) fn valid(&self) -> bool {
        self.idx < self.n
    }

    /// Index of the current event in the chunk.
    #[inline]
    pub(crate) fn index(&self) -> usize {
        self.idx
    }

    /// Category of the events.
    pub(crate) fn category(&self) -> EventCategory {
        self.category.unwrap_or(EventCategory::Punctual)
    }

    /// End of the current event (its timestamp for punctual events and variables).
    #[inline]
    pub(crate) fn end(&self) -> Timestamp {
        match self.category() {
            EventCategory::State | EventCategory::Link => self.end,
            _ => self.ts,
        }
    }

    /// The params column of the current block (positions in it are positions in `body`).
    #[inline]
    fn par_col(&self) -> &[u8] {
        &self.body[..self.cols.par.1]
    }

    /// Moves to the next event.
    #[inline]
    pub(crate) fn advance(
        &mut self,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> LazyResult<()> {
        if self.advance_in_block()? {
            Ok(())
        } else {
            self.next_block(decompressor)
        }
    }

    /// Moves to the next event if it is in the current block (true); false when the block is
    /// done and [`Self::next_block`] must follow (which needs the decompressor).
    #[inline(always)]
    pub(crate) fn advance_in_block(&mut self) -> LazyResult<bool> {
        if self.idx >= self.n {
            return Ok(true);
        }
        if !self.ignore_params {
            self.par_pos = match self.par_end.take() {
                Some(e) => e,
                None => {
                    let mut p = self.par_pos;
                    skip_params(self.par_col(), &mut p)?;
                    p
                }
            };
        }
        self.idx += 1;
        self.bidx += 1;
        if self.bidx < self.bcount {
            let d = col_uvarint(&self.body, &mut self.cols.ts)?;
            self.ts = self.ts.wrapping_add(d as i64);
            self.read_fields()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Enters the next block once [`Self::advance_in_block`] has left the current one.
    #[inline(never)]
    pub(crate) fn next_block(
        &mut self,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> LazyResult<()> {
        let c = &self.cols;
        if !self.ignore_params && self.par_pos != c.par.1 {
            return Err("trailing bytes in the params column");
        }
        if [c.ts, c.ty, c.pr, c.dur, c.aux, c.val]
            .iter()
            .any(|&(q, end)| q != end)
        {
            return Err("trailing bytes in a column");
        }
        if self.block + 1 < self.blocks.len() {
            self.enter_block(self.block + 1, decompressor)
        } else {
            self.block = self.blocks.len();
            self.idx = self.n;
            Ok(())
        }
    }

    /// Moves forward to the first event starting at or after `t` (or past the end).
    pub(crate) fn seek(
        &mut self,
        t: Timestamp,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> LazyResult<()> {
        if self.idx >= self.n || self.ts >= t {
            return Ok(());
        }
        // Whole blocks first: a block whose successor starts before t holds nothing at or
        // after t.
        let mut j = self.block;
        while j + 1 < self.blocks.len() && self.blocks[j + 1].first_ts < t {
            j += 1;
        }
        if j != self.block {
            self.enter_block(j, decompressor)?;
        }
        if self.ts < t {
            self.skip_in_block(t)?;
        }
        // Then event by event (only when the rest of the block starts before t: the next
        // block, if reached, starts at or after t).
        while self.idx < self.n && self.ts < t {
            self.advance(decompressor)?;
        }
        Ok(())
    }

    /// Moves to the first event of the current block at or after `t` by walking the
    /// timestamp column alone and skipping the other columns' entries; stays put when the
    /// rest of the block starts before `t`.
    fn skip_in_block(&mut self, t: Timestamp) -> LazyResult<()> {
        let body = &self.body[..];
        let ts_col = body.get(..self.cols.ts.1).ok_or("column out of range")?;
        let mut q = self.cols.ts.0;
        let mut ts = self.ts;
        let mut k = 0;
        while self.bidx + k + 1 < self.bcount {
            ts = ts.wrapping_add(get_uvarint(ts_col, &mut q)? as i64);
            k += 1;
            if ts >= t {
                break;
            }
        }
        if ts < t || k == 0 {
            // Leave the (rare) walk to the end of the block to `advance`, which checks it.
            return Ok(());
        }
        // The other columns are positioned after the current event's entries: skip those of
        // the k - 1 events in between; `read_fields` reads the new current one.
        let mut c = self.cols;
        c.ts.0 = q;
        skip_varints(body, &mut c.ty, k - 1)?;
        skip_varints(body, &mut c.pr, k - 1)?;
        match self.category() {
            EventCategory::State | EventCategory::Link => {
                skip_varints(body, &mut c.dur, k - 1)?;
                skip_varints(body, &mut c.aux, k - 1)?;
            }
            EventCategory::Variable => {
                c.val.0 += 8 * (k - 1);
                if c.val.0 > c.val.1 {
                    return Err("value column has the wrong length");
                }
            }
            EventCategory::Punctual => {}
        }
        let (skip, mut p) = match self.par_end.take() {
            Some(e) => (k - 1, e),
            None => (k, self.par_pos),
        };
        if !self.ignore_params {
            let pc = body.get(..c.par.1).ok_or("column out of range")?;
            for _ in 0..skip {
                skip_params(pc, &mut p)?;
            }
        }
        self.cols = c;
        self.par_pos = p;
        self.ts = ts;
        self.bidx += k;
        self.idx += k;
        self.read_fields()
    }

    /// Events before this time are all in the loaded blocks (see [`Self::load_from`]).
    /// Loads the chunk's further blocks that start before `until` (from `src`, the same blob),
    /// without decoding again the block the cursor is on: a walk that goes on past what was
    /// loaded continues where it stopped.
    pub(crate) fn extend_to(
        &mut self,
        src: &mut impl BlobSource,
        until: Timestamp,
        decompressor: &mut zstd::bulk::Decompressor<'static>,
    ) -> Result<(), String> {
        let k = self.rest.partition_point(|b| b.first_ts < until);
        if k == 0 {
            return Ok(());
        }
        let old_len = self.blocks.len();
        let have = self.frames.len();
        let to = self.rest[k - 1].frame.1;
        if self.frames_from + have != self.rest[0].frame.0 || to < self.frames_from + have {
            return Err("block frames are not contiguous".into());
        }
        self.frames.resize(to - self.frames_from, 0);
        src.read_at(&mut self.frames[have..], self.frames_from + have)?;
        self.blocks.extend(self.rest.drain(..k));
        self.limit = self.rest.first().map_or(Timestamp::MAX, |b| b.first_ts);
        // A cursor that stopped at the end of the loaded blocks goes on into the new ones.
        if self.block == old_len {
            self.enter_block(old_len, decompressor)
                .map_err(str::to_owned)?;
        }
        Ok(())
    }

    pub(crate) fn loaded_until(&self) -> Timestamp {
        self.limit
    }

    /// Stops (or resumes, from the next chunk loaded) following the parameter column: for
    /// walks that only look at the fixed columns, such as counting.
    pub(crate) fn set_ignore_params(&mut self, on: bool) {
        self.ignore_params = on;
    }

    /// The parameters of the current event, replacing the contents of `out` (whose
    /// allocation is reused).
    #[inline]
    pub(crate) fn params_into(&mut self, out: &mut Vec<ParamValue>) -> LazyResult<()> {
        out.clear();
        if self.ignore_params {
            return Err("the cursor does not follow the parameter column");
        }
        let buf = self.par_col();
        let mut q = self.par_pos;
        let n = get_uvarint(buf, &mut q)?;
        // Every value takes at least two bytes: a count beyond what is left cannot be parsed.
        if n > (buf.len().saturating_sub(q) / 2) as u64 {
            return Err("parameter tag runs past the end");
        }
        for _ in 0..n {
            out.push(parse_param(buf, &mut q)?);
        }
        self.par_end = Some(q);
        Ok(())
    }

    /// The parameters of the current event (parsed once per returned event).
    pub(crate) fn params(&mut self) -> LazyResult<Vec<ParamValue>> {
        if self.ignore_params {
            return Err("the cursor does not follow the parameter column");
        }
        let buf = self.par_col();
        let mut q = self.par_pos;
        // Most events have one or two values: build those vectors in one go.
        let v = match buf.get(q) {
            Some(1) => {
                q += 1;
                vec![parse_param(buf, &mut q)?]
            }
            Some(2) => {
                q += 1;
                let a = parse_param(buf, &mut q)?;
                let b = parse_param(buf, &mut q)?;
                vec![a, b]
            }
            _ => parse_params(buf, &mut q)?,
        };
        self.par_end = Some(q);
        Ok(v)
    }

    /// The current event's category-specific fields.
    #[inline]
    pub(crate) fn kind(&self) -> EventKind {
        self.kind
    }

    /// The CPU of the chunk's events.
    #[inline]
    pub(crate) fn cpu(&self) -> Option<Cpu> {
        self.cpu
    }

    /// The current event as a model value.
    #[cfg(test)]
    pub(crate) fn event(&mut self) -> LazyResult<Event> {
        let kind = self.kind;
        Ok(Event {
            ts: self.ts,
            type_id: self.ty,
            producer: self.producer,
            cpu: self.cpu,
            kind,
            params: self.params()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blob of `buf` as the writer encodes it (zstd level 1).
    fn encode(buf: &ColumnBuffer, category: EventCategory, cpu: Option<Cpu>) -> Vec<u8> {
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        encode_chunk(buf, category, cpu, &mut EncodeScratch::default(), &mut comp)
            .unwrap()
            .0
    }

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

    #[test]
    fn chunk_round_trip_sorts_by_time() {
        let mut buf = ColumnBuffer::default();
        let evs = [
            Event::state(50, 60, 1, 3, 9, Some(2))
                .with_params(vec![ParamValue::String("é".into())]),
            Event::state(10, 100, 0, 4, 8, Some(2)),
            Event::state(70, 75, 0, 3, 9, Some(2))
                .with_params(vec![ParamValue::Signed(-5), ParamValue::Float(1.5)]),
        ];
        for e in &evs {
            buf.push(e);
        }
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let (blob, meta) = encode_chunk(
            &buf,
            EventCategory::State,
            Some(2),
            &mut EncodeScratch::default(),
            &mut comp,
        )
        .unwrap();
        assert_eq!((meta.t_min, meta.t_max, meta.end_max), (10, 70, 100));
        assert_eq!(meta.types, vec![3, 4]);
        let mut d = DecodedChunk::default();
        decode_chunk(&blob, &mut zstd::bulk::Decompressor::new().unwrap(), &mut d).unwrap();
        let got: Vec<Event> = (0..d.len()).map(|i| d.event(i)).collect();
        assert_eq!(got, vec![evs[1].clone(), evs[0].clone(), evs[2].clone()]);
    }

    /// The lazy cursor returns exactly what the full decoder does, from any seek target.
    #[test]
    fn cursor_matches_full_decode() {
        let mut buf = ColumnBuffer::default();
        for i in 0..1000i64 {
            let t = (i * 7919) % 1000 * 3;
            let params = match i % 3 {
                0 => vec![],
                1 => vec![ParamValue::Signed(-i), ParamValue::String(format!("s{i}"))],
                _ => vec![ParamValue::Float(i as f64), ParamValue::Address(1 << 40)],
            };
            buf.push(
                &Event::state(t, t + i, (i % 5) as u16, 300 + i as u32, 2, Some(1))
                    .with_params(params),
            );
        }
        let blob = encode(&buf, EventCategory::State, Some(1));
        let mut dec = zstd::bulk::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        decode_chunk(&blob, &mut dec, &mut d).unwrap();
        let mut c = ChunkCursor::default();
        let targets = [
            -5, 0, 1, 2, 3, 1500, 1534, 1535, 1536, 1537, 2996, 2997, 2998, 3000, 10_000,
        ];
        for (target, direct) in targets.iter().flat_map(|&t| [(t, false), (t, true)]) {
            if direct {
                c.load(9, &blob, target, &mut dec).unwrap();
            } else {
                c.load(9, &blob, i64::MIN, &mut dec).unwrap();
                c.seek(target, &mut dec).unwrap();
            }
            let first = d.ts.partition_point(|&t| t < target);
            let mut i = first;
            // Read every other event's parameters, to walk both the parsed and the skipped path.
            while c.valid() {
                assert_eq!(c.index(), i);
                if i % 2 == 0 {
                    assert_eq!(c.event().unwrap(), d.event(i));
                } else {
                    assert_eq!(
                        (c.ts, c.ty, c.producer, c.end()),
                        (d.ts[i], d.ty[i], d.producer[i], d.end[i])
                    );
                }
                c.advance(&mut dec).unwrap();
                i += 1;
            }
            assert_eq!(i, d.len());
        }
        // A truncated body is an error, never a panic.
        for cut in [3, 10, blob.len() / 2, blob.len() - 1] {
            if c.load(9, &blob[..cut], i64::MIN, &mut dec).is_ok() {
                let _ = c.seek(2000, &mut dec);
            }
        }
        // So is any flipped byte.
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x5A;
            if c.load(9, &bad, 1000, &mut dec).is_ok() {
                while c.valid() {
                    let _ = c.event();
                    if c.advance(&mut dec).is_err() {
                        break;
                    }
                }
            }
            let _ = decode_chunk(&bad, &mut dec, &mut d);
        }
    }

    /// The example of `SCHEMA.md`, byte for byte.
    #[test]
    fn golden_schema_example() {
        let mut buf = ColumnBuffer::default();
        buf.push(
            &Event::punctual(1000, 3, 54, Some(0))
                .with_params(vec![ParamValue::Signed(0), ParamValue::Unsigned(21)]),
        );
        buf.push(
            &Event::punctual(1500, 3, 54, Some(0))
                .with_params(vec![ParamValue::Signed(21), ParamValue::Unsigned(0)]),
        );
        let blob = encode(&buf, EventCategory::Punctual, Some(0));
        let body: [u8; 22] = [
            0x04, 0xd0, 0x0f, 0xf4, 0x03, 0x02, 0x03, 0x03, 0x02, 0x36, 0x36, 0x0a, 0x02, 0x00,
            0x00, 0x01, 0x15, 0x02, 0x00, 0x2a, 0x01, 0x00,
        ];
        // format 2, 2 events, punctual, cpu 0 + 1, 1 block: 2 events from t = 1000, body of
        // 22 bytes stored in 22 bytes, i.e. as is (it is below RAW_BLOCK_MAX_BYTES).
        let mut want = vec![0x02, 0x02, 0x00, 0x01, 0x01, 0x02, 0xd0, 0x0f, 0x16, 0x16];
        want.extend_from_slice(&body);
        assert_eq!(blob, want);
        // The same chunk in format 1 (a zstd frame per block) still reads back.
        let frame = zstd::bulk::compress(&body, 1).unwrap();
        let mut v1 = vec![0x01, 0x02, 0x00, 0x01, 0x01, 0x02, 0xd0, 0x0f, 0x16];
        v1.push(u8::try_from(frame.len()).unwrap());
        v1.extend_from_slice(&frame);
        let mut dec = zstd::bulk::Decompressor::new().unwrap();
        for b in [&blob, &v1] {
            let mut d = DecodedChunk::default();
            decode_chunk(b, &mut dec, &mut d).unwrap();
            assert_eq!(d.ts, vec![1000, 1500]);
            assert_eq!(
                d.event(1).params,
                vec![ParamValue::Signed(21), ParamValue::Unsigned(0)]
            );
            let mut c = ChunkCursor::default();
            c.load(9, b, 1200, &mut dec).unwrap();
            assert_eq!(c.ts, 1500);
        }
        // A large block is a zstd frame, shorter than its body.
        let mut big = ColumnBuffer::default();
        for i in 0..600 {
            big.push(
                &Event::punctual(i * 10, 3, 54, Some(0)).with_params(vec![ParamValue::Unsigned(7)]),
            );
        }
        let blob = encode(&big, EventCategory::Punctual, Some(0));
        let mut blocks = Vec::new();
        parse_header(&blob, &mut blocks).unwrap();
        assert_eq!(blocks.len(), 2);
        assert!(!blocks[0].raw && blocks[0].frame.1 - blocks[0].frame.0 < blocks[0].body_len);
        assert!(blocks[1].raw, "88 events, a small body: {:?}", blocks[1]);
    }

    #[test]
    fn garbage_is_an_error() {
        let mut dec = zstd::bulk::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        for blob in [
            &[][..],
            &[1],
            &[1, 5, 0, 0, 0],
            &[9, 1, 2],
            &[1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
        ] {
            assert!(decode_chunk(blob, &mut dec, &mut d).is_err());
        }
    }
}
