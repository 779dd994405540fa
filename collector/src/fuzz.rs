//! A mutation fuzzer that runs on stable Rust, in the test suite and from `socscope bench fuzz`: inputs
//! are real captures and trace files (seeds) mutated a few bytes at a time, fed to every decoder that
//! reads data from outside — the wire stream decoder, each text importer, the trace-cmd `.dat` and CTF
//! readers, the chunk decoder — and every
//! panic is caught, counted and kept. The cargo-fuzz targets beside the crates stay for coverage-guided
//! runs on nightly.

use std::io::BufReader;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use socscope_formats::ctf::CtfReader;
use socscope_formats::ftrace::{Body, FtraceReader, Line, Record};
use socscope_formats::gst::GstReader;
use socscope_formats::kptrace::{FormatDescription, KptraceMerge, RelayReader};
use socscope_formats::paje::PajeReader;
use socscope_formats::tracecmd::DatReader;
use socscope_tracedb::ChunkFuzzer;
use socscope_wire::decode::StreamDecoder;

pub use socscope_formats::Format;

/// A decoder under test: the wire, the store's chunks, the refusal frame, and the reader of every
/// format of the registry ([`Format::ALL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `StreamDecoder`: the wire, fed in slices of varying size.
    Wire,
    /// The chunk decoders of the trace store (whole and lazy).
    Chunk,
    /// The `Refusal` frame a collector sends to a board, as the agent and its C API decode it.
    Refusal,
    /// The reader of a format (the records it reads, through every accessor an importer uses).
    Format(Format),
}

impl Target {
    /// Every target: the wire, then every format of the registry, then the chunks and the refusal.
    pub const ALL: [Target; Format::ALL.len() + 3] = {
        let mut all = [Target::Wire; Format::ALL.len() + 3];
        let mut i = 0;
        while i < Format::ALL.len() {
            all[i + 1] = Target::Format(Format::ALL[i]);
            i += 1;
        }
        all[i + 1] = Target::Chunk;
        all[i + 2] = Target::Refusal;
        all
    };

    /// Its name on the command line (a format's target is named after the format).
    pub fn name(self) -> &'static str {
        match self {
            Target::Wire => "wire",
            Target::Chunk => "chunk",
            Target::Refusal => "refusal",
            Target::Format(f) => f.name(),
        }
    }
}

/// `Refusal` frames of every reason, with short, long and non-ASCII messages: the seeds of
/// [`Target::Refusal`].
pub fn refusal_seeds() -> Vec<Vec<u8>> {
    use socscope_wire::refusal::{Refusal, RefusalReason, encode_refusal};
    let long = "disk full ".repeat(30);
    let mut out = Vec::new();
    for (code, message) in [
        (1, "no token in the Hello"),
        (2, "too many sessions"),
        (3, long.as_str()),
        (4, "wire version 9: upgrade the collector"),
        (5, ""),
        (200, "Zürich — ☃"),
    ] {
        let mut buf = vec![0u8; 1024];
        let refusal = Refusal {
            reason: RefusalReason::from_code(code),
            message,
        };
        if let Ok(n) = encode_refusal(&mut buf, &refusal) {
            buf.truncate(n);
            out.push(buf);
        }
    }
    out
}

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    /// Inputs tried.
    pub inputs: u64,
    /// Inputs the decoder accepted at least partly (a frame, a record, a chunk).
    pub accepted: u64,
    /// Inputs that panicked.
    pub panics: u64,
    /// The first input that panicked, and what the panic said.
    pub first_panic: Option<(Vec<u8>, String)>,
    /// Bytes fed in all.
    pub bytes: u64,
    /// Wall-clock time.
    pub elapsed: Duration,
}

/// A small, fast, seedable generator (xorshift64*): the runs are reproducible from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Bytes a mutation likes to write: boundaries of varints, lengths and signs.
const INTERESTING: [u8; 10] = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x20, 0x0a, 0x3a];

/// Mutates `input` in place with 1 to 4 random edits (bit flips, interesting bytes, insertions,
/// deletions, duplicated or spliced ranges), keeping it at most `max_len` bytes.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                for _ in 0..n {
                    input.insert(at, rng.next() as u8);
                }
            }
            4 if len > 1 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                input.drain(at..at + n);
            }
            5 if len > 1 => {
                // Duplicate a range (a section of the stream seen twice).
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                let copy = input[at..at + n].to_vec();
                let to = rng.below(len + 1);
                input.splice(to..to, copy);
            }
            6 if !other.is_empty() => {
                // Splice in a range of another seed.
                let at = rng.below(other.len());
                let n = 1 + rng.below((other.len() - at).min(64));
                let to = rng.below(len + 1);
                input.splice(to..to, other[at..at + n].iter().copied());
            }
            7 if len > 0 => input.truncate(rng.below(len)),
            _ => {}
        }
    }
    input.truncate(max_len);
}

/// Cuts seeds into windows of at most `window` bytes (starting at a line or frame boundary when
/// there is one), so that each input is small and the run fast, while every part of every seed is used.
pub fn seed_windows(seeds: &[Vec<u8>], window: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for seed in seeds {
        let mut at = 0;
        while at < seed.len() {
            let end = (at + window).min(seed.len());
            out.push(seed[at..end].to_vec());
            // The next window starts after a delimiter of the current one, if any.
            let mid = (at + window / 2).min(end);
            let next = seed[mid..end]
                .iter()
                .position(|&b| b == 0 || b == b'\n')
                .map_or(end, |p| mid + p + 1);
            at = next.max(at + 1);
        }
    }
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

/// Pajé records only mean something after the definitions of their event ids: each seed is a window
/// of records preceded by the `%EventDef` blocks it uses (the whole header would make every input
/// kilobytes long, and most mutations would land in it).
pub fn paje_seeds(files: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for file in files {
        let text = String::from_utf8_lossy(file);
        let mut defs: Vec<(String, String)> = Vec::new();
        let mut records: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("%EventDef") {
                let id = rest
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_string();
                defs.push((id, format!("{line}\n")));
            } else if line.starts_with('%') {
                if let Some((_, block)) = defs.last_mut() {
                    block.push_str(line);
                    block.push('\n');
                }
            } else if !line.trim().is_empty() {
                records.push(line);
            }
        }
        for window in records.chunks(6) {
            let mut seed = String::new();
            for (id, block) in &defs {
                if window
                    .iter()
                    .any(|l| l.split_whitespace().next() == Some(id))
                {
                    seed.push_str(block);
                }
            }
            for line in window {
                seed.push_str(line);
                seed.push('\n');
            }
            out.push(seed.into_bytes());
        }
    }
    out
}

/// Feeds one input to `target`; returns whether the decoder accepted something.
fn run_one(target: Target, input: &[u8], chunks: &mut Option<ChunkFuzzer>) -> bool {
    match target {
        Target::Wire => {
            let mut decoder = StreamDecoder::new(socscope_wire::READ_WIRE_VERSIONS);
            let (mut frames, mut drops) = (0u64, 0u64);
            let seed = input.first().copied().unwrap_or(1);
            let (mut at, mut size) = (0, usize::from(seed % 61) + 1);
            while at < input.len() {
                let end = (at + size).min(input.len());
                decoder.feed(&input[at..end]);
                while let Some(r) = decoder.next_frame() {
                    match r {
                        Ok(_) => frames += 1,
                        Err(_) => drops += 1,
                    }
                }
                at = end;
                size = (size * 7 + usize::from(seed)) % 97 + 1;
            }
            // The header of a last frame cut off (what the collector counts as lost), read unchecked.
            let _ = decoder.truncated_events();
            if decoder.finish().is_some() {
                drops += 1;
            }
            // Every report is counted, every byte accounted for.
            let stats = decoder.stats();
            assert_eq!((stats.frames, stats.dropped_frames), (frames, drops));
            assert_eq!(stats.bytes, input.len() as u64);
            frames > 0
        }
        Target::Refusal => {
            let mut bytes = input.to_vec();
            let Ok(r) = socscope_wire::refusal::decode_refusal(&mut bytes) else {
                return false;
            };
            // What decodes encodes back to the same refusal.
            let (reason, message) = (r.reason, r.message.to_string());
            let mut again = vec![0u8; 4 * socscope_wire::refusal::MAX_REFUSAL_MESSAGE + 64];
            let n = socscope_wire::refusal::encode_refusal(&mut again, &r).expect("room for it");
            let back = socscope_wire::refusal::decode_refusal(&mut again[..n]).expect("decodes");
            assert_eq!((back.reason, back.message), (reason, message.as_str()));
            true
        }
        Target::Chunk => match chunks {
            Some(f) => f.run(input),
            None => false,
        },
        Target::Format(f) => run_format(f, input),
    }
}

/// Feeds one input to the reader of `format`; returns whether it accepted something.
fn run_format(format: Format, input: &[u8]) -> bool {
    match format {
        Format::Kptrace => {
            let half = input.len() / 2;
            let desc = FormatDescription::read(
                &b"CS : OLDPID INTEGER, NEWPID INTEGER\nMK : T STRING\n"[..],
                "f",
            )
            .ok();
            let mut any = false;
            for post in [None, desc] {
                let files = vec![
                    (
                        0u16,
                        BufReader::new(RelayReader::new(&input[..half])),
                        "trace0".to_string(),
                    ),
                    (
                        1u16,
                        BufReader::new(RelayReader::new(&input[half..])),
                        "trace1".to_string(),
                    ),
                ];
                let mut merge = KptraceMerge::new(files, post);
                for _ in 0..100_000 {
                    match merge.next_record() {
                        Ok(Some(_)) => any = true,
                        Err(_) => {}
                        Ok(None) => break,
                    }
                }
            }
            let _ = FormatDescription::read(input, "fmt");
            any
        }
        Format::Paje => {
            let mut r = PajeReader::new(input, "fuzz");
            let mut any = false;
            for _ in 0..100_000 {
                match r.next_record() {
                    Ok(Some(rec)) => {
                        any = true;
                        let _ = (
                            rec.time_ns(),
                            rec.get("Value"),
                            rec.extra_fields(&["Time"]).count(),
                        );
                    }
                    Err(_) => {}
                    Ok(None) => break,
                }
            }
            any
        }
        Format::Ftrace => {
            let mut r = FtraceReader::new(input, "fuzz");
            let mut any = false;
            for _ in 0..100_000 {
                match r.next_line() {
                    Ok(Some(Line::Record(rec))) => {
                        any = true;
                        if let Body::Event { args, .. } = rec.body {
                            let _ = Record::pairs(args).count();
                        }
                    }
                    Ok(Some(Line::Header | Line::StackFrame(_))) | Err(_) => {}
                    Ok(None) => break,
                }
            }
            any
        }
        Format::Gst => {
            let mut r = GstReader::new(input, "fuzz");
            let mut any = false;
            for _ in 0..100_000 {
                match r.next_record() {
                    Ok(Some(_)) => any = true,
                    Err(_) => {}
                    Ok(None) => break,
                }
            }
            any
        }
        Format::TraceCmd => {
            let Ok(mut r) = DatReader::new(std::io::Cursor::new(input), "fuzz") else {
                return false;
            };
            let mut any = false;
            let mut text = String::new();
            for _ in 0..100_000 {
                match r.next_event() {
                    Ok(Some(e)) => {
                        any = true;
                        text.clear();
                        e.render(&mut text);
                        let _ = (e.stack(), e.fields().count(), e.comm());
                    }
                    Err(_) => {}
                    Ok(None) => break,
                }
            }
            let _ = (r.take_losses(), r.lost());
            any
        }
        Format::Ctf => {
            let (metadata, stream) = split_ctf_input(input);
            let Ok(mut r) = CtfReader::from_memory(metadata, vec![("s_0".into(), stream.to_vec())])
            else {
                return false;
            };
            let mut any = false;
            for _ in 0..100_000 {
                match r.next_event() {
                    Ok(Some(e)) => {
                        any = true;
                        if let Some(f) = &e.fields {
                            let _ = f.to_string();
                        }
                    }
                    Err(_) => {}
                    Ok(None) => break,
                }
            }
            let _ = r.take_losses();
            any
        }
    }
}

/// The seeds of a format's target, from the real captures: `find(REL)` is where `REL` (a path from the
/// repository's root, such as `shared/data/traces/paje` for the shared collection) is on this machine.
/// Text captures are cut into windows of `window` bytes; binary ones into whole small inputs.
pub fn format_seeds(
    format: Format,
    find: &dyn Fn(&str) -> std::io::Result<std::path::PathBuf>,
    window: usize,
) -> std::io::Result<Vec<Vec<u8>>> {
    use std::path::PathBuf;
    let with_path = |p: &std::path::Path, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    };
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| with_path(p, e));
    let files_in = |rel: &str| -> std::io::Result<Vec<Vec<u8>>> {
        let dir = find(rel)?;
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| with_path(&dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        paths.iter().map(|p| read(p)).collect()
    };
    Ok(match format {
        Format::Kptrace => seed_windows(&files_in("protocols/formats/tests/data/kptrace")?, window),
        Format::Paje => paje_seeds(&files_in("shared/data/traces/paje")?),
        Format::Ftrace => seed_windows(&files_in("shared/data/traces/ftrace")?, window),
        Format::Gst => seed_windows(&files_in("shared/data/traces/gstreamer")?, window),
        Format::TraceCmd => tracecmd_seeds(&read(
            &find("shared/data/traces/trace-cmd")?.join("lisa-example_rtapp-v6.dat"),
        )?),
        Format::Ctf => {
            // Each shared CTF trace's metadata with the first 6 KB of one of its streams.
            let root = find("shared/data/traces/ctf")?;
            let mut out = Vec::new();
            for dir in [
                "lttng-kernel-arm-bug446190",
                "lttng-ust-ros2",
                "perf-ctf-taskset2",
            ] {
                let d = root.join(dir);
                let mut streams: Vec<PathBuf> = std::fs::read_dir(&d)
                    .map_err(|e| with_path(&d, e))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && !p.ends_with("metadata"))
                    .collect();
                streams.sort();
                let Some(first) = streams.first() else {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{}: no stream file", d.display()),
                    ));
                };
                out.push(ctf_seed(&read(&d.join("metadata"))?, &read(first)?, 6000));
            }
            out
        }
    })
}

/// A CTF fuzz input: a metadata file and one stream, the metadata's length first (4 bytes,
/// little-endian).
pub fn ctf_input(metadata: &[u8], stream: &[u8]) -> Vec<u8> {
    let mut v = (metadata.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(metadata);
    v.extend_from_slice(stream);
    v
}

fn split_ctf_input(input: &[u8]) -> (&[u8], &[u8]) {
    let Some(len) = input.get(..4) else {
        return (input, &[]);
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let rest = &input[4..];
    rest.split_at(len.min(rest.len()))
}

/// Small `.dat` seeds from a real version-6 capture: two CPUs' first pages, the formats of the events
/// in them and a few more, as version 6, and as version 7 with zstd and zlib.
pub fn tracecmd_seeds(dat: &[u8]) -> Vec<Vec<u8>> {
    use socscope_formats::tracecmd::Compression;
    use socscope_formats::tracecmd::rewrite::{Rewrite, rewrite};
    let formats = [
        "print",
        "bprint",
        "kernel_stack",
        "sched_switch",
        "sched_wakeup",
        "cpu_frequency",
        "irq_handler_entry",
        "softirq_entry",
    ];
    let symbols = [
        "tracing_mark_write",
        "enqueue_task_fair",
        "dequeue_task_fair",
        "dequeue_entity",
        "schedule",
    ];
    let mut out = Vec::new();
    for (version, compression) in [
        (6, Compression::None),
        (7, Compression::Zstd),
        (7, Compression::Zlib),
    ] {
        let how = Rewrite {
            version,
            compression,
            formats: Some(formats.iter().map(|s| s.to_string()).collect()),
            symbols: Some(symbols.iter().map(|s| s.to_string()).collect()),
            pages: Some(1),
            cpus: Some(vec![2]),
            chunk_pages: 1,
            repeat: 1,
        };
        out.extend(rewrite(dat, &how));
    }
    out
}

/// A CTF seed from a real trace directory's metadata and one of its streams: the stream's first
/// `window` bytes (a packet cut short, whose events before the cut are read), and the metadata with
/// only the event classes those bytes use.
pub fn ctf_seed(metadata: &[u8], stream: &[u8], window: usize) -> Vec<u8> {
    let stream = &stream[..window.min(stream.len())];
    let mut used = std::collections::HashSet::new();
    if let Ok(mut r) = CtfReader::from_memory(metadata, vec![("s_0".into(), stream.to_vec())]) {
        loop {
            match r.next_event() {
                Ok(Some(e)) => {
                    used.insert(e.name.to_string());
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
    let text = socscope_formats::ctf::tsdl::metadata_text(metadata).unwrap_or_default();
    // Event blocks (`event {` ... `};` at the start of lines) of events the window does not use: out.
    let mut kept = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find("\nevent {") {
        kept.push_str(&rest[..start + 1]);
        let block = &rest[start + 1..];
        let end = block.find("\n};").map_or(block.len(), |e| e + 4);
        let name = block[..end]
            .split("name = \"")
            .nth(1)
            .and_then(|n| n.split('"').next())
            .unwrap_or("");
        if used.contains(name) {
            kept.push_str(&block[..end]);
        }
        rest = &block[end..];
    }
    kept.push_str(rest);
    ctf_input(kept.as_bytes(), stream)
}

thread_local! {
    /// Whether this thread is fuzzing (its panics are counted, not printed).
    static FUZZING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Panics found by the fuzzer are counted and kept, not printed once per input; other threads (other
/// tests of the same binary) keep the usual message. The hook is installed once per process.
fn quiet_panics_on_this_thread() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !FUZZING.with(|f| f.get()) {
                previous(info);
            }
        }));
    });
    FUZZING.with(|f| f.set(true));
}

/// Runs `inputs` mutated inputs (the seeds themselves first) through `target`, with at most
/// `max_len` bytes each, reproducibly from `seed`.
pub fn run(
    target: Target,
    seeds: &[Vec<u8>],
    inputs: u64,
    max_len: usize,
    seed: u64,
) -> FuzzReport {
    let started = Instant::now();
    let mut rng = Rng(seed | 1);
    let mut chunks = ChunkFuzzer::new().ok();
    let mut report = FuzzReport::default();
    let empty = [Vec::new()];
    let seeds = if seeds.is_empty() { &empty[..] } else { seeds };
    quiet_panics_on_this_thread();
    let mut input = Vec::with_capacity(max_len);
    for i in 0..inputs {
        input.clear();
        let base = &seeds[(i as usize) % seeds.len()];
        input.extend_from_slice(&base[..base.len().min(max_len)]);
        if i >= seeds.len() as u64 {
            let other = &seeds[rng.below(seeds.len())];
            mutate(&mut rng, &mut input, other, max_len);
        }
        report.inputs += 1;
        report.bytes += input.len() as u64;
        match std::panic::catch_unwind(AssertUnwindSafe(|| run_one(target, &input, &mut chunks))) {
            Ok(true) => report.accepted += 1,
            Ok(false) => {}
            Err(payload) => {
                report.panics += 1;
                if report.first_panic.is_none() {
                    let what = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    report.first_panic = Some((input.clone(), what));
                }
                // A panic may leave the chunk decoder's buffers half written: start afresh.
                chunks = ChunkFuzzer::new().ok();
            }
        }
    }
    FUZZING.with(|f| f.set(false));
    report.elapsed = started.elapsed();
    report
}
