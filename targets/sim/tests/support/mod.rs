//! Runs the built `socscope-sim` and decodes what it wrote with the real decoder.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use socscope_wire::decode::{Frame, StreamDecoder};
use socscope_wire::dict::Builtin;

/// One decoded record, flattened.
#[derive(Clone, Debug)]
pub struct Rec {
    pub cpu: u16,
    pub seq: u64,
    pub ticks: u64,
    pub ty: u16,
    /// The first unsigned parameter (pid, irq, mark id, syscall nr), if any.
    pub arg: Option<u64>,
    /// The text parameter of markers and thread creations.
    pub text: Option<String>,
}

impl Rec {
    pub fn is(&self, b: Builtin) -> bool {
        self.ty == b.id()
    }
}

/// A decoded capture.
#[derive(Debug, Default)]
pub struct Capture {
    pub tick_rate_hz: u64,
    pub records: Vec<Rec>,
    pub lost: u64,
    pub lost_per_cpu: std::collections::BTreeMap<u16, u64>,
    pub producers: Vec<(u32, Option<u32>, String)>,
    pub bye_records: Option<u64>,
    pub bye_dropped: Option<u64>,
}

impl Capture {
    pub fn seconds(&self, r: &Rec) -> f64 {
        r.ticks as f64 / self.tick_rate_hz as f64
    }

    pub fn markers<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a Rec> + 'a {
        self.records
            .iter()
            .filter(move |r| r.is(Builtin::Marker) && r.text.as_deref() == Some(text))
    }
}

pub fn decode(bytes: &[u8]) -> Capture {
    let mut d = StreamDecoder::default();
    let mut cap = Capture::default();
    // Feed in odd-sized slices, as a serial port would.
    for chunk in bytes.chunks(4093) {
        d.feed(chunk);
        while let Some(r) = d.next_frame() {
            match r.expect("the sim's stream decodes without errors").frame {
                Frame::Hello(h) => cap.tick_rate_hz = h.tick_rate_hz,
                Frame::Dictionary(items) => {
                    for item in items {
                        if let socscope_wire::decode::OwnedDictEntry::Producer(p) = item {
                            cap.producers.push((p.id, p.parent, p.name));
                        }
                    }
                }
                Frame::Events(batch) => {
                    for r in batch.iter() {
                        let text = if r.type_id() == Builtin::Marker.id()
                            || r.type_id() == Builtin::ThreadCreate.id()
                        {
                            r.fields()
                                .iter()
                                .enumerate()
                                .find_map(|(i, _)| r.text(i))
                                .map(str::to_owned)
                        } else {
                            None
                        };
                        cap.records.push(Rec {
                            cpu: batch.cpu,
                            seq: r.seq,
                            ticks: r.ticks(),
                            ty: r.type_id(),
                            arg: r.unsigned(0),
                            text,
                        });
                    }
                }
                Frame::Loss(l) => {
                    cap.lost += l.count;
                    *cap.lost_per_cpu.entry(l.cpu).or_default() += l.count;
                }
                Frame::Heartbeat(_) | Frame::CpuTotal(_) | Frame::Window(_) => {}
                Frame::Bye(b) => {
                    cap.bye_records = Some(b.records);
                    cap.bye_dropped = Some(b.dropped);
                }
            }
        }
    }
    assert!(d.finish().is_none(), "the stream ends on a frame boundary");
    cap
}

pub fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_socscope-sim"))
}

/// Runs the sim with `args` plus `--out FILE --json`; returns the summary and the decoded capture.
pub fn run_to_file(dir: &Path, name: &str, args: &[&str]) -> (serde_json::Value, Vec<u8>) {
    let path = dir.join(name);
    let out = sim()
        .args(args)
        .arg("--out")
        .arg(&path)
        .arg("--json")
        .output()
        .expect("socscope-sim runs");
    assert_success(&out);
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the summary is one JSON object");
    let bytes = std::fs::read(&path).expect("the capture was written");
    (summary, bytes)
}

pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "socscope-sim failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
