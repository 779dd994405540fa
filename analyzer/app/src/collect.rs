//! `socscope collect`: boards over TCP and serial ports (and `.wire` replays) into a catalog directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use serde_json::json;
use socscope_collector::naming::{printable, printable_message};
use socscope_collector::serial::SerialSpec;
use socscope_collector::{IngestConfig, Notice, probe, replay, serial, tcp};
use tokio::sync::{mpsc, watch};

use crate::DEFAULT_DIR;
use crate::out::{errln, outln};
use socscope_tracedb::units;

#[derive(clap::Args, Debug)]
pub struct CollectArgs {
    /// Address to listen on for boards over TCP (localhost unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:7070", value_name = "HOST:PORT", value_parser = crate::input::host_port)]
    pub listen: String,
    /// Do not listen on TCP (serial ports and replays only).
    #[arg(long)]
    pub no_listen: bool,
    /// A serial port to capture from, PATH[:BAUD] (default 115200 baud); repeatable.
    #[arg(long, value_name = "PATH[:BAUD]")]
    pub serial: Vec<String>,
    /// A board whose agent runs in probe mode, read through a GDB remote-protocol debug port (QEMU's
    /// `-gdb tcp::PORT`, OpenOCD, a J-Link GDB server): HOST:PORT, and @ADDRESS of the agent's control
    /// block if known (else the RAM at 0x20000000 is scanned for it); repeatable.
    #[arg(long, value_name = "HOST:PORT[@ADDRESS]")]
    pub probe: Vec<String>,
    /// A .wire capture to ingest as if it came from a board; repeatable.
    #[arg(long, value_name = "FILE")]
    pub replay: Vec<PathBuf>,
    /// Catalog directory: one trace file per session, plus catalog.db.
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Exit after this many sessions have ended (for scripted rigs).
    #[arg(long, value_name = "N")]
    pub sessions: Option<u64>,
    /// Print each event (session started or ended, dropped frame) as one JSON line.
    #[arg(long)]
    pub json: bool,
    /// Longest board/SoC/OS/application name kept from a board's Hello (longer ones are cut and counted).
    #[arg(long, value_name = "N", default_value_t = socscope_collector::DEFAULT_MAX_NAME_CHARS)]
    pub max_name_chars: usize,
    /// The most bytes one zstd-compressed Events frame may expand to; frames declaring more are dropped
    /// and counted (frames_dropped.decompress).
    #[arg(long, value_name = "BYTES", default_value_t = socscope_collector::DEFAULT_MAX_DECOMPRESSED)]
    pub max_decompressed: usize,
    /// Require this shared secret in every board's Hello (socscope-sim --token); others are refused.
    #[arg(long, value_name = "SECRET")]
    pub token: Option<String>,
    /// The same, read from FILE (its first line), so that it does not show in the process list.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Boards served at once over TCP; more connections are closed at once (and said).
    #[arg(long, value_name = "N", default_value_t = tcp::DEFAULT_MAX_CONNECTIONS, value_parser = crate::input::positive_count)]
    pub max_connections: usize,
    /// Close a TCP connection that sends nothing for this long (seconds, or 500ms, 2min; boards send
    /// heartbeats).
    #[arg(long, value_name = "SECONDS", default_value_t = tcp::DEFAULT_IDLE_TIMEOUT.as_secs_f64(), value_parser = crate::input::seconds)]
    pub idle_timeout: f64,
    /// Close a TCP connection on which no session started (no accepted Hello) within this long
    /// (seconds, or 500ms).
    #[arg(long, value_name = "SECONDS", default_value_t = tcp::DEFAULT_HELLO_TIMEOUT.as_secs_f64(), value_parser = crate::input::seconds)]
    pub hello_timeout: f64,
    /// TCP connections without a session (no accepted Hello yet) one address may hold; a new one from
    /// that address closes the oldest. At --max-connections, a newcomer closes the oldest connection
    /// without a session of any address: silent peers cannot keep boards out.
    #[arg(long, value_name = "N", default_value_t = tcp::DEFAULT_MAX_PENDING_PER_ADDRESS, value_parser = crate::input::positive_count)]
    pub max_pending_per_address: usize,
    /// Sessions one TCP connection may start per minute (each is a trace file); more are refused.
    #[arg(long, value_name = "N", default_value_t = tcp::DEFAULT_MAX_SESSIONS_PER_MINUTE, value_parser = crate::input::positive_count)]
    pub max_sessions_per_minute: usize,
    /// Sessions all TCP connections together may start per minute (each is a trace file); more are
    /// refused. Bounds the files a flood of short connections creates.
    #[arg(long, value_name = "N", default_value_t = tcp::DEFAULT_MAX_NEW_SESSIONS_PER_MINUTE, value_parser = crate::input::positive_count)]
    pub max_new_sessions_per_minute: usize,
    /// Commit live traces this often (seconds, or 100ms): readers see new events within it, and a
    /// crash of the collector loses at most about this much.
    #[arg(long, value_name = "SECONDS", default_value_t = socscope_collector::session::DEFAULT_COMMIT_INTERVAL.as_secs_f64(), value_parser = crate::input::positive_seconds)]
    pub commit_interval: f64,
    /// Bytes kept free in the directory (a hidden file, .socscope-reserve-PID-N, one per collector) so
    /// that traces can still be closed when the disk fills up; freed then, set aside again before the
    /// next session (0: none).
    #[arg(long, value_name = "BYTES", default_value_t = socscope_collector::DEFAULT_DISK_RESERVE)]
    pub disk_reserve: u64,
    /// Export each trace to this fleet dataset as its session ends (as `socscope fleet sync` would), so
    /// that a rig's dataset is always current.
    #[arg(long, value_name = "DATASET")]
    pub dataset: Option<PathBuf>,
    #[command(flatten)]
    pub rig: crate::trigger::TriggerArgs,
}

pub fn print_notice(n: &Notice, json: bool) {
    if json {
        let v = match n {
            Notice::SessionStarted {
                source,
                board,
                path,
            } => {
                json!({"event": "session_started", "source": source, "board": board, "file": path})
            }
            Notice::SessionEnded(r) => json!({
                "event": "session_ended", "source": r.source, "board": r.board, "file": r.path,
                "complete": r.complete, "interrupted": r.interrupted, "records": r.records, "events": r.events,
                "lost_on_board": r.lost_on_board, "lost_in_transit": r.lost_in_transit,
                "dropped_frames": r.dropped_frames, "wall_seconds": r.wall_seconds,
                "trace_seconds": r.trace_seconds, "records_per_second": r.records_per_second(),
                "decoded_until_seconds": r.decoded_until_seconds,
            }),
            Notice::FrameDropped { source, message } => {
                json!({"event": "frame_dropped", "source": source, "message": message})
            }
            Notice::VersionRejected { source, message } => {
                json!({"event": "version_rejected", "source": source, "message": message})
            }
            Notice::TriggerFired {
                source,
                board,
                path,
                firing,
            } => json!({
                "event": "trigger_fired", "source": source, "board": board, "file": path,
                "rule": firing.rule, "at_ns": firing.at, "start_ns": firing.start, "end_ns": firing.end,
                "who": firing.who, "value": firing.value, "detail": firing.detail,
            }),
            Notice::TriggerNote { source, message } => {
                json!({"event": "trigger_note", "source": source, "message": message})
            }
            Notice::WatchEnded(r) => json!({
                "event": "watch_ended", "source": r.source, "board": r.board, "complete": r.complete,
                "records": r.records, "lost_on_board": r.lost_on_board, "lost_in_transit": r.lost_in_transit,
                "firings": r.firings.len(), "windows_saved": r.saved, "not_saved": r.not_saved,
                "peak_ring_bytes": r.peak_ring_bytes, "trace_seconds": r.trace_seconds,
                "saver_waits": r.saver_waits, "windows_saved_inline": r.saved_inline,
            }),
        };
        // A closed standard output stops the capture loop (see `run`); the notice itself is not an error.
        let _ = crate::out::line(format_args!("{v}"));
        return;
    }
    match n {
        Notice::SessionStarted {
            source,
            board,
            path,
        } => {
            let _ = crate::out::line(format_args!(
                "session started: {} ({source}) -> {}",
                printable(board),
                path.display()
            ));
        }
        Notice::SessionEnded(r) if r.interrupted.is_some() => errln!(
            "error: session interrupted: {} ({}) -> {}: {}",
            printable(&r.board),
            r.source,
            r.path.display(),
            printable_message(r.interrupted.as_deref().unwrap_or_default())
        ),
        Notice::SessionEnded(r) => {
            let _ = crate::out::line(format_args!(
                "session ended:   {} ({}): {} records -> {} events in {:.2} s ({} records/s), {}, {} lost on board, {} lost in transit, {} frames dropped",
                printable(&r.board),
                r.source,
                r.records,
                r.events,
                r.wall_seconds,
                units::count(r.records_per_second()),
                if r.complete { "complete" } else { "incomplete" },
                r.lost_on_board,
                r.lost_in_transit,
                r.dropped_frames
            ));
        }
        Notice::FrameDropped { source, message } => {
            errln!("warning: {source}: {}", printable_message(message))
        }
        Notice::VersionRejected { source, message } => {
            errln!("error: {source}: {}", printable_message(message))
        }
        Notice::TriggerFired {
            board,
            path,
            firing,
            ..
        } => {
            let _ = crate::out::line(format_args!(
                "trigger:         {} at {} s on {}: {}{}",
                printable(&firing.rule),
                units::timestamp(firing.at),
                printable(board),
                printable(&firing.detail),
                if path.as_os_str().is_empty() {
                    String::new()
                } else {
                    format!(" -> {}", path.display())
                }
            ));
        }
        Notice::TriggerNote { source, message } => {
            let _ = crate::out::line(format_args!("{source}: {}", printable_message(message)));
        }
        Notice::WatchEnded(r) => {
            let _ = crate::out::line(format_args!(
                "session ended:   {} ({}): {} records in {:.2} s of trace, {}, {} trigger firing(s), {} window(s) saved{}, ring peak {}{}",
                printable(&r.board),
                r.source,
                r.records,
                r.trace_seconds,
                if r.complete { "complete" } else { "incomplete" },
                r.firings.len(),
                r.saved.len(),
                if r.not_saved > 0 {
                    format!(" ({} not saved: --max-saves)", r.not_saved)
                } else {
                    String::new()
                },
                units::bytes(r.peak_ring_bytes as u64),
                if r.saver_waits > 0 {
                    format!(
                        ", the stream waited {} time(s) for a window being saved",
                        r.saver_waits
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
}

/// Closes the traces of `dir` that a collector killed, crashed or stopped by a full disk left live
/// (nobody writes them now), and refreshes their catalog entries; folds in the WAL of traces closed
/// on a full disk; prints one line per trace. Removes the hidden files of imports killed before they
/// finished.
fn repair_left_live(dir: &std::path::Path, json: bool) -> Result<()> {
    for path in socscope_collector::import::remove_abandoned_imports(dir) {
        errln!(
            "note: removed {}, left by an import that was killed before it finished",
            path.display()
        );
    }
    let live = socscope_tracedb::left_live(dir)
        .with_context(|| format!("while looking for traces left live in {}", dir.display()))?;
    for path in live {
        let outcome = match crate::inspect::repair_one(
            &path,
            dir,
            "left live by a collector that stopped without closing it (killed, crashed, or the disk was full); closed when `socscope collect` started on the directory",
        ) {
            Ok(outcome) => outcome,
            Err(e) => {
                // One damaged file does not keep the collector from starting.
                errln!(
                    "warning: {} was left live and could not be repaired: {}",
                    path.display(),
                    crate::format::error_chain(&e)
                );
                continue;
            }
        };
        if json {
            let _ = crate::out::line(format_args!(
                "{}",
                json!({"event": "trace_repaired", "file": path, "outcome": outcome})
            ));
        } else {
            let _ = crate::out::line(format_args!("repaired: {} {}", path.display(), outcome));
        }
    }
    // Traces closed on a full disk keep their WAL beside them until there is room to fold it in.
    let with_wal = socscope_tracedb::left_with_wal(dir).with_context(|| {
        format!(
            "while looking for traces closed on a full disk in {}",
            dir.display()
        )
    })?;
    for path in with_wal {
        let folded = socscope_tracedb::repair(&path, "closed on a full disk")
            .map(|_| !socscope_tracedb::wal_path(&path).exists());
        match folded {
            Ok(true) if json => {
                let _ = crate::out::line(format_args!(
                    "{}",
                    json!({"event": "trace_wal_folded", "file": path})
                ));
            }
            Ok(true) => {
                let _ = crate::out::line(format_args!(
                    "folded: {} (closed on a full disk, its WAL is now in the file)",
                    path.display()
                ));
            }
            Ok(false) => errln!(
                "warning: {} still has its WAL beside it (closed on a full disk; a reader holds it, or there is no room yet): `socscope repair` folds it in later",
                path.display()
            ),
            Err(e) => errln!(
                "warning: the WAL of {} (closed on a full disk) could not be folded in: {}",
                path.display(),
                e
            ),
        }
    }
    Ok(())
}

pub fn run(args: CollectArgs) -> Result<ExitCode> {
    // Inputs are checked before anything is created.
    for f in &args.replay {
        crate::input::require_file(f)?;
    }
    let mut config = IngestConfig::new(&args.dir);
    config.max_name_chars = args.max_name_chars;
    config.max_decompressed = args.max_decompressed;
    config.disk_reserve = socscope_collector::DiskReserve::new(&args.dir, args.disk_reserve);
    config.commit_interval = std::time::Duration::try_from_secs_f64(args.commit_interval)
        .map_err(|e| anyhow::anyhow!("--commit-interval {}: {e}", args.commit_interval))?;
    config.token = match (&args.token, &args.token_file) {
        (Some(t), _) if t.is_empty() => anyhow::bail!("--token: the secret is empty"),
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            let token = text.lines().next().unwrap_or_default().trim().to_string();
            if token.is_empty() {
                anyhow::bail!("the token file {} is empty", path.display());
            }
            Some(token)
        }
        (None, None) => None,
    };
    // Closing every trace that can be open at once must fit in the reserve, or a full disk leaves
    // some of them live.
    let open_at_once = if args.no_listen {
        0
    } else {
        args.max_connections
    } + args.serial.len()
        + args.probe.len()
        + args.replay.len();
    let needed = socscope_collector::DiskReserve::needed(open_at_once);
    if args.disk_reserve > 0 && args.disk_reserve < needed {
        anyhow::bail!(
            "--disk-reserve {}: too small to close the {open_at_once} traces that can be open at once ({} connections, {} serial ports, {} probes, {} replays) on a full disk; it needs at least {needed} bytes (or lower --max-connections; 0 keeps no reserve)",
            args.disk_reserve,
            if args.no_listen {
                0
            } else {
                args.max_connections
            },
            args.serial.len(),
            args.probe.len(),
            args.replay.len()
        );
    }
    let rig = crate::trigger::setup(&args.rig, &args.dir)?;
    config.triggers = rig.triggers.clone();
    config.flight = rig.flight.clone();
    let specs: Vec<SerialSpec> = args
        .serial
        .iter()
        .map(|s| s.parse::<SerialSpec>())
        .collect::<Result<_, _>>()?;
    // Open every port and bind the listener before creating anything, so a typo, a port in use or
    // a missing device fails at once and leaves no directory behind.
    let mut ports = Vec::new();
    for spec in &specs {
        ports.push((spec.clone(), serial::open(spec)?));
    }
    let mut probes = Vec::new();
    for s in &args.probe {
        let spec = s.parse::<probe::ProbeSpec>()?;
        let port = probe::connect(&spec)?;
        probes.push((spec, port));
    }
    let std_listener = if args.no_listen {
        None
    } else {
        let l = std::net::TcpListener::bind(&args.listen)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        l.set_nonblocking(true)
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        Some(l)
    };
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    // Before any session writes: what a previous run left live is closed now, not shown as live forever.
    repair_left_live(&args.dir, args.json)?;
    // A dataset that cannot be written is said now, not after the first night's capture.
    if let Some(ds) = &args.dataset {
        crate::fleet::check_dataset(ds)?;
    }
    let exporter = args
        .dataset
        .clone()
        .map(|ds| crate::fleet::DatasetExporter::start(args.dir.clone(), ds, args.json));
    // The room to close traces on a full disk is taken before any board is accepted.
    config.disk_reserve.ensure().map_err(|source| {
        socscope_collector::CollectorError::NoRoomForReserve {
            path: config.disk_reserve.path().to_path_buf(),
            size: config.disk_reserve.size(),
            source,
        }
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let (notice_tx, mut notices) = mpsc::unbounded_channel::<Notice>();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        // External triggers: the control socket (`socscope trigger`) and SIGUSR1.
        let external = config.triggers.as_ref().map(|t| t.external.clone());
        let mut usr1 = match &external {
            Some(_) => Some(
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
                    .context("cannot watch for SIGUSR1")?,
            ),
            None => None,
        };
        if let (Some(external), Some(path)) = (&external, &rig.control) {
            let listener = socscope_collector::control::bind_control(path).await?;
            if args.json {
                outln!("{}", json!({"event": "control", "socket": path}));
            } else {
                outln!("external triggers: socscope trigger --control {} (or SIGUSR1 to pid {})", path.display(), std::process::id());
            }
            tokio::spawn(socscope_collector::control::serve_control(
                listener,
                path.clone(),
                config.token.clone(),
                external.clone(),
                shutdown_rx.clone(),
            ));
        }
        if let Some(l) = std_listener {
            let listener = tokio::net::TcpListener::from_std(l)
                .with_context(|| format!("cannot listen on {}", args.listen))?;
            let addr = listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or(args.listen.clone());
            let open_to_others = listener
                .local_addr()
                .is_ok_and(|a| !a.ip().is_loopback());
            if open_to_others && config.token.is_none() {
                errln!(
                    "warning: listening on {addr}, reachable from other hosts, without a token: anyone who can \
                     connect can store traces in {}; give the boards a secret (--token-file FILE here \
                     and on the boards)",
                    args.dir.display()
                );
            }
            if args.json {
                outln!(
                    "{}",
                    json!({"event": "listening", "address": addr, "dir": args.dir, "token_required": config.token.is_some()})
                );
            } else {
                outln!("listening on {addr}, traces in {}", args.dir.display());
            }
            let limits = tcp::ServeLimits {
                max_connections: args.max_connections,
                idle_timeout: std::time::Duration::try_from_secs_f64(args.idle_timeout)
                    .map_err(|e| anyhow::anyhow!("--idle-timeout {}: {e}", args.idle_timeout))?,
                max_sessions_per_minute: args.max_sessions_per_minute,
                max_new_sessions_per_minute: args.max_new_sessions_per_minute,
                hello_timeout: std::time::Duration::try_from_secs_f64(args.hello_timeout)
                    .map_err(|e| anyhow::anyhow!("--hello-timeout {}: {e}", args.hello_timeout))?,
                max_pending_per_address: args.max_pending_per_address,
            };
            tasks.push(tokio::spawn(tcp::serve_with(
                listener,
                config.clone(),
                limits,
                shutdown_rx.clone(),
                notice_tx.clone(),
            )));
        }
        let mut blocking = Vec::new();
        for (spec, port) in ports {
            let (config, stop, tx) = (config.clone(), stop.clone(), notice_tx.clone());
            if !args.json {
                outln!("reading serial port {} at {} baud", spec.path, spec.baud);
            }
            blocking.push(tokio::task::spawn_blocking(move || {
                serial::capture(port, &spec, config, stop, |n| {
                    let _ = tx.send(n);
                })
                .map(|_| ())
            }));
        }
        for (spec, port) in probes {
            let (config, stop, tx) = (config.clone(), stop.clone(), notice_tx.clone());
            if !args.json {
                outln!("reading a board through the debug port {}", spec.address);
            }
            blocking.push(tokio::task::spawn_blocking(move || {
                probe::capture(port, &spec, config, stop, std::time::Duration::from_millis(2), |n| {
                    let _ = tx.send(n);
                })
                .map(|_| ())
            }));
        }
        for file in args.replay.clone() {
            let (config, tx) = (config.clone(), notice_tx.clone());
            blocking.push(tokio::task::spawn_blocking(move || {
                let (_, notices) = replay::replay_file(&file, config)?;
                for n in notices {
                    let _ = tx.send(n);
                }
                Ok(())
            }));
        }
        drop(notice_tx);
        let only_replays = args.no_listen && specs.is_empty();
        let mut ended = 0u64;
        let mut cut_short = 0u64;
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        // SIGTERM (a service manager, `kill`) closes the traces as Ctrl-C does.
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("cannot watch for SIGTERM")?;
        let mut replays_done = tokio::spawn(async move {
            let mut first_error = None;
            for b in blocking {
                match b.await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => first_error = first_error.or(Some(e)),
                    Err(e) => {
                        first_error = first_error.or(Some(
                            socscope_collector::CollectorError::Invalid(e.to_string()),
                        ))
                    }
                }
            }
            first_error
        });
        let mut failure = None;
        let mut sources_done = false;
        loop {
            tokio::select! {
                n = notices.recv() => match n {
                    Some(n) => {
                        print_notice(&n, args.json);
                        // Nobody reads the notices any more (`socscope collect … | head`): stop as on Ctrl-C.
                        if crate::out::closed() { break; }
                        if let Notice::SessionEnded(r) = &n {
                            // Every finished trace goes to the dataset, a flight recorder's saved windows too.
                            if let Some(x) = &exporter { x.export(r.path.clone()); }
                            cut_short += u64::from(r.interrupted.is_some());
                        }
                        // With a flight recorder a board's session ends as a watch; its saved windows
                        // are sessions of their own that do not count.
                        let board_ended = match &n {
                            Notice::SessionEnded(_) => rig.flight.is_none(),
                            Notice::WatchEnded(_) => true,
                            _ => false,
                        };
                        if board_ended {
                            ended += 1;
                            if args.sessions.is_some_and(|limit| ended >= limit) { break; }
                        }
                    }
                    None => break,
                },
                done = &mut replays_done, if !sources_done => {
                    sources_done = true;
                    if let Ok(Some(e)) = done { failure = Some(e); }
                    if only_replays { break; }
                }
                _ = &mut ctrl_c => {
                    if !args.json { errln!("stopping (SIGINT): closing every open trace"); }
                    break;
                }
                _ = terminate.recv() => {
                    if !args.json { errln!("stopping (SIGTERM): closing every open trace"); }
                    break;
                }
                Some(_) = async { match usr1.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => {
                    if let Some(external) = &external {
                        let n = external.fire("SIGUSR1");
                        if !args.json { errln!("SIGUSR1: external trigger {n} fired on every board"); }
                    }
                }
            }
        }
        let _ = shutdown_tx.send(true);
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            if let Ok(Err(e)) = t.await {
                failure = failure.or(Some(e));
            }
        }
        if !sources_done && let Ok(Some(e)) = replays_done.await {
            failure = failure.or(Some(e));
        }
        // Sessions closed by the shutdown report here.
        while let Ok(n) = notices.try_recv() {
            print_notice(&n, args.json);
            if let Notice::SessionEnded(r) = &n {
                if let Some(x) = &exporter { x.export(r.path.clone()); }
                cut_short += u64::from(r.interrupted.is_some());
            }
        }
        if let Some(x) = exporter {
            x.finish();
        }
        match failure {
            Some(e) => Err(anyhow::Error::new(e)),
            // Traces cut short by the store (a full disk): said as they happened, and in the exit status.
            None if cut_short > 0 => {
                errln!(
                    "error: {cut_short} session(s) were cut short because their trace could not be written (see above)"
                );
                Ok(ExitCode::FAILURE)
            }
            None => Ok(ExitCode::SUCCESS),
        }
    })
}
