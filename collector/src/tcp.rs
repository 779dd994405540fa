//! The TCP listener: many boards at once, a trace per session, bounded memory and back-pressure.
//!
//! Each connection has a reader task and an ingest thread joined by a bounded channel: when the disk is
//! slower than the link the channel fills, the reader stops reading, and TCP flow control pushes back on
//! the board.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
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
}

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
    let mut workers = Vec::new();
    let mut refused = 0u64;
    let sessions = crate::session::SessionWindow::new(limits.max_new_sessions_per_minute);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    // Running out of file descriptors or a reset during accept: keep serving the others.
                    Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
                };
                workers.retain(|w: &tokio::task::JoinHandle<()>| !w.is_finished());
                if workers.len() >= limits.max_connections {
                    refused += 1;
                    drop(stream);
                    let _ = notices.send(Notice::FrameDropped {
                        source: format!("tcp {peer}"),
                        message: format!(
                            "connection refused: {} connections open, the limit (--max-connections); {refused} refused so far",
                            workers.len()
                        ),
                    });
                    continue;
                }
                let _ = stream.set_nodelay(true);
                workers.push(spawn_connection(stream, peer, config.clone(), &limits, sessions.clone(), shutdown.clone(), notices.clone()));
            }
            _ = shutdown.changed() => break,
        }
    }
    for w in workers {
        let _ = w.await;
    }
    Ok(())
}

fn spawn_connection(
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    config: IngestConfig,
    limits: &ServeLimits,
    sessions: crate::session::SessionWindow,
    mut shutdown: watch::Receiver<bool>,
    notices: mpsc::UnboundedSender<Notice>,
) -> tokio::task::JoinHandle<()> {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
    // Best effort: a kernel that refuses keeps its own size (the loss bound then is not met, nothing
    // else changes).
    let _ = socket2::SockRef::from(&stream).set_recv_buffer_size(RECV_BUFFER);
    let source = format!("tcp {peer}");
    let (idle_timeout, sessions_per_minute, hello_timeout) = (
        limits.idle_timeout,
        limits.max_sessions_per_minute,
        limits.hello_timeout,
    );
    let session_seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
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
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut last_data = tokio::time::Instant::now();
        let connected = tokio::time::Instant::now();
        loop {
            let mut buf = vec![0u8; READ_CHUNK];
            tokio::select! {
                read = stream.read(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
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
            }
        }
        drop(tx);
        let _ = tokio::task::spawn_blocking(move || ingest_thread.join()).await;
    })
}
