//! `socscope demo`: the whole pipeline in one command — a simulated set-top box streams over TCP to the
//! collector, which writes a trace; then the trace is summarised.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use socscope_collector::{IngestConfig, Notice, SessionReport, tcp};
use socscope_sim::{Scenario, SimConfig, SimSummary};
use tokio::sync::{mpsc, watch};

use crate::collect::print_notice;
use crate::out::{errln, outln};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Run without the GUI: capture, then print the trace's summary.
    #[arg(long)]
    pub headless: bool,
    /// Simulated time (seconds, or 500ms, 2min).
    #[arg(long, default_value_t = 10.0, value_parser = crate::input::seconds)]
    pub duration: f64,
    /// Catalog directory for the demo trace.
    #[arg(long, default_value = crate::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Seed of the simulated board.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events per simulated second (default: a realistic ~20 k/s).
    #[arg(long)]
    pub rate: Option<f64>,
    /// A busy task preempts the pipeline from AT for DURATION seconds (repeatable).
    #[arg(long, value_name = "AT:DURATION")]
    pub cpu_stress: Vec<Scenario>,
    /// A dd-like writer and the journal thread delay the vsync callback (repeatable).
    #[arg(long, value_name = "AT:DURATION")]
    pub io_stress: Vec<Scenario>,
    /// Zap to another channel every SECONDS (or 500ms, 1min).
    #[arg(long, value_name = "SECONDS", value_parser = crate::input::seconds)]
    pub zap_every: Option<f64>,
    /// Pace the board to the wall clock.
    #[arg(long)]
    pub realtime: bool,
    /// The summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Everything one capture produced.
pub struct Capture {
    /// What the board sent; `None` when the capture was stopped before the board finished.
    pub sim: Option<SimSummary>,
    pub session: SessionReport,
    /// What stopped the capture early (a signal, the window closed), if anything did.
    pub stopped: Option<&'static str>,
}

/// Runs a simulated board against an in-process collector listening on loopback, and waits for its trace.
pub fn capture(config: SimConfig, dir: PathBuf, quiet: bool) -> Result<Capture> {
    capture_notifying(config, dir, quiet, None, None)
}

/// [`capture`], sending the trace's path on `started` as soon as the collector creates it (the GUI opens
/// it live). SIGINT, SIGTERM or `stop` turning true end the capture early: the collector closes the trace
/// (incomplete, one self-contained file) before this returns.
pub fn capture_notifying(
    config: SimConfig,
    dir: PathBuf,
    quiet: bool,
    started: Option<std::sync::mpsc::Sender<PathBuf>>,
    stop: Option<watch::Receiver<bool>>,
) -> Result<Capture> {
    config.validate().map_err(|e| anyhow!("{e}"))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tcp::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr().context("listener address")?;
        let (notice_tx, mut notices) = mpsc::unbounded_channel::<Notice>();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let server = tokio::spawn(tcp::serve(
            listener,
            IngestConfig::new(&dir),
            shutdown_rx,
            notice_tx,
        ));
        let board = tokio::task::spawn_blocking(move || -> Result<SimSummary> {
            let stream = socscope_sim::transport::tcp(&addr.to_string())
                .with_context(|| format!("the simulated board cannot connect to {addr}"))?;
            let mut link = socscope_sim::transport::WriterTransport::new(stream);
            let summary = socscope_sim::run(&config, &mut link)
                .map_err(|e| anyhow!("simulated board: {e}"))?;
            link.finish()
                .context("simulated board: flushing the link")?;
            Ok(summary)
        });
        let mut session = None;
        let deadline = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(deadline);
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("cannot watch for SIGTERM")?;
        let (_never_tx, never) = watch::channel(false);
        let mut stop = stop.unwrap_or(never);
        let mut stopped: Option<&'static str> = None;
        while session.is_none() {
            tokio::select! {
                _ = &mut ctrl_c, if stopped.is_none() => {
                    stopped = Some("SIGINT");
                    let _ = shutdown_tx.send(true);
                }
                _ = terminate.recv(), if stopped.is_none() => {
                    stopped = Some("SIGTERM");
                    let _ = shutdown_tx.send(true);
                }
                changed = stop.changed(), if stopped.is_none() => {
                    if changed.is_ok() && *stop.borrow() {
                        stopped = Some("the window closed");
                        let _ = shutdown_tx.send(true);
                    }
                }
                n = notices.recv() => match n {
                    Some(Notice::SessionEnded(r)) => {
                        if !quiet { print_notice(&Notice::SessionEnded(r.clone()), false); }
                        session = Some(r);
                    }
                    Some(other) => {
                        if let (Notice::SessionStarted { path, .. }, Some(tx)) = (&other, &started) {
                            let _ = tx.send(path.clone());
                        }
                        if !quiet { print_notice(&other, false) }
                    }
                    None => break,
                },
                _ = &mut deadline => bail!("no session ended within an hour"),
            }
        }
        let _ = shutdown_tx.send(true);
        server.await.context("collector task")??;
        // A board cut off by the stop fails to write: that is the stop, not an error.
        let sim = match board.await.context("simulated board task")? {
            Ok(sim) => Some(sim),
            Err(_) if stopped.is_some() => None,
            Err(e) => return Err(e),
        };
        let session = session.ok_or_else(|| match stopped {
            Some(why) => anyhow!("stopped ({why}) before the board's session started: no trace"),
            None => anyhow!("the collector ended without a session"),
        })?;
        // Closed while the window read it, the trace may still be in WAL mode: the caller folds it in
        // once nobody reads it ([`settle`]).
        Ok(Capture {
            sim,
            session,
            stopped,
        })
    })
}

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    #[cfg(not(feature = "gui"))]
    if !args.headless && !args.json {
        errln!("note: this build has no GUI (cargo feature `gui`); running the headless demo");
    }
    let config = SimConfig {
        seed: args.seed,
        duration_s: args.duration,
        rate: args.rate.unwrap_or(socscope_sim::BASE_RATE),
        zap_every_s: args.zap_every,
        cpu_stress: args.cpu_stress.clone(),
        io_stress: args.io_stress.clone(),
        realtime: args.realtime,
        board: "demo-stb",
        ..SimConfig::default()
    };
    if !args.json {
        outln!(
            "simulated set-top box: {} simulated s, seed {}, collector on 127.0.0.1, traces in {}",
            args.duration,
            args.seed,
            args.dir.display()
        );
    }
    #[cfg(feature = "gui")]
    if !args.headless && !args.json {
        match socscope_analyzer::gui::display::unavailable() {
            None => return live_gui(config, &args),
            Some(why) => errln!(
                "note: {why}, so the demo runs headless; run it from a desktop session to watch the \
                 trace grow in the GUI"
            ),
        }
    }
    let c = capture(config, args.dir.clone(), args.json)?;
    settle(&c.session.path);
    summarise(&c, &args)
}

/// Leaves the demo's trace as one self-contained file (no `-wal`/`-shm` beside it): the collector did
/// at close unless a reader (the window) held it then.
fn settle(path: &std::path::Path) {
    match socscope_tracedb::repair(path, "the demo stopped without closing its trace") {
        Ok(_) if !socscope_tracedb::wal_path(path).exists() => {}
        Ok(_) => errln!(
            "note: {} keeps its WAL beside it (another program reads it); `socscope repair` folds it in later",
            path.display()
        ),
        Err(e) => errln!("note: {e}; `socscope repair` folds the trace's WAL in later"),
    }
}

/// What the capture sent and what is in its trace.
fn summarise(c: &Capture, args: &DemoArgs) -> Result<ExitCode> {
    if !args.json {
        match (&c.sim, c.stopped) {
            (Some(sim), _) => outln!("board sent:      {sim}"),
            (None, Some(why)) => {
                outln!("stopped ({why}) before the board finished: the trace is closed, incomplete")
            }
            (None, None) => {}
        }
        outln!();
    }
    crate::inspect::info(&c.session.path, &args.dir, args.json)?;
    if !args.json {
        outln!(
            "\nnext: socscope ls --dir {}   |   socscope sql {} \"SELECT * FROM events LIMIT 20\"",
            args.dir.display(),
            c.session.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The board streams in real time in the background while the GUI shows the trace growing.
#[cfg(feature = "gui")]
fn live_gui(mut config: SimConfig, args: &DemoArgs) -> Result<ExitCode> {
    config.realtime = true;
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = args.dir.clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let capture = std::thread::Builder::new()
        .name("socscope-demo-capture".into())
        .spawn(move || capture_notifying(config, dir, true, Some(tx), Some(stop_rx)))
        .context("cannot start the capture thread")?;
    let path = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(p) => p,
        Err(_) => {
            return match capture.join() {
                Ok(Err(e)) => Err(e),
                _ => bail!("the collector created no trace within 30 s"),
            };
        }
    };
    outln!(
        "live trace: {} (the board runs in real time; close the window to stop)",
        path.display()
    );
    let mut options = crate::view::options(&crate::view::ViewArgs {
        target: path.clone(),
        view: "density".into(),
        light: false,
        size: "1280x800".into(),
        screenshot: None,
        exit_after_frames: None,
        frame_log: None,
        script: None,
        no_cpu_tracks: false,
        aggregation: "temporal".into(),
    })?;
    options.dir = Some(args.dir.clone());
    if let Err(e) = socscope_analyzer::gui::run(options) {
        // The display went away between the check and the window: the capture goes on, shown headless.
        errln!("note: {e:#}; the demo goes on headless");
        let c = capture
            .join()
            .map_err(|_| anyhow!("the capture thread panicked"))??;
        settle(&c.session.path);
        return summarise(&c, args);
    }
    // The window is closed (its button, or SIGINT/SIGTERM): a board still streaming is stopped, the
    // collector closes the trace, and — nobody reading it any more — it becomes one file.
    let _ = stop_tx.send(true);
    let c = capture
        .join()
        .map_err(|_| anyhow!("the capture thread panicked"))?;
    settle(&path);
    match c {
        Ok(c) => match (&c.sim, c.stopped) {
            (Some(sim), _) => outln!("board sent:      {sim}"),
            (None, Some(why)) => {
                outln!("stopped ({why}) before the board finished: the trace is closed, incomplete")
            }
            (None, None) => {}
        },
        Err(e) => return Err(e),
    }
    Ok(ExitCode::SUCCESS)
}
