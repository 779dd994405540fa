//! The lazy reader side: one cursor per chunk, decoding only what a query walks over.

use super::decode::{BlockRef, ChunkHeader, decompress_block, parse_header_of};
use super::*;

/// Bytes read first from a chunk blob to parse its header (the block table of a full chunk
/// takes well under this).
const HEADER_PREFIX: usize = 512;

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
    /// The dictionary the chunk's blocks were compressed with.
    dict: Option<ReadDictionary>,
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
    // Eight bytes at a time while they hold fewer varint ends (bytes below 0x80) than are left
    // to skip, then byte by byte up to the k-th end.
    while left > 0
        && let Some(w) = col.get(p..p + 8)
    {
        let w = u64::from_le_bytes(w.try_into().unwrap_or([0x80; 8]));
        let ends = (!w & 0x8080_8080_8080_8080).count_ones() as usize;
        if ends >= left {
            break;
        }
        left -= ends;
        p += 8;
    }
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
        decompressor: &mut crate::codec::Decompressor,
        dicts: &dyn Dictionaries,
    ) -> Result<(), String> {
        let mut src = blob;
        self.load_from(id, &mut src, from, Timestamp::MAX, decompressor, dicts)
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
        decompressor: &mut crate::codec::Decompressor,
        dicts: &dyn Dictionaries,
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
        let ChunkHeader {
            n,
            category,
            cpu,
            dict,
        } = parsed?;
        self.dict = match dict {
            0 => None,
            id if self.dict.as_ref().is_some_and(|d| d.id == id) => self.dict.take(),
            id => Some(dicts.dictionary(id)?),
        };
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
        decompressor: &mut crate::codec::Decompressor,
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
            self.dict.as_ref(),
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
        decompressor: &mut crate::codec::Decompressor,
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
        decompressor: &mut crate::codec::Decompressor,
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

    /// Calls `f(type, producer)` for the current event and each following one that starts
    /// before `end`, and leaves the cursor on the first event at or after `end` (or past the
    /// chunk). With parameters ignored (what counting does), the events of a block are walked
    /// on their fixed columns alone: times, types and producers decoded, durations and the rest
    /// skipped, the next block entered at the block's end.
    pub(crate) fn tally_until(
        &mut self,
        end: Timestamp,
        decompressor: &mut crate::codec::Decompressor,
        mut f: impl FnMut(TypeId, ProducerId),
    ) -> LazyResult<()> {
        while self.idx < self.n && self.ts < end {
            f(self.ty, self.producer);
            if !self.ignore_params {
                self.advance(decompressor)?;
                continue;
            }
            let category = self.category();
            let body = &self.body[..];
            let mut c = self.cols;
            let col = |range: (usize, usize)| body.get(..range.1).ok_or("column out of range");
            let (ts_col, ty_col, pr_col) = (col(c.ts)?, col(c.ty)?, col(c.pr)?);
            let mut ts = self.ts;
            let mut k = self.bidx + 1;
            // Stops on an event starting at or after `end`: its time is read, its other
            // columns not yet (`read_fields` reads them).
            let mut stop = None;
            while k < self.bcount {
                let t = ts.wrapping_add(get_uvarint(ts_col, &mut c.ts.0)? as i64);
                if t >= end {
                    stop = Some(t);
                    break;
                }
                let ty = u32::try_from(get_uvarint(ty_col, &mut c.ty.0)?)
                    .map_err(|_| "type id overflows u32")?;
                let pr = u32::try_from(get_uvarint(pr_col, &mut c.pr.0)?)
                    .map_err(|_| "producer id overflows u32")?;
                match category {
                    EventCategory::State | EventCategory::Link => {
                        skip_varints(body, &mut c.dur, 1)?;
                        skip_varints(body, &mut c.aux, 1)?;
                    }
                    EventCategory::Variable => {
                        c.val.0 += 8;
                        if c.val.0 > c.val.1 {
                            return Err("value column has the wrong length");
                        }
                    }
                    EventCategory::Punctual => {}
                }
                f(ty, pr);
                ts = t;
                k += 1;
            }
            self.cols = c;
            match stop {
                Some(t) => {
                    self.idx += k - self.bidx;
                    self.bidx = k;
                    self.ts = t;
                    return self.read_fields();
                }
                None => {
                    // On the block's last event (counted): on into the next block.
                    self.idx += k - 1 - self.bidx;
                    self.bidx = k - 1;
                    self.ts = ts;
                    self.advance(decompressor)?;
                }
            }
        }
        Ok(())
    }

    /// Moves forward to the first event starting at or after `t` (or past the end).
    pub(crate) fn seek(
        &mut self,
        t: Timestamp,
        decompressor: &mut crate::codec::Decompressor,
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
    /// Loads the chunk's further blocks that start before `until` (from `src`, the same blob)
    /// for a walk going on from `from` (at or after the cursor's time), without decoding again
    /// the block the cursor is on: a walk that goes on past what was loaded continues where it
    /// stopped. When `from` is past the start of the first block not loaded, the blocks before
    /// the one holding `from` hold nothing the walk needs (a block's events end where its
    /// successor starts): they are dropped or never read, and the cursor is on that block.
    pub(crate) fn extend_to(
        &mut self,
        src: &mut impl BlobSource,
        from: Timestamp,
        until: Timestamp,
        decompressor: &mut crate::codec::Decompressor,
    ) -> Result<(), String> {
        let k = self.rest.partition_point(|b| b.first_ts < until);
        if k == 0 {
            return Ok(());
        }
        let j = self.rest[..k].partition_point(|b| b.first_ts < from);
        if j >= 1 {
            self.rest.drain(..j - 1);
            let k = k - (j - 1);
            self.blocks.clear();
            self.blocks.extend(self.rest.drain(..k));
            self.limit = self.rest.first().map_or(Timestamp::MAX, |b| b.first_ts);
            self.frames_from = self.blocks[0].frame.0;
            let to = self.blocks[k - 1].frame.1;
            self.frames.clear();
            self.frames.resize(to - self.frames_from, 0);
            src.read_at(&mut self.frames, self.frames_from)?;
            return self.enter_block(0, decompressor).map_err(str::to_owned);
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
    use crate::codec::{ColumnBuffer, DecodedChunk, decode_chunk, encode_for_test as encode};

    /// Skipping k varints lands where k varints end, for every k and varints of every length
    /// (the eight-bytes-at-a-time path and the byte path), inside a column that ends before the
    /// body does; skipping past the column's end is an error.
    #[test]
    fn skipping_varints_lands_after_the_kth() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut col = Vec::new();
        let mut ends = vec![0];
        for i in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Lengths 1 to 10 bytes, runs of one-byte values between.
            let v = if i % 3 == 0 {
                x & 0x7f
            } else {
                x >> (7 * (x % 10))
            };
            put_uvarint(&mut col, v);
            ends.push(col.len());
        }
        let len = col.len();
        let mut body = col.clone();
        body.extend_from_slice(&[0x01; 16]);
        for from in [0usize, 1, 7, 150] {
            for k in 0..=(300 - from) {
                let mut c = (ends[from], len);
                skip_varints(&body, &mut c, k).unwrap();
                assert_eq!(c.0, ends[from + k], "from {from}, skip {k}");
            }
        }
        let mut c = (0, len);
        assert!(skip_varints(&body, &mut c, 301).is_err());
    }

    /// Counting on the fixed columns visits exactly the events a plain walk visits and stops
    /// on the same event, in every category and across block ends, also when the walk goes on.
    #[test]
    fn tally_until_visits_what_a_walk_visits() {
        let mut rng = crate::bench::SplitMix::new(17);
        for category in [
            EventCategory::Punctual,
            EventCategory::State,
            EventCategory::Link,
            EventCategory::Variable,
        ] {
            let mut buf = ColumnBuffer::default();
            let mut t = 0i64;
            for i in 0..1500u32 {
                // Deltas of 1, 2 and 3 varint bytes.
                t += [1, 300, 70_000][(rng.next_u64() % 3) as usize];
                let (ty, pr) = (i % 7, (rng.next_u64() % 5) as u32);
                let e = match category {
                    EventCategory::Punctual => Event::punctual(t, ty, pr, Some(0)),
                    EventCategory::State => Event::state(t, t + 500_000, 1, ty, pr, Some(0)),
                    EventCategory::Link => Event {
                        kind: EventKind::Link {
                            end: t + 9,
                            target: 3,
                        },
                        ..Event::punctual(t, ty, pr, Some(0))
                    },
                    EventCategory::Variable => Event {
                        kind: EventKind::Variable { value: 1.5 },
                        ..Event::punctual(t, ty, pr, Some(0))
                    },
                };
                buf.push(&e.with_params(vec![ParamValue::Unsigned(u64::from(i))]));
            }
            let blob = encode(&buf, category, Some(0));
            let mut dec = crate::codec::Decompressor::new().unwrap();
            let mut d = DecodedChunk::default();
            decode_chunk(&blob, &mut dec, &NoDictionaries, &mut d).unwrap();
            let last = *d.ts.last().unwrap();
            for _ in 0..40 {
                let from = (rng.next_u64() % (last as u64 + 2)) as i64;
                let mut ends = [from, from, from];
                for e in &mut ends[1..] {
                    *e += (rng.next_u64() % 400_000) as i64;
                }
                ends.sort_unstable();
                let mut c = ChunkCursor::default();
                c.set_ignore_params(true);
                c.load(9, &blob, from, &mut dec, &NoDictionaries).unwrap();
                let mut i = d.ts.partition_point(|&t| t < from);
                for end in ends {
                    let mut seen = Vec::new();
                    c.tally_until(end, &mut dec, |ty, pr| seen.push((ty, pr)))
                        .unwrap();
                    let stop = d.ts.partition_point(|&t| t < end).max(i);
                    let want: Vec<(u32, u32)> =
                        (i..stop).map(|k| (d.ty[k], d.producer[k])).collect();
                    assert_eq!(seen, want, "{category:?} [{from}, {end})");
                    assert_eq!(c.valid(), stop < d.len());
                    if c.valid() {
                        assert_eq!(
                            (c.index(), c.ts, c.ty, c.producer, c.end()),
                            (
                                stop,
                                d.ts[stop],
                                d.ty[stop],
                                d.producer[stop],
                                d.end.get(stop).copied().unwrap_or(d.ts[stop])
                            )
                        );
                    }
                    i = stop;
                }
            }
        }
    }

    /// A cursor loaded for one range and extended for a later one (next to it or far past
    /// what was loaded) counts exactly the later range's events.
    #[test]
    fn extending_to_a_later_range_counts_exactly_its_events() {
        let mut rng = crate::bench::SplitMix::new(29);
        let mut buf = ColumnBuffer::default();
        let mut t = 0i64;
        for i in 0..4000u32 {
            // Runs of equal times, so that blocks can start on a tie.
            t += [0, 0, 1, 700][(rng.next_u64() % 4) as usize];
            buf.push(&Event::state(t, t + 50, 0, i % 3, 1, Some(0)));
        }
        let blob = encode(&buf, EventCategory::State, Some(0));
        let mut dec = crate::codec::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        decode_chunk(&blob, &mut dec, &NoDictionaries, &mut d).unwrap();
        let last = *d.ts.last().unwrap();
        let count = |from: i64, to: i64| d.ts.iter().filter(|&&t| from <= t && t < to).count();
        for _ in 0..300 {
            let mut cuts: Vec<i64> = (0..4)
                .map(|_| (rng.next_u64() % (last as u64 + 2)) as i64)
                .collect();
            cuts.sort_unstable();
            let (a, b, c, e) = (cuts[0], cuts[1], cuts[2], cuts[3]);
            let mut cur = ChunkCursor::default();
            cur.set_ignore_params(true);
            let mut src = &blob[..];
            cur.load_from(9, &mut src, a, b, &mut dec, &NoDictionaries)
                .unwrap();
            let mut n = 0;
            cur.tally_until(b, &mut dec, |_, _| n += 1).unwrap();
            assert_eq!(n, count(a, b), "[{a}, {b})");
            if e > cur.loaded_until() {
                cur.extend_to(&mut src, c, e, &mut dec).unwrap();
            }
            cur.seek(c, &mut dec).unwrap();
            let mut n = 0;
            cur.tally_until(e, &mut dec, |_, _| n += 1).unwrap();
            assert_eq!(n, count(c, e), "[{a}, {b}) then [{c}, {e})");
        }
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
        let mut dec = crate::codec::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        decode_chunk(&blob, &mut dec, &NoDictionaries, &mut d).unwrap();
        let mut c = ChunkCursor::default();
        let targets = [
            -5, 0, 1, 2, 3, 1500, 1534, 1535, 1536, 1537, 2996, 2997, 2998, 3000, 10_000,
        ];
        for (target, direct) in targets.iter().flat_map(|&t| [(t, false), (t, true)]) {
            if direct {
                c.load(9, &blob, target, &mut dec, &NoDictionaries).unwrap();
            } else {
                c.load(9, &blob, i64::MIN, &mut dec, &NoDictionaries)
                    .unwrap();
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
            if c.load(9, &blob[..cut], i64::MIN, &mut dec, &NoDictionaries)
                .is_ok()
            {
                let _ = c.seek(2000, &mut dec);
            }
        }
        // So is any flipped byte.
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x5A;
            if c.load(9, &bad, 1000, &mut dec, &NoDictionaries).is_ok() {
                while c.valid() {
                    let _ = c.event();
                    if c.advance(&mut dec).is_err() {
                        break;
                    }
                }
            }
            let _ = decode_chunk(&bad, &mut dec, &NoDictionaries, &mut d);
        }
    }
}
