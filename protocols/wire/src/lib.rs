//! The agent↔collector wire format: COBS-framed, checked (CRC-32C or Fletcher-32) frames carrying a session's hello, its
//! dictionary of producers and event types, batches of compact event records, loss reports and heartbeats.
//!
//! Start here: [`encode::FrameEncoder`] and [`encode::RecordEncoder`] (the `no_std`, allocation-free
//! encoder used by the agent), [`dict`] (the built-in KPTrace-like dictionary), and, behind feature
//! `decode`, [`decode::StreamDecoder`] (the nom streaming decoder used by the collector).
//!
//! `SPEC.md` beside this crate describes every byte.
#![no_std]

#[cfg(feature = "std")]
extern crate std;

pub mod check;
pub mod dict;
pub mod encode;
pub mod frame;
pub mod refusal;
pub mod varint;

#[cfg(feature = "decode")]
pub mod decode;

/// The version of the wire format this crate writes. Carried in band, in the `Hello` frame.
pub const WIRE_VERSION: u16 = 3;

/// The wire versions this build's collector reads: 3; 2 (the same frames, `Events` only with CRC-32C);
/// and 1 (the same bytes as 2; a version-1 agent never repeats its `Hello`).
pub const READ_WIRE_VERSIONS: &[u16] = &[1, 2, 3];

/// The CRC appended to every frame: CRC-32C (Castagnoli), little-endian, over the kind byte and body.
///
/// Bare-metal builds compute it bit by bit, with no table: a board's agent checks only its control frames
/// with it (a few hundred bytes a second; its `Events` frames use Fletcher-32), so 1 KiB of flash for a
/// table would not pay. Hosted builds (the simulator, the collector) use the 16 KiB slice-by-16 table.
/// Both compute the same CRC.
#[cfg(target_os = "none")]
pub const FRAME_CRC: crc::Crc<u32, crc::NoTable> =
    crc::Crc::<u32, crc::NoTable>::new(&crc::CRC_32_ISCSI);
/// The CRC appended to every frame: CRC-32C (Castagnoli), little-endian, over the kind byte and body.
///
/// Bare-metal builds compute it bit by bit (no table); hosted builds (the simulator, the collector) use
/// the 16 KiB slice-by-16 table, many times faster. Both compute the same CRC.
#[cfg(not(target_os = "none"))]
pub const FRAME_CRC: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// The largest decoded frame (kind + body + CRC) a decoder must accept. Larger frames are dropped.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// The most parameters an event type may declare.
pub const MAX_PARAMS: usize = 8;

/// The longest name (producer, event type, parameter) in bytes.
pub const MAX_NAME_LEN: usize = 64;
