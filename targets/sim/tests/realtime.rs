//! In real time the board cannot wait for its link: a slow link makes the rings fill, and every dropped
//! record is counted and reported in `Loss` frames.

mod support;

use std::time::Instant;

use socscope_agent::{Transport, TransportError};
use socscope_sim::{SimConfig, run};

/// A link that takes `bytes_per_s` of wall time, refusing frames beyond that.
struct SlowLink {
    started: Instant,
    bytes_per_s: f64,
    sent: Vec<u8>,
}

impl Transport for SlowLink {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let allowed = 8192.0 + self.started.elapsed().as_secs_f64() * self.bytes_per_s;
        if (self.sent.len() + frame.len()) as f64 > allowed {
            return Err(TransportError::WouldBlock);
        }
        self.sent.extend_from_slice(frame);
        Ok(())
    }
}

#[test]
fn a_slow_link_in_real_time_drops_and_counts_exactly() {
    let config = SimConfig {
        duration_s: 0.5,
        rate: 1_000_000.0,
        realtime: true,
        ..SimConfig::default()
    };
    let mut link = SlowLink {
        started: Instant::now(),
        bytes_per_s: 400_000.0,
        sent: Vec::new(),
    };
    let started = Instant::now();
    let summary = run(&config, &mut link).unwrap();
    assert!(
        started.elapsed().as_secs_f64() >= 0.5,
        "paced to the wall clock"
    );
    assert!(summary.dropped > 0, "{summary:?}");
    assert_eq!(summary.bytes, link.sent.len() as u64);

    let cap = support::decode(&link.sent);
    assert_eq!(cap.records.len() as u64, summary.events);
    assert_eq!(cap.lost, summary.dropped);
    assert_eq!(cap.bye_dropped, Some(summary.dropped));
    // Per CPU, kept and lost records account for every sequence number.
    for cpu in 0..2u16 {
        let kept = cap.records.iter().filter(|r| r.cpu == cpu).count() as u64;
        let last = cap
            .records
            .iter()
            .filter(|r| r.cpu == cpu)
            .map(|r| r.seq)
            .max()
            .unwrap();
        let lost = cap.lost_per_cpu.get(&cpu).copied().unwrap_or(0);
        assert!(
            kept + lost > last,
            "cpu {cpu}: {kept} kept + {lost} lost < {}",
            last + 1
        );
    }
}

#[test]
fn off_real_time_a_slow_link_slows_the_simulation_instead() {
    let config = SimConfig {
        duration_s: 0.2,
        ..SimConfig::default()
    };
    let mut link = SlowLink {
        started: Instant::now(),
        bytes_per_s: 100_000.0,
        sent: Vec::new(),
    };
    let summary = run(&config, &mut link).unwrap();
    assert_eq!(summary.dropped, 0);
    assert_eq!(
        support::decode(&link.sent).records.len() as u64,
        summary.events
    );
}
