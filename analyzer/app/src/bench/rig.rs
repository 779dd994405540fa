//! `socscope bench rig`: the flight recorder and the triggers on the shape a rig produces — the
//! simulated set-top box at 20 k events/s, with I/O stress that makes the vsync callback late now and
//! then — replayed from one `.wire` file (a reproducible stream) through the collector:
//!
//! - ingest rate of plain `collect` (the anchor), of `collect --trigger …`, and of
//!   `collect --flight-recorder 60 --trigger …` in three shapes — every firing saved (the stress makes
//!   the rules fire for 10 s a minute: 3 windows holding 31 % of a 180 s stream, a heavy night), one
//!   window saved (`--max-saves 1`: one glitch a night) and none (`--max-saves 0`: a quiet night, the
//!   watch and the ring alone) — alternated over rounds in the same run; wall time (what the issue's
//!   ratio is) and the process's CPU time (user + system, every thread: the flight recorder saves its
//!   windows on threads of its own, so both are given);
//! - the flight recorder's memory (its ring's own accounting, peak) for 1 board and for 16 boards at once;
//! - completeness of every saved window: the events of a full capture of the same stream that lie inside
//!   the window, found in the window (same time, type, CPU);
//! - the trigger latency on a live link: a realtime simulated board over TCP, from the wall time of the
//!   record that made a rule true to the window's trace being closed and registered.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use socscope_collector::flight::FlightConfig;
use socscope_collector::trigger::{TriggerRule, TriggerSet};
use socscope_collector::{IngestConfig, Notice, replay, tcp};
use socscope_sim::{Scenario, SimConfig};
use socscope_tracedb::{Filter, TimeRange, TraceReader, units};

use super::scratch_dir;
use crate::out::outln;

const S: i64 = 1_000_000_000;

/// The rules a rig would use on this board: a state watched while open (every vsync IRQ), a periodic
/// start watched for lateness, a marker.
const RULES: [&str; 3] = [
    "state:irq@vsync>2ms",
    "gap:running@vsync-cb>25ms",
    "marker:underflow",
];

fn triggers() -> Result<TriggerSet> {
    let rules = RULES
        .iter()
        .map(|r| r.parse::<TriggerRule>().map_err(anyhow::Error::new))
        .collect::<Result<Vec<_>>>()?;
    TriggerSet::new(rules, Vec::new()).map_err(|e| anyhow::anyhow!(e))
}

fn flight(window_s: i64) -> FlightConfig {
    FlightConfig::new(window_s * S, 10 * S, 2 * S)
}

/// The modes a round replays, the anchor first: plain `collect`, the triggers alone, and the flight
/// recorder saving every window, one window, none.
const MODES: [&str; 5] = [
    "plain",
    "triggers",
    "flight",
    "flight-one-save",
    "flight-no-save",
];

/// The stream: `seconds` of the default board (20 k events/s), I/O stress for 10 s every minute.
fn write_stream(path: &Path, seconds: f64) -> Result<u64> {
    let io_stress = (0..)
        .map(|m| m as f64 * 60.0 + 40.0)
        .take_while(|at| *at + 10.0 < seconds)
        .map(|at| Scenario { at, duration: 10.0 })
        .collect();
    let config = SimConfig {
        duration_s: seconds,
        io_stress,
        ..SimConfig::default()
    };
    let mut file = socscope_sim::transport::file(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let summary = socscope_sim::run(&config, &mut file).context("the simulation")?;
    file.finish().context("flushing the stream")?;
    Ok(summary.events)
}

struct Replayed {
    seconds: f64,
    cpu_seconds: f64,
    records: u64,
    peak_ring: usize,
    windows: Vec<PathBuf>,
    firings: usize,
}

/// Replays `wire` into `dir` `boards` times at once (one stream per board, as separate connections).
fn replay(wire: &Path, dir: &Path, boards: usize, mode: &str) -> Result<Replayed> {
    let _ = std::fs::remove_dir_all(dir);
    let mut config = IngestConfig::new(dir);
    match mode {
        "plain" => {}
        "triggers" => config.triggers = Some(triggers()?),
        _ => {
            config.triggers = Some(triggers()?);
            let mut f = flight(60);
            f.max_saves = match mode {
                "flight-one-save" => Some(1),
                "flight-no-save" => Some(0),
                _ => None,
            };
            config.flight = Some(f);
        }
    }
    let flight_mode = config.flight.is_some();
    let started = Instant::now();
    let cpu_started = cpu_seconds();
    let handles: Vec<_> = (0..boards)
        .map(|_| {
            let (wire, config) = (wire.to_path_buf(), config.clone());
            std::thread::spawn(move || replay::replay_file(&wire, config))
        })
        .collect();
    let mut out = Replayed {
        seconds: 0.0,
        cpu_seconds: 0.0,
        records: 0,
        peak_ring: 0,
        windows: Vec::new(),
        firings: 0,
    };
    for h in handles {
        let (reports, notices) = h
            .join()
            .map_err(|_| anyhow::anyhow!("a replay panicked"))??;
        for n in notices {
            match n {
                Notice::WatchEnded(r) => {
                    out.records += r.records;
                    out.peak_ring = out.peak_ring.max(r.peak_ring_bytes);
                    out.firings += r.firings.len();
                }
                Notice::SessionEnded(r) if !flight_mode => out.records += r.records,
                _ => {}
            }
        }
        if flight_mode {
            out.windows.extend(reports.into_iter().map(|r| r.path));
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    out.cpu_seconds = cpu_seconds() - cpu_started;
    Ok(out)
}

/// The process's CPU time so far, user and system, all threads (`/proc/self/stat`, in the kernel's
/// fixed 100 ticks a second); 0 where it cannot be read.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces, so cut at its closing parenthesis):
    // state is field 3, utime 14, stime 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// Event counts by (time, type name, CPU).
type EventCounts = std::collections::BTreeMap<(i64, String, Option<u16>), u64>;

/// Events of `path` inside `range` (ends included), by (time, type name, CPU); variables of allocated
/// bytes left out (a running sum from the capture's start).
fn inside(path: &Path, range: TimeRange) -> Result<EventCounts> {
    let reader = TraceReader::open(path)?;
    let types: std::collections::BTreeMap<u32, String> = reader
        .event_types()?
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for e in reader.events(range, &Filter::all())? {
        let e = e?;
        let ty = types.get(&e.type_id).cloned().unwrap_or_default();
        if ty == "allocated_bytes" || e.end() > range.end || e.ts < range.start {
            continue;
        }
        *out.entry((e.ts, ty, e.cpu)).or_default() += 1;
    }
    Ok(out)
}

/// (expected, present) events over every window.
fn completeness(full: &Path, windows: &[PathBuf]) -> Result<(u64, u64)> {
    let (mut expected, mut present) = (0, 0);
    for w in windows {
        let reader = TraceReader::open(w)?;
        let stat = |name: &str| {
            reader
                .ingest_stats()
                .ok()
                .and_then(|s| s.into_iter().find(|s| s.name == name))
                .map_or(0, |s| s.value)
        };
        let range = TimeRange::new(stat("window_start_ns"), stat("window_end_ns"));
        let a = inside(full, range)?;
        let b = inside(w, range)?;
        for (k, n) in &a {
            expected += n;
            present += (*n).min(b.get(k).copied().unwrap_or(0));
        }
    }
    Ok((expected, present))
}

/// A realtime board over TCP with the flight recorder: wall seconds from each trigger's record to its
/// window saved.
fn latency(dir: &Path, seconds: f64) -> Result<Vec<f64>> {
    let _ = std::fs::remove_dir_all(dir);
    let mut config = IngestConfig::new(dir);
    config.triggers = Some(triggers()?);
    let mut f = FlightConfig::new(30 * S, 2 * S, S / 2);
    f.max_saves = None;
    config.flight = Some(f);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tcp::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let serve = tokio::spawn(tcp::serve(listener, config, stop_rx, tx));
        let sim = SimConfig {
            duration_s: seconds,
            realtime: true,
            io_stress: vec![Scenario {
                at: 3.0,
                duration: seconds - 5.0,
            }],
            ..SimConfig::default()
        };
        let board = std::thread::spawn(move || -> Result<()> {
            let stream = socscope_sim::transport::tcp(&address)?;
            let mut link = socscope_sim::transport::WriterTransport::new(stream);
            socscope_sim::run(&sim, &mut link)?;
            link.finish()?;
            Ok(())
        });
        let mut hello_at: Option<Instant> = None;
        let mut first_at: Option<i64> = None;
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(seconds + 20.0);
        loop {
            tokio::select! {
                n = rx.recv() => match n {
                    Some(Notice::TriggerNote { message, .. }) if message.starts_with("flight recorder: watching") => {
                        hello_at = Some(Instant::now());
                    }
                    Some(Notice::TriggerFired { firing, .. }) => {
                        first_at.get_or_insert(firing.at);
                    }
                    Some(Notice::SessionEnded(_)) => {
                        // A window closed: the first trigger it holds was sent at hello + at.
                        if let (Some(h), Some(at)) = (hello_at, first_at.take()) {
                            out.push(h.elapsed().as_secs_f64() - at as f64 / 1e9);
                        }
                    }
                    Some(Notice::WatchEnded(_)) | None => break,
                    Some(_) => {}
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        let _ = stop_tx.send(true);
        let _ = serve.await;
        board
            .join()
            .map_err(|_| anyhow::anyhow!("the board panicked"))??;
        Ok(out)
    })
}

fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)))
}

pub fn run(
    seconds: f64,
    boards_seconds: f64,
    rounds: usize,
    dir: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    let (dir, _tmp) = scratch_dir(dir)?;
    let wire = dir.join("rig.wire");
    let events = write_stream(&wire, seconds)?;
    let wire16 = dir.join("rig16.wire");
    write_stream(&wire16, boards_seconds)?;
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut rates: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut cpu_rates: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut saved: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut peak_1 = 0usize;
    let mut windows = Vec::new();
    let mut firings = 0;
    for round in 0..rounds {
        // Alternated so that load drifts hit every mode alike.
        let mut order = MODES;
        if round % 2 == 1 {
            order.reverse();
        }
        for mode in order {
            let r = replay(&wire, &dir.join(mode), 1, mode)?;
            rates
                .entry(mode)
                .or_default()
                .push(r.records as f64 / r.seconds);
            cpu_rates
                .entry(mode)
                .or_default()
                .push(r.records as f64 / r.cpu_seconds.max(0.01));
            saved.insert(mode, r.windows.len());
            if mode == "flight" {
                peak_1 = peak_1.max(r.peak_ring);
                windows = r.windows;
                firings = r.firings;
            }
        }
    }
    let full = dir.join("plain");
    let full_trace = socscope_tracedb::Catalog::open(&full)?
        .traces()?
        .first()
        .map(|t| full.join(&t.db_file))
        .context("the plain capture's trace")?;
    let (expected, present) = completeness(&full_trace, &windows)?;
    // 16 boards at once: plain then flight, rates summed over the boards.
    let plain16 = replay(&wire16, &dir.join("plain16"), 16, "plain")?;
    let _ = std::fs::remove_dir_all(dir.join("plain16"));
    let flight16 = replay(&wire16, &dir.join("flight16"), 16, "flight")?;
    let latencies = latency(&dir.join("latency"), 20.0)?;
    let loadavg_end = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let ratio_of = |rates: &std::collections::BTreeMap<&str, Vec<f64>>, m: &str| -> (f64, f64) {
        let (p, x) = (&rates["plain"], &rates[m]);
        let r: Vec<f64> = p.iter().zip(x).map(|(a, b)| b / a).collect();
        range(&r)
    };
    let ratio = |m: &str| ratio_of(&rates, m);
    let cpu_ratio = |m: &str| ratio_of(&cpu_rates, m);
    let others = &MODES[1..];
    let doc: Value = json!({
        "stream": {"seconds": seconds, "records": events, "rate": events as f64 / seconds},
        "rounds": rounds,
        "records_per_s": rates,
        "ratio_vs_plain": others.iter().map(|m| (m.to_string(), json!(ratio(m)))).collect::<serde_json::Map<_, _>>(),
        "records_per_cpu_s": cpu_rates,
        "cpu_ratio_vs_plain": others.iter().map(|m| (m.to_string(), json!(cpu_ratio(m)))).collect::<serde_json::Map<_, _>>(),
        "windows_saved": saved,
        "flight_ring_peak_bytes_1_board": peak_1,
        "flight_windows_saved": windows.len(),
        "flight_firings": firings,
        "completeness": {"expected": expected, "present": present},
        "boards16": {
            "seconds": boards_seconds,
            "plain_records_per_s": plain16.records as f64 / plain16.seconds,
            "flight_records_per_s": flight16.records as f64 / flight16.seconds,
            "flight_ring_peak_bytes_per_board_max": flight16.peak_ring,
            "rss_max_bytes": super::rss_max_bytes(),
        },
        "latency_s": latencies,
        "loadavg": [loadavg.trim(), loadavg_end.trim()],
    });
    if json_out {
        outln!("{doc}");
    } else {
        outln!("stream: {} s, {} records; {rounds} rounds", seconds, events);
        for m in MODES {
            outln!("records/s, {m}: {:?}", rates[m]);
        }
        for m in others {
            let (lo, hi) = ratio(m);
            let (clo, chi) = cpu_ratio(m);
            outln!(
                "{m} vs plain: {lo:.3}–{hi:.3}; per CPU second {clo:.3}–{chi:.3}; windows saved: {}",
                saved.get(m).copied().unwrap_or(0)
            );
        }
        outln!(
            "flight recorder (60 s): ring peak {} for 1 board, {} for the largest of 16; {} windows saved for {firings} firings",
            units::bytes(peak_1 as u64),
            units::bytes(flight16.peak_ring as u64),
            windows.len()
        );
        outln!(
            "completeness: {present} of {expected} events of the full capture inside the windows"
        );
        let (llo, lhi) = range(&latencies);
        outln!(
            "latency (record to window saved, post 0.5 s): {} windows, {llo:.3}–{lhi:.3} s",
            latencies.len()
        );
        outln!("loadavg: {} → {}", loadavg.trim(), loadavg_end.trim());
    }
    Ok(ExitCode::SUCCESS)
}
