//! Longer CTF traces for the import benchmarks: each stream's packets repeated N times, each copy's
//! clock values shifted past the span of the copy before, its packet sequence numbers and
//! discarded-event counts continued — the shape of a capture N times as long on the same streams
//! (so a reader's memory can be checked against the length of a trace, not only against its width).
//!
//! Clock values narrower than 64 bits (LTTng's 27-bit compact timestamps) hold the clock's low bits:
//! the shift is a multiple of 2 to their width, so they stay as they are and still rebuild the clock
//! from the shifted packet beginnings. Index files are not written (they are optional).

use std::io::Write;
use std::path::Path;

use super::tsdl::Type;
use super::{CtfReader, Decoder, IntAt, Recorded, decode_event, field_name, io_err, trace_dirs};
use crate::{BinaryError, FormatError};

/// A packet read, and the integers to rewrite in each copy.
struct Packet {
    bytes: Vec<u8>,
    clocks: Vec<IntAt>,
    seq: Option<IntAt>,
    discarded: Option<IntAt>,
}

fn get(bytes: &[u8], at: IntAt) -> u64 {
    let mut d = Decoder::new(bytes, bytes.len() as u64 * 8, at.big);
    d.pos = at.pos;
    let order = if at.big {
        super::tsdl::ByteOrder::Big
    } else {
        super::tsdl::ByteOrder::Little
    };
    d.bits(at.size, order).unwrap_or(0)
}

/// Writes the `at.size` low bits of `v` where `at` lies (the bit order [`Decoder::bits`] reads).
fn put(bytes: &mut [u8], at: IntAt, v: u64) {
    for k in 0..u64::from(at.size) {
        let bit = if at.big {
            (v >> (u64::from(at.size) - 1 - k)) & 1
        } else {
            (v >> k) & 1
        };
        let abs = at.pos + k;
        let (byte, off) = ((abs / 8) as usize, (abs % 8) as u32);
        let mask = if at.big { 0x80u8 >> off } else { 1u8 << off };
        if let Some(b) = bytes.get_mut(byte) {
            if bit == 1 {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

fn wrapping(v: u64, add: u64, size: u32) -> u64 {
    let s = v.wrapping_add(add);
    if size >= 64 {
        s
    } else {
        s & ((1u64 << size) - 1)
    }
}

/// The positions, among a packet context's integers in decoding order, of its top-level integer
/// fields named `names` (the context's fields before any that is not a plain integer or enum).
fn context_ints(context: Option<&Type>, names: [&str; 2]) -> [Option<usize>; 2] {
    let mut out = [None; 2];
    let Some(Type::Struct(f)) = context else {
        return out;
    };
    for (i, (n, t)) in f.fields.iter().enumerate() {
        if !matches!(t, Type::Int(_) | Type::Enum(_)) {
            break;
        }
        for (k, want) in names.iter().enumerate() {
            if field_name(n) == *want {
                out[k] = Some(i);
            }
        }
    }
    out
}

/// Writes under `out` the CTF trace (or every trace of the session) at `dir` with each stream's
/// packets repeated `n` times.
pub fn repeat(dir: &Path, out: &Path, n: usize) -> Result<(), FormatError> {
    for trace_dir in trace_dirs(dir).map_err(io_err(dir))? {
        let rel = trace_dir.strip_prefix(dir).unwrap_or(Path::new(""));
        repeat_trace(&trace_dir, &out.join(rel), n)?;
    }
    Ok(())
}

fn repeat_trace(dir: &Path, out: &Path, n: usize) -> Result<(), FormatError> {
    let mut r = CtfReader::open(dir)?;
    for s in &mut r.streams {
        s.recorded = Some(Recorded::default());
    }
    let mut streams: Vec<(String, Vec<Packet>)> = Vec::new();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    // The widest clock field narrower than 64 bits: the shift is a multiple of 2 to its width.
    let mut narrow = 0u32;
    for i in 0..r.streams.len() {
        let mut packets = Vec::new();
        while r.load_packet(i)? {
            let CtfReader {
                traces,
                streams: s,
                spare,
                ..
            } = &mut r;
            let s = &mut s[i];
            let trace = &traces[s.trace];
            while s.pos < s.content_bits {
                decode_event(trace, s, i, spare)?;
            }
            if let Some(e) = s.cut.take() {
                return Err(e);
            }
            let rec = s.recorded.take().unwrap_or_default();
            s.recorded = Some(Recorded::default());
            let context = trace
                .metadata
                .streams
                .get(&s.stream_class)
                .and_then(|c| c.packet_context.as_ref());
            let [seq, discarded] = context_ints(context, ["packet_seq_num", "events_discarded"]);
            let bytes = s.packet.clone();
            let mut clocks: Vec<IntAt> = rec.context.iter().copied().filter(|c| c.clock).collect();
            clocks.extend(rec.event_clocks);
            for c in &clocks {
                if c.size >= 64 {
                    let v = get(&bytes, *c);
                    lo = lo.min(v);
                    hi = hi.max(v);
                } else {
                    narrow = narrow.max(c.size);
                }
            }
            packets.push(Packet {
                seq: seq.and_then(|k| rec.context.get(k).copied()),
                discarded: discarded.and_then(|k| rec.context.get(k).copied()),
                clocks,
                bytes,
            });
        }
        streams.push((r.streams[i].name.clone(), packets));
    }
    if lo > hi {
        return Err(BinaryError::new(
            &dir.display().to_string(),
            None,
            0,
            "no 64-bit clock value in the packets: nothing to shift the copies by",
        )
        .into());
    }
    let unit = 1u64 << narrow.min(63);
    let shift = (hi - lo)
        .div_ceil(unit)
        .saturating_add(1)
        .saturating_mul(unit);
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let meta = dir.join("metadata");
    std::fs::copy(&meta, out.join("metadata")).map_err(io_err(&meta))?;
    for (name, packets) in &streams {
        let path = out.join(name);
        let file = std::fs::File::create(&path).map_err(io_err(&path))?;
        let mut w = std::io::BufWriter::new(file);
        let first_seq = packets
            .first()
            .and_then(|p| p.seq.map(|s| get(&p.bytes, s)));
        let last_seq = packets.last().and_then(|p| p.seq.map(|s| get(&p.bytes, s)));
        let seq_step = match (first_seq, last_seq) {
            (Some(a), Some(b)) => b.saturating_sub(a) + 1,
            _ => 0,
        };
        let discarded_step = packets
            .last()
            .and_then(|p| p.discarded.map(|d| get(&p.bytes, d)))
            .unwrap_or(0);
        for k in 0..n as u64 {
            for p in packets {
                let mut b = p.bytes.clone();
                for c in &p.clocks {
                    put(
                        &mut b,
                        *c,
                        wrapping(get(&p.bytes, *c), shift.wrapping_mul(k), c.size),
                    );
                }
                if let Some(s) = p.seq {
                    put(&mut b, s, wrapping(get(&p.bytes, s), seq_step * k, s.size));
                }
                if let Some(d) = p.discarded {
                    put(
                        &mut b,
                        d,
                        wrapping(get(&p.bytes, d), discarded_step * k, d.size),
                    );
                }
                w.write_all(&b).map_err(io_err(&path))?;
            }
        }
        w.flush().map_err(io_err(&path))?;
    }
    Ok(())
}
