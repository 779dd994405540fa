//! Where the simulated board's frames go: a capture file, a TCP connection (optionally zstd-compressed),
//! or a serial port (a real device or a pty).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
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
        write_all_patiently(&mut self.writer, frame).map_err(|e| {
            self.error = Some(e);
            TransportError::Closed
        })
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

/// A transport for real time: frames go to a writer thread, and while more than `limit` bytes wait for the
/// link, [`Transport::write_frame`] answers `WouldBlock`, so a slow link makes the agent's rings fill and drop
/// (and count) records, as on a real board, instead of slowing simulated time down.
pub struct QueuedTransport {
    queue: Option<mpsc::Sender<Vec<u8>>>,
    in_flight: Arc<AtomicUsize>,
    failed: Arc<AtomicBool>,
    limit: usize,
    writer: Option<JoinHandle<io::Result<()>>>,
    zstd: Option<ZstdSection>,
}

impl QueuedTransport {
    /// Starts the writer thread over `writer`, with at most `limit` bytes queued.
    pub fn spawn<W: Write + Send + 'static>(mut writer: W, limit: usize) -> Self {
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let handle = {
            let in_flight = Arc::clone(&in_flight);
            let failed = Arc::clone(&failed);
            std::thread::spawn(move || {
                let result = (|| {
                    while let Ok(frame) = rx.recv() {
                        write_all_patiently(&mut writer, &frame)?;
                        in_flight.fetch_sub(frame.len(), Ordering::AcqRel);
                        // Push bytes out as soon as nothing else is waiting.
                        if in_flight.load(Ordering::Acquire) == 0 {
                            writer.flush()?;
                        }
                    }
                    writer.flush()
                })();
                if result.is_err() {
                    failed.store(true, Ordering::Release);
                }
                result
            })
        };
        Self {
            queue: Some(tx),
            in_flight,
            failed,
            limit,
            writer: Some(handle),
            zstd: None,
        }
    }

    /// Compresses `Events` records with zstd at `level` (the wire allows it on TCP only).
    pub fn with_zstd(mut self, level: i32) -> io::Result<Self> {
        self.zstd = Some(ZstdSection::new(level)?);
        Ok(self)
    }

    /// Waits until everything queued is written; returns the writer's first error.
    pub fn finish(&mut self) -> io::Result<()> {
        self.queue = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the writer thread panicked")),
            None => Ok(()),
        }
    }
}

impl Transport for QueuedTransport {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(TransportError::Closed);
        }
        let queued = self.in_flight.load(Ordering::Acquire);
        if queued > 0 && queued + frame.len() > self.limit {
            return Err(TransportError::WouldBlock);
        }
        self.in_flight.fetch_add(frame.len(), Ordering::AcqRel);
        let queue = self.queue.as_ref().ok_or(TransportError::Closed)?;
        queue
            .send(frame.to_vec())
            .map_err(|_| TransportError::Closed)
    }

    fn compress(&mut self, records: &[u8]) -> Option<&[u8]> {
        self.zstd.as_mut()?.compress(records)
    }
}

impl Drop for QueuedTransport {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// `write_all`, except that a serial port's write timeout means "slow link", not "gone".
fn write_all_patiently<W: Write>(writer: &mut W, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match writer.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

/// Connects to `host:port` (blocking writes: TCP flow control paces the simulation), with a write buffer.
pub fn tcp(address: &str) -> io::Result<BufWriter<TcpStream>> {
    let mut last = None;
    for addr in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(BufWriter::with_capacity(64 << 10, stream));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address found")))
}

/// A serial port, buffered.
pub type SerialWriter = BufWriter<Box<dyn serialport::SerialPort>>;

/// Opens the serial device (or pty) at `path` at `baud`, 8N1, raw.
pub fn serial(path: &str, baud: u32) -> Result<SerialWriter, serialport::Error> {
    let port = serialport::new(path, baud)
        .timeout(Duration::from_secs(1))
        .open()?;
    Ok(BufWriter::with_capacity(4096, port))
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

/// What the collector sends back on a TCP link, read by a thread of its own while the board streams:
/// the `Refusal` frame it writes before closing a link whose session it will not store (wrong token,
/// full disk…), and whether it closed the link.
#[derive(Debug, Default)]
pub struct LinkWatch {
    state: std::sync::Mutex<LinkState>,
}

/// What [`LinkWatch`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkState {
    /// The collector refused the session: its reason (`token`, `store`, …) and message.
    pub refused: Option<(String, String)>,
    /// The collector closed the link (end of stream, or a reset).
    pub closed_by_collector: bool,
}

impl LinkWatch {
    /// Starts reading `stream` (a clone of the board's socket) on a thread of its own.
    pub fn start(stream: &TcpStream) -> io::Result<Arc<Self>> {
        let mut reader = stream.try_clone()?;
        let watch = Arc::new(Self::default());
        let seen = Arc::clone(&watch);
        std::thread::Builder::new()
            .name("socscope-sim-link".into())
            .spawn(move || {
                use std::io::Read;
                let mut got: Vec<u8> = Vec::new();
                let mut buf = [0u8; 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) if got.len() < 4096 => {
                            got.extend_from_slice(&buf[..n]);
                            let mut frame = got.clone();
                            if let Ok(r) = socscope_agent::decode_refusal(&mut frame) {
                                let refused = (r.reason.name().to_string(), r.message.to_string());
                                if let Ok(mut s) = seen.state.lock() {
                                    s.refused = Some(refused);
                                }
                            }
                        }
                        Ok(_) => {}
                    }
                }
                if let Ok(mut s) = seen.state.lock() {
                    s.closed_by_collector = true;
                }
            })?;
        Ok(watch)
    }

    /// What was seen so far.
    pub fn state(&self) -> LinkState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits up to `within` for the collector to refuse or close the link (after a write failed, what
    /// it said may still be on its way).
    pub fn settle(&self, within: Duration) -> LinkState {
        let deadline = std::time::Instant::now() + within;
        loop {
            let s = self.state();
            if s.refused.is_some() || s.closed_by_collector || std::time::Instant::now() >= deadline
            {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A writer that fails once the collector refused the session ([`LinkWatch`]): the board stops
/// streaming into a link whose data nobody stores.
pub struct Watched<W> {
    inner: W,
    watch: Arc<LinkWatch>,
}

impl<W> Watched<W> {
    /// `inner`, watched by `watch`.
    pub fn new(inner: W, watch: Arc<LinkWatch>) -> Self {
        Self { inner, watch }
    }
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some((reason, message)) = self.watch.state().refused {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("the collector refused the session ({reason}): {message}"),
            ));
        }
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Bytes written to `stream` that its peer has not acknowledged yet (the kernel's send queue,
/// `TIOCOUTQ`); `None` where that cannot be read.
pub fn unacknowledged(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int through the pointer, which points to a live c_int.
    let r = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (r == 0).then(|| queued.max(0) as u64)
}
