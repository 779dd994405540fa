//! The chunk decoders as fuzzing targets: a `.db` file can come from anywhere, so every way the
//! library reads a chunk blob must turn garbage into an error, never a panic or an unbounded loop.
//! Used by the collector's mutation runner (`socscope bench fuzz`, the test suite).

use crate::codec::{self, ChunkCursor, DecodedChunk};

/// Decodes chunk blobs the two ways the library does: whole (`decode_chunk`) and lazily (the
/// cursor the readers walk, event by event).
pub struct ChunkFuzzer {
    decompressor: crate::codec::Decompressor,
    eager: DecodedChunk,
    cursor: ChunkCursor,
}

/// Events a lazy walk visits at most per blob (a chunk holds at most [`crate::MAX_CHUNK_EVENTS`]).
const WALK_LIMIT: usize = 1 << 20;

impl ChunkFuzzer {
    /// A fuzzer with its own decompressor.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            decompressor: crate::codec::Decompressor::new()?,
            eager: DecodedChunk::default(),
            cursor: ChunkCursor::default(),
        })
    }

    /// Decodes `blob` whole and walks it lazily; returns whether the whole decode accepted it.
    pub fn run(&mut self, blob: &[u8]) -> bool {
        let whole = codec::decode_chunk(
            blob,
            &mut self.decompressor,
            &codec::NoDictionaries,
            &mut self.eager,
        )
        .is_ok();
        let mut src = blob;
        if self
            .cursor
            .load_from(
                1,
                &mut src,
                i64::MIN,
                i64::MAX,
                &mut self.decompressor,
                &codec::NoDictionaries,
            )
            .is_ok()
        {
            let mut walked = 0;
            while self.cursor.valid() && walked < WALK_LIMIT {
                let _ = self.cursor.end();
                if self.cursor.advance(&mut self.decompressor).is_err() {
                    break;
                }
                walked += 1;
            }
        }
        whole
    }
}
