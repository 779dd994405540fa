//! No input makes a parser panic: arbitrary bytes, and real lines of `shared/data/traces/` (and of the
//! KPTrace grammar set) mutated byte by byte, fed to every reader to the end of the input. A bad line is
//! an error the reader survives: after an error it keeps reading.

use std::io::Read;
use std::path::PathBuf;

use proptest::prelude::*;
use socscope_formats::{FormatError, LineReader, detect, ftrace, gst, kptrace, paje};

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces")
        .join(rel)
}

fn lines_of(path: PathBuf) -> Vec<Vec<u8>> {
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn real_lines(rel: &str) -> Vec<Vec<u8>> {
    lines_of(data(rel))
}

fn grammar_lines(name: &str) -> Vec<Vec<u8>> {
    lines_of(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/kptrace")
            .join(name),
    )
}

/// Counts of what a reader returned: (records, parse errors).
type Seen = (u64, u64);

fn parse_error(e: FormatError, seen: &mut Seen) {
    match e {
        FormatError::Parse(p) => {
            assert!(p.line >= 1 && p.column >= 1, "{p:?}");
            seen.1 += 1;
        }
        other => panic!("an in-memory read failed: {other}"),
    }
}

fn read_ftrace(input: &[u8]) -> Seen {
    let mut seen = (0, 0);
    let mut r = ftrace::FtraceReader::new(input, "p");
    loop {
        match r.next_line() {
            Ok(Some(ftrace::Line::Record(rec))) => {
                if let ftrace::Body::Event { args, .. } = rec.body {
                    for (k, v) in ftrace::Record::pairs(args) {
                        assert!(!k.is_empty());
                        std::hint::black_box(v);
                    }
                }
                seen.0 += 1;
            }
            Ok(Some(ftrace::Line::Header)) => {}
            Ok(Some(ftrace::Line::StackFrame(frame))) => {
                std::hint::black_box(frame);
            }
            Ok(None) => break,
            Err(e) => parse_error(e, &mut seen),
        }
    }
    assert_eq!(r.bytes(), input.len() as u64);
    seen
}

fn read_paje(input: &[u8]) -> Seen {
    let mut seen = (0, 0);
    let mut r = paje::PajeReader::new(input, "p");
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                std::hint::black_box(rec.time_ns());
                seen.0 += 1;
            }
            Ok(None) => break,
            Err(e) => parse_error(e, &mut seen),
        }
    }
    seen
}

fn read_gst(input: &[u8]) -> Seen {
    let mut seen = (0, 0);
    let mut r = gst::GstReader::new(input, "p");
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                std::hint::black_box(&rec);
                seen.0 += 1;
            }
            Ok(None) => break,
            Err(e) => parse_error(e, &mut seen),
        }
    }
    seen
}

/// The KPTrace merge of `inputs` (one per CPU), raw form or post-processed with `desc`.
fn read_kptrace(inputs: &[&[u8]], desc: Option<kptrace::FormatDescription>) -> Seen {
    let mut seen = (0, 0);
    let sources = inputs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let relay = std::io::BufReader::new(kptrace::RelayReader::new(*b));
            (i as u16, relay, format!("trace{i}"))
        })
        .collect();
    let mut m = kptrace::KptraceMerge::new(sources, desc);
    let mut errors = 0;
    loop {
        match m.next_record() {
            Ok(Some(rec)) => {
                std::hint::black_box(&rec);
                seen.0 += 1;
            }
            Ok(None) => break,
            Err(e) => {
                errors += 1;
                assert!(errors <= 1 << 20, "the merge does not move past a bad line");
                parse_error(e, &mut seen);
            }
        }
    }
    seen
}

/// Every reader and helper of the crate on `input`.
fn everything(input: &[u8]) {
    read_ftrace(input);
    read_paje(input);
    read_gst(input);
    read_kptrace(&[input], None);
    let text = String::from_utf8_lossy(input);
    for line in text.lines() {
        let _ = ftrace::parse_line(line);
        let _ = gst::parse_line(&gst::strip_ansi(line));
        let _ = kptrace::looks_like_record(line);
        let _ = kptrace::cpu_of_file(line);
        let _ = kptrace::hex(line);
    }
    let _ = detect(input);
    let _ = kptrace::FormatDescription::sniff(&text);
    let _ = kptrace::sniff_system_map(&text);
    let _ = kptrace::FormatDescription::read(input, "d");
    let _ = kptrace::read_system_map(input, "m");
    let mut plain = Vec::new();
    kptrace::RelayReader::new(input)
        .read_to_end(&mut plain)
        .expect("in memory");
    let mut lines = LineReader::new(input, "l");
    let mut n = 0;
    while let Some((no, _)) = lines.next_line().expect("in memory") {
        n += 1;
        assert_eq!(no, n);
    }
}

/// One edit of a line.
#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Bytes that matter to the grammars are more likely than any byte.
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b" \t\r\n\0:.-[]()=>,%\"'0123456789aAxXeE#\x1b|\xff\xc3".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(line: &mut Vec<u8>, m: &Mutation) {
    let len = line.len();
    match *m {
        Mutation::Replace(i, b) if len > 0 => line[i % len] = b,
        Mutation::Insert(i, b) => line.insert(i % (len + 1), b),
        Mutation::Delete(i, n) if len > 0 => {
            let at = i % len;
            line.drain(at..(at + n).min(len));
        }
        Mutation::Duplicate(i, n) if len > 0 => {
            let at = i % len;
            let piece: Vec<u8> = line[at..(at + n).min(len)].to_vec();
            line.splice(at..at, piece);
        }
        Mutation::Truncate(i) => line.truncate(i % (len + 1)),
        _ => {}
    }
}

/// The file's lines with `picks` of them (index, mutations) edited; the rest kept, so headers and
/// definitions stay in force around the edited lines.
fn mutated_file(lines: &[Vec<u8>], picks: &[(usize, Vec<Mutation>)]) -> Vec<u8> {
    let mut lines = lines.to_vec();
    for (i, ms) in picks {
        let k = i % lines.len();
        for m in ms {
            mutate(&mut lines[k], m);
        }
    }
    lines.join(&b"\n"[..])
}

fn picks() -> impl Strategy<Value = Vec<(usize, Vec<Mutation>)>> {
    prop::collection::vec(
        (any::<usize>(), prop::collection::vec(mutation(), 1..6)),
        1..12,
    )
}

const FTRACE: [&str; 3] = [
    "ftrace/tci-ftrace_syscalls.txt",
    "ftrace/tci-trace-android-sched.txt",
    "ftrace/tci-trace-android-sched-irq.txt",
];
const PAJE: [&str; 3] = [
    "paje/pajeng-native_sample.trace",
    "paje/pajeng-categories.trace",
    "paje/pajeng-simgrid-fg126.trace",
];
const GST: [&str; 3] = [
    "gstreamer/gst-log-parser-color.log",
    "gstreamer/gst-log-parser-nocolor.log",
    "gstreamer/gst-log-parser-corrupted-nocolor.log",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..2048)) {
        everything(&input);
    }

    #[test]
    fn arbitrary_text_lines_never_panic(
        lines in prop::collection::vec("[ -~\t\u{1b}é]{0,120}", 0..24),
    ) {
        everything(lines.join("\n").as_bytes());
    }

    #[test]
    fn relay_padding_words_anywhere_never_panic(
        chunks in prop::collection::vec((any::<u32>(), "[0-9. a-zA-Z]{0,64}\n"), 0..8),
    ) {
        let mut input = Vec::new();
        for (w, text) in &chunks {
            input.extend_from_slice(&(w % (kptrace::SUBBUF_SIZE as u32)).to_le_bytes());
            input.extend_from_slice(text.as_bytes());
        }
        everything(&input);
        read_kptrace(&[&input, &input[..input.len() / 2]], None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn mutated_ftrace_lines_never_panic(f in 0..FTRACE.len(), p in picks()) {
        let lines = real_lines(FTRACE[f]);
        let input = mutated_file(&lines, &p);
        let (records, _) = read_ftrace(&input);
        // An edited line is lost at worst; the others still parse.
        let events = lines.iter().filter(|l| !l.is_empty() && !l.starts_with(b"#")).count() as u64;
        prop_assert!(records >= events.saturating_sub(p.len() as u64));
        everything(&input);
    }

    #[test]
    fn mutated_paje_lines_never_panic(f in 0..PAJE.len(), p in picks()) {
        let input = mutated_file(&real_lines(PAJE[f]), &p);
        read_paje(&input);
        everything(&input);
    }

    #[test]
    fn mutated_gst_lines_never_panic(f in 0..GST.len(), p in picks()) {
        let input = mutated_file(&real_lines(GST[f]), &p);
        read_gst(&input);
        everything(&input);
    }

    #[test]
    fn mutated_kptrace_lines_never_panic(p in picks(), q in picks(), d in picks()) {
        let t0 = mutated_file(&grammar_lines("trace0"), &p);
        let t1 = mutated_file(&grammar_lines("trace1"), &q);
        read_kptrace(&[&t0, &t1], None);
        let post = mutated_file(&grammar_lines("post.txt"), &p);
        let fmt = mutated_file(&grammar_lines("kptrace.fmt"), &d);
        if let Ok(desc) = kptrace::FormatDescription::read(&fmt[..], "kptrace.fmt") {
            read_kptrace(&[&post], Some(desc));
        }
        let map = mutated_file(&grammar_lines("System.map"), &d);
        let _ = kptrace::read_system_map(&map[..], "System.map");
        everything(&t0);
        everything(&post);
    }
}
