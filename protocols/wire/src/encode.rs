//! The `no_std`, allocation-free encoder: frames into the caller's buffer, records into the caller's buffer.
//!
//! Every frame is built the same way: its decoded bytes (kind, body) are written from the buffer's second
//! byte, then [`seal_in_place`] appends the CRC and COBS-encodes the whole in place (COBS only rewrites the
//! zero bytes, so the data never moves, except by one byte per 254 non-zero bytes in a row). The agent
//! builds its `Events` frames this way inside its ring blocks, with no second buffer and no copy.

#[cfg(test)]
use crate::FRAME_CRC;
use crate::MAX_FRAME_LEN;
use crate::dict::{Category, EventTypeDef, ProducerDef};
use crate::frame::{
    Bye, CpuTotal, DictEntry, EventsHeader, FrameCheck, FrameKind, Heartbeat, Hello, Loss,
    ParamValue, Window,
};
use crate::varint;

/// Why something could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The output buffer is too small for the frame or record.
    BufferTooSmall,
    /// The frame would exceed [`MAX_FRAME_LEN`] once decoded.
    FrameTooLong,
    /// A value could not be serialized.
    Serialize,
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::BufferTooSmall => "output buffer too small",
            Self::FrameTooLong => "frame longer than the wire format allows",
            Self::Serialize => "value could not be serialized",
        })
    }
}

/// The bytes of the CRC that ends every frame.
pub const CRC_LEN: usize = 4;

/// The worst-case encoded size of a frame whose kind, body and CRC total `decoded_len` bytes: COBS adds one
/// byte per 254 and one more, then the `0x00` delimiter.
pub const fn max_encoded_len(decoded_len: usize) -> usize {
    decoded_len + decoded_len / 254 + 2
}

/// Finishes a frame in place. `buf[1..1 + decoded_len]` holds the frame's kind and body (`buf[0]` is
/// reserved for COBS's first code byte); this appends the CRC-32C, COBS-encodes kind, body and CRC where
/// they lie, and writes the `0x00` delimiter. Returns the encoded length (delimiter included), which starts
/// at `buf[0]`. Byte for byte the output of the `cobs` crate (a final block of 254 non-zero bytes is not
/// followed by an empty one). `buf` needs at most [`max_encoded_len`]`(decoded_len + CRC_LEN)` bytes; less
/// when the frame has fewer runs of 254 non-zero bytes.
pub fn seal_in_place(buf: &mut [u8], decoded_len: usize) -> Result<usize, EncodeError> {
    seal_in_place_with(buf, decoded_len, FrameCheck::Crc32c)
}

/// [`seal_in_place`] with the given check: [`FrameCheck::Fletcher32`] for an `Events` frame of kind
/// [`FrameKind::EventsFletcher`] (its kind byte written by [`events_header_for`]).
pub fn seal_in_place_with(
    buf: &mut [u8],
    decoded_len: usize,
    check: FrameCheck,
) -> Result<usize, EncodeError> {
    if decoded_len + CRC_LEN > MAX_FRAME_LEN {
        return Err(EncodeError::FrameTooLong);
    }
    if check == FrameCheck::Fletcher32 && 1 + decoded_len + CRC_LEN <= 255 {
        return seal_fletcher_short(buf, decoded_len);
    }
    let crc = check.compute(
        buf.get(1..1 + decoded_len)
            .ok_or(EncodeError::BufferTooSmall)?,
    );
    let mut end = 1 + decoded_len + CRC_LEN;
    buf.get_mut(1 + decoded_len..end)
        .ok_or(EncodeError::BufferTooSmall)?
        .copy_from_slice(&crc.to_le_bytes());
    // COBS in place, one pass: each zero becomes the code byte of the block after it (`buf[0]` is the
    // first block's), so the data stays where it is, except after a block of 254 non-zero bytes that
    // more data follows: its code byte (0xFF) carries no zero, so the next block's code byte is
    // inserted and the rest moves up by one (rare: at most once per 254 bytes). Byte by byte: this
    // path serves control frames and long `Events` frames; a board's ring blocks take
    // `seal_fletcher_short`.
    let (mut code_at, mut i) = (0, 1);
    loop {
        // Four bytes at a time while they hold no zero and the block stays under 254 data bytes (a
        // word has a zero byte exactly when `(w - 0x01010101) & !w & 0x80808080` is not 0): a host's
        // 4 KiB blocks are framed at several bytes per cycle.
        while i + 4 <= end && i + 4 - code_at < 255 {
            let Some(w) = buf.get(i..i + 4).and_then(|w| <[u8; 4]>::try_from(w).ok()) else {
                break;
            };
            let w = u32::from_le_bytes(w);
            if w.wrapping_sub(0x0101_0101) & !w & 0x8080_8080 != 0 {
                break;
            }
            i += 4;
        }
        if i - code_at == 255 && i < end {
            // Moved by hand, downwards: `copy_within` would link a 700-byte `memmove` on a board.
            let mut j = end;
            while j > i {
                let byte = buf.get(j - 1).copied().ok_or(EncodeError::BufferTooSmall)?;
                set(buf, j, byte)?;
                j -= 1;
            }
            set(buf, code_at, 0xFF)?;
            code_at = i;
            end += 1;
        } else if i >= end {
            break;
        } else if buf.get(i).copied() == Some(0) {
            set(buf, code_at, (i - code_at) as u8)?;
            code_at = i;
        }
        i += 1;
    }
    set(buf, code_at, (end - code_at) as u8)?;
    set(buf, end, 0)?;
    Ok(end + 1)
}

/// [`seal_in_place_with`] Fletcher-32 for a frame of at most 255 encoded bytes before the delimiter
/// (a board's ring block): one pass over the frame, four bytes at a time, adds them to the Fletcher sums
/// and rewrites its zero bytes as COBS code bytes (no run of 254 non-zero bytes can be followed by more
/// data in so short a frame, so the data never moves); then the check is appended and stuffed the same
/// way. About 2.5 instructions per byte on a Cortex-M4.
fn seal_fletcher_short(buf: &mut [u8], decoded_len: usize) -> Result<usize, EncodeError> {
    let data_end = 1 + decoded_len;
    let end = data_end + CRC_LEN;
    if end > 255 || end >= buf.len() {
        return Err(EncodeError::BufferTooSmall);
    }
    let p = buf.as_mut_ptr();
    let (mut a, mut b) = (0u32, 0u32);
    let mut code_at = 0usize;
    let mut i = 1usize;
    // SAFETY: every index read or written is at most `end`, below `buf.len()` (checked above); `code_at`
    // is 0 or an index already read. At most 63 words: the sums cannot overflow (see `check`).
    unsafe {
        while i + 4 <= data_end {
            let w = u32::from_le(p.add(i).cast::<u32>().read_unaligned());
            a += w & 0xffff;
            b += a;
            a += w >> 16;
            b += a;
            // The zero bytes of `w`, exactly: bit 7 of each byte set when the byte is 0.
            let mut zeros = !((w & 0x7f7f_7f7f).wrapping_add(0x7f7f_7f7f) | w) & 0x8080_8080;
            while zeros != 0 {
                let at = i + (zeros.trailing_zeros() / 8) as usize;
                p.add(code_at).write((at - code_at) as u8);
                code_at = at;
                zeros &= zeros - 1;
            }
            i += 4;
        }
        let check_tail = |i: usize, code_at: &mut usize| {
            if p.add(i).read() == 0 {
                p.add(*code_at).write((i - *code_at) as u8);
                *code_at = i;
            }
        };
        while i < data_end {
            let lo = u32::from(p.add(i).read());
            let hi = if i + 1 < data_end {
                u32::from(p.add(i + 1).read())
            } else {
                0
            };
            a += lo | hi << 8;
            b += a;
            check_tail(i, &mut code_at);
            if i + 1 < data_end {
                check_tail(i + 1, &mut code_at);
            }
            i += 2;
        }
        let check = (a % 65_535) | (b % 65_535) << 16;
        p.add(data_end)
            .cast::<[u8; 4]>()
            .write_unaligned(check.to_le_bytes());
        for j in data_end..end {
            check_tail(j, &mut code_at);
        }
        p.add(code_at).write((end - code_at) as u8);
        p.add(end).write(0);
    }
    Ok(end + 1)
}

#[inline]
fn set(buf: &mut [u8], at: usize, value: u8) -> Result<(), EncodeError> {
    *buf.get_mut(at).ok_or(EncodeError::BufferTooSmall)? = value;
    Ok(())
}

/// Writes a frame's decoded bytes (kind, then body) into the buffer [`seal_in_place`] finishes. Handed to
/// the body-writing closure of [`encode_frame`].
pub struct FrameBody<'o> {
    out: &'o mut [u8],
    /// The next free byte (`out[0]` is COBS's first code byte).
    at: usize,
}

impl FrameBody<'_> {
    /// Appends raw bytes to the frame body.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let end = self.at + bytes.len();
        // The CRC still follows, and MAX_FRAME_LEN bounds kind, body and CRC together.
        if end + CRC_LEN > MAX_FRAME_LEN + 1 {
            return Err(EncodeError::FrameTooLong);
        }
        self.out
            .get_mut(self.at..end)
            .ok_or(EncodeError::BufferTooSmall)?
            .copy_from_slice(bytes);
        self.at = end;
        Ok(())
    }

    /// Appends an unsigned LEB128 varint.
    pub fn push_varint(&mut self, value: u64) -> Result<(), EncodeError> {
        let mut buf = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(value, &mut buf).ok_or(EncodeError::BufferTooSmall)?;
        self.push(buf.get(..n).unwrap_or_default())
    }

    /// Appends a string: its varint byte length, then its bytes.
    pub fn push_str(&mut self, s: &str) -> Result<(), EncodeError> {
        self.push_varint(s.len() as u64)?;
        self.push(s.as_bytes())
    }

    /// Appends an `Option<u32>` as postcard writes it: `00`, or `01` then the value.
    fn push_option(&mut self, value: Option<u32>) -> Result<(), EncodeError> {
        match value {
            None => self.push(&[0]),
            Some(v) => {
                self.push(&[1])?;
                self.push_varint(u64::from(v))
            }
        }
    }
}

/// Encodes one complete frame into `out`: the kind byte, the body the closure writes, the CRC-32C of both
/// (little-endian), all COBS-encoded, then the `0x00` delimiter. Returns the bytes written.
pub fn encode_frame(
    out: &mut [u8],
    kind: FrameKind,
    body: impl FnOnce(&mut FrameBody<'_>) -> Result<(), EncodeError>,
) -> Result<usize, EncodeError> {
    encode_frame_of_kind(out, kind as u8, body)
}

/// [`encode_frame`] for a kind byte of its own: the collector-to-board `Refusal`
/// ([`crate::refusal`]), which board-to-collector decoders do not know as a [`FrameKind`].
pub fn encode_frame_of_kind(
    out: &mut [u8],
    kind: u8,
    body: impl FnOnce(&mut FrameBody<'_>) -> Result<(), EncodeError>,
) -> Result<usize, EncodeError> {
    let mut frame = FrameBody { out, at: 1 };
    frame.push(&[kind])?;
    body(&mut frame)?;
    let decoded = frame.at - 1;
    seal_in_place(frame.out, decoded)
}

/// Encodes a `Hello` frame.
pub fn encode_hello(out: &mut [u8], hello: &Hello<'_>) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Hello, |f| {
        f.push_varint(u64::from(hello.wire_version))?;
        for s in [
            hello.agent_version,
            hello.board,
            hello.soc,
            hello.os,
            hello.application,
        ] {
            f.push_str(s)?;
        }
        f.push_varint(u64::from(hello.cpu_count))?;
        f.push_varint(hello.tick_rate_hz)?;
        f.push_varint(hello.session_id)?;
        f.push_varint(hello.start_ticks)?;
        f.push_str(hello.token)
    })
}

/// Encodes a `Dictionary` frame holding `entries`.
pub fn encode_dictionary(out: &mut [u8], entries: &[DictEntry<'_>]) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Dictionary, |f| {
        f.push_varint(entries.len() as u64)?;
        for entry in entries {
            match entry {
                DictEntry::Producer(p) => push_producer(f, p)?,
                DictEntry::EventType(t) => push_event_type(f, t)?,
            }
        }
        Ok(())
    })
}

fn push_producer(f: &mut FrameBody<'_>, p: &ProducerDef<'_>) -> Result<(), EncodeError> {
    f.push(&[0])?;
    f.push_varint(u64::from(p.id))?;
    f.push_option(p.parent)?;
    f.push_varint(p.kind as u64)?;
    f.push_varint(p.local_id)?;
    f.push_str(p.name)
}

fn push_event_type(f: &mut FrameBody<'_>, t: &EventTypeDef<'_>) -> Result<(), EncodeError> {
    f.push(&[1])?;
    f.push_varint(u64::from(t.id))?;
    f.push_str(t.name)?;
    match t.category {
        Category::Punctual => f.push(&[0])?,
        Category::StateEnter => f.push(&[1])?,
        Category::StateExit { enter } => {
            f.push(&[2])?;
            f.push_varint(u64::from(enter))?;
        }
        Category::Variable => f.push(&[3])?,
        Category::Special => f.push(&[4])?,
    }
    f.push_varint(t.params.len() as u64)?;
    for p in t.params {
        f.push_str(p.name)?;
        f.push_varint(p.ty as u64)?;
    }
    Ok(())
}

/// Encodes a `Loss` frame.
pub fn encode_loss(out: &mut [u8], loss: &Loss) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Loss, |f| {
        f.push_varint(u64::from(loss.cpu))?;
        f.push_varint(loss.first_seq)?;
        f.push_varint(loss.count)
    })
}

/// Encodes a `Heartbeat` frame.
pub fn encode_heartbeat(out: &mut [u8], heartbeat: &Heartbeat) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Heartbeat, |f| {
        f.push_varint(heartbeat.ticks)?;
        f.push_varint(heartbeat.records)?;
        f.push_varint(heartbeat.dropped)
    })
}

/// Encodes a `CpuTotal` frame.
pub fn encode_cpu_total(out: &mut [u8], total: &CpuTotal) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::CpuTotal, |f| {
        f.push_varint(u64::from(total.cpu))?;
        f.push_varint(total.sequences)
    })
}

/// Encodes a `Window` frame.
pub fn encode_window(out: &mut [u8], window: &Window) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Window, |f| {
        f.push_varint(u64::from(window.cpu))?;
        f.push_varint(window.first_seq)?;
        f.push_varint(window.overwritten)
    })
}

/// Encodes a `Bye` frame.
pub fn encode_bye(out: &mut [u8], bye: &Bye) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Bye, |f| {
        f.push_varint(bye.ticks)?;
        f.push_varint(bye.records)?;
        f.push_varint(bye.dropped)
    })
}

/// The longest `Events` header: kind byte, flags, CPU, first sequence number, base timestamp, count.
pub const EVENTS_HEADER_MAX: usize = 1 + 1 + 3 + 10 + 10 + 5;

/// Writes an `Events` frame's kind byte and header into `out` (at least [`EVENTS_HEADER_MAX`] bytes);
/// returns its length. The agent writes it just before a ring block's records, then seals the block in
/// place.
pub fn events_header(out: &mut [u8], header: &EventsHeader) -> Result<usize, EncodeError> {
    events_header_for(out, header, FrameKind::Events)
}

/// [`events_header`] for an `Events` frame of the given kind: [`FrameKind::Events`] (sealed with CRC-32C)
/// or [`FrameKind::EventsFletcher`] (sealed by [`seal_in_place_with`] with Fletcher-32).
pub fn events_header_for(
    out: &mut [u8],
    header: &EventsHeader,
    kind: FrameKind,
) -> Result<usize, EncodeError> {
    put_bytes(out, &mut 0, &[kind as u8, header.flags])?;
    let mut at = 2;
    put_varint_fast(out, &mut at, u64::from(header.cpu))?;
    put_varint_fast(out, &mut at, header.first_seq)?;
    put_varint_fast(out, &mut at, header.base_ticks)?;
    put_varint_fast(out, &mut at, u64::from(header.count))?;
    Ok(at)
}

/// A varint whose value usually fits 32 bits (a board's sequence numbers and times for its first hours):
/// 32-bit shifts then, cheaper on a 32-bit core than [`varint::encode_u64`]'s.
fn put_varint_fast(out: &mut [u8], at: &mut usize, value: u64) -> Result<(), EncodeError> {
    if value >> 32 != 0 {
        return put_varint(out, at, value);
    }
    let mut v = value as u32;
    loop {
        let slot = out.get_mut(*at).ok_or(EncodeError::BufferTooSmall)?;
        *at += 1;
        if v < 0x80 {
            *slot = v as u8;
            return Ok(());
        }
        *slot = v as u8 | 0x80;
        v >>= 7;
    }
}

/// The length of the `Events` header [`events_header_for`] writes (kind byte included), so that it can
/// be written straight before a block's records.
pub const fn events_header_len(header: &EventsHeader) -> usize {
    2 + varint::len_u64(header.cpu as u64)
        + varint::len_u64(header.first_seq)
        + varint::len_u64(header.base_ticks)
        + varint::len_u64(header.count as u64)
}

/// Encodes an `Events` frame: the header, then `records` verbatim. `records` are the bytes a
/// [`RecordEncoder`] produced from `header.base_ticks`, or, when `header.flags` has
/// [`crate::frame::EVENTS_FLAG_ZSTD`], the varint length of those bytes followed by their zstd compression.
pub fn encode_events(
    out: &mut [u8],
    header: &EventsHeader,
    records: &[u8],
) -> Result<usize, EncodeError> {
    encode_events_as(out, header, records, FrameKind::Events)
}

/// [`encode_events`] as a frame of the given kind: [`FrameKind::Events`] (CRC-32C) or
/// [`FrameKind::EventsFletcher`] (Fletcher-32, what the agent writes). Any other kind is written as
/// [`FrameKind::Events`].
pub fn encode_events_as(
    out: &mut [u8],
    header: &EventsHeader,
    records: &[u8],
    kind: FrameKind,
) -> Result<usize, EncodeError> {
    let kind = match kind {
        FrameKind::EventsFletcher => FrameKind::EventsFletcher,
        _ => FrameKind::Events,
    };
    let mut head = [0u8; EVENTS_HEADER_MAX];
    let n = events_header_for(&mut head, header, kind)?;
    let mut frame = FrameBody { out, at: 1 };
    frame.push(head.get(..n).unwrap_or_default())?;
    frame.push(records)?;
    let decoded = frame.at - 1;
    seal_in_place_with(frame.out, decoded, kind.check())
}

/// Packs records for one `Events` frame: each record is the type id (varint), the timestamp delta in ticks
/// from the previous record (the frame's base for the first; varint), then its parameters in declaration
/// order. Address parameters are zigzagged deltas from the previous address in the frame (0 before the
/// first), which keeps nearby pointers to one or two bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordEncoder {
    last_ticks: u64,
    last_address: u64,
}

impl RecordEncoder {
    /// Starts a frame whose header carries `base_ticks`.
    pub const fn new(base_ticks: u64) -> Self {
        Self {
            last_ticks: base_ticks,
            last_address: 0,
        }
    }

    /// The timestamp of the last record encoded (the base before any).
    pub const fn last_ticks(&self) -> u64 {
        self.last_ticks
    }

    /// Encodes one record at the start of `out` and returns its length. A timestamp earlier than the previous
    /// record's is encoded as a zero delta (the caller counts such clock regressions). On error nothing is
    /// committed: the encoder's state is unchanged and the bytes written to `out` are to be discarded.
    #[inline]
    pub fn encode(
        &mut self,
        out: &mut [u8],
        ticks: u64,
        type_id: u16,
        params: &[ParamValue<'_>],
    ) -> Result<usize, EncodeError> {
        let mut at = 0;
        let mut address = self.last_address;
        put_varint(out, &mut at, u64::from(type_id))?;
        let ticks = ticks.max(self.last_ticks);
        put_varint(out, &mut at, ticks - self.last_ticks)?;
        for value in params {
            match *value {
                ParamValue::Unsigned(v) => put_varint(out, &mut at, v)?,
                ParamValue::Signed(v) => put_varint(out, &mut at, varint::zigzag(v))?,
                ParamValue::Float(v) => put_bytes(out, &mut at, &v.to_le_bytes())?,
                ParamValue::Str(s) => {
                    put_varint(out, &mut at, s.len() as u64)?;
                    put_bytes(out, &mut at, s.as_bytes())?;
                }
                ParamValue::Address(a) => {
                    put_varint(out, &mut at, varint::zigzag(a.wrapping_sub(address) as i64))?;
                    address = a;
                }
            }
        }
        self.last_ticks = ticks;
        self.last_address = address;
        Ok(at)
    }
}

#[inline]
fn put_varint(out: &mut [u8], at: &mut usize, value: u64) -> Result<(), EncodeError> {
    let slot = out.get_mut(*at..).ok_or(EncodeError::BufferTooSmall)?;
    *at += varint::encode_u64(value, slot).ok_or(EncodeError::BufferTooSmall)?;
    Ok(())
}

#[inline]
fn put_bytes(out: &mut [u8], at: &mut usize, bytes: &[u8]) -> Result<(), EncodeError> {
    let end = *at + bytes.len();
    out.get_mut(*at..end)
        .ok_or(EncodeError::BufferTooSmall)?
        .copy_from_slice(bytes);
    *at = end;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sealing in place must produce exactly what the `cobs` crate produces over kind, body and CRC.
    #[test]
    fn seal_in_place_matches_the_cobs_crate() {
        let mut seed = 0x1234_5678_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let check = |data: &[u8]| {
            let mut decoded = [0u8; 1300];
            decoded[..data.len()].copy_from_slice(data);
            let crc = FRAME_CRC.checksum(data);
            decoded[data.len()..data.len() + 4].copy_from_slice(&crc.to_le_bytes());
            let mut expected = [0u8; 1400];
            let n = cobs::encode(&decoded[..data.len() + 4], &mut expected);
            let mut buf = [0xAAu8; 1400];
            buf[1..1 + data.len()].copy_from_slice(data);
            let m = seal_in_place(&mut buf[..max_encoded_len(data.len() + 4)], data.len()).unwrap();
            assert_eq!(&buf[..m - 1], &expected[..n], "len {}", data.len());
            assert_eq!(buf[m - 1], 0);
        };
        for _ in 0..3000 {
            let len = (next() % 1200) as usize;
            let zero_every = 1 + (next() % 600);
            let data: [u8; 1200] = core::array::from_fn(|_| {
                if next() % zero_every == 0 {
                    0
                } else {
                    (next() % 255 + 1) as u8
                }
            });
            check(&data[..len]);
        }
        // Exact block boundaries, a zero right after a full block, zeros only.
        for len in [0usize, 1, 249, 250, 251, 253, 254, 255, 504, 505, 508, 509] {
            check(&[7u8; 600][..len]);
        }
        let mut data = [7u8; 300];
        data[254] = 0;
        check(&data);
        check(&[0u8; 40]);
    }

    /// With Fletcher-32 too: COBS of kind, body and check, byte for byte the `cobs` crate's.
    #[test]
    fn seal_in_place_with_fletcher_matches_the_cobs_crate() {
        let mut seed = 0x0bad_cafe_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..2000 {
            let len = (next() % 900) as usize + if i < 20 { 250 + i } else { 0 };
            let zero_every = 1 + (next() % 400);
            let data: [u8; 1300] = core::array::from_fn(|_| {
                if next() % zero_every == 0 {
                    0
                } else {
                    (next() % 255 + 1) as u8
                }
            });
            let data = &data[..len.min(1200)];
            let mut decoded = [0u8; 1300];
            decoded[..data.len()].copy_from_slice(data);
            let check = crate::check::fletcher32(data);
            decoded[data.len()..data.len() + 4].copy_from_slice(&check.to_le_bytes());
            let mut expected = [0u8; 1400];
            let n = cobs::encode(&decoded[..data.len() + 4], &mut expected);
            let mut buf = [0xAAu8; 1400];
            buf[1..1 + data.len()].copy_from_slice(data);
            let m = seal_in_place_with(
                &mut buf[..max_encoded_len(data.len() + 4)],
                data.len(),
                FrameCheck::Fletcher32,
            )
            .unwrap();
            assert_eq!(&buf[..m - 1], &expected[..n], "len {}", data.len());
            assert_eq!(buf[m - 1], 0);
        }
    }

    #[test]
    fn seal_in_place_refuses_a_short_buffer() {
        let mut buf = [0x11u8; 600];
        for len in 0..600 {
            let r = seal_in_place(&mut buf[..len], 300);
            assert!(r.is_err() || len >= 300 + 6, "len {len}: {r:?}");
        }
    }

    #[test]
    fn frame_ends_in_single_delimiter_and_has_no_other_zero() {
        let mut out = [0xAAu8; 64];
        let n = encode_bye(
            &mut out,
            &Bye {
                ticks: 0,
                records: 0,
                dropped: 0,
            },
        )
        .unwrap();
        assert_eq!(out[n - 1], 0);
        assert!(out[..n - 1].iter().all(|&b| b != 0));
    }

    #[test]
    fn short_output_is_an_error_not_a_panic() {
        for len in 0..12 {
            let mut out = [0u8; 12];
            let r = encode_heartbeat(
                &mut out[..len],
                &Heartbeat {
                    ticks: 1 << 40,
                    records: 5,
                    dropped: 0,
                },
            );
            assert!(r.is_err() || len >= 10, "len {len}: {r:?}");
        }
    }

    #[test]
    fn record_delta_and_address_delta() {
        let mut enc = RecordEncoder::new(1000);
        let mut out = [0u8; 32];
        let n = enc
            .encode(&mut out, 1100, 11, &[ParamValue::Address(0x4000_0010)])
            .unwrap();
        // type 11, delta 100, address zigzag(0x40000010) = 0x80000020 -> 5 bytes.
        assert_eq!(&out[..2], &[11, 100]);
        assert_eq!(n, 2 + 5);
        let n = enc
            .encode(&mut out, 1090, 11, &[ParamValue::Address(0x4000_0000)])
            .unwrap();
        // clock went back: delta 0; address delta -16 -> zigzag 31.
        assert_eq!(&out[..n], &[11, 0, 31]);
        assert_eq!(enc.last_ticks(), 1100);
    }

    #[test]
    fn failed_record_leaves_state_unchanged() {
        let mut enc = RecordEncoder::new(0);
        let mut out = [0u8; 3];
        let before = enc;
        assert_eq!(
            enc.encode(
                &mut out,
                5,
                9,
                &[ParamValue::Str("too long for three bytes")]
            ),
            Err(EncodeError::BufferTooSmall)
        );
        assert_eq!(enc, before);
    }
}
