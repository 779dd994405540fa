//! Probe capture: reads an agent's rings out of a running board's memory through a debug port that
//! speaks the GDB remote protocol (QEMU's gdbstub, OpenOCD, a J-Link GDB server) and frames them as the
//! agent's own drain would, so that the rest of the collector sees an ordinary wire stream.
//!
//! The board (agent in probe mode, `Agent::attach_probe`) publishes a control block (SPEC.md, "Probe
//! mode"): the rings' addresses, and per ring the count of blocks it closed; the host copies each closed
//! block, then advances the ring's `released` count, which gives the block back to the board. Every
//! frame the board's drain would have sent is built here: `Hello` from the board's names and clock,
//! `Dictionary` from the image in the board's flash, an `Events` frame per block, a `Loss` frame for
//! every gap in the blocks' sequence numbers (records the board dropped when its ring was full), and
//! once the board finished, `CpuTotal` per CPU and `Bye`.
//!
//! The GDB remote protocol reads memory only while the target is halted: each poll halts the board
//! (`0x03`), reads, writes `released`, and lets it run again (`c`). Under QEMU's `-icount` the board's
//! clock stands still while it is halted, so the board sees no gap; on real hardware a poll costs the
//! board the time of a few memory reads.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socscope_wire::encode;
use socscope_wire::frame::{Bye, CpuTotal, EventsHeader, FrameKind, Hello, Loss};

use crate::intake::Intake;
use crate::session::{IngestConfig, Notice, SessionReport};
use crate::{CollectorError, Result};

/// The control block's magic bytes (its first 16).
pub const MAGIC: [u8; 16] = *b"socscope-probe\0\0";
/// The newest control block layout this reader knows; it reads every one from 1 on (1: six name
/// entries in the block; 2: one names image in the board's flash).
pub const VERSION: u32 = 2;
/// Bytes before the first ring's entry: the longest header (version 1's), what a first read takes
/// before the version is known.
pub const HEADER_LEN: usize = 184;
/// The same in version 2.
pub const HEADER_LEN_V2: usize = 104;
/// Bytes per ring entry.
pub const RING_LEN: usize = 32;
/// The names a board gives: board, SoC, OS, application, token, agent version.
const NAMES: usize = 6;
/// Where a block's numbers are (its first 24 bytes): first sequence number, base time, record count,
/// end of its records.
const META_LEN: usize = 24;
/// `state` values.
const STATE_FINISHED: u32 = 2;

/// A probe source: `HOST:PORT` of a GDB remote-protocol server, and optionally `@ADDRESS` of the control
/// block (hexadecimal with `0x`, or decimal); without it the reader scans the RAM for its magic bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The debug port's address.
    pub address: String,
    /// The control block's address, if known.
    pub control: Option<u64>,
}

impl std::str::FromStr for ProbeSpec {
    type Err = CollectorError;

    fn from_str(s: &str) -> Result<Self> {
        let (address, control) = match s.split_once('@') {
            Some((a, c)) => {
                let parsed = match c.strip_prefix("0x").or_else(|| c.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => c.parse(),
                };
                let v = parsed.map_err(|_| {
                    CollectorError::Invalid(format!(
                        "probe {s:?}: control block address {c:?} is not a number (0x… or decimal)"
                    ))
                })?;
                (a, Some(v))
            }
            None => (s, None),
        };
        if address
            .rsplit_once(':')
            .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(CollectorError::Invalid(format!(
                "probe {s:?}: expected HOST:PORT[@ADDRESS] (a GDB remote-protocol port, e.g. QEMU's -gdb tcp::1234)"
            )));
        }
        Ok(Self {
            address: address.to_string(),
            control,
        })
    }
}

/// What the reader needs of a board: its memory, and halting and resuming it.
pub trait Target {
    /// Reads `len` bytes at `addr`.
    fn read(&mut self, addr: u64, len: usize) -> std::io::Result<Vec<u8>>;
    /// Writes `bytes` at `addr`.
    fn write(&mut self, addr: u64, bytes: &[u8]) -> std::io::Result<()>;
    /// Lets the board run.
    fn resume(&mut self) -> std::io::Result<()>;
    /// Stops the board (its memory can then be read).
    fn halt(&mut self) -> std::io::Result<()>;
}

/// A GDB remote-protocol client over TCP: the commands a probe reader needs (`?`, `m`, `M`, `c`, `0x03`).
pub struct GdbRemote {
    stream: TcpStream,
    running: bool,
    /// Bytes read after the last packet.
    pending: Vec<u8>,
}

impl GdbRemote {
    /// Connects; the server halts the target (QEMU's gdbstub does).
    pub fn connect(address: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut g = Self {
            stream,
            running: false,
            pending: Vec::new(),
        };
        // The stop reason: the target is halted.
        g.command("?")?;
        Ok(g)
    }

    fn send(&mut self, payload: &str) -> std::io::Result<()> {
        let sum = payload.bytes().fold(0u8, |a, b| a.wrapping_add(b));
        let packet = format!("${payload}#{sum:02x}");
        for _ in 0..3 {
            self.stream.write_all(packet.as_bytes())?;
            match self.byte()? {
                b'+' => return Ok(()),
                b'-' => continue,
                other => {
                    // A stop reply that raced the packet: keep it for `receive`.
                    self.pending.insert(0, other);
                    return Ok(());
                }
            }
        }
        Err(proto("the debug port refused a packet three times"))
    }

    fn byte(&mut self) -> std::io::Result<u8> {
        if !self.pending.is_empty() {
            return Ok(self.pending.remove(0));
        }
        let mut b = [0u8; 1];
        self.stream.read_exact(&mut b)?;
        Ok(b[0])
    }

    /// The next packet's payload (acknowledged).
    fn receive(&mut self) -> std::io::Result<String> {
        loop {
            while self.byte()? != b'$' {}
            let mut payload = Vec::new();
            loop {
                match self.byte()? {
                    b'#' => break,
                    b => payload.push(b),
                }
            }
            let sum_hex = [self.byte()?, self.byte()?];
            let sum = std::str::from_utf8(&sum_hex)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok());
            let computed = payload.iter().fold(0u8, |a, &b| a.wrapping_add(b));
            if sum == Some(computed) {
                self.stream.write_all(b"+")?;
                let text = unescape(&payload);
                return String::from_utf8(text).map_err(|_| proto("a reply that is not text"));
            }
            self.stream.write_all(b"-")?;
        }
    }

    fn command(&mut self, payload: &str) -> std::io::Result<String> {
        self.send(payload)?;
        self.receive()
    }
}

/// A GDB protocol error as an I/O error.
fn proto(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("debug port: {what}"),
    )
}

/// Undoes the protocol's `}` escapes and run-length encoding (`x*n`).
fn unescape(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len());
    let mut i = 0;
    while i < payload.len() {
        match payload[i] {
            b'}' if i + 1 < payload.len() => {
                out.push(payload[i + 1] ^ 0x20);
                i += 2;
            }
            b'*' if i + 1 < payload.len() => {
                let repeat = usize::from(payload[i + 1].saturating_sub(29));
                if let Some(&last) = out.last() {
                    out.extend(std::iter::repeat_n(last, repeat));
                }
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

impl Target for GdbRemote {
    fn read(&mut self, addr: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let n = (len - out.len()).min(1024);
            let reply = self.command(&format!("m{:x},{n:x}", addr + out.len() as u64))?;
            if reply.starts_with('E') || reply.len() != 2 * n {
                return Err(proto(&format!(
                    "cannot read {n} bytes at {:#x}: {reply:?}",
                    addr + out.len() as u64
                )));
            }
            for pair in reply.as_bytes().chunks_exact(2) {
                let hex = std::str::from_utf8(pair)
                    .map_err(|_| proto("a memory reply that is not hex"))?;
                out.push(
                    u8::from_str_radix(hex, 16)
                        .map_err(|_| proto("a memory reply that is not hex"))?,
                );
            }
        }
        Ok(out)
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let reply = self.command(&format!("M{addr:x},{:x}:{hex}", bytes.len()))?;
        if reply != "OK" {
            return Err(proto(&format!("cannot write at {addr:#x}: {reply:?}")));
        }
        Ok(())
    }

    fn resume(&mut self) -> std::io::Result<()> {
        if !self.running {
            self.send("c")?;
            self.running = true;
        }
        Ok(())
    }

    fn halt(&mut self) -> std::io::Result<()> {
        if self.running {
            self.stream.write_all(&[0x03])?;
            // The stop reply (`T05…` or `S05`); a `W`/`X` reply says the board is gone.
            let reply = self.receive()?;
            if reply.starts_with('W') || reply.starts_with('X') {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the board exited ({reply})"),
                ));
            }
            self.running = false;
        }
        Ok(())
    }
}

/// The control block's fixed part, as read from the board.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    /// Where it is.
    pub address: u64,
    pub cpus: usize,
    pub block: usize,
    pub blocks: usize,
    pub records_at: usize,
    pub tick_rate_hz: u64,
    pub session_id: u64,
    pub start_ticks: u64,
    pub dictionary: (u64, usize),
    pub cpu_count: u16,
    /// Where the board's names are.
    pub names: Names,
    /// Bytes before the first ring's entry (184 in version 1, 104 in version 2).
    pub header_len: usize,
    /// Per ring: its first block's address.
    pub rings: Vec<u64>,
}

/// Where a control block says the board's names are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Names {
    /// Version 1: board, SoC, OS, application, token, agent version, each an address and a length.
    Each([(u64, usize); NAMES]),
    /// Version 2: one image (address, length): the six names, each a length byte and its UTF-8 bytes.
    Image(u64, usize),
}

/// Splits a names image into its six names, or says where it is malformed.
pub fn parse_names_image(image: &[u8]) -> std::result::Result<[String; NAMES], String> {
    let mut names: [String; NAMES] = Default::default();
    let mut at = 0;
    for (i, name) in names.iter_mut().enumerate() {
        let Some(&len) = image.get(at) else {
            return Err(format!(
                "the names image ends at byte {at} ({} bytes) before name {} of {NAMES}",
                image.len(),
                i + 1
            ));
        };
        let bytes = image.get(at + 1..at + 1 + usize::from(len)).ok_or_else(|| {
            format!(
                "the names image's name {} (at byte {at}) says {len} bytes, the image has {} after it",
                i + 1,
                image.len() - at - 1
            )
        })?;
        *name = String::from_utf8_lossy(bytes).into_owned();
        at += 1 + usize::from(len);
    }
    if at != image.len() {
        return Err(format!(
            "the names image has {} bytes after its six names (at byte {at})",
            image.len() - at
        ));
    }
    Ok(names)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl Control {
    /// Parses a control block's bytes (at least its header; its rings' entries when `cpus` of them
    /// follow), or says what is wrong with them.
    pub fn parse(address: u64, b: &[u8]) -> std::result::Result<Self, String> {
        if b.get(..16) != Some(&MAGIC[..]) {
            return Err(format!(
                "no control block at {address:#x} (its magic bytes differ)"
            ));
        }
        let version = u32_at(b, 16);
        if !(1..=VERSION).contains(&version) {
            return Err(format!(
                "the control block at {address:#x} has layout version {version}; this collector reads versions 1 to {VERSION}"
            ));
        }
        let cpus = u32_at(b, 20) as usize;
        let block = u32_at(b, 24) as usize;
        let blocks = u32_at(b, 28) as usize;
        let records_at = u32_at(b, 32) as usize;
        if cpus == 0
            || cpus > 64
            || blocks == 0
            || records_at < META_LEN
            || records_at > block
            || block > 1 << 20
        {
            return Err(format!(
                "the control block at {address:#x} is inconsistent: {cpus} rings of {blocks} blocks of {block} bytes, records at {records_at}"
            ));
        }
        let (names, header_len) = if version == 1 {
            let mut names = [(0u64, 0usize); NAMES];
            for (i, n) in names.iter_mut().enumerate() {
                *n = (u64_at(b, 88 + 16 * i), u32_at(b, 96 + 16 * i) as usize);
            }
            (Names::Each(names), HEADER_LEN)
        } else {
            (
                Names::Image(u64_at(b, 88), u32_at(b, 96) as usize),
                HEADER_LEN_V2,
            )
        };
        let rings = (0..cpus)
            .map(|c| u64_at(b, header_len + RING_LEN * c))
            .collect();
        Ok(Self {
            address,
            cpus,
            block,
            blocks,
            records_at,
            tick_rate_hz: u64_at(b, 40),
            session_id: u64_at(b, 48),
            start_ticks: u64_at(b, 56),
            dictionary: (u64_at(b, 72), u32_at(b, 80) as usize),
            cpu_count: u32_at(b, 84).min(u32::from(u16::MAX)) as u16,
            names,
            header_len,
            rings,
        })
    }

    /// The whole block's length.
    pub fn len(&self) -> usize {
        self.header_len + RING_LEN * self.cpus
    }

    /// Whether it has no rings (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.cpus == 0
    }
}

/// Per ring: what the host has taken so far.
#[derive(Clone, Copy, Debug, Default)]
struct RingProgress {
    /// Blocks copied (the `k`-th is the ring's block `k mod blocks`).
    taken: u64,
    /// The next sequence number the frames sent so far cover.
    next_seq: u64,
    records: u64,
}

/// Reads a board's rings through `target` and turns them into wire frames.
pub struct ProbeReader<T: Target> {
    target: T,
    control: Control,
    progress: Vec<RingProgress>,
    frame: Vec<u8>,
}

/// What one poll found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Poll {
    /// Blocks turned into frames.
    pub blocks: u64,
    /// The board has finished and every block is out: the session's last frames were produced.
    pub finished: bool,
}

impl<T: Target> ProbeReader<T> {
    /// Finds the control block (at `control`, or by scanning `scan` for its magic bytes; the board is
    /// let run between tries until `timeout`, as it fills the block at start), halting the board to
    /// read. Returns the reader and the session's first frames (`Hello`, `Dictionary`).
    pub fn open(
        mut target: T,
        control: Option<u64>,
        scan: std::ops::Range<u64>,
        timeout: Duration,
    ) -> std::io::Result<(Self, Vec<u8>)> {
        let start = Instant::now();
        let control = loop {
            target.halt()?;
            let found = match control {
                Some(at) => {
                    // Version 2's header: enough to know the version and the whole block's length,
                    // read again whole below.
                    let b = target.read(at, HEADER_LEN_V2)?;
                    Control::parse(at, &b).map(Some)
                }
                None => find_control(&mut target, scan.clone()),
            };
            match found {
                Ok(Some(c)) if u32_at(&target.read(c.address + 36, 4)?, 0) != 0 => break c,
                Ok(_) | Err(_) if start.elapsed() < timeout => {
                    target.resume()?;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(_) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "no agent control block found in {:#x}..{:#x} within {timeout:?} (is the firmware built in probe mode, and started?)",
                            scan.start, scan.end
                        ),
                    ));
                }
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            }
        };
        // The rings' entries, then the names and the dictionary.
        let whole = target.read(control.address, control.len())?;
        let control = Control::parse(control.address, &whole)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let names = read_names(&mut target, &control)?;
        let (dict_addr, dict_len) = control.dictionary;
        let dictionary = if dict_len == 0 {
            Vec::new()
        } else {
            target.read(dict_addr, dict_len)?
        };
        let mut out = Vec::new();
        let mut frame = vec![0u8; encode::max_encoded_len(dict_len + 1024) + 8];
        let hello = Hello {
            wire_version: socscope_wire::WIRE_VERSION,
            agent_version: &names[5],
            board: &names[0],
            soc: &names[1],
            os: &names[2],
            application: &names[3],
            cpu_count: control.cpu_count,
            tick_rate_hz: control.tick_rate_hz,
            session_id: control.session_id,
            start_ticks: control.start_ticks,
            token: &names[4],
        };
        let n = encode::encode_hello(&mut frame, &hello).map_err(encode_error)?;
        out.extend_from_slice(&frame[..n]);
        if !dictionary.is_empty() {
            let n =
                encode::encode_frame(&mut frame, FrameKind::Dictionary, |f| f.push(&dictionary))
                    .map_err(encode_error)?;
            out.extend_from_slice(&frame[..n]);
        }
        let progress = vec![RingProgress::default(); control.cpus];
        let frame = vec![0u8; encode::max_encoded_len(control.block + 64) + 8];
        Ok((
            Self {
                target,
                control,
                progress,
                frame,
            },
            out,
        ))
    }

    /// The control block found.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Halts the board, frames every block closed since the last poll into `out` (with `Loss` frames
    /// for the gaps), gives them back, and lets the board run; once the board has finished, also the
    /// last `Loss`, `CpuTotal` and `Bye` frames.
    pub fn poll(&mut self, out: &mut Vec<u8>) -> std::io::Result<Poll> {
        self.target.halt()?;
        let (address, cpus, blocks) =
            (self.control.address, self.control.cpus, self.control.blocks);
        let state_and_rings = self.target.read(address + 36, 4)?;
        let finished = u32_at(&state_and_rings, 0) == STATE_FINISHED;
        let rings = self
            .target
            .read(address + self.control.header_len as u64, RING_LEN * cpus)?;
        let mut result = Poll::default();
        for cpu in 0..cpus {
            let entry = &rings[RING_LEN * cpu..RING_LEN * (cpu + 1)];
            let closed = u32_at(entry, 8);
            let p = self.progress[cpu];
            let waiting = closed.wrapping_sub(p.taken as u32);
            if waiting as usize > blocks {
                return Err(proto(&format!(
                    "ring {cpu}: {waiting} blocks closed and not taken, more than its {blocks}"
                )));
            }
            for _ in 0..waiting {
                self.take_block(cpu, out)?;
                result.blocks += 1;
            }
            if waiting > 0 {
                let released = self.progress[cpu].taken as u32;
                let at = address + (self.control.header_len + RING_LEN * cpu + 12) as u64;
                self.target.write(at, &released.to_le_bytes())?;
            }
        }
        if finished {
            // Every block was closed before `state` said so: the ones just taken are the last.
            let end = self.target.read(address + 64, 8)?;
            self.finish(&rings, u64_at(&end, 0), out)?;
            result.finished = true;
        } else {
            self.target.resume()?;
        }
        Ok(result)
    }

    fn take_block(&mut self, cpu: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
        let c = &self.control;
        let p = &mut self.progress[cpu];
        let slot = (p.taken % c.blocks as u64) as usize;
        let addr = c.rings[cpu] + (slot * c.block) as u64;
        let block = self.target.read(addr, c.block)?;
        let first_seq = u64_at(&block, 0);
        let base_ticks = u64_at(&block, 8);
        let count = u32_at(&block, 16);
        let end = (u32_at(&block, 20) as usize).clamp(c.records_at, c.block);
        if first_seq < p.next_seq {
            return Err(proto(&format!(
                "ring {cpu}: block {} starts at sequence number {first_seq}, before {} (already sent)",
                p.taken, p.next_seq
            )));
        }
        if first_seq > p.next_seq {
            let loss = Loss {
                cpu: cpu as u16,
                first_seq: p.next_seq,
                count: first_seq - p.next_seq,
            };
            let n = encode::encode_loss(&mut self.frame, &loss).map_err(encode_error)?;
            out.extend_from_slice(&self.frame[..n]);
        }
        let header = EventsHeader {
            flags: 0,
            cpu: cpu as u16,
            first_seq,
            base_ticks,
            count,
        };
        let n = encode::encode_events(&mut self.frame, &header, &block[c.records_at..end])
            .map_err(encode_error)?;
        out.extend_from_slice(&self.frame[..n]);
        p.next_seq = first_seq + u64::from(count);
        p.records += u64::from(count);
        p.taken += 1;
        Ok(())
    }

    fn finish(&mut self, rings: &[u8], end_ticks: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut dropped = 0;
        let mut records = 0;
        for cpu in 0..self.control.cpus {
            let entry = &rings[RING_LEN * cpu..RING_LEN * (cpu + 1)];
            let sequences = u64_at(entry, 16);
            dropped += u64_at(entry, 24);
            let p = self.progress[cpu];
            records += p.records;
            if sequences > p.next_seq {
                let loss = Loss {
                    cpu: cpu as u16,
                    first_seq: p.next_seq,
                    count: sequences - p.next_seq,
                };
                let n = encode::encode_loss(&mut self.frame, &loss).map_err(encode_error)?;
                out.extend_from_slice(&self.frame[..n]);
            }
            let total = CpuTotal {
                cpu: cpu as u16,
                sequences,
            };
            let n = encode::encode_cpu_total(&mut self.frame, &total).map_err(encode_error)?;
            out.extend_from_slice(&self.frame[..n]);
        }
        let bye = Bye {
            ticks: end_ticks,
            records,
            dropped,
        };
        let n = encode::encode_bye(&mut self.frame, &bye).map_err(encode_error)?;
        out.extend_from_slice(&self.frame[..n]);
        Ok(())
    }

    /// Lets the board run and hands the target back.
    pub fn into_target(mut self) -> std::io::Result<T> {
        self.target.resume()?;
        Ok(self.target)
    }
}

/// The board's six names, from where its control block says they are.
fn read_names<T: Target>(target: &mut T, control: &Control) -> std::io::Result<[String; NAMES]> {
    match control.names {
        Names::Each(each) => {
            let mut names: [String; NAMES] = Default::default();
            for (name, &(addr, len)) in names.iter_mut().zip(&each) {
                let bytes = if len == 0 {
                    Vec::new()
                } else {
                    target.read(addr, len.min(256))?
                };
                *name = String::from_utf8_lossy(&bytes).into_owned();
            }
            Ok(names)
        }
        Names::Image(addr, len) => {
            // Six names of at most 255 bytes and their length bytes.
            if len > NAMES * 256 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "the control block at {:#x} gives a names image of {len} bytes (at most {})",
                        control.address,
                        NAMES * 256
                    ),
                ));
            }
            let image = if len == 0 {
                Vec::new()
            } else {
                target.read(addr, len)?
            };
            parse_names_image(&image).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{e} (the image at {addr:#x}, control block at {:#x})",
                        control.address
                    ),
                )
            })
        }
    }
}

fn encode_error(e: encode::EncodeError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("framing: {e}"))
}

/// Scans `range` for the control block's magic bytes (4 KiB reads, 16-byte aligned: the block is
/// 4-aligned at least, and the agent's static is 8-aligned).
fn find_control<T: Target>(
    target: &mut T,
    range: std::ops::Range<u64>,
) -> std::result::Result<Option<Control>, String> {
    const CHUNK: u64 = 4096;
    let mut at = range.start;
    while at < range.end {
        let len = CHUNK.min(range.end - at) as usize;
        let Ok(bytes) = target.read(at, len) else {
            // Past the end of the board's RAM.
            break;
        };
        let mut off = 0;
        while off + 16 <= bytes.len() {
            if bytes[off..off + 16] == MAGIC {
                let addr = at + off as u64;
                let header = target
                    .read(addr, HEADER_LEN_V2)
                    .map_err(|e| e.to_string())?;
                return Control::parse(addr, &header).map(Some);
            }
            off += 4;
        }
        // A magic split across two reads is found by overlapping them.
        at += CHUNK - 16;
    }
    Ok(None)
}

/// Where [`capture`] looks for the control block when no address is given: the usual Cortex-M SRAM.
pub const DEFAULT_SCAN: std::ops::Range<u64> = 0x2000_0000..0x2008_0000;

/// Connects to the debug port (so errors come at once).
pub fn connect(spec: &ProbeSpec) -> Result<GdbRemote> {
    GdbRemote::connect(&spec.address).map_err(|e| CollectorError::Net {
        what: format!("connecting to the debug port {}", spec.address),
        source: e,
    })
}

/// Reads the board through `port` until it finishes its session (or `stop` is set, or the port fails),
/// ingesting the frames; calls `notify` with each notice. `interval`: time between polls.
pub fn capture(
    port: GdbRemote,
    spec: &ProbeSpec,
    config: IngestConfig,
    stop: Arc<AtomicBool>,
    interval: Duration,
    mut notify: impl FnMut(Notice),
) -> Result<Vec<SessionReport>> {
    let net = |e: std::io::Error| CollectorError::Net {
        what: format!("reading the board through {}", spec.address),
        source: e,
    };
    let mut ingest = Intake::new(config, format!("probe {}", spec.address));
    let (mut reader, first) =
        ProbeReader::open(port, spec.control, DEFAULT_SCAN, Duration::from_secs(30))
            .map_err(net)?;
    ingest.feed(&first)?;
    let mut out = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        out.clear();
        let polled = reader.poll(&mut out).map_err(net)?;
        ingest.feed(&out)?;
        for n in ingest.take_notices() {
            notify(n);
        }
        if polled.finished {
            break;
        }
        if polled.blocks == 0 {
            std::thread::sleep(interval);
            ingest.tick()?;
        }
    }
    let _ = reader.into_target();
    let (reports, notices) = ingest.finish()?;
    for n in notices {
        notify(n);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            "localhost:1234".parse::<ProbeSpec>().unwrap(),
            ProbeSpec {
                address: "localhost:1234".into(),
                control: None
            }
        );
        assert_eq!(
            "127.0.0.1:3333@0x20000460"
                .parse::<ProbeSpec>()
                .unwrap()
                .control,
            Some(0x2000_0460)
        );
        assert!("127.0.0.1".parse::<ProbeSpec>().is_err());
        assert!("127.0.0.1:1@zz".parse::<ProbeSpec>().is_err());
    }

    /// A board's memory as a debug port reads it.
    struct Memory {
        base: u64,
        bytes: Vec<u8>,
    }

    impl Target for Memory {
        fn read(&mut self, addr: u64, len: usize) -> std::io::Result<Vec<u8>> {
            let at = (addr - self.base) as usize;
            self.bytes
                .get(at..at + len)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| proto("read past the memory"))
        }
        fn write(&mut self, addr: u64, bytes: &[u8]) -> std::io::Result<()> {
            let at = (addr - self.base) as usize;
            self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
            Ok(())
        }
        fn resume(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn halt(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    const BASE: u64 = 0x2000_0000;
    const NAME_LIST: [&str; NAMES] = ["stb-test", "sti7105", "linux", "player", "", "0.1.0"];

    /// A control block of `version` with one ring at 0x2000_0400 and the board's names after it at
    /// 0x2000_0800, in the memory of a board.
    fn board(version: u32) -> Memory {
        let mut bytes = vec![0u8; 0x1000];
        let put = |bytes: &mut Vec<u8>, at: usize, v: &[u8]| {
            bytes[at..at + v.len()].copy_from_slice(v);
        };
        put(&mut bytes, 0, &MAGIC);
        put(&mut bytes, 16, &version.to_le_bytes());
        put(&mut bytes, 20, &1u32.to_le_bytes());
        put(&mut bytes, 24, &256u32.to_le_bytes());
        put(&mut bytes, 28, &4u32.to_le_bytes());
        put(&mut bytes, 32, &31u32.to_le_bytes());
        put(&mut bytes, 36, &1u32.to_le_bytes());
        put(&mut bytes, 40, &1_000_000u64.to_le_bytes());
        put(&mut bytes, 48, &7u64.to_le_bytes());
        put(&mut bytes, 56, &1000u64.to_le_bytes());
        put(&mut bytes, 84, &1u32.to_le_bytes());
        let names_at = 0x800usize;
        let ring_at = if version == 1 { 184 } else { 104 };
        put(&mut bytes, ring_at, &(BASE + 0x400).to_le_bytes());
        if version == 1 {
            let mut at = names_at;
            for (i, name) in NAME_LIST.iter().enumerate() {
                put(&mut bytes, 88 + 16 * i, &(BASE + at as u64).to_le_bytes());
                put(&mut bytes, 96 + 16 * i, &(name.len() as u32).to_le_bytes());
                put(&mut bytes, at, name.as_bytes());
                at += name.len();
            }
        } else {
            let mut image = Vec::new();
            for name in NAME_LIST {
                image.push(name.len() as u8);
                image.extend_from_slice(name.as_bytes());
            }
            put(&mut bytes, 88, &(BASE + names_at as u64).to_le_bytes());
            put(&mut bytes, 96, &(image.len() as u32).to_le_bytes());
            put(&mut bytes, names_at, &image);
        }
        Memory { base: BASE, bytes }
    }

    #[test]
    fn reads_both_control_block_versions() {
        for version in [1, 2] {
            let mut memory = board(version);
            let whole = memory.read(BASE, 256).unwrap();
            let control = Control::parse(BASE, &whole).unwrap();
            assert_eq!(control.rings, vec![BASE + 0x400], "version {version}");
            assert_eq!(control.len(), if version == 1 { 216 } else { 136 });
            assert_eq!((control.tick_rate_hz, control.session_id), (1_000_000, 7));
            assert_eq!(control.start_ticks, 1000);
            let names = read_names(&mut memory, &control).unwrap();
            assert_eq!(names, NAME_LIST.map(String::from), "version {version}");
            // The reader finds the block by its magic bytes and opens it from its first header read.
            let found = find_control(&mut memory, BASE..BASE + 0x1000)
                .unwrap()
                .unwrap();
            assert_eq!(found.address, BASE);
            let (reader, frames) =
                ProbeReader::open(board(version), None, BASE..BASE + 0x1000, Duration::ZERO)
                    .unwrap();
            assert_eq!(reader.control().rings, vec![BASE + 0x400]);
            // `Hello` carries the names (postcard: a length byte, then the bytes).
            let hello = frames.windows(9).any(|w| w == b"\x08stb-test");
            assert!(
                hello,
                "version {version}: the board's name in the host's Hello"
            );
        }
        let mut future = board(2);
        future.bytes[16] = 3;
        let whole = future.read(BASE, 256).unwrap();
        let e = Control::parse(BASE, &whole).unwrap_err();
        assert!(
            e.contains("layout version 3") && e.contains("versions 1 to 2"),
            "{e}"
        );
    }

    #[test]
    fn a_malformed_names_image_is_refused_with_where() {
        assert_eq!(
            parse_names_image(b"\x01a\x01b\x00\x00\x00\x00").unwrap(),
            ["a", "b", "", "", "", ""].map(String::from)
        );
        let e = parse_names_image(b"\x01a\x05b").unwrap_err();
        assert!(e.contains("name 2 (at byte 2) says 5 bytes"), "{e}");
        let e = parse_names_image(b"\x00\x00").unwrap_err();
        assert!(e.contains("before name 3"), "{e}");
        let e = parse_names_image(b"\x00\x00\x00\x00\x00\x00\x07").unwrap_err();
        assert!(e.contains("1 bytes after its six names"), "{e}");
        let mut memory = board(2);
        memory.bytes[0x800] = 200;
        let whole = memory.read(BASE, 256).unwrap();
        let control = Control::parse(BASE, &whole).unwrap();
        let e = read_names(&mut memory, &control).unwrap_err().to_string();
        assert!(
            e.contains("name 1 (at byte 0) says 200 bytes") && e.contains("0x20000800"),
            "{e}"
        );
    }

    #[test]
    fn unescapes_run_lengths_and_escapes() {
        // "0* " is '0' repeated 3 more times (' ' = 32, 32 - 29 = 3); "}\x03" is '#'.
        assert_eq!(unescape(b"0* 1"), b"00001");
        assert_eq!(unescape(b"a}\x03b"), b"a#b");
    }
}
