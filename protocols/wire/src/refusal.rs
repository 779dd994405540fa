//! The one frame a collector sends to a board: `Refusal` (kind 8), the reason it will not store the
//! board's session, written just before it closes the link (SPEC.md, section 5.8). Encoding and
//! decoding are `no_std` and allocation-free, so the agent and its C API can read it.

use crate::encode::{EncodeError, encode_frame_of_kind};
use crate::varint;

/// The kind byte of a `Refusal` frame.
pub const REFUSAL_KIND: u8 = 8;

/// The longest message a `Refusal` carries, in bytes (longer ones are cut at a character boundary).
pub const MAX_REFUSAL_MESSAGE: usize = 256;

/// Why a collector refuses a board's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// The `Hello` carried no token, or a wrong one (`socscope collect --token`).
    Token,
    /// Too many sessions started within a minute (on the connection, or over all of them).
    SessionLimit,
    /// The collector cannot store the session: its disk is full, or the trace file cannot be written.
    Store,
    /// The board speaks a wire version the collector does not read.
    Version,
    /// Every connection slot holds a session already.
    ConnectionLimit,
    /// A code this build does not know (a newer collector): the message says why.
    Other(u8),
}

impl RefusalReason {
    /// The code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Token => 1,
            Self::SessionLimit => 2,
            Self::Store => 3,
            Self::Version => 4,
            Self::ConnectionLimit => 5,
            Self::Other(c) => c,
        }
    }

    /// The reason of a code.
    pub const fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Token,
            2 => Self::SessionLimit,
            3 => Self::Store,
            4 => Self::Version,
            5 => Self::ConnectionLimit,
            c => Self::Other(c),
        }
    }

    /// A short name (`token`, `session-limit`, `store`, `version`, `connection-limit`, `other`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Token => "token",
            Self::SessionLimit => "session-limit",
            Self::Store => "store",
            Self::Version => "version",
            Self::ConnectionLimit => "connection-limit",
            Self::Other(_) => "other",
        }
    }
}

/// A `Refusal` frame: the reason and a message for the board's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal<'a> {
    /// Why.
    pub reason: RefusalReason,
    /// What the collector said, UTF-8, at most [`MAX_REFUSAL_MESSAGE`] bytes.
    pub message: &'a str,
}

/// Why bytes read back from a collector are not a `Refusal` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalError {
    /// No frame delimiter (the frame did not arrive whole).
    Incomplete,
    /// The COBS encoding is broken.
    Cobs,
    /// Shorter than a kind byte and a CRC.
    TooShort,
    /// The CRC-32C does not match.
    Crc,
    /// Another frame kind.
    NotARefusal(u8),
    /// The body is not a reason byte and a string ending where the body ends.
    Malformed,
}

/// Encodes a `Refusal` frame (delimiter included) into `out`; a message longer than
/// [`MAX_REFUSAL_MESSAGE`] bytes is cut at a character boundary.
pub fn encode_refusal(out: &mut [u8], refusal: &Refusal<'_>) -> Result<usize, EncodeError> {
    let mut end = refusal.message.len().min(MAX_REFUSAL_MESSAGE);
    while !refusal.message.is_char_boundary(end) {
        end -= 1;
    }
    let message = &refusal.message.as_bytes()[..end];
    encode_frame_of_kind(out, REFUSAL_KIND, |f| {
        f.push(&[refusal.reason.code()])?;
        let mut len = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(message.len() as u64, &mut len).unwrap_or(0);
        f.push(&len[..n])?;
        f.push(message)
    })
}

/// Decodes the first frame of `bytes` (what a collector sent before it closed the link) in place and
/// reads it as a `Refusal`. Bytes before a leading delimiter are skipped.
pub fn decode_refusal(bytes: &mut [u8]) -> Result<Refusal<'_>, RefusalError> {
    // Only checked accesses below: the agent's C API calls this and must link without any panicking
    // path (scripts/build-bare-metal.sh proves it).
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let bytes = bytes.get_mut(start..).ok_or(RefusalError::Incomplete)?;
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or(RefusalError::Incomplete)?;
    let frame = bytes.get_mut(..end).ok_or(RefusalError::Incomplete)?;
    let n = cobs_decode_in_place(frame).ok_or(RefusalError::Cobs)?;
    let frame = frame.get(..n).ok_or(RefusalError::Cobs)?;
    let (data, crc) = frame
        .split_last_chunk::<4>()
        .ok_or(RefusalError::TooShort)?;
    if data.is_empty() {
        return Err(RefusalError::TooShort);
    }
    if crate::FRAME_CRC.checksum(data) != u32::from_le_bytes(*crc) {
        return Err(RefusalError::Crc);
    }
    let (&kind, body) = data.split_first().ok_or(RefusalError::TooShort)?;
    if kind != REFUSAL_KIND {
        return Err(RefusalError::NotARefusal(kind));
    }
    let (&code, rest) = body.split_first().ok_or(RefusalError::Malformed)?;
    let (len, used) = read_varint(rest).ok_or(RefusalError::Malformed)?;
    let text = rest.get(used..).ok_or(RefusalError::Malformed)?;
    if len != text.len() as u64 || text.len() > MAX_REFUSAL_MESSAGE {
        return Err(RefusalError::Malformed);
    }
    let message = core::str::from_utf8(text).map_err(|_| RefusalError::Malformed)?;
    Ok(Refusal {
        reason: RefusalReason::from_code(code),
        message,
    })
}

/// COBS-decodes `frame` (its delimiter excluded) in place; returns the decoded length, `None` when the
/// encoding is broken. The `cobs` crate's decoder (used by the collector's stream decoder) indexes its
/// buffer directly, which leaves panicking paths the C API may not contain; this one only uses
/// checked accesses and decodes the same way.
fn cobs_decode_in_place(frame: &mut [u8]) -> Option<usize> {
    let mut read = 0;
    let mut write = 0;
    while let Some(&code) = frame.get(read) {
        if code == 0 {
            return None;
        }
        read += 1;
        for _ in 1..code {
            let b = *frame.get(read)?;
            *frame.get_mut(write)? = b;
            read += 1;
            write += 1;
        }
        if code != 0xFF && read < frame.len() {
            *frame.get_mut(write)? = 0;
            write += 1;
        }
    }
    Some(write)
}

/// A LEB128 varint at the start of `bytes`: its value and length.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(varint::MAX_VARINT_LEN) {
        value |= u64::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::{vec, vec::Vec};

    #[test]
    fn round_trip_and_damage() {
        let mut buf = [0u8; 512];
        let long = "é".repeat(200);
        for (reason, message) in [
            (RefusalReason::Token, "no token"),
            (RefusalReason::Other(77), ""),
            (RefusalReason::Store, long.as_str()),
        ] {
            let n = encode_refusal(&mut buf, &Refusal { reason, message }).unwrap();
            let mut copy = buf;
            let r = decode_refusal(&mut copy[..n]).unwrap();
            assert_eq!(r.reason, reason);
            assert!(message.starts_with(r.message));
            assert!(r.message.len() <= MAX_REFUSAL_MESSAGE);
            for i in 0..n - 1 {
                let mut bad = buf;
                bad[i] ^= 0x20;
                assert!(decode_refusal(&mut bad[..n]).is_err(), "byte {i}");
            }
        }
    }

    /// The checked COBS decoder agrees with the `cobs` crate on every input, valid or not: same length
    /// and bytes when the crate decodes, an error when it refuses.
    #[test]
    fn cobs_decoding_agrees_with_the_cobs_crate() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..20_000 {
            let len = (next() % 300) as usize;
            let mut input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if round % 2 == 0 {
                // Valid encodings too: the crate's encoding of random data.
                let mut enc = vec![0u8; cobs::max_encoding_length(len)];
                let n = cobs::encode(&input, &mut enc);
                enc.truncate(n);
                input = enc;
            }
            input.retain(|&b| b != 0);
            let mut ours = input.clone();
            let mut theirs = input.clone();
            let a = cobs_decode_in_place(&mut ours);
            let b = if theirs.is_empty() {
                Ok(0)
            } else {
                cobs::decode_in_place(&mut theirs)
            };
            match (a, b) {
                (Some(x), Ok(y)) => {
                    assert_eq!(x, y, "{input:?}");
                    assert_eq!(ours[..x], theirs[..y], "{input:?}");
                }
                (None, Err(_)) => {}
                (a, b) => panic!("{input:?}: ours {a:?}, the crate {b:?}"),
            }
        }
    }
}
