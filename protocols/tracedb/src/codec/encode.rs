//! The writer side: column buffers of a stream encoded as a chunk blob.

use super::*;

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

/// Events per independently compressed block of a chunk without a dictionary (the last block
/// may hold fewer; with a dictionary, [`DICT_BLOCK_EVENTS`]).
pub const BLOCK_EVENTS: usize = 512;

/// The full leading blocks of a stream's open tail chunk as an earlier [`encode_chunk`] stored
/// them: a commit that rewrites the tail re-encodes only the blocks after them, so a commit
/// costs the events added since the last one, not the whole tail (valid while the buffer keeps
/// those events first in time order; checked at each use).
#[derive(Debug, Default)]
pub(crate) struct TailBlocks {
    /// `(events, first timestamp, body length, stored length)` of each cached block.
    blocks: Vec<(usize, Timestamp, usize, usize)>,
    /// Their stored bytes, one after the other.
    frames: Vec<u8>,
    /// The buffer positions of their events, in time order.
    order: Vec<u32>,
    /// Events per block of the cached blocks.
    block_events: usize,
}

impl TailBlocks {
    /// Forgets the cached blocks (the tail chunk was closed).
    pub(crate) fn clear(&mut self) {
        self.blocks.clear();
        self.frames.clear();
        self.order.clear();
    }

    /// How many leading events the cached blocks hold.
    fn events(&self) -> usize {
        self.blocks.len() * self.block_events
    }
}

/// Scratch space reused by [`encode_chunk`].
#[derive(Default)]
pub(crate) struct EncodeScratch {
    order: Vec<u32>,
    body: Vec<u8>,
    col: Vec<u8>,
    /// The zstd frame of the block being encoded.
    frame: Vec<u8>,
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
///
/// With `dict`, the blocks hold [`DICT_BLOCK_EVENTS`] events and are compressed with that
/// dictionary of the stream, whose id the header names; without, [`BLOCK_EVENTS`] and none.
///
/// With `tail`, the full leading blocks it holds are reused when the buffer still begins with
/// their events in time order (else they are encoded again), and the full blocks this call
/// encodes are cached in it: the same bytes either way.
pub(crate) fn encode_chunk(
    buf: &ColumnBuffer,
    category: EventCategory,
    cpu: Option<Cpu>,
    scratch: &mut EncodeScratch,
    compressor: &mut zstd::bulk::Compressor<'static>,
    dict: Option<&WriteDictionary>,
    mut tail: Option<&mut TailBlocks>,
) -> std::io::Result<(Vec<u8>, ChunkMeta)> {
    let block_events = if dict.is_some() {
        DICT_BLOCK_EVENTS
    } else {
        BLOCK_EVENTS
    };
    let n = buf.len();
    time_order(buf, &mut scratch.order);
    let order = &scratch.order;
    // The cached blocks still hold the first events in time order only if sorting put the
    // same events first (an event arriving late moves in front of them only if it is earlier).
    let reused = match tail.as_deref_mut() {
        Some(t) => {
            if t.block_events != block_events {
                t.clear();
                t.block_events = block_events;
            }
            let k = t.events();
            if k <= n && order[..k] == t.order[..] {
                t.blocks.len()
            } else {
                t.clear();
                0
            }
        }
        None => 0,
    };
    let has_end = matches!(category, EventCategory::State | EventCategory::Link);
    let n_blocks = n.div_ceil(block_events);
    let mut blob = Vec::with_capacity(n * 6 + 64);
    blob.push(CHUNK_FORMAT);
    put_uvarint(&mut blob, n as u64);
    blob.push(category.code());
    put_uvarint(&mut blob, cpu.map_or(0, |c| u64::from(c) + 1));
    put_uvarint(&mut blob, dict.map_or(0, |d| d.id));
    put_uvarint(&mut blob, n_blocks as u64);
    let frames = &mut scratch.frames;
    frames.clear();
    let mut prev_first = 0i64;
    let mut put_entry =
        |blob: &mut Vec<u8>, b: usize, count: usize, first: i64, body: usize, stored: usize| {
            put_uvarint(blob, count as u64);
            if b == 0 {
                put_uvarint(blob, zigzag(first));
            } else {
                put_uvarint(blob, first.wrapping_sub(prev_first) as u64);
            }
            prev_first = first;
            put_uvarint(blob, body as u64);
            put_uvarint(blob, stored as u64);
        };
    if let Some(t) = tail.as_deref() {
        for (b, &(count, first, body, stored)) in t.blocks.iter().enumerate().take(reused) {
            put_entry(&mut blob, b, count, first, body, stored);
        }
    }
    for (b, block) in order.chunks(block_events).enumerate().skip(reused) {
        let body = &mut scratch.body;
        body.clear();
        encode_block(buf, category, block, body, &mut scratch.col);
        // Into the one frame buffer, as long as zstd may need.
        let frame = &mut scratch.frame;
        frame.clear();
        frame.reserve(zstd::zstd_safe::compress_bound(body.len()));
        match dict {
            Some(d) => {
                compressor
                    .context_mut()
                    .compress_using_cdict(frame, body, &d.cdict)
                    .map_err(|c| std::io::Error::other(zstd::zstd_safe::get_error_name(c)))?;
            }
            None => {
                compressor.compress_to_buffer(body, frame)?;
            }
        }
        // Stored as is when small, or when zstd saves nothing (a stored length equal to the
        // body length means "as is", so a frame that long is never written).
        let stored: &[u8] = if body.len() <= RAW_BLOCK_MAX_BYTES || frame.len() >= body.len() {
            body
        } else {
            frame
        };
        let first = buf.ts[block[0] as usize];
        put_entry(&mut blob, b, block.len(), first, body.len(), stored.len());
        frames.extend_from_slice(stored);
        if let Some(t) = tail.as_deref_mut()
            && block.len() == block_events
            && t.blocks.len() == b
        {
            t.blocks
                .push((block.len(), first, body.len(), stored.len()));
            t.frames.extend_from_slice(stored);
            t.order.extend_from_slice(block);
        }
    }
    if let Some(t) = tail.as_deref() {
        // The cached frames come first: `frames` holds the blocks after them, and (when this
        // call cached new blocks) those again at the end of `t.frames`.
        let cached_before = t.frames.len() - t.blocks[reused..].iter().map(|b| b.3).sum::<usize>();
        blob.extend_from_slice(&t.frames[..cached_before]);
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

/// The buffer's positions in time order (stable: ties keep the order of arrival).
fn time_order(buf: &ColumnBuffer, order: &mut Vec<u32>) {
    order.clear();
    order.extend(0..buf.len() as u32);
    if !buf.ts.windows(2).all(|w| w[0] <= w[1]) {
        order.sort_by_key(|&i| buf.ts[i as usize]);
    }
}

/// Appends the bodies of the buffer's events in time order, [`DICT_BLOCK_EVENTS`] to a body,
/// to `out`, and each body's length to `sizes`: what a stream's dictionary is trained on.
pub(crate) fn sample_bodies(
    buf: &ColumnBuffer,
    category: EventCategory,
    scratch: &mut EncodeScratch,
    out: &mut Vec<u8>,
    sizes: &mut Vec<usize>,
) {
    time_order(buf, &mut scratch.order);
    for block in scratch.order.chunks(DICT_BLOCK_EVENTS) {
        let from = out.len();
        encode_block(buf, category, block, out, &mut scratch.col);
        sizes.push(out.len() - from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode::parse_header;
    use crate::codec::{
        ChunkCursor, DecodedChunk, Dictionaries, NoDictionaries, ReadDictionary, decode_chunk,
        encode_for_test as encode,
    };

    /// A state chunk on CPU 1 encoded twice: reusing `tail`'s cached blocks (and updating them),
    /// and from nothing.
    fn encode_reused_and_fresh(
        buf: &ColumnBuffer,
        scratch: &mut EncodeScratch,
        comp: &mut zstd::bulk::Compressor<'static>,
        dict: Option<&WriteDictionary>,
        tail: &mut TailBlocks,
    ) -> ((Vec<u8>, ChunkMeta), (Vec<u8>, ChunkMeta)) {
        let (cat, cpu) = (EventCategory::State, Some(1));
        let reused = encode_chunk(buf, cat, cpu, scratch, comp, dict, Some(tail)).unwrap();
        let mut fresh_scratch = EncodeScratch::default();
        let fresh = encode_chunk(buf, cat, cpu, &mut fresh_scratch, comp, dict, None).unwrap();
        (reused, fresh)
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
            None,
            None,
        )
        .unwrap();
        assert_eq!((meta.t_min, meta.t_max, meta.end_max), (10, 70, 100));
        assert_eq!(meta.types, vec![3, 4]);
        let mut d = DecodedChunk::default();
        decode_chunk(
            &blob,
            &mut crate::codec::Decompressor::new().unwrap(),
            &NoDictionaries,
            &mut d,
        )
        .unwrap();
        let got: Vec<Event> = (0..d.len()).map(|i| d.event(i)).collect();
        assert_eq!(got, vec![evs[1].clone(), evs[0].clone(), evs[2].clone()]);
    }

    /// A tail chunk rewritten commit after commit, reusing its full blocks, is byte for byte the
    /// chunk encoded from scratch, also when a late event sorts in front of cached blocks.
    #[test]
    fn reused_tail_blocks_give_the_same_bytes() {
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let mut scratch = EncodeScratch::default();
        let mut tail = TailBlocks::default();
        let mut buf = ColumnBuffer::default();
        let mut rng = crate::bench::SplitMix::new(7);
        let mut t = 1_000i64;
        let mut pushed = 0usize;
        // Commits after uneven runs of events; at 2 500 events one arrives out of order.
        for run in [1usize, 300, 211, 512, 700, 1, 776, 100, 1000, 495] {
            for _ in 0..run {
                t += (rng.next_u64() % 5_000) as i64;
                let ts = if pushed == 2_500 { 1_500 } else { t };
                let e = Event::state(
                    ts,
                    ts + 40,
                    0,
                    3 + (rng.next_u64() % 2) as u32,
                    (rng.next_u64() % 7) as u32,
                    Some(1),
                )
                .with_params(vec![ParamValue::Unsigned(rng.next_u64() % 100)]);
                buf.push(&e);
                pushed += 1;
            }
            let ((reused, meta_r), (fresh, meta_f)) =
                encode_reused_and_fresh(&buf, &mut scratch, &mut comp, None, &mut tail);
            assert_eq!(reused, fresh, "after {pushed} events");
            assert_eq!(
                (meta_r.t_min, meta_r.t_max, meta_r.count),
                (meta_f.t_min, meta_f.t_max, meta_f.count)
            );
            // Cached: the full blocks of the time-sorted buffer, never more.
            assert!(tail.events() <= pushed / BLOCK_EVENTS * BLOCK_EVENTS);
        }
        assert_eq!(pushed, 4_096);
        assert_eq!(tail.events(), 4_096);
    }

    /// A dictionary trained on sample bodies of random state events, and its reader side.
    fn test_dictionary(id: u64) -> (WriteDictionary, ReadDictionary) {
        let mut buf = ColumnBuffer::default();
        let mut rng = crate::bench::SplitMix::new(11);
        let mut t = 0i64;
        for _ in 0..20_000 {
            t += (rng.next_u64() % 5_000) as i64;
            buf.push(
                &Event::state(t, t + 40, 0, 3 + (rng.next_u64() % 2) as u32, 2, Some(1))
                    .with_params(vec![ParamValue::Unsigned(rng.next_u64() % 100)]),
            );
        }
        let (mut bytes, mut sizes) = (Vec::new(), Vec::new());
        sample_bodies(
            &buf,
            EventCategory::State,
            &mut EncodeScratch::default(),
            &mut bytes,
            &mut sizes,
        );
        assert_eq!(sizes.len(), 20_000usize.div_ceil(DICT_BLOCK_EVENTS));
        let dict = zstd::dict::from_continuous(&bytes, &sizes, 4 << 10).unwrap();
        let cdict = zstd::zstd_safe::CDict::try_create(&dict, 1).unwrap();
        (
            WriteDictionary { id, cdict },
            crate::codec::DictionaryData::new(id, &dict).unwrap(),
        )
    }

    struct OneDictionary(ReadDictionary);

    impl Dictionaries for OneDictionary {
        fn dictionary(&self, id: u64) -> Result<ReadDictionary, String> {
            if id == self.0.id {
                Ok(self.0.clone())
            } else {
                Err(format!("no dictionary {id}"))
            }
        }
    }

    /// With a dictionary: blocks of 128 events, the header names it, the tail rewrite reuses
    /// blocks byte for byte, and the chunk reads back (eagerly and lazily) only with it.
    #[test]
    fn chunks_with_a_dictionary_read_back_and_reuse_their_tail_blocks() {
        let (wd, rd) = test_dictionary(7);
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let mut scratch = EncodeScratch::default();
        let mut tail = TailBlocks::default();
        let mut buf = ColumnBuffer::default();
        let mut events = Vec::new();
        let mut rng = crate::bench::SplitMix::new(3);
        let mut t = 1_000i64;
        let mut blob = Vec::new();
        for run in [1usize, 200, 57, 128, 700, 1, 1000, 2009] {
            for _ in 0..run {
                t += (rng.next_u64() % 5_000) as i64;
                let e = Event::state(t, t + 40, 0, 3 + (rng.next_u64() % 2) as u32, 2, Some(1))
                    .with_params(vec![ParamValue::Unsigned(rng.next_u64() % 100)]);
                buf.push(&e);
                events.push(e);
            }
            let ((reused, _), (fresh, _)) =
                encode_reused_and_fresh(&buf, &mut scratch, &mut comp, Some(&wd), &mut tail);
            assert_eq!(reused, fresh, "after {} events", events.len());
            assert!(tail.events() <= events.len() / DICT_BLOCK_EVENTS * DICT_BLOCK_EVENTS);
            blob = reused;
        }
        assert_eq!(events.len(), 4_096);
        let mut blocks = Vec::new();
        let h = parse_header(&blob, &mut blocks).unwrap();
        assert_eq!((h.n, h.dict, blocks.len()), (4_096, 7, 32));
        assert!(blocks.iter().all(|b| b.count == DICT_BLOCK_EVENTS));
        let mut dec = crate::codec::Decompressor::new().unwrap();
        let mut d = DecodedChunk::default();
        assert!(decode_chunk(&blob, &mut dec, &NoDictionaries, &mut d).is_err());
        decode_chunk(&blob, &mut dec, &OneDictionary(rd.clone()), &mut d).unwrap();
        let got: Vec<Event> = (0..d.len()).map(|i| d.event(i)).collect();
        assert_eq!(got, events);
        // Lazily from the middle, and a dictionary-less chunk after on the same decompressor.
        let mut c = ChunkCursor::default();
        c.load(9, &blob, events[3_000].ts, &mut dec, &OneDictionary(rd))
            .unwrap();
        let mut walked = Vec::new();
        while c.valid() {
            walked.push(c.event().unwrap());
            c.advance(&mut dec).unwrap();
        }
        assert_eq!(walked, events[3_000..]);
        let plain = encode(&buf, EventCategory::State, Some(1));
        decode_chunk(&plain, &mut dec, &NoDictionaries, &mut d).unwrap();
        assert_eq!(d.len(), 4_096);
        // Without the dictionary, a smaller chunk would have been 512-event blocks.
        let mut blocks = Vec::new();
        assert_eq!(parse_header(&plain, &mut blocks).unwrap().dict, 0);
        assert_eq!(blocks.len(), 8);
    }

    /// Bytes as SCHEMA.md writes them: lower-case hex pairs separated by spaces.
    fn hex(bytes: &[u8]) -> String {
        bytes
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The bytes of the fenced block tagged `tag` of SCHEMA.md: each line starts with its
    /// bytes in hex, ended by two spaces (the comment follows); `..` stands for `body`; a line
    /// starting with a space only continues the comment.
    fn schema_block(schema: &str, tag: &str, body: &[u8]) -> Vec<u8> {
        let fence = format!("```{tag}\n");
        let start = schema
            .find(&fence)
            .unwrap_or_else(|| panic!("no {fence:?} in SCHEMA.md"));
        let rest = &schema[start + fence.len()..];
        let block = &rest[..rest.find("```").expect("the block's closing fence")];
        let mut out = Vec::new();
        for (i, line) in block.lines().enumerate() {
            if line.is_empty() || line.starts_with(' ') {
                continue;
            }
            let bytes = line.split("  ").next().unwrap_or_default();
            for tok in bytes.split(' ') {
                if tok == ".." {
                    out.extend_from_slice(body);
                } else {
                    let b = u8::from_str_radix(tok, 16).ok().filter(|_| tok.len() == 2);
                    out.push(b.unwrap_or_else(|| {
                        panic!(
                            "SCHEMA.md `{tag}` line {}: {tok:?} is not a hex byte",
                            i + 1
                        )
                    }));
                }
            }
        }
        out
    }

    /// The block reader reads bytes, skips comments and refuses what is not a hex byte.
    #[test]
    fn schema_block_reads_hex_and_skips_comments() {
        let doc = "x\n```chunk-body\n04 d0  len 4, ab\n                  more, ff\n0a\n```\n\
                   ```chunk-blob\n02  format\n..  the body\n```\n";
        let body = schema_block(doc, "chunk-body", &[]);
        assert_eq!(body, [0x04, 0xd0, 0x0a]);
        assert_eq!(
            schema_block(doc, "chunk-blob", &body),
            [0x02, 0x04, 0xd0, 0x0a]
        );
        let bad = "```chunk-body\n04 zz  comment\n```\n";
        assert!(std::panic::catch_unwind(|| schema_block(bad, "chunk-body", &[])).is_err());
    }

    /// The example of `SCHEMA.md` ("#### Example" of the chunk encoding), read from the
    /// document itself: the encoder writes exactly its bytes, and they read back.
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
        let schema = include_str!("../../SCHEMA.md");
        let body = schema_block(schema, "chunk-body", &[]);
        // 22 bytes: below RAW_BLOCK_MAX_BYTES, so the block is stored as is.
        assert_eq!(body.len(), 22, "SCHEMA.md's example body");
        let want = schema_block(schema, "chunk-blob", &body);
        assert_eq!(
            hex(&blob),
            hex(&want),
            "the encoder and SCHEMA.md's example blob"
        );
        // The same chunk in format 1 (a zstd frame per block) still reads back.
        let frame = zstd::bulk::compress(&body, 1).unwrap();
        let mut v1 = vec![0x01, 0x02, 0x00, 0x01, 0x01, 0x02, 0xd0, 0x0f, 0x16];
        v1.push(u8::try_from(frame.len()).unwrap());
        v1.extend_from_slice(&frame);
        // And in format 2 (no dictionary field).
        let mut v2 = vec![0x02];
        v2.extend_from_slice(&blob[1..4]);
        v2.extend_from_slice(&blob[5..]);
        let mut dec = crate::codec::Decompressor::new().unwrap();
        for b in [&blob, &v1, &v2] {
            let mut d = DecodedChunk::default();
            decode_chunk(b, &mut dec, &NoDictionaries, &mut d).unwrap();
            assert_eq!(d.ts, vec![1000, 1500]);
            assert_eq!(
                d.event(1).params,
                vec![ParamValue::Signed(21), ParamValue::Unsigned(0)]
            );
            let mut c = ChunkCursor::default();
            c.load(9, b, 1200, &mut dec, &NoDictionaries).unwrap();
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
}
