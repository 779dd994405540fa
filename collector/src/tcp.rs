//! The TCP listener: many boards at once, a trace per session, bounded memory and back-pressure.
//!
//! Each connection has a reader task and an ingest thread joined by a bounded channel: when the disk is
//! slower than the link the channel fills, the reader stops reading, and TCP flow control pushes back on
//! the board.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::intake::Intake;
use crate::session::{IngestConfig, Notice};
use crate::{CollectorError, Result};

/// Byte chunks in flight per connection (each at most [`READ_CHUNK`] bytes).
pub const CHANNEL_DEPTH: usize = 4;
/// Bytes the kernel may hold for a connection before the collector reads them (`SO_RCVBUF`).
/// Whatever TCP has acknowledged is lost if the collector dies before storing it: with the kernel's
/// autotuning that grew to several MB (over a second of data at full speed); this, the channel and
/// the commit interval keep the acknowledged-but-unstored part under 250 ms at full speed.
pub const RECV_BUFFER: usize = 256 * 1024;
/// How long a link whose session was refused stays open after the `Refusal` frame was sent, for the
/// board to read it (what the board sends meanwhile is dropped).
pub const REFUSAL_LINGER: Duration = Duration::from_secs(5);
/// Bytes read from a socket at once.
pub const READ_CHUNK: usize = 64 * 1024;

/// Binds a listener, with an error that says where.
pub async fn bind(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| CollectorError::Net {
            what: format!("cannot listen on {addr}"),
            source: e,
        })
}

/// Bounds on what the TCP side accepts, so that idle or hostile peers cannot exhaust threads and memory.
#[derive(Clone, Debug)]
pub struct ServeLimits {
    /// Connections served at once; more are accepted and closed at once, each said in a notice.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed (its session ends incomplete). Boards
    /// send a `Heartbeat` when idle, far more often than this.
    pub idle_timeout: Duration,
    /// Sessions (`Hello`s) one connection may start in any minute; more are refused and counted.
    pub max_sessions_per_minute: usize,
    /// Sessions all connections together may start in any minute (each is a trace file): bounds what
    /// a flood of short connections creates; more are refused and counted.
    pub max_new_sessions_per_minute: usize,
    /// A connection on which no session started (no accepted `Hello`: silent, garbage, wrong token)
    /// within this time is closed, so that such peers cannot hold the connection slots. Boards repeat
    /// their `Hello` every second (wire version 2).
    pub hello_timeout: Duration,
    /// Connections without a session one address may hold at once: a new connection from an address
    /// holding that many closes the oldest of them that has sent nothing for [`SILENT_AFTER`]. Peers
    /// that connect and say nothing cannot fill the slots a board needs (a board sends its `Hello` at
    /// once; a connection that sent bytes, or whose session started, is never closed to make room).
    pub max_pending_per_address: usize,
}

/// A connection that has sent nothing for this long may be closed to make room for a newcomer (see
/// [`ServeLimits::max_pending_per_address`]); a board sends its `Hello` within milliseconds.
pub const SILENT_AFTER: Duration = Duration::from_millis(500);

/// Default of [`ServeLimits::max_pending_per_address`]: a rack of boards behind one NAT address
/// reconnecting together still fits.
pub const DEFAULT_MAX_PENDING_PER_ADDRESS: usize = 16;

/// Default of [`ServeLimits::hello_timeout`].
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Default of [`ServeLimits::max_sessions_per_minute`]: a board starts one session per connection.
pub const DEFAULT_MAX_SESSIONS_PER_MINUTE: usize = 10;

/// Default of [`ServeLimits::max_new_sessions_per_minute`]: a fleet of 64 boards (the connection
/// limit) can all connect and reconnect within a minute.
pub const DEFAULT_MAX_NEW_SESSIONS_PER_MINUTE: usize = 240;

/// Default of [`ServeLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default of [`ServeLimits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_sessions_per_minute: DEFAULT_MAX_SESSIONS_PER_MINUTE,
            max_new_sessions_per_minute: DEFAULT_MAX_NEW_SESSIONS_PER_MINUTE,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            max_pending_per_address: DEFAULT_MAX_PENDING_PER_ADDRESS,
        }
    }
}

/// Accepts boards until `shutdown` turns true, then closes every session cleanly (incomplete unless the
/// board said `Bye`) and returns. Notices (sessions started and ended, drops) go to `notices`. Default
/// [`ServeLimits`].
pub async fn serve(
    listener: TcpListener,
    config: IngestConfig,
    shutdown: watch::Receiver<bool>,
    notices: mpsc::UnboundedSender<Notice>,
) -> Result<()> {
    serve_with(listener, config, ServeLimits::default(), shutdown, notices).await
}

/// [`serve`] with explicit limits.
pub async fn serve_with(
    listener: TcpListener,
    config: IngestConfig,
    limits: ServeLimits,
    mut shutdown: watch::Receiver<bool>,
    notices: mpsc::UnboundedSender<Notice>,
) -> Result<()> {
    let mut workers: Vec<Worker> = Vec::new();
    let mut refused = 0u64;
    let mut evicted = 0u64;
    let sessions = crate::session::SessionWindow::new(limits.max_new_sessions_per_minute);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    // Running out of file descriptors or a reset during accept: keep serving the others.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
                };
                workers.retain(|w| !w.task.is_finished() && !w.evicted);
                // Room is made by closing the oldest connection without a session: of this address when
                // it holds its share of them, else of any address when every slot is taken. A
                // connection whose session started is never closed for a newcomer.
                let pending_here = workers
                    .iter()
                    .filter(|w| w.peer.ip() == peer.ip() && !w.has_session())
                    .count();
                let mut victim = None;
                if pending_here >= limits.max_pending_per_address.max(1) {
                    victim = oldest_silent(&workers, Some(peer.ip()));
                }
                if victim.is_none() && workers.len() >= limits.max_connections {
                    victim = oldest_silent(&workers, None);
                }
                if let Some(k) = victim {
                    let w = &mut workers[k];
                    evicted += 1;
                    w.evicted = true;
                    let _ = w.evict.send(true);
                    let _ = notices.send(Notice::FrameDropped {
                        source: format!("tcp {}", w.peer),
                        message: format!(
                            "connection closed: no session after {:.1} s (nothing received), its slot given to a new connection (at most {} connections, {} without a session per address); {evicted} closed so far",
                            w.since.elapsed().as_secs_f64(),
                            limits.max_connections,
                            limits.max_pending_per_address
                        ),
                    });
                    workers.retain(|w| !w.evicted);
                }
                if workers.len() >= limits.max_connections {
                    refused += 1;
                    drop(stream);
                    let _ = notices.send(Notice::FrameDropped {
                        source: format!("tcp {peer}"),
                        message: format!(
                            "connection refused: {} connections open, the limit (--max-connections), none of them silent long enough to make room; {refused} refused so far",
                            workers.len()
                        ),
                    });
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let (evict, evict_rx) = watch::channel(false);
                let session_seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let heard = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let watched = Watched { shutdown: shutdown.clone(), evict: evict_rx, session_seen: session_seen.clone(), heard: heard.clone() };
                let task = spawn_connection(stream, peer, config.clone(), &limits, sessions.clone(), watched, notices.clone());
                workers.push(Worker { task, peer, since: std::time::Instant::now(), session_seen, heard, evict, evicted: false });
            }
            _ = shutdown.changed() => break,
        }
    }
    for w in workers {
        let _ = w.task.await;
    }
    Ok(())
}

/// What the accept loop and a connection's task share: the orders to stop and to close it for a
/// newcomer, and whether a session started on it and whether it sent anything.
struct Watched {
    shutdown: watch::Receiver<bool>,
    evict: watch::Receiver<bool>,
    session_seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    heard: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// One connection being served.
struct Worker {
    task: tokio::task::JoinHandle<()>,
    peer: SocketAddr,
    since: std::time::Instant,
    /// A session started on it (an accepted `Hello`).
    session_seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bytes came in on it.
    heard: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Turned true to close it for a newcomer.
    evict: watch::Sender<bool>,
    evicted: bool,
}

impl Worker {
    fn has_session(&self) -> bool {
        self.session_seen.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The connection that has sent nothing for longest, at least [`SILENT_AFTER`] (of address `ip` when
/// given).
fn oldest_silent(workers: &[Worker], ip: Option<std::net::IpAddr>) -> Option<usize> {
    workers
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            !w.has_session()
                && !w.heard.load(std::sync::atomic::Ordering::Relaxed)
                && w.since.elapsed() >= SILENT_AFTER
                && ip.is_none_or(|ip| w.peer.ip() == ip)
        })
        .min_by_key(|(_, w)| w.since)
        .map(|(k, _)| k)
}

fn spawn_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    config: IngestConfig,
    limits: &ServeLimits,
    sessions: crate::session::SessionWindow,
    watched: Watched,
    notices: mpsc::UnboundedSender<Notice>,
) -> tokio::task::JoinHandle<()> {
    let Watched {
        mut shutdown,
        mut evict,
        session_seen,
        heard,
    } = watched;
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
    // A refused session's `Refusal` frame, from the ingest thread to the socket.
    let (refuse_tx, mut refusals) = mpsc::unbounded_channel::<Vec<u8>>();
    // Best effort: a kernel that refuses keeps its own size (the loss bound then is not met, nothing
    // else changes).
    let _ = socket2::SockRef::from(&stream).set_recv_buffer_size(RECV_BUFFER);
    let source = format!("tcp {peer}");
    let (idle_timeout, sessions_per_minute, hello_timeout) = (
        limits.idle_timeout,
        limits.max_sessions_per_minute,
        limits.hello_timeout,
    );
    let seen_by_ingest = session_seen.clone();
    let ingest_notices = notices.clone();
    let ingest_thread = std::thread::Builder::new()
        .name(format!("ingest {peer}"))
        .spawn(move || {
            let mut ingest = Intake::new(config, source.clone());
            ingest.limit_sessions(sessions_per_minute);
            ingest.limit_sessions_shared(sessions);
            let forward = |ingest: &mut Intake| {
                for n in ingest.take_notices() {
                    let _ = ingest_notices.send(n);
                }
            };
            let mut failed = None;
            loop {
                // Wake up now and then so a quiet link still commits within the interval.
                let chunk = rx.blocking_recv();
                let Some(chunk) = chunk else { break };
                if let Err(e) = ingest.feed(&chunk) {
                    failed = Some(e);
                    break;
                }
                if let Some((reason, message)) = ingest.take_refusal() {
                    let mut frame = vec![0u8; 2 * socscope_wire::refusal::MAX_REFUSAL_MESSAGE + 64];
                    let refusal = socscope_wire::refusal::Refusal {
                        reason,
                        message: &message,
                    };
                    if let Ok(n) = socscope_wire::refusal::encode_refusal(&mut frame, &refusal) {
                        frame.truncate(n);
                        let _ = refuse_tx.send(frame);
                    }
                }
                if ingest.has_had_session() {
                    seen_by_ingest.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                forward(&mut ingest);
            }
            drop(rx);
            match ingest.finish() {
                Ok((_, rest)) => {
                    for n in rest {
                        let _ = ingest_notices.send(n);
                    }
                }
                Err(e) => failed = failed.or(Some(e)),
            }
            if let Some(e) = failed {
                let _ = ingest_notices.send(Notice::FrameDropped {
                    source,
                    message: format!("session stopped: {e}"),
                });
            }
        });
    tokio::spawn(async move {
        let Ok(ingest_thread) = ingest_thread else {
            return;
        };
        let (mut stream, mut answer) = stream.into_split();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut last_data = tokio::time::Instant::now();
        let connected = tokio::time::Instant::now();
        loop {
            let mut buf = vec![0u8; READ_CHUNK];
            tokio::select! {
                read = stream.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        heard.store(true, std::sync::atomic::Ordering::Relaxed);
                        buf.truncate(n);
                        // Waits while the ingest is behind: back-pressure to the board.
                        if tx.send(buf).await.is_err() { break; }
                        // Data arrived; time spent waiting for a slow disk is not the board's silence.
                        last_data = tokio::time::Instant::now();
                    }
                },
                _ = tick.tick() => {
                    if !session_seen.load(std::sync::atomic::Ordering::Relaxed)
                        && connected.elapsed() >= hello_timeout
                    {
                        let _ = notices.send(Notice::FrameDropped {
                            source: format!("tcp {peer}"),
                            message: format!(
                                "connection closed: no session started within {} s (--hello-timeout)",
                                hello_timeout.as_secs_f64()
                            ),
                        });
                        break;
                    }
                    if last_data.elapsed() >= idle_timeout {
                        let _ = notices.send(Notice::FrameDropped {
                            source: format!("tcp {peer}"),
                            message: format!(
                                "connection closed: nothing received for {} s (--idle-timeout)",
                                idle_timeout.as_secs_f64()
                            ),
                        });
                        break;
                    }
                    // An empty chunk lets a quiet session commit within the interval.
                    if tx.send(Vec::new()).await.is_err() { break; }
                }
                _ = shutdown.changed() => break,
                _ = evict.changed() => break,
                Some(frame) = refusals.recv() => {
                    // The board learns why before the link closes; what it sends meanwhile is read and
                    // dropped (closing with unread bytes would reset the link and could lose the frame).
                    let _ = answer.write_all(&frame).await;
                    let _ = answer.shutdown().await;
                    let linger = tokio::time::sleep(REFUSAL_LINGER);
                    tokio::pin!(linger);
                    let mut sink = vec![0u8; READ_CHUNK];
                    loop {
                        tokio::select! {
                            read = stream.read(&mut sink) => if matches!(read, Ok(0) | Err(_)) { break },
                            _ = &mut linger => break,
                        }
                    }
                    break;
                }
            }
        }
        drop(tx);
        let _ = tokio::task::spawn_blocking(move || ingest_thread.join()).await;
    })
}
