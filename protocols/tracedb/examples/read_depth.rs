//! Where a read's time goes: the latency of reading the first `k` events from random times of a
//! trace, for several `k` (the first event is the query's set-up: one block of every stream
//! near the time; each further event the merge and decoding):
//! `cargo run --release -p socscope-tracedb --example read_depth -- TRACE [K,K,...] [READS]`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: read_depth TRACE [K,K,...] [READS]")?;
    let depths: Vec<usize> = args
        .get(2)
        .map_or("1,100,1000,10000,30000", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let reads: usize = args.get(3).map_or(Ok(400), |s| s.parse())?;
    for k in depths {
        let r = socscope_tracedb::bench::read_random(std::path::Path::new(path), reads, k)?;
        println!(
            "first {k:>6} events: median {:>8.1} us (one reused event), {:>8.1} us (owned events)",
            r.reused.p50_us, r.owned.p50_us
        );
    }
    Ok(())
}
