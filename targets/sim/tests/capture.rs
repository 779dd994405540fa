//! `socscope-sim --out FILE --json`: the summary matches what the real decoder finds in the file, and the
//! stream depends only on the seed.

mod support;

use socscope_wire::dict::Builtin;
use support::{decode, run_to_file};

#[test]
fn summary_counts_match_the_decoded_capture() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, bytes) = run_to_file(dir.path(), "x.wire", &["--duration", "10"]);
    let cap = decode(&bytes);

    let events = summary["events"].as_u64().unwrap();
    assert_eq!(cap.records.len() as u64, events);
    assert_eq!(cap.lost, summary["dropped"].as_u64().unwrap());
    assert_eq!(bytes.len() as u64, summary["bytes"].as_u64().unwrap());
    assert_eq!(cap.bye_records, Some(events));
    assert_eq!(summary["duration_s"].as_f64(), Some(10.0));
    let bpe = summary["bytes_per_event"].as_f64().unwrap();
    assert!((bpe - bytes.len() as f64 / events as f64).abs() < 1e-9);

    // Per-type counts agree too.
    for b in socscope_wire::dict::BUILTINS {
        let decoded = cap.records.iter().filter(|r| r.is(b)).count() as u64;
        assert_eq!(
            summary["per_type"][b.def().name].as_u64(),
            Some(decoded),
            "{}",
            b.mnemonic()
        );
    }

    // A realistic default workload: about 20 k events per simulated second, within the size budget.
    assert!(
        (15_000..=25_000).contains(&(events / 10)),
        "{events} events in 10 s"
    );
    assert!(bpe <= 6.0, "{bpe} bytes per event");

    // Timestamps never go back on a CPU, and sequence numbers are dense.
    for cpu in 0..2u16 {
        let on: Vec<_> = cap.records.iter().filter(|r| r.cpu == cpu).collect();
        assert!(
            on.windows(2)
                .all(|w| w[0].ticks <= w[1].ticks && w[1].seq == w[0].seq + 1)
        );
        assert!(!on.is_empty());
    }

    // About 25 decoded frames and 50 pushed frames per second.
    let decoded = cap.markers("frame decoded").count();
    assert!((240..=260).contains(&decoded), "{decoded} frames decoded");
    let pushed = cap.records.iter().filter(|r| r.is(Builtin::Mark)).count();
    assert!((495..=505).contains(&pushed), "{pushed} frames pushed");

    // The thread table opens the trace with `Kc` records.
    let first = cap.records.iter().map(|r| r.ticks).min().unwrap();
    let table: Vec<&str> = cap
        .records
        .iter()
        .filter(|r| r.is(Builtin::ThreadCreate) && r.ticks == first)
        .filter_map(|r| r.text.as_deref())
        .collect();
    for name in [
        "player",
        "vsync-cb",
        "demux",
        "vdec",
        "adec",
        "alsa-sink",
        "kworker/1:1",
    ] {
        assert!(table.contains(&name), "{name} in {table:?}");
    }

    // Producers: threads hang under their process.
    let player = cap
        .producers
        .iter()
        .find(|p| p.2 == "player" && p.1.is_none())
        .expect("player process");
    let vdec = cap
        .producers
        .iter()
        .find(|p| p.2 == "vdec")
        .expect("vdec thread");
    assert_eq!(vdec.1, Some(player.0));
    for name in [
        "cpu0",
        "cpu1",
        "vsync",
        "eth0",
        "twd-timer",
        "kworker/0:1",
        "jbd2/mmcblk0p2-8",
    ] {
        assert!(cap.producers.iter().any(|p| p.2 == name), "{name} declared");
    }
}

#[test]
fn the_stream_depends_only_on_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--duration",
        "3",
        "--zap-every",
        "1",
        "--cpu-stress",
        "1:1",
        "--io-stress",
        "2:0.5",
    ];
    let (_, a) = run_to_file(
        dir.path(),
        "a.wire",
        &[&args[..], &["--seed", "7"]].concat(),
    );
    let (_, b) = run_to_file(
        dir.path(),
        "b.wire",
        &[&args[..], &["--seed", "7"]].concat(),
    );
    let (_, c) = run_to_file(
        dir.path(),
        "c.wire",
        &[&args[..], &["--seed", "8"]].concat(),
    );
    assert_eq!(a, b, "same seed, same bytes");
    assert_ne!(a, c, "another seed, another stream");
}

#[test]
fn rate_scales_events_per_simulated_second_and_the_tick_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, bytes) = run_to_file(
        dir.path(),
        "fast.wire",
        &["--duration", "0.5", "--rate", "2000000"],
    );
    let events = summary["events"].as_u64().unwrap();
    assert!(
        (800_000..=1_200_000).contains(&events),
        "{events} events in 0.5 s at 2 M/s"
    );
    let cap = decode(&bytes);
    assert_eq!(cap.records.len() as u64, events);
    assert_eq!(cap.tick_rate_hz, summary["tick_rate_hz"].as_u64().unwrap());
    assert_eq!(cap.tick_rate_hz, 100_000_000);
    assert!(summary["bytes_per_event"].as_f64().unwrap() <= 6.0);
}
