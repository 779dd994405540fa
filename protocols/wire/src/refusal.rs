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
    let start = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let bytes = &mut bytes[start..];
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or(RefusalError::Incomplete)?;
    let frame = &mut bytes[..end];
    let n = cobs::decode_in_place(frame).map_err(|_| RefusalError::Cobs)?;
    let frame = &frame[..n];
    if frame.len() < 5 {
        return Err(RefusalError::TooShort);
    }
    let (data, crc) = frame.split_at(frame.len() - 4);
    let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crate::FRAME_CRC.checksum(data) != want {
        return Err(RefusalError::Crc);
    }
    let (&kind, body) = data.split_first().ok_or(RefusalError::TooShort)?;
    if kind != REFUSAL_KIND {
        return Err(RefusalError::NotARefusal(kind));
    }
    let (&code, rest) = body.split_first().ok_or(RefusalError::Malformed)?;
    let (len, used) = read_varint(rest).ok_or(RefusalError::Malformed)?;
    let text = &rest[used..];
    if len != text.len() as u64 || text.len() > MAX_REFUSAL_MESSAGE {
        return Err(RefusalError::Malformed);
    }
    let message = core::str::from_utf8(text).map_err(|_| RefusalError::Malformed)?;
    Ok(Refusal {
        reason: RefusalReason::from_code(code),
        message,
    })
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
}
