//! Every perturbation shows in the data, found by decoding the capture as an analyst would.

mod support;

use socscope_wire::dict::Builtin;
use support::{Capture, decode, run_to_file};

const IRQ_VSYNC: u64 = 45;

fn capture(args: &[&str]) -> Capture {
    let dir = tempfile::tempdir().unwrap();
    let (summary, bytes) = run_to_file(dir.path(), "s.wire", args);
    let cap = decode(&bytes);
    assert_eq!(
        cap.records.len() as u64,
        summary["events"].as_u64().unwrap()
    );
    cap
}

/// Rate of `frame decoded` markers per second inside `[a, b)` and in the rest of `[from, to)`.
fn decoded_rates(cap: &Capture, a: f64, b: f64, from: f64, to: f64) -> (f64, f64) {
    let times: Vec<f64> = cap
        .markers("frame decoded")
        .map(|r| cap.seconds(r))
        .collect();
    let inside = times.iter().filter(|&&t| t >= a && t < b).count() as f64 / (b - a);
    let outside = times
        .iter()
        .filter(|&&t| t >= from && t < to && !(t >= a && t < b))
        .count() as f64
        / ((to - from) - (b - a));
    (inside, outside)
}

/// (time of the vsync interrupt, delay until the callback pushed its frame), in seconds.
fn vsync_delays(cap: &Capture) -> Vec<(f64, f64)> {
    let mut last_vsync = None;
    let mut out = Vec::new();
    for r in cap.records.iter().filter(|r| r.cpu == 0) {
        if r.is(Builtin::IrqEntry) && r.arg == Some(IRQ_VSYNC) {
            last_vsync = Some(r.ticks);
        } else if r.is(Builtin::Mark)
            && let Some(v) = last_vsync.take()
        {
            out.push((
                v as f64 / cap.tick_rate_hz as f64,
                (r.ticks - v) as f64 / cap.tick_rate_hz as f64,
            ));
        }
    }
    out
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

#[test]
fn cpu_stress_lowers_the_decoded_frame_rate() {
    let cap = capture(&["--duration", "8", "--cpu-stress", "3:2"]);
    let (inside, outside) = decoded_rates(&cap, 3.0, 5.0, 0.5, 8.0);
    eprintln!("frames decoded per second: {inside:.1} under stress, {outside:.1} otherwise");
    assert!(outside > 23.0, "{outside}");
    assert!(inside < 0.75 * outside, "{inside} vs {outside}");
    // The busy threads were created and ended.
    let burners: Vec<_> = cap
        .records
        .iter()
        .filter(|r| r.is(Builtin::ThreadCreate) && r.text.as_deref() == Some("cpu-burn"))
        .collect();
    assert_eq!(burners.len(), 2);
    for b in &burners {
        assert!((cap.seconds(b) - 3.0).abs() < 0.01);
        let exit = cap
            .records
            .iter()
            .find(|r| r.is(Builtin::ThreadExit) && r.arg == b.arg)
            .expect("burner exits");
        assert!(
            (5.0..5.1).contains(&cap.seconds(exit)),
            "{}",
            cap.seconds(exit)
        );
    }
    // Without stress the rate is steady.
    let calm = capture(&["--duration", "8"]);
    let (a, b) = decoded_rates(&calm, 3.0, 5.0, 0.5, 8.0);
    assert!((a - b).abs() < 2.0, "{a} vs {b}");
}

#[test]
fn io_stress_delays_the_vsync_callback() {
    let cap = capture(&["--duration", "8", "--io-stress", "3:2"]);
    let delays = vsync_delays(&cap);
    assert!(delays.len() > 390, "{} vsyncs", delays.len());
    let inside = mean(
        delays
            .iter()
            .filter(|d| (3.0..5.0).contains(&d.0))
            .map(|d| d.1),
    );
    let outside = mean(
        delays
            .iter()
            .filter(|d| !(3.0..5.05).contains(&d.0))
            .map(|d| d.1),
    );
    let worst_inside = delays
        .iter()
        .filter(|d| (3.0..5.0).contains(&d.0))
        .map(|d| d.1)
        .fold(0.0, f64::max);
    eprintln!(
        "vsync callback delay: mean {:.0} µs under I/O stress (worst {:.0} µs), {:.0} µs otherwise",
        inside * 1e6,
        worst_inside * 1e6,
        outside * 1e6
    );
    assert!(inside > 5.0 * outside, "{inside} vs {outside}");
    assert!(worst_inside > 0.002, "{worst_inside}");
    // dd did write, and the journal thread ran.
    let dd = cap
        .records
        .iter()
        .find(|r| r.is(Builtin::ThreadCreate) && r.text.as_deref() == Some("dd"))
        .expect("dd");
    assert!((cap.seconds(dd) - 3.0).abs() < 0.01);
    let writes = cap
        .records
        .iter()
        .filter(|r| {
            r.is(Builtin::SyscallEntry) && r.arg == Some(4) && (3.0..5.0).contains(&cap.seconds(r))
        })
        .count();
    assert!(writes > 500, "{writes} writes");
}

#[test]
fn zapping_replaces_the_decoder_threads() {
    let cap = capture(&["--duration", "7", "--zap-every", "2"]);
    let starts: Vec<f64> = cap.markers("zap start").map(|r| cap.seconds(r)).collect();
    let ends: Vec<f64> = cap.markers("zap end").map(|r| cap.seconds(r)).collect();
    assert_eq!(starts.len(), 3, "{starts:?}");
    assert_eq!(ends.len(), 3, "{ends:?}");
    for (i, (&s, &e)) in starts.iter().zip(&ends).enumerate() {
        assert!(
            (s - 2.0 * (i + 1) as f64).abs() < 0.2,
            "zap {i} starts at {s}"
        );
        assert!(e > s + 0.02 && e < s + 1.5, "zap {i}: {s} → {e}");
        let within = |r: &&support::Rec| (s..=e).contains(&cap.seconds(r));
        let exited: Vec<u64> = cap
            .records
            .iter()
            .filter(within)
            .filter(|r| r.is(Builtin::ThreadExit))
            .filter_map(|r| r.arg)
            .collect();
        let created: Vec<(u64, String)> = cap
            .records
            .iter()
            .filter(within)
            .filter(|r| r.is(Builtin::ThreadCreate))
            .map(|r| (r.arg.unwrap(), r.text.clone().unwrap()))
            .collect();
        assert_eq!(exited.len(), 3, "zap {i}: exits {exited:?}");
        let mut names: Vec<&str> = created.iter().map(|c| c.1.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["adec", "demux", "vdec"], "zap {i}");
        // New pids, never reused.
        for (pid, _) in &created {
            assert!(!exited.contains(pid));
        }
        // The picture freezes while tuning: at most the new channel's first frame is decoded.
        let decoded = cap
            .markers("frame decoded")
            .filter(|r| (s + 0.001..=e).contains(&cap.seconds(r)))
            .count();
        assert!(
            decoded <= 2,
            "zap {i}: {decoded} frames decoded while tuning"
        );
    }
}
