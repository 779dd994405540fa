//! The shared harness of the end-to-end tests: an in-process collector on a loopback port, simulated boards
//! on threads, capture files and their frame-by-frame inventory, and the trace-side numbers to compare.
//!
//! Each test file uses a different part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use socscope_collector::{IngestConfig, Notice, SessionReport, tcp};
use socscope_sim::transport::{QueuedTransport, WriterTransport};
use socscope_sim::{SimConfig, SimSummary};
use socscope_tracedb::{Catalog, Filter, TimeRange, TraceReader, TypeId};
use socscope_wire::WIRE_VERSION;
use socscope_wire::decode::{Frame, StreamDecoder};
use socscope_wire::dict::Builtin;
use tokio::sync::{mpsc, watch};

/// How long a test waits for sessions before it fails (generous: debug builds on a loaded 2-core box).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// A collector listening on `127.0.0.1:<free port>`, writing into a temporary catalog directory.
pub struct Collector {
    runtime: tokio::runtime::Runtime,
    address: SocketAddr,
    dir: tempfile::TempDir,
    notices: mpsc::UnboundedReceiver<Notice>,
    shutdown: watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<socscope_collector::Result<()>>>,
    seen: Vec<Notice>,
}

impl Collector {
    /// Binds, starts serving, and returns at once.
    pub fn start() -> Self {
        Self::start_in(tempfile::tempdir().expect("a temporary directory"))
    }

    /// The same, writing into `dir` (e.g. a directory with a small file system mounted on it).
    pub fn start_in(dir: tempfile::TempDir) -> Self {
        Self::start_with(dir, tcp::ServeLimits::default())
    }

    /// The same, with explicit TCP limits.
    pub fn start_with(dir: tempfile::TempDir, limits: tcp::ServeLimits) -> Self {
        let config = IngestConfig::new(dir.path());
        Self::start_configured(dir, config, limits)
    }

    /// The same, with an explicit ingest configuration (its `dir` should be `dir`).
    pub fn start_configured(
        dir: tempfile::TempDir,
        config: IngestConfig,
        limits: tcp::ServeLimits,
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (address, server) = runtime.block_on(async {
            let listener = tcp::bind("127.0.0.1:0").await.expect("bind on loopback");
            let address = listener.local_addr().expect("the listener's address");
            let server = tokio::spawn(tcp::serve_with(
                listener,
                config,
                limits,
                shutdown_rx,
                notice_tx,
            ));
            (address, server)
        });
        Self {
            runtime,
            address,
            dir,
            notices,
            shutdown,
            server: Some(server),
            seen: Vec::new(),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// The catalog directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Waits until `n` sessions have ended in total (counting earlier calls), or panics after
    /// [`SESSION_TIMEOUT`]; returns every report so far, in the order they ended.
    pub fn wait_sessions(&mut self, n: usize) -> Vec<SessionReport> {
        let deadline = tokio::time::Instant::now() + SESSION_TIMEOUT;
        while self.reports().len() < n {
            let next = self
                .runtime
                .block_on(async { tokio::time::timeout_at(deadline, self.notices.recv()).await });
            match next {
                Ok(Some(notice)) => self.seen.push(notice),
                Ok(None) => panic!("the collector stopped before {n} sessions ended"),
                Err(_) => panic!(
                    "only {} of {n} sessions ended within {SESSION_TIMEOUT:?}; notices: {:#?}",
                    self.reports().len(),
                    self.seen
                ),
            }
        }
        self.reports()
    }

    /// Waits for the `n`-th session start (counting from 1) and returns its trace file.
    pub fn wait_started(&mut self, n: usize) -> PathBuf {
        let deadline = tokio::time::Instant::now() + SESSION_TIMEOUT;
        loop {
            let started: Vec<PathBuf> = self
                .seen
                .iter()
                .filter_map(|n| match n {
                    Notice::SessionStarted { path, .. } => Some(path.clone()),
                    _ => None,
                })
                .collect();
            if let Some(path) = started.get(n - 1) {
                return path.clone();
            }
            let next = self
                .runtime
                .block_on(async { tokio::time::timeout_at(deadline, self.notices.recv()).await });
            match next {
                Ok(Some(notice)) => self.seen.push(notice),
                _ => panic!("session {n} did not start; notices: {:#?}", self.seen),
            }
        }
    }

    /// Takes in the notices sent so far without waiting.
    pub fn poll(&mut self) {
        while let Ok(n) = self.notices.try_recv() {
            self.seen.push(n);
        }
    }

    /// The reports among the notices received so far.
    pub fn reports(&self) -> Vec<SessionReport> {
        self.seen
            .iter()
            .filter_map(|n| match n {
                Notice::SessionEnded(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every notice received so far.
    pub fn notices(&self) -> &[Notice] {
        &self.seen
    }

    /// Shuts the server down (closing open sessions) and returns every notice it ever sent.
    pub fn stop(mut self) -> Vec<Notice> {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            self.runtime
                .block_on(async { tokio::time::timeout(SESSION_TIMEOUT, server).await })
                .expect("the server stops within the timeout")
                .expect("the server task does not panic")
                .expect("the server ends without error");
        }
        while let Ok(n) = self.notices.try_recv() {
            self.seen.push(n);
        }
        std::mem::take(&mut self.seen)
    }
}

/// Runs a simulated board on a thread, streaming to `address` over TCP; joins to its summary.
pub fn sim_over_tcp(config: SimConfig, address: String) -> JoinHandle<SimSummary> {
    std::thread::spawn(move || {
        let stream = socscope_sim::transport::tcp(&address).expect("the board connects");
        let mut link = WriterTransport::new(stream);
        let summary = socscope_sim::run(&config, &mut link).expect("the simulation runs");
        link.finish().expect("the link flushes");
        summary
    })
}

/// Runs a real-time board on a thread as the `socscope-sim` program does: frames go through a queue to the
/// socket and are pushed out as soon as the queue is empty.
pub fn realtime_sim_over_tcp(config: SimConfig, address: String) -> JoinHandle<SimSummary> {
    assert!(config.realtime);
    std::thread::spawn(move || {
        let stream = socscope_sim::transport::tcp(&address).expect("the board connects");
        let mut link = QueuedTransport::spawn(stream, 256 << 10);
        let summary = socscope_sim::run(&config, &mut link).expect("the simulation runs");
        link.finish().expect("the link flushes");
        summary
    })
}

/// Writes a simulated board's stream into a capture file.
pub fn capture_file(config: &SimConfig, path: &Path) -> SimSummary {
    let mut file = socscope_sim::transport::file(path).expect("the capture file is created");
    let summary = socscope_sim::run(config, &mut file).expect("the simulation runs");
    file.finish().expect("the capture file is flushed");
    summary
}

/// A trace's `ingest_stat` rows as a map.
pub fn ingest_stats(reader: &TraceReader) -> BTreeMap<String, i64> {
    reader
        .ingest_stats()
        .expect("ingest statistics")
        .into_iter()
        .map(|s| (s.name, s.value))
        .collect()
}

/// The `records.<type>` rows of `stats`, by wire type name.
pub fn records_by_type(stats: &BTreeMap<String, i64>) -> BTreeMap<String, u64> {
    stats
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("records.")?.to_string(), *v as u64)))
        .collect()
}

/// A sim summary's per-type counts (named as the collector names them) (types never recorded left out, as the
/// collector writes no row for them).
pub fn expected_records_by_type(summary: &SimSummary) -> BTreeMap<String, u64> {
    summary
        .per_type
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(m, n)| (m.to_string(), *n))
        .collect()
}

/// Asserts that a trace holds exactly what a board sent: raw record counts, per type, no loss.
pub fn assert_exact_counts(path: &Path, summary: &SimSummary) {
    let reader = TraceReader::open(path).expect("the trace opens");
    let stats = ingest_stats(&reader);
    assert_eq!(
        stats["records"], summary.events as i64,
        "records in {path:?}"
    );
    assert_eq!(
        records_by_type(&stats),
        expected_records_by_type(summary),
        "records per type in {path:?}"
    );
    assert_eq!(summary.dropped, 0, "the sim dropped nothing");
    assert_eq!(stats["records_lost_on_board"], summary.dropped as i64);
    assert_eq!(stats["records_lost_in_transit"], 0);
    assert_eq!(stats["frames_dropped"], 0);
    assert_eq!(stats["board_records"], summary.events as i64);
    assert_eq!(stats["board_dropped"], summary.dropped as i64);
    assert!(reader.losses().expect("losses").is_empty());
}

/// Events of one store type in the whole trace.
pub fn count_type(reader: &TraceReader, type_id: TypeId) -> u64 {
    reader
        .count(TimeRange::all(), &Filter::all().types([type_id]))
        .expect("a count")
}

/// The store type id of a built-in wire type.
pub fn store_type(b: Builtin) -> TypeId {
    TypeId::from(b.id())
}

/// One frame of a capture, as the decoder saw it.
#[derive(Clone, Debug)]
pub struct FrameInfo {
    /// Stream offset of its first byte.
    pub offset: usize,
    /// Encoded length, delimiter included.
    pub len: usize,
    /// `Hello`, `Events`, ...
    pub kind: &'static str,
    /// The CPU of an `Events` frame.
    pub cpu: Option<u16>,
    /// Records in an `Events` frame, per wire type id.
    pub records: BTreeMap<u16, u64>,
}

impl FrameInfo {
    /// Records in the frame.
    pub fn record_count(&self) -> u64 {
        self.records.values().sum()
    }

    /// The encoded bytes, delimiter excluded.
    pub fn body(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len - 1
    }
}

/// Decodes a clean stream into its frames; panics on any drop (the stream is supposed to be intact).
pub fn inventory(bytes: &[u8]) -> Vec<FrameInfo> {
    let mut decoder = StreamDecoder::new(&[WIRE_VERSION]);
    decoder.feed(bytes);
    let mut frames = Vec::new();
    while let Some(next) = decoder.next_frame() {
        let d = next.expect("the capture decodes cleanly");
        let (kind, cpu, records) = match &d.frame {
            Frame::Hello(_) => ("Hello", None, BTreeMap::new()),
            Frame::Dictionary(_) => ("Dictionary", None, BTreeMap::new()),
            Frame::Events(batch) => {
                let mut records = BTreeMap::new();
                for r in batch.iter() {
                    *records.entry(r.type_id()).or_insert(0) += 1;
                }
                ("Events", Some(batch.cpu), records)
            }
            Frame::Loss(_) => ("Loss", None, BTreeMap::new()),
            Frame::Heartbeat(_) => ("Heartbeat", None, BTreeMap::new()),
            Frame::Bye(_) => ("Bye", None, BTreeMap::new()),
            Frame::CpuTotal(t) => ("CpuTotal", Some(t.cpu), BTreeMap::new()),
            Frame::Window(w) => ("Window", Some(w.cpu), BTreeMap::new()),
        };
        frames.push(FrameInfo {
            offset: d.offset as usize,
            len: d.len,
            kind,
            cpu,
            records,
        });
    }
    assert!(
        decoder.finish().is_none(),
        "the capture ends on a frame boundary"
    );
    frames
}

/// Records decoded from a stream that may be cut or corrupt, as any decoder sees them: the number a
/// collector fed the same bytes must store.
pub fn decodable_records(bytes: &[u8]) -> u64 {
    let mut decoder = StreamDecoder::new(&[WIRE_VERSION]);
    decoder.feed(bytes);
    let mut n = 0;
    while let Some(next) = decoder.next_frame() {
        if let Ok(d) = next
            && let Frame::Events(batch) = d.frame
        {
            n += batch.len() as u64;
        }
    }
    n
}

/// The one trace file of a catalog directory.
pub fn only_trace(dir: &Path) -> PathBuf {
    let catalog = Catalog::open(dir).expect("the catalog opens");
    let traces = catalog.traces().expect("the catalog lists traces");
    assert_eq!(traces.len(), 1, "one trace in {dir:?}");
    catalog.resolve(&traces[0])
}

/// A `Hello` frame (unframed) of `board` running `application`, session `session_id`: one CPU, a
/// 1 MHz tick, no token.
pub fn hello(board: &str, application: &str, session_id: u64) -> Vec<u8> {
    let mut frame = vec![0u8; board.len() + application.len() + 512];
    let n = socscope_wire::encode::encode_hello(
        &mut frame,
        &socscope_wire::frame::Hello {
            wire_version: WIRE_VERSION,
            agent_version: "1",
            board,
            soc: "soc",
            os: "linux",
            application,
            cpu_count: 1,
            tick_rate_hz: 1_000_000,
            session_id,
            start_ticks: 0,
            token: "",
        },
    )
    .expect("the encoder takes it");
    frame.truncate(n);
    frame
}
