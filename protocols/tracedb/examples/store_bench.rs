//! Measures the store: `cargo run --release -p socscope-tracedb --example store_bench -- [events] [dir]`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000_000);
    let dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("socscope-bench-{n}.db"));
    if std::env::var_os("READ_ONLY").is_some() {
        let r = socscope_tracedb::bench::read_random(&path, 200, 10_000)?;
        println!("read: {r:?}");
        return Ok(());
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let raw_path = dir.join(format!("socscope-bench-{n}-raw.db"));
    let _ = std::fs::remove_file(&raw_path);
    let raw = socscope_tracedb::bench::write_synthetic_with(
        &raw_path,
        n,
        socscope_tracedb::WriterConfig {
            summary: false,
            ..Default::default()
        },
    )?;
    let _ = std::fs::remove_file(&raw_path);
    println!(
        "raw chunk write (no summary): {:.2} M ev/s, {:.2} B/event",
        raw.events_per_second / 1e6,
        raw.bytes_per_event
    );
    let w = socscope_tracedb::bench::write_synthetic(&path, n)?;
    println!(
        "write: {} events in {:.2} s = {:.2} M ev/s; file {:.1} MB = {:.2} B/event (chunks {:.2} B/event); trace {:.2} s",
        w.events,
        w.seconds,
        w.events_per_second / 1e6,
        w.file_bytes as f64 / 1e6,
        w.bytes_per_event,
        w.chunk_bytes_per_event,
        w.trace_ns as f64 / 1e9
    );
    let r = socscope_tracedb::bench::read_random(&path, 200, 10_000)?;
    println!(
        "read 10k consecutive at random times (warm), reused event: mean {:.0} µs, p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs; owned events: p50 {:.0} µs; first event of a range query: max {:.2} ms",
        r.reused.mean_us,
        r.reused.p50_us,
        r.reused.p99_us,
        r.reused.max_us,
        r.owned.p50_us,
        r.max_first_event_ms
    );
    let s = socscope_tracedb::bench::scan_all(&path)?;
    println!(
        "scan: {} events in {:.2} s = {:.1} M ev/s",
        s.events,
        s.seconds,
        s.events_per_second / 1e6
    );
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}
