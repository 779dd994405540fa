//! The `no_std`, allocation-free encoder: frames into the caller's buffer, records into the caller's buffer.

use serde::Serialize;

use crate::frame::{
    Bye, CpuTotal, DictEntry, EventsHeader, FrameKind, Heartbeat, Hello, Loss, ParamValue,
};
use crate::varint;
use crate::{FRAME_CRC, MAX_FRAME_LEN};

/// Why something could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The output buffer is too small for the frame or record.
    BufferTooSmall,
    /// The frame would exceed [`MAX_FRAME_LEN`] once decoded.
    FrameTooLong,
    /// A value could not be serialized (postcard refused it).
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
const CRC_LEN: usize = 4;

/// The worst-case encoded size of a frame whose kind, body and CRC total `decoded_len` bytes: COBS adds one
/// byte per 254 and one more, then the `0x00` delimiter.
pub const fn max_encoded_len(decoded_len: usize) -> usize {
    decoded_len + decoded_len / 254 + 2
}

/// Feeds a frame's bytes through the CRC and the COBS encoder. Handed to the body-writing closure of
/// [`encode_frame`]; also a postcard serializer flavor.
pub struct FrameBody<'o> {
    cobs: CobsWriter<'o>,
    crc: FrameDigest,
    len: usize,
}

#[cfg(target_os = "none")]
type FrameDigest = crc::Digest<'static, u32>;
#[cfg(not(target_os = "none"))]
type FrameDigest = crc::Digest<'static, u32, crc::Table<16>>;

/// COBS-encodes into the caller's buffer run by run (a byte-at-a-time state machine costs several
/// nanoseconds per byte, which is most of a record's budget). Its output is byte for byte that of the
/// `cobs` crate: a block of 254 non-zero bytes at the very end is not followed by an empty block.
struct CobsWriter<'o> {
    out: &'o mut [u8],
    /// Where the current block's code byte goes.
    code_at: usize,
    /// The next free byte.
    pos: usize,
}

impl<'o> CobsWriter<'o> {
    fn new(out: &'o mut [u8]) -> Self {
        Self {
            out,
            code_at: 0,
            pos: 1,
        }
    }

    #[inline]
    fn run(&self) -> usize {
        self.pos - self.code_at - 1
    }

    /// Closes the current block with `code` and opens the next at the write position.
    #[inline]
    fn close_block(&mut self, code: u8) -> Result<(), EncodeError> {
        *self
            .out
            .get_mut(self.code_at)
            .ok_or(EncodeError::BufferTooSmall)? = code;
        self.code_at = self.pos;
        self.pos += 1;
        Ok(())
    }

    // Not inlined: postcard writes field by field, and inlining this loop into every field write would
    // triple the agent's flash footprint for nothing (the hot path is one push per records block).
    #[inline(never)]
    fn push(&mut self, mut data: &[u8]) -> Result<(), EncodeError> {
        while !data.is_empty() {
            if self.run() == 254 {
                self.close_block(0xFF)?;
            }
            let room = 254 - self.run();
            let window = data.get(..data.len().min(room)).unwrap_or(data);
            let zero = window.iter().position(|&b| b == 0);
            let copy = zero.unwrap_or(window.len());
            let end = self.pos + copy;
            self.out
                .get_mut(self.pos..end)
                .ok_or(EncodeError::BufferTooSmall)?
                .copy_from_slice(window.get(..copy).unwrap_or_default());
            self.pos = end;
            match zero {
                Some(_) => {
                    let code = (self.run() + 1) as u8;
                    self.close_block(code)?;
                    data = data.get(copy + 1..).unwrap_or_default();
                }
                None => data = data.get(copy..).unwrap_or_default(),
            }
        }
        Ok(())
    }

    /// Writes the last code byte and the `0x00` delimiter; returns the frame's encoded length.
    fn finish(self) -> Result<usize, EncodeError> {
        let code = if self.run() == 254 {
            0xFF
        } else {
            (self.run() + 1) as u8
        };
        *self
            .out
            .get_mut(self.code_at)
            .ok_or(EncodeError::BufferTooSmall)? = code;
        *self
            .out
            .get_mut(self.pos)
            .ok_or(EncodeError::BufferTooSmall)? = 0;
        Ok(self.pos + 1)
    }
}

impl FrameBody<'_> {
    /// Appends raw bytes to the frame body.
    #[inline(never)]
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        self.len += bytes.len();
        // The CRC still follows, and MAX_FRAME_LEN bounds kind, body and CRC together.
        if self.len + CRC_LEN > MAX_FRAME_LEN {
            return Err(EncodeError::FrameTooLong);
        }
        self.crc.update(bytes);
        self.cobs.push(bytes)
    }

    /// Appends an unsigned LEB128 varint.
    #[inline]
    pub fn push_varint(&mut self, value: u64) -> Result<(), EncodeError> {
        let mut buf = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(value, &mut buf).ok_or(EncodeError::BufferTooSmall)?;
        self.push(&buf[..n])
    }

    /// Appends a postcard-serialized value.
    pub fn push_postcard<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        postcard::serialize_with_flavor(value, PostcardSink(self)).map_err(|e| match e {
            postcard::Error::SerializeBufferFull => EncodeError::BufferTooSmall,
            _ => EncodeError::Serialize,
        })
    }
}

struct PostcardSink<'b, 'o>(&'b mut FrameBody<'o>);

impl postcard::ser_flavors::Flavor for PostcardSink<'_, '_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.push(data).map_err(|e| match e {
            EncodeError::BufferTooSmall => postcard::Error::SerializeBufferFull,
            _ => postcard::Error::SerdeSerCustom,
        })
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.try_extend(&[data])
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
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
    let mut frame = FrameBody {
        cobs: CobsWriter::new(out),
        crc: FRAME_CRC.digest(),
        len: 0,
    };
    frame.push(&[kind])?;
    body(&mut frame)?;
    let crc = frame.crc.finalize();
    frame.cobs.push(&crc.to_le_bytes())?;
    frame.cobs.finish()
}

/// Encodes a `Hello` frame.
pub fn encode_hello(out: &mut [u8], hello: &Hello<'_>) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Hello, |f| f.push_postcard(hello))
}

/// Encodes a `Dictionary` frame holding `entries`.
pub fn encode_dictionary(out: &mut [u8], entries: &[DictEntry<'_>]) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Dictionary, |f| f.push_postcard(entries))
}

/// Encodes a `Loss` frame.
pub fn encode_loss(out: &mut [u8], loss: &Loss) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Loss, |f| f.push_postcard(loss))
}

/// Encodes a `Heartbeat` frame.
pub fn encode_heartbeat(out: &mut [u8], heartbeat: &Heartbeat) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Heartbeat, |f| f.push_postcard(heartbeat))
}

/// Encodes a `CpuTotal` frame.
pub fn encode_cpu_total(out: &mut [u8], total: &CpuTotal) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::CpuTotal, |f| f.push_postcard(total))
}

/// Encodes a `Bye` frame.
pub fn encode_bye(out: &mut [u8], bye: &Bye) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Bye, |f| f.push_postcard(bye))
}

/// Encodes an `Events` frame: the header, then `records` verbatim. `records` are the bytes a
/// [`RecordEncoder`] produced from `header.base_ticks`, or, when `header.flags` has
/// [`crate::frame::EVENTS_FLAG_ZSTD`], the varint length of those bytes followed by their zstd compression.
pub fn encode_events(
    out: &mut [u8],
    header: &EventsHeader,
    records: &[u8],
) -> Result<usize, EncodeError> {
    encode_frame(out, FrameKind::Events, |f| {
        f.push(&[header.flags])?;
        f.push_varint(u64::from(header.cpu))?;
        f.push_varint(header.first_seq)?;
        f.push_varint(header.base_ticks)?;
        f.push_varint(u64::from(header.count))?;
        f.push(records)
    })
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

    /// The run-based encoder must produce exactly what the `cobs` crate produces, pushes split anywhere.
    #[test]
    fn cobs_writer_matches_the_cobs_crate() {
        let mut seed = 0x1234_5678_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..3000 {
            let len = (next() % 1200) as usize;
            let zero_every = 1 + (next() % 600);
            let data: [u8; 1200] = core::array::from_fn(|_| {
                if next() % zero_every == 0 {
                    0
                } else {
                    (next() % 255 + 1) as u8
                }
            });
            let data = &data[..len];
            let mut expected = [0u8; 1300];
            let n = cobs::encode(data, &mut expected);
            let mut out = [0xAAu8; 1300];
            let mut w = CobsWriter::new(&mut out);
            let mut rest = data;
            while !rest.is_empty() {
                let k = (1 + next() % 300) as usize;
                let (a, b) = rest.split_at(k.min(rest.len()));
                w.push(a).unwrap();
                rest = b;
            }
            let m = w.finish().unwrap();
            assert_eq!(&out[..m - 1], &expected[..n], "case {case}, len {len}");
            assert_eq!(out[m - 1], 0);
        }
        // Exact block boundaries.
        for len in [0usize, 1, 253, 254, 255, 508, 509] {
            let data = [7u8; 600];
            let mut expected = [0u8; 700];
            let n = cobs::encode(&data[..len], &mut expected);
            let mut out = [0u8; 700];
            let mut w = CobsWriter::new(&mut out);
            w.push(&data[..len]).unwrap();
            let m = w.finish().unwrap();
            assert_eq!(&out[..m - 1], &expected[..n], "len {len}");
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
