//! Where the simulated board's frames go: a capture file, a TCP connection (optionally zstd-compressed),
//! or a serial port (a real device or a pty).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use socscope_agent::{Transport, TransportError};
use socscope_wire::varint;

/// A blocking transport over any writer: the simulation waits for the writer, so nothing is dropped.
/// The first I/O error closes it and is kept for the report.
pub struct WriterTransport<W: Write> {
    writer: W,
    error: Option<io::Error>,
    zstd: Option<ZstdSection>,
}

impl<W: Write> WriterTransport<W> {
    /// Wraps `writer`; frames go out uncompressed.
    pub fn new(writer: W) -> Self {
        Self {
            writer,
            error: None,
            zstd: None,
        }
    }

    /// Compresses `Events` records with zstd at `level` (the wire allows it on TCP only).
    pub fn with_zstd(mut self, level: i32) -> io::Result<Self> {
        self.zstd = Some(ZstdSection::new(level)?);
        Ok(self)
    }

    /// The I/O error that closed the transport, if any.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Flushes buffered bytes; returns the first error seen, write or flush.
    pub fn finish(&mut self) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.writer.flush()
    }

    /// The writer.
    pub fn into_inner(self) -> W {
        self.writer
    }
}

impl<W: Write> Transport for WriterTransport<W> {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        if self.error.is_some() {
            return Err(TransportError::Closed);
        }
        loop {
            match self.writer.write_all(frame) {
                Ok(()) => return Ok(()),
                // A serial port's write timeout: the link is slow, not gone.
                Err(e) if e.kind() == io::ErrorKind::TimedOut => continue,
                Err(e) => {
                    self.error = Some(e);
                    return Err(TransportError::Closed);
                }
            }
        }
    }

    fn compress(&mut self, records: &[u8]) -> Option<&[u8]> {
        self.zstd.as_mut()?.compress(records)
    }
}

/// A records section as the wire wants it compressed: the raw length as a varint, then one zstd frame.
struct ZstdSection {
    compressor: zstd::bulk::Compressor<'static>,
    packed: Vec<u8>,
    section: Vec<u8>,
}

impl ZstdSection {
    fn new(level: i32) -> io::Result<Self> {
        Ok(Self {
            compressor: zstd::bulk::Compressor::new(level)?,
            packed: Vec::new(),
            section: Vec::new(),
        })
    }

    fn compress(&mut self, records: &[u8]) -> Option<&[u8]> {
        self.packed.clear();
        self.packed
            .reserve(zstd::zstd_safe::compress_bound(records.len()));
        self.compressor
            .compress_to_buffer(records, &mut self.packed)
            .ok()?;
        let mut len = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(records.len() as u64, &mut len)?;
        self.section.clear();
        self.section.extend_from_slice(len.get(..n)?);
        self.section.extend_from_slice(&self.packed);
        Some(&self.section)
    }
}

/// A capture file, buffered.
pub type FileTransport = WriterTransport<BufWriter<File>>;

/// Creates (or truncates) a capture file at `path`.
pub fn file(path: &Path) -> io::Result<FileTransport> {
    Ok(WriterTransport::new(BufWriter::with_capacity(
        1 << 20,
        File::create(path)?,
    )))
}

/// A TCP connection with a write buffer.
pub type TcpTransport = WriterTransport<BufWriter<TcpStream>>;

/// Connects to `host:port` (blocking writes: TCP flow control paces the simulation).
pub fn tcp(address: &str) -> io::Result<TcpTransport> {
    let mut last = None;
    for addr in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(WriterTransport::new(BufWriter::with_capacity(
                    64 << 10,
                    stream,
                )));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address found")))
}

/// A serial port.
pub type SerialTransport = WriterTransport<BufWriter<Box<dyn serialport::SerialPort>>>;

/// Opens the serial device (or pty) at `path` at `baud`, 8N1, raw.
pub fn serial(path: &str, baud: u32) -> Result<SerialTransport, serialport::Error> {
    let port = serialport::new(path, baud)
        .timeout(Duration::from_secs(1))
        .open()?;
    Ok(WriterTransport::new(BufWriter::with_capacity(4096, port)))
}

/// Parses `tcp://HOST:PORT` into `HOST:PORT`.
pub fn parse_tcp_url(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("tcp://")?;
    let (host, port) = rest.rsplit_once(':')?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return None;
    }
    Some(rest)
}

/// Parses `PATH[:BAUD]`; the baud rate defaults to 115200.
pub fn parse_serial(spec: &str) -> Option<(&str, u32)> {
    match spec.rsplit_once(':') {
        Some((path, baud)) if !path.is_empty() && baud.chars().all(|c| c.is_ascii_digit()) => {
            Some((path, baud.parse().ok().filter(|&b| b > 0)?))
        }
        _ if !spec.is_empty() => Some((spec, 115_200)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_urls() {
        assert_eq!(
            parse_tcp_url("tcp://127.0.0.1:7000"),
            Some("127.0.0.1:7000")
        );
        assert_eq!(parse_tcp_url("tcp://[::1]:7000"), Some("[::1]:7000"));
        assert_eq!(parse_tcp_url("127.0.0.1:7000"), None);
        assert_eq!(parse_tcp_url("tcp://host"), None);
        assert_eq!(parse_tcp_url("tcp://:80"), None);
        assert_eq!(parse_tcp_url("tcp://h:99999"), None);
    }

    #[test]
    fn serial_specs() {
        assert_eq!(
            parse_serial("/dev/ttyUSB0"),
            Some(("/dev/ttyUSB0", 115_200))
        );
        assert_eq!(
            parse_serial("/dev/ttyUSB0:921600"),
            Some(("/dev/ttyUSB0", 921_600))
        );
        assert_eq!(parse_serial("/dev/ttyUSB0:0"), None);
        assert_eq!(parse_serial(""), None);
    }
}
