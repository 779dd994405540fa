//! No input makes an import panic: arbitrary bytes and real lines (of `shared/data/traces/` and of the
//! KPTrace grammar set) mutated byte by byte, imported into a temporary trace with each importer. A
//! lenient import of such input succeeds (bad lines are skipped and counted) and leaves a readable trace,
//! unless nothing of it can be kept (binary input, no usable line); a strict one may fail, but only with
//! an error; a failed import leaves no trace.

mod common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use socscope_collector::import::{ImportOptions, import};
use socscope_formats::Format;
use socscope_tracedb::{Filter, TimeRange, TraceReader};

/// The lines of a shared capture.
fn real(rel: &str) -> Vec<Vec<u8>> {
    lines_of(common::real(rel))
}

fn grammar(name: &str) -> Vec<Vec<u8>> {
    lines_of(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../protocols/formats/tests/data/kptrace")
            .join(name),
    )
}

fn lines_of(path: PathBuf) -> Vec<Vec<u8>> {
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

/// Imports `files` (name, content) with `format`; checks a lenient import's trace.
fn import_bytes(
    format: Format,
    files: &[(&str, &[u8])],
    strict: bool,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|(name, bytes)| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect();
    let mut skipped = 0u64;
    let mut on_skip = |e: &socscope_formats::ParseError, n: u64| {
        assert!(e.line >= 1 && n == skipped + 1, "{e}: skip #{n}");
        skipped = n;
    };
    let mut on_progress = |_: u64| {};
    let mut opts = ImportOptions {
        strict,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    let out = dir.path().join("t.db");
    let result = import(&paths, format, &out, &mut opts);
    match result {
        Ok(report) => {
            prop_assert_eq!(report.lines_skipped, skipped);
            check_trace(&out, report.info.event_count)?;
        }
        Err(e) => {
            // Lenient imports fail only on input no line of which can be used at all (a KPTrace set
            // with no trace file, binary input, a file of which nothing is kept), never on a bad
            // line; and then no trace is left behind.
            let msg = e.to_string();
            prop_assert!(
                strict
                    || format == Format::Kptrace
                    || msg.contains("nothing to import")
                    || msg.contains("binary input"),
                "lenient import failed: {}",
                msg
            );
            prop_assert!(!msg.is_empty());
            prop_assert!(!out.exists(), "a failed import left {}", out.display());
        }
    }
    Ok(())
}

fn check_trace(path: &Path, events: u64) -> Result<(), TestCaseError> {
    let r = TraceReader::open(path).unwrap();
    let mut n = 0u64;
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        e.unwrap();
        n += 1;
    }
    prop_assert_eq!(n, events);
    Ok(())
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b" \t\n\0:.-[]()=>,%\"0123456789xE#\x1b|\xff".to_vec()),
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
    ]
}

fn picks() -> impl Strategy<Value = Vec<(usize, Vec<Mutation>)>> {
    prop::collection::vec(
        (any::<usize>(), prop::collection::vec(mutation(), 1..5)),
        1..10,
    )
}

fn mutated(lines: &[Vec<u8>], picks: &[(usize, Vec<Mutation>)]) -> Vec<u8> {
    let mut lines = lines.to_vec();
    for (i, ms) in picks {
        let k = i % lines.len();
        let line = &mut lines[k];
        for m in ms {
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
                    let piece = line[at..(at + n).min(len)].to_vec();
                    line.splice(at..at, piece);
                }
                _ => {}
            }
        }
    }
    lines.join(&b"\n"[..])
}

/// The text formats of the registry (a binary capture is not a file of arbitrary bytes or lines: the
/// trace-cmd and CTF readers have their own fuzz targets).
static FORMATS: std::sync::LazyLock<Vec<Format>> = std::sync::LazyLock::new(|| {
    Format::ALL
        .iter()
        .copied()
        .filter(|f| !f.spec().is_binary())
        .collect()
});

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_import_without_panic(
        f in 0..FORMATS.len(),
        input in prop::collection::vec(any::<u8>(), 0..1024),
        strict in any::<bool>(),
    ) {
        let name = if FORMATS[f] == Format::Kptrace { "trace0" } else { "in.txt" };
        import_bytes(FORMATS[f], &[(name, &input)], strict)?;
    }

    #[test]
    fn arbitrary_text_imports_without_panic(
        f in 0..FORMATS.len(),
        lines in prop::collection::vec("[ -~\t]{0,100}", 0..16),
    ) {
        let name = if FORMATS[f] == Format::Kptrace { "trace0" } else { "in.txt" };
        import_bytes(FORMATS[f], &[(name, lines.join("\n").as_bytes())], false)?;
    }

    #[test]
    fn mutated_ftrace_imports_without_panic(small in any::<bool>(), p in picks()) {
        // The syscall capture is cut to its first 300 lines to keep the case fast.
        let lines = if small {
            real("ftrace/tci-trace-android-sched-irq.txt")
        } else {
            real("ftrace/tci-ftrace_syscalls.txt").into_iter().take(300).collect()
        };
        import_bytes(Format::Ftrace, &[("f.txt", &mutated(&lines, &p))], false)?;
    }

    #[test]
    fn mutated_paje_imports_without_panic(f in 0..3usize, p in picks()) {
        let lines = match f {
            0 => real("paje/pajeng-categories.trace"),
            1 => real("paje/pajeng-simgrid-fg126.trace"),
            _ => real("paje/pajeng-native_sample.trace").into_iter().take(600).collect(),
        };
        import_bytes(Format::Paje, &[("p.trace", &mutated(&lines, &p))], false)?;
    }

    #[test]
    fn mutated_gst_imports_without_panic(colour in any::<bool>(), p in picks()) {
        let lines = real(if colour {
            "gstreamer/gst-log-parser-color.log"
        } else {
            "gstreamer/gst-log-parser-corrupted-nocolor.log"
        });
        import_bytes(Format::Gst, &[("g.log", &mutated(&lines, &p))], false)?;
    }

    #[test]
    fn mutated_kptrace_imports_without_panic(p in picks(), q in picks(), post in any::<bool>()) {
        if post {
            let text = mutated(&grammar("post.txt"), &p);
            let fmt = mutated(&grammar("kptrace.fmt"), &q);
            import_bytes(Format::Kptrace, &[("post.txt", &text), ("kptrace.fmt", &fmt)], false)?;
        } else {
            let t0 = mutated(&grammar("trace0"), &p);
            let t1 = mutated(&grammar("trace1"), &q);
            let map = grammar("System.map").join(&b"\n"[..]);
            import_bytes(
                Format::Kptrace,
                &[("trace0", &t0), ("trace1", &t1), ("System.map", &map)],
                false,
            )?;
        }
    }
}
