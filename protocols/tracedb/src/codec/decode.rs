//! The eager reader side: a whole chunk blob decoded into columns, every byte checked.

use super::*;

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
pub(super) struct BlockRef {
    pub(super) count: usize,
    pub(super) first_ts: Timestamp,
    /// Index in the chunk of the block's first event.
    pub(super) first_index: usize,
    pub(super) body_len: usize,
    /// `[start, end)` of its stored bytes (a zstd frame, or the body itself) in the blob.
    pub(super) frame: (usize, usize),
    /// Stored as is, not compressed.
    pub(super) raw: bool,
}

/// What a chunk header says besides its block table.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChunkHeader {
    pub(super) n: usize,
    pub(super) category: EventCategory,
    pub(super) cpu: Option<Cpu>,
    /// The stream dictionary its blocks were compressed with (0: none).
    pub(super) dict: u64,
}

/// Parses a chunk header: events, category, CPU, dictionary and the block table (frames
/// checked to tile the rest of the blob exactly).
pub(super) fn parse_header(blob: &[u8], blocks: &mut Vec<BlockRef>) -> Result<ChunkHeader, String> {
    parse_header_of(blob, blob.len(), blocks)
}

/// The dictionary a chunk names (0: none), from the first bytes `head` of its blob of `total`
/// bytes; an error when its header is not a chunk header. What repair checks of every chunk.
pub(crate) fn chunk_dictionary(head: &[u8], total: usize) -> Result<u64, String> {
    parse_header_of(head, total, &mut Vec::new()).map(|h| h.dict)
}

/// [`parse_header`] from the first bytes `head` of a blob of `total` bytes.
pub(super) fn parse_header_of(
    head: &[u8],
    total: usize,
    blocks: &mut Vec<BlockRef>,
) -> Result<ChunkHeader, String> {
    let blob = head;
    let mut r = ByteReader::new(blob);
    let format = r.u8()?;
    if !(1..=CHUNK_FORMAT).contains(&format) {
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
    let dict = if format >= 3 { r.uvarint()? } else { 0 };
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
    Ok(ChunkHeader {
        n,
        category,
        cpu,
        dict,
    })
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
pub(super) fn decompress_block(
    b: &BlockRef,
    frames: &[u8],
    frames_from: usize,
    body: &mut Vec<u8>,
    decompressor: &mut crate::codec::Decompressor,
    dict: Option<&ReadDictionary>,
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
    let got = match dict {
        Some(d) => decompressor.decompress_with(frame, body, d)?,
        None => decompressor.decompress_to_buffer(frame, body)?,
    };
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
    decompressor: &mut crate::codec::Decompressor,
    dicts: &dyn Dictionaries,
    out: &mut DecodedChunk,
) -> Result<(), String> {
    let mut blocks = Vec::new();
    let ChunkHeader {
        n,
        category,
        cpu,
        dict,
    } = parse_header(blob, &mut blocks)?;
    let dict = match dict {
        0 => None,
        id => Some(dicts.dictionary(id)?),
    };
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
        decompress_block(b, blob, 0, &mut body, decompressor, dict.as_ref())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error() {
        let mut dec = crate::codec::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        for blob in [
            &[][..],
            &[1],
            &[1, 5, 0, 0, 0],
            &[9, 1, 2],
            &[1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
        ] {
            assert!(decode_chunk(blob, &mut dec, &NoDictionaries, &mut d).is_err());
        }
    }
}
