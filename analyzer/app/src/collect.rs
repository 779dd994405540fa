//! `socscope collect`: boards over TCP and serial ports (and `.wire` replays) into a catalog directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use serde_json::json;
use socscope_collector::serial::SerialSpec;
use socscope_collector::{IngestConfig, Notice, replay, serial, tcp};
use tokio::sync::{mpsc, watch};

use crate::out::{errln, outln};
use crate::{DEFAULT_DIR, format};

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
                "complete": r.complete, "records": r.records, "events": r.events,
                "lost_on_board": r.lost_on_board, "lost_in_transit": r.lost_in_transit,
                "dropped_frames": r.dropped_frames, "wall_seconds": r.wall_seconds,
                "trace_seconds": r.trace_seconds, "records_per_second": r.records_per_second(),
            }),
            Notice::FrameDropped { source, message } => {
                json!({"event": "frame_dropped", "source": source, "message": message})
            }
            Notice::VersionRejected { source, message } => {
                json!({"event": "version_rejected", "source": source, "message": message})
            }
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
                "session started: {board} ({source}) -> {}",
                path.display()
            ));
        }
        Notice::SessionEnded(r) => {
            let _ = crate::out::line(format_args!(
                "session ended:   {} ({}): {} records -> {} events in {:.2} s ({} records/s), {}, {} lost on board, {} lost in transit, {} frames dropped",
                r.board,
                r.source,
                r.records,
                r.events,
                r.wall_seconds,
                format::si(r.records_per_second()),
                if r.complete { "complete" } else { "incomplete" },
                r.lost_on_board,
                r.lost_in_transit,
                r.dropped_frames
            ));
        }
        Notice::FrameDropped { source, message } => errln!("warning: {source}: {message}"),
        Notice::VersionRejected { source, message } => errln!("error: {source}: {message}"),
    }
}

pub fn run(args: CollectArgs) -> Result<ExitCode> {
    // Inputs are checked before anything is created.
    for f in &args.replay {
        crate::input::require_file(f)?;
    }
    let config = IngestConfig::new(&args.dir);
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let specs: Vec<SerialSpec> = args
        .serial
        .iter()
        .map(|s| s.parse::<SerialSpec>())
        .collect::<Result<_, _>>()?;
    // Open every port before starting, so a typo fails at once.
    let mut ports = Vec::new();
    for spec in &specs {
        ports.push((spec.clone(), serial::open(spec)?));
    }
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
        if !args.no_listen {
            let listener = tcp::bind(&args.listen).await?;
            let addr = listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or(args.listen.clone());
            if args.json {
                outln!(
                    "{}",
                    json!({"event": "listening", "address": addr, "dir": args.dir})
                );
            } else {
                outln!("listening on {addr}, traces in {}", args.dir.display());
            }
            tasks.push(tokio::spawn(tcp::serve(
                listener,
                config.clone(),
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
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
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
                        if matches!(n, Notice::SessionEnded(_)) {
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
                    if !args.json { errln!("stopping: closing every open trace"); }
                    break;
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
        }
        match failure {
            Some(e) => Err(anyhow::Error::new(e)),
            None => Ok(ExitCode::SUCCESS),
        }
    })
}
