//! `socscope bench import`: text importers on generated gigabytes — parse alone (records discarded)
//! and the whole import (parse, state reconstruction, store).
//!
//! The ftrace file is the real capture `shared/data/traces/ftrace/tci-ftrace_syscalls.txt` (or the file
//! given) copied end to end, each copy shifted in time so that timestamps keep increasing; the KPTrace
//! capture is generated: per-CPU relay files (256 KiB sub-buffers with their padding words) of a
//! realistic mnemonic mix, with a `System.map`. The GStreamer tracer log is the real log
//! `collector/tests/data/gst/audiotestsrc-queue-stats.log` (latency, rusage and stats tracers) copied
//! the same way (line times and the records' `ts` fields shifted).

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use socscope_collector::import::{ImportOptions, import};
use socscope_formats::{Format, ftrace, gst, kptrace};

use crate::out::outln;
use socscope_tracedb::units;

/// Where the shared traces live, relative to the repository root's parent.
const SAMPLE: &str = "shared/data/traces/ftrace/tci-ftrace_syscalls.txt";

/// The targets of issue 4.
const TARGET_PARSE_MB_PER_S: f64 = 100.0;
const TARGET_STORED_EVENTS_PER_S: f64 = 1_000_000.0;

/// The real GStreamer tracer log, relative to the repository root.
const GST_SAMPLE: &str = "collector/tests/data/gst/audiotestsrc-queue-stats.log";

/// Writes copies of the GStreamer log `sample`, shifted in time (line times and `ts=` fields), until
/// `bytes` are written.
fn generate_gst(sample: &Path, out: &Path, bytes: u64) -> Result<u64> {
    let text =
        std::fs::read_to_string(sample).with_context(|| format!("reading {}", sample.display()))?;
    let lines: Vec<(i64, &str)> = text
        .lines()
        .filter_map(|l| {
            let r = gst::parse_line(l).ok()?;
            let (_, rest) = l.split_once(' ')?;
            Some((r.ts, rest))
        })
        .collect();
    if lines.is_empty() {
        bail!("{} holds no GStreamer log line", sample.display());
    }
    let last = lines.iter().map(|l| l.0).max().unwrap_or(0);
    let period = (last + 1_000_000) / 1000 * 1000;
    let mut w = BufWriter::with_capacity(
        1 << 20,
        File::create(out).with_context(|| format!("creating {}", out.display()))?,
    );
    let mut written = 0u64;
    let mut copy = 0i64;
    let mut buf = String::with_capacity(512);
    while written < bytes {
        let shift = copy * period;
        for (ts, rest) in &lines {
            use std::fmt::Write as _;
            let t = ts + shift;
            buf.clear();
            let _ = write!(
                buf,
                "{}:{:02}:{:02}.{:09} ",
                t / 3_600_000_000_000,
                t / 60_000_000_000 % 60,
                t / 1_000_000_000 % 60,
                t % 1_000_000_000
            );
            // The tracer records' own times move with the lines.
            let mut rest: &str = rest;
            while let Some(at) = rest.find("ts=(guint64)") {
                let (head, tail) = rest.split_at(at + "ts=(guint64)".len());
                buf.push_str(head);
                let end = tail
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(tail.len());
                let v: i64 = tail[..end].parse().unwrap_or(0);
                let _ = write!(buf, "{}", v + shift);
                rest = &tail[end..];
            }
            buf.push_str(rest);
            buf.push('\n');
            w.write_all(buf.as_bytes())?;
            written += buf.len() as u64;
        }
        copy += 1;
    }
    w.flush()?;
    Ok(written)
}

/// Parse only: every GStreamer line read (tracer structures too) and dropped.
fn parse_gst(path: &Path) -> Result<(u64, u64, u64)> {
    let f = File::open(path)?;
    let mut r = gst::GstReader::new(BufReader::with_capacity(256 * 1024, f), "bench");
    let (mut records, mut bad) = (0u64, 0u64);
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                if let Some(s) = rec.tracer() {
                    std::hint::black_box(&s);
                }
                std::hint::black_box(&rec);
                records += 1;
            }
            Ok(None) => break,
            Err(socscope_formats::FormatError::Parse(_)) => bad += 1,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((r.bytes(), records, bad))
}

/// The real ftrace sample: `--ftrace-sample`, else `shared/data/traces/...` found above the executable
/// or above this crate's sources.
fn locate_sample(given: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        crate::input::require_file(&p)?;
        return Ok(p);
    }
    if let Some(p) = super::find_above(SAMPLE, Path::is_file) {
        return Ok(p);
    }
    bail!(
        "cannot find the real ftrace capture `{SAMPLE}` above the executable or above {}; \
         give it with --ftrace-sample PATH (the benchmark uses no other input)",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// One event line of the sample, split around its timestamp.
struct SampleLine {
    before: String,
    ts: i64,
    after: String,
}

/// Event lines of `text` with their timestamps located (header and unparsable lines are dropped).
fn sample_lines(text: &str) -> Vec<SampleLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(r) = ftrace::parse_line(line) else {
            continue;
        };
        // The timestamp is the first `SEC.FRAC:` word after the CPU column that parses to `r.ts`.
        let cpu_col = format!("[{:03}]", r.cpu);
        let from = line.find(&cpu_col).map_or(0, |i| i + cpu_col.len());
        let mut pos = from;
        let mut found = None;
        for word in line[from..].split(' ') {
            if let Some(t) = word.strip_suffix(':')
                && let Some((s, f)) = t.split_once('.')
                && !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && f.bytes().all(|b| b.is_ascii_digit())
                && s.parse::<i64>().ok().zip(f.parse::<i64>().ok()).is_some()
            {
                found = Some((pos, pos + t.len()));
                break;
            }
            pos += word.len() + 1;
        }
        let Some((a, b)) = found else { continue };
        out.push(SampleLine {
            before: line[..a].to_string(),
            ts: r.ts,
            after: line[b..].to_string(),
        });
    }
    out
}

/// Writes copies of the sample's event lines, shifted in time, until `bytes` are written.
fn generate_ftrace(sample: &Path, out: &Path, bytes: u64) -> Result<u64> {
    let text =
        std::fs::read_to_string(sample).with_context(|| format!("reading {}", sample.display()))?;
    let lines = sample_lines(&text);
    if lines.is_empty() {
        bail!("{} holds no ftrace event line", sample.display());
    }
    let first = lines.iter().map(|l| l.ts).min().unwrap_or(0);
    let last = lines.iter().map(|l| l.ts).max().unwrap_or(0);
    // Copies follow each other 1 ms apart, on microsecond boundaries.
    let period = (last - first + 1_000_000 + 999) / 1000 * 1000;
    let mut w = BufWriter::with_capacity(
        1 << 20,
        File::create(out).with_context(|| format!("creating {}", out.display()))?,
    );
    let mut written = 0u64;
    let mut copy = 0i64;
    let mut buf = String::with_capacity(256);
    while written < bytes {
        for l in &lines {
            use std::fmt::Write as _;
            let ts = l.ts + copy * period;
            buf.clear();
            let _ = writeln!(
                buf,
                "{}{}.{:06}{}",
                l.before,
                ts / 1_000_000_000,
                (ts % 1_000_000_000) / 1000,
                l.after
            );
            w.write_all(buf.as_bytes())?;
            written += buf.len() as u64;
        }
        copy += 1;
    }
    w.flush()?;
    Ok(written)
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SYSCALLS: [(u64, &str); 8] = [
    (0xc001_2340, "sys_read"),
    (0xc001_2400, "sys_write"),
    (0xc001_2480, "sys_ioctl"),
    (0xc001_2500, "sys_poll"),
    (0xc001_2580, "sys_futex"),
    (0xc001_2600, "sys_nanosleep"),
    (0xc001_2680, "sys_mmap2"),
    (0xc001_2700, "sys_gettimeofday"),
];

/// One CPU's relay file: sub-buffers of [`kptrace::SUBBUF_SIZE`] bytes, each a padding count, whole
/// lines and zero padding.
struct RelayWriter {
    out: BufWriter<File>,
    sub: Vec<u8>,
    /// Text bytes written (what the parser reads).
    text: u64,
}

impl RelayWriter {
    fn line(&mut self, line: &[u8]) -> Result<()> {
        if self.sub.len() + line.len() > kptrace::SUBBUF_SIZE - 4 {
            self.flush_sub()?;
        }
        self.sub.extend_from_slice(line);
        self.text += line.len() as u64;
        Ok(())
    }
    fn flush_sub(&mut self) -> Result<()> {
        let pad = kptrace::SUBBUF_SIZE - 4 - self.sub.len();
        self.out.write_all(&(pad as u32).to_le_bytes())?;
        self.out.write_all(&self.sub)?;
        self.out.write_all(&vec![0u8; pad])?;
        self.sub.clear();
        Ok(())
    }
}

/// Writes `cpus` per-CPU KPTrace relay files and a `System.map` into `dir`, about `bytes` of text in
/// all; returns the files (map first) and the text bytes.
fn generate_kptrace(dir: &Path, cpus: u16, bytes: u64) -> Result<(Vec<PathBuf>, u64)> {
    use std::fmt::Write as _;
    let map = dir.join("System.map");
    let mut m = String::new();
    for (addr, name) in SYSCALLS {
        let _ = writeln!(m, "{addr:08x} T {name}");
    }
    let _ = writeln!(m, "c0100000 T do_softirq_timer");
    let _ = writeln!(m, "c0100080 T net_rx_action");
    std::fs::write(&map, m)?;
    let mut files = vec![map];
    let mut total = 0u64;
    for cpu in 0..cpus {
        let path = dir.join(format!("trace{cpu}"));
        let mut w = RelayWriter {
            out: BufWriter::with_capacity(1 << 20, File::create(&path)?),
            sub: Vec::with_capacity(kptrace::SUBBUF_SIZE),
            text: 0,
        };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((u64::from(cpu) + 1) * 0x1234_5678));
        let mut ts: u64 = 1_000_000 + u64::from(cpu) * 7; // microseconds
        let pids: Vec<u64> = (0..12).map(|i| 100 + u64::from(cpu) * 100 + i).collect();
        let mut pid = pids[0];
        let mut live: Vec<u64> = Vec::new();
        let mut line = String::with_capacity(128);
        let target = bytes / u64::from(cpus);
        while w.text < target {
            let mut emit =
                |w: &mut RelayWriter, ts: &mut u64, pid: u64, body: std::fmt::Arguments| {
                    *ts += 1 + rng_step(*ts);
                    line.clear();
                    let _ = writeln!(
                        line,
                        "{}.{:06} {pid} {body}",
                        *ts / 1_000_000,
                        *ts % 1_000_000
                    );
                    w.line(line.as_bytes())
                };
            let r = rng.below(100);
            match r {
                0..40 => {
                    let (addr, _) = SYSCALLS[rng.below(SYSCALLS.len() as u64) as usize];
                    let (a0, a1, a2) = (rng.below(16), rng.next() >> 40, rng.below(4096));
                    emit(
                        &mut w,
                        &mut ts,
                        pid,
                        format_args!("E {addr:08x} {a0:x} {a1:x} {a2:x} 0"),
                    )?;
                    if rng.below(5) == 0 {
                        let irq = 20 + rng.below(8);
                        emit(&mut w, &mut ts, pid, format_args!("I {irq}"))?;
                        emit(&mut w, &mut ts, pid, format_args!("i"))?;
                    }
                    let ret = rng.below(512) as i64 - 8;
                    emit(&mut w, &mut ts, pid, format_args!("X {addr:08x} {ret}"))?;
                }
                40..55 => {
                    let irq = 20 + rng.below(8);
                    emit(&mut w, &mut ts, pid, format_args!("I {irq}"))?;
                    emit(&mut w, &mut ts, pid, format_args!("i"))?;
                    if rng.below(2) == 0 {
                        emit(&mut w, &mut ts, pid, format_args!("S c0100000"))?;
                        emit(&mut w, &mut ts, pid, format_args!("s"))?;
                    }
                }
                55..63 => {
                    emit(&mut w, &mut ts, pid, format_args!("S c0100080"))?;
                    emit(&mut w, &mut ts, pid, format_args!("s"))?;
                }
                63..73 => {
                    if live.len() > 32 || (!live.is_empty() && rng.below(2) == 0) {
                        let p = live.swap_remove(rng.below(live.len() as u64) as usize);
                        emit(&mut w, &mut ts, pid, format_args!("MF {p:08x}"))?;
                    } else {
                        let p = 0xc800_0000 + (rng.next() >> 40) * 16;
                        live.push(p);
                        let size = 16 << rng.below(8);
                        emit(&mut w, &mut ts, pid, format_args!("MM {p:08x} {size}"))?;
                    }
                }
                73..85 => {
                    let next = pids[rng.below(pids.len() as u64) as usize];
                    emit(&mut w, &mut ts, pid, format_args!("W {next}"))?;
                    if next != pid {
                        emit(&mut w, &mut ts, pid, format_args!("C {pid} {next}"))?;
                        pid = next;
                    }
                }
                85..95 => {
                    let pc = 0x0040_0000 + rng.below(4096) * 4;
                    emit(
                        &mut w,
                        &mut ts,
                        pid,
                        format_args!("U {pc:08x} 1 2 {:x} 0", rng.below(99)),
                    )?;
                    emit(&mut w, &mut ts, pid, format_args!("u 0 {:08x}", pc + 64))?;
                }
                _ => {
                    let frame = rng.below(100_000);
                    emit(
                        &mut w,
                        &mut ts,
                        pid,
                        format_args!("K decoder: frame {frame} ready"),
                    )?;
                }
            }
        }
        if !w.sub.is_empty() {
            w.flush_sub()?;
        }
        w.out.flush()?;
        total += w.text;
        files.push(path);
    }
    Ok((files, total))
}

/// 0 to 2 extra microseconds, varying with the time (no generator borrow inside the closure).
fn rng_step(ts: u64) -> u64 {
    (ts.wrapping_mul(0x9e37_79b9) >> 20) % 3
}

fn on_disk(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| std::fs::metadata(format!("{}{s}", path.display())).map_or(0, |m| m.len()))
        .sum()
}

/// Parse only: every record read and dropped.
fn parse_ftrace(path: &Path) -> Result<(u64, u64, u64)> {
    let f = File::open(path)?;
    let mut r = ftrace::FtraceReader::new(BufReader::with_capacity(256 * 1024, f), "bench");
    let (mut records, mut bad) = (0u64, 0u64);
    loop {
        match r.next_line() {
            Ok(Some(ftrace::Line::Record(rec))) => {
                std::hint::black_box(&rec);
                records += 1;
            }
            Ok(Some(ftrace::Line::Header | ftrace::Line::StackFrame(_))) => {}
            Ok(None) => break,
            Err(socscope_formats::FormatError::Parse(_)) => bad += 1,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((r.bytes(), records, bad))
}

fn parse_kptrace(files: &[PathBuf]) -> Result<(u64, u64, u64)> {
    let mut sources = Vec::new();
    for (cpu, f) in files.iter().skip(1).enumerate() {
        let reader =
            BufReader::with_capacity(256 * 1024, kptrace::RelayReader::new(File::open(f)?));
        sources.push((cpu as u16, reader, f.display().to_string()));
    }
    let mut merge = kptrace::KptraceMerge::new(sources, None);
    let (mut records, mut bad) = (0u64, 0u64);
    loop {
        match merge.next_record() {
            Ok(Some(rec)) => {
                std::hint::black_box(&rec);
                records += 1;
                merge.recycle(rec);
            }
            Ok(None) => break,
            Err(socscope_formats::FormatError::Parse(_)) => bad += 1,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((merge.bytes(), records, bad))
}

/// On-CPU time of this thread so far, in seconds (`/proc/thread-self/schedstat`; 0 where unavailable).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// User + system time of the whole process so far (every thread, ended ones too), in seconds
/// (`/proc/self/stat`, in clock ticks of 1/100 s, the Linux user ABI's `USER_HZ`; 0 where
/// unavailable). The machine is shared, so rates per CPU second are given beside the wall-clock ones;
/// the ftrace import parses on a second thread, which the importing thread's own time would miss.
fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces, inside parentheses): state is the
    // first, utime the 12th, stime the 13th.
    let Some(after) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Parse alone, then the whole import into a trace; one JSON object of the numbers.
fn measure(
    name: &str,
    files: &[PathBuf],
    format: Format,
    out: &Path,
    parse: impl FnOnce() -> Result<(u64, u64, u64)>,
) -> Result<Value> {
    let (t, c) = (Instant::now(), thread_cpu_s());
    let (bytes, records, bad) = parse()?;
    let parse_s = t.elapsed().as_secs_f64();
    let parse_cpu_s = thread_cpu_s() - c;
    if bad > 0 {
        bail!("{name}: the generated file has {bad} lines the parser rejects");
    }
    let mut skipped = 0u64;
    let mut on_skip = |_: &socscope_formats::ParseError, n: u64| skipped = n;
    let mut on_progress = |_: u64| {};
    let mut opts = ImportOptions {
        strict: false,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    let (t, c, tc) = (Instant::now(), process_cpu_s(), thread_cpu_s());
    let report = import(files, format, out, &mut opts)
        .with_context(|| format!("importing the generated {name} capture"))?;
    let import_s = t.elapsed().as_secs_f64();
    let import_cpu_s = process_cpu_s() - c;
    let import_thread_cpu_s = thread_cpu_s() - tc;
    let stored = report.info.event_count;
    Ok(json!({
        "bytes": bytes,
        "records": records,
        "parse_s": parse_s,
        "parse_mb_per_s": bytes as f64 / 1e6 / parse_s,
        "parse_records_per_s": records as f64 / parse_s,
        "parse_cpu_s": parse_cpu_s,
        "parse_mb_per_cpu_s": bytes as f64 / 1e6 / parse_cpu_s,
        "import_s": import_s,
        "import_mb_per_s": report.bytes as f64 / 1e6 / import_s,
        "import_records": report.records,
        "lines_skipped": report.lines_skipped + skipped,
        "stored_events": stored,
        "stored_events_per_s": stored as f64 / import_s,
        "import_cpu_s": import_cpu_s,
        "import_thread_cpu_s": import_thread_cpu_s,
        "stored_events_per_cpu_s": stored as f64 / import_cpu_s,
        "import_records_per_cpu_s": report.records as f64 / import_cpu_s,
        "trace_bytes": on_disk(out),
    }))
}

pub fn run(
    bytes: u64,
    kptrace_bytes: Option<u64>,
    gst_bytes: Option<u64>,
    ftrace_sample: Option<PathBuf>,
    dir: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    let sample = locate_sample(ftrace_sample)?;
    let (dir, _guard) = super::scratch_dir(dir)?;
    let ftrace_file = dir.join("ftrace-shifted.txt");
    let kp_dir = dir.join("kptrace");
    std::fs::create_dir_all(&kp_dir)?;
    let t = Instant::now();
    let ftrace_bytes = generate_ftrace(&sample, &ftrace_file, bytes)?;
    let (kp_files, kp_bytes) = generate_kptrace(&kp_dir, 4, kptrace_bytes.unwrap_or(bytes))?;
    let generate_s = t.elapsed().as_secs_f64();
    let ftrace = measure(
        "ftrace",
        std::slice::from_ref(&ftrace_file),
        Format::Ftrace,
        &dir.join("ftrace.db"),
        || parse_ftrace(&ftrace_file),
    )?;
    std::fs::remove_file(&ftrace_file).ok();
    let kp = measure(
        "kptrace",
        &kp_files,
        Format::Kptrace,
        &dir.join("kptrace.db"),
        || parse_kptrace(&kp_files),
    )?;
    let gst_sample = super::find_above(GST_SAMPLE, Path::is_file).with_context(|| {
        format!("cannot find the GStreamer tracer log `{GST_SAMPLE}` above the executable or the sources")
    })?;
    let gst_file = dir.join("gst-shifted.log");
    let gst_bytes = generate_gst(&gst_sample, &gst_file, gst_bytes.unwrap_or(bytes / 4))?;
    let gst = measure(
        "gst",
        std::slice::from_ref(&gst_file),
        Format::Gst,
        &dir.join("gst.db"),
        || parse_gst(&gst_file),
    )?;
    std::fs::remove_file(&gst_file).ok();
    let num = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let meets = [&ftrace, &kp].iter().all(|v| {
        num(v, "parse_mb_per_s") >= TARGET_PARSE_MB_PER_S
            && num(v, "stored_events_per_s") >= TARGET_STORED_EVENTS_PER_S
    });
    let doc = json!({
        "ftrace_sample": sample.display().to_string(),
        "ftrace_generated_bytes": ftrace_bytes,
        "kptrace_generated_text_bytes": kp_bytes,
        "kptrace_cpus": 4,
        "generate_s": generate_s,
        "ftrace": ftrace,
        "kptrace": kp,
        "gst_sample": gst_sample.display().to_string(),
        "gst_generated_bytes": gst_bytes,
        "gst": gst,
        "target_parse_mb_per_s": TARGET_PARSE_MB_PER_S,
        "target_stored_events_per_s": TARGET_STORED_EVENTS_PER_S,
        "meets_targets": meets,
        "rss_max_bytes": super::rss_max_bytes(),
    });
    if json_out {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for (name, v) in [
            ("ftrace", &doc["ftrace"]),
            ("kptrace", &doc["kptrace"]),
            ("gst", &doc["gst"]),
        ] {
            outln!(
                "{name}: {} parsed at {:.0} MB/s ({} records/s); import {} events stored in {:.2} s = {} events/s",
                units::bytes(v["bytes"].as_u64().unwrap_or(0)),
                num(v, "parse_mb_per_s"),
                units::count(num(v, "parse_records_per_s")),
                v["stored_events"],
                num(v, "import_s"),
                units::count(num(v, "stored_events_per_s")),
            );
        }
        outln!(
            "targets (≥ {TARGET_PARSE_MB_PER_S} MB/s parsed, ≥ {} events/s stored): {}",
            units::count(TARGET_STORED_EVENTS_PER_S),
            if meets { "met" } else { "NOT met" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_copies_keep_the_lines_and_increase_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let sample = dir.path().join("s.txt");
        std::fs::write(
            &sample,
            "# tracer: nop\n\
             \x20  Chrome_IO - thr-77 (   70) [003] d..2. 5.000001: sched_waking: comm=a b pid=3\n\
             \x20 bash-1234 [001] 5.500000: sys_read(fd: 3, buf: 7ff)\n",
        )
        .unwrap();
        let out = dir.path().join("o.txt");
        let n = generate_ftrace(&sample, &out, 300).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(n, text.len() as u64);
        let recs: Vec<_> = text
            .lines()
            .map(|l| ftrace::parse_line(l).unwrap())
            .collect();
        assert!(recs.len() >= 4 && recs.len() % 2 == 0, "{text}");
        assert_eq!(recs[2].comm, "Chrome_IO - thr");
        // The second copy starts 1 ms after the first one ends.
        assert_eq!(recs[2].ts, 5_500_000_000 + 1_000_000);
        assert!(recs.windows(2).all(|w| w[0].ts < w[1].ts));
        assert!(text.lines().all(|l| !l.starts_with('#')));
    }

    #[test]
    fn generated_kptrace_parses_without_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let (files, text) = generate_kptrace(dir.path(), 2, 600_000).unwrap();
        assert_eq!(files.len(), 3);
        assert!(text >= 600_000);
        // Relay files: whole sub-buffers.
        let size = std::fs::metadata(&files[1]).unwrap().len();
        assert_eq!(size % kptrace::SUBBUF_SIZE as u64, 0);
        let (bytes, records, bad) = parse_kptrace(&files).unwrap();
        assert_eq!(bad, 0);
        assert_eq!(bytes, text);
        assert!(records > 10_000);
    }

    #[test]
    fn process_cpu_time_counts_other_threads() {
        let before = process_cpu_s();
        std::thread::spawn(|| {
            let start = thread_cpu_s();
            let mut x = 0u64;
            while thread_cpu_s() - start < 0.3 {
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                }
            }
        })
        .join()
        .unwrap();
        let spent = process_cpu_s() - before;
        assert!(spent >= 0.25, "{spent} s");
    }

    #[test]
    fn a_missing_sample_is_an_error_naming_it() {
        let e = locate_sample(Some("/nonexistent/x.txt".into())).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.txt"));
    }
}
