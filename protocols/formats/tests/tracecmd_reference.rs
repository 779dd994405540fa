//! The trace-cmd `.dat` reader against the reference reader, `trace-cmd report` (Debian package
//! `trace-cmd`, installed by scripts/install-test-deps.sh): on every `.dat` file under
//! `shared/data/traces/trace-cmd/` and on compressed version-7 copies `trace-cmd convert` makes of them,
//! the same events per name, the same timestamps to the nanosecond, the same text for every event.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use socscope_formats::ftrace::{Body, parse_line};
use socscope_formats::tracecmd::DatReader;

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/traces/trace-cmd")
}

fn dat_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(traces_dir())
        .expect("shared/data/traces/trace-cmd is there")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dat"))
        .collect();
    v.sort();
    assert!(v.len() >= 2, "{v:?}");
    v
}

/// `trace-cmd` with `args`; its standard output.
fn trace_cmd(args: &[&str]) -> String {
    let out = Command::new("trace-cmd")
        .args(args)
        .output()
        .expect("trace-cmd runs (Debian package trace-cmd, scripts/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "trace-cmd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One event as compared: cpu, ns, comm, pid, name, text.
type Line = (u16, i64, String, u64, String, String);

/// `trace-cmd report` of `file` (`-N`: no plugins, the print formats alone; `-t`: nanoseconds).
fn reference(file: &Path, plugins: bool) -> Vec<Line> {
    let f = file.to_str().unwrap();
    let mut args = vec!["report", "-t"];
    if !plugins {
        args.push("-N");
    }
    args.push(f);
    let text = trace_cmd(&args);
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(r) = parse_line(line) else { continue };
        let Body::Event { name, args } = r.body else {
            panic!("{line}")
        };
        out.push((
            r.cpu,
            r.ts,
            r.comm.to_string(),
            r.pid,
            name.to_string(),
            args.to_string(),
        ));
    }
    out
}

fn ours(file: &Path) -> Vec<Line> {
    let mut r = DatReader::open(file).unwrap();
    let mut out = Vec::new();
    let mut text = String::new();
    while let Some(e) = r.next_event().unwrap() {
        text.clear();
        e.render(&mut text);
        out.push((
            e.cpu as u16,
            e.ts as i64,
            e.comm().to_string(),
            e.pid as u64,
            e.name().into_owned(),
            text.trim().to_string(),
        ));
    }
    out
}

fn compare(file: &Path) -> usize {
    let theirs = reference(file, false);
    let mine = ours(file);
    let count = |v: &[Line]| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for l in v {
            *m.entry(l.4.clone()).or_default() += 1;
        }
        m
    };
    assert_eq!(count(&mine), count(&theirs), "{}", file.display());
    for (i, (a, b)) in mine.iter().zip(&theirs).enumerate() {
        assert_eq!(
            (a.0, a.1, &a.3, &a.4, &a.5),
            (b.0, b.1, &b.3, &b.4, &b.5),
            "{} event {i}",
            file.display()
        );
    }
    // Names as trace-cmd prints them with its plugins (which learn names from sched_switch).
    let named = reference(file, true);
    for (i, (a, b)) in mine.iter().zip(&named).enumerate() {
        assert_eq!((&a.2, a.3), (&b.2, b.3), "{} event {i}", file.display());
    }
    mine.len()
}

#[test]
fn dat_files_read_as_trace_cmd_reports_them() {
    for f in dat_files() {
        let n = compare(&f);
        eprintln!("{}: {n} events", f.display());
    }
}

/// Version-7 copies, zstd-compressed and uncompressed, of the files that hold events (the shared
/// version-7 file holds none), made by `trace-cmd convert`.
#[test]
fn version_7_copies_read_as_trace_cmd_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut converted = 0;
    for f in dat_files() {
        if ours(&f).is_empty() {
            continue;
        }
        for compression in ["zstd", "none"] {
            let out = dir.path().join(format!(
                "{}-v7-{compression}.dat",
                f.file_stem().unwrap().to_string_lossy()
            ));
            trace_cmd(&[
                "convert",
                "-i",
                f.to_str().unwrap(),
                "--file-version",
                "7",
                "--compression",
                compression,
                "-o",
                out.to_str().unwrap(),
            ]);
            let r = DatReader::open(&out).unwrap();
            assert_eq!(r.info().version, 7);
            assert_eq!(
                r.info().compression_text.starts_with("zstd"),
                compression == "zstd"
            );
            let n = compare(&out);
            assert_eq!(n, ours(&f).len());
            converted += 1;
        }
    }
    assert!(converted >= 2);
}

#[test]
fn headers_say_what_the_files_hold() {
    let dir = traces_dir();
    let r = DatReader::open(&dir.join("aos-kvm-empty-v7.dat")).unwrap();
    let i = r.info();
    assert_eq!(
        (i.version, i.long_size, i.page_size, i.big_endian),
        (7, 8, 4096, false)
    );
    assert_eq!(i.compression_text, "zstd 1.5.7");
    assert_eq!(i.cpus, 4);
    assert!(i.cpu_data.is_empty());
    assert_eq!(i.cpustat.len(), 4);
    assert!(
        i.uname.as_deref().unwrap().contains("7.1.3"),
        "{:?}",
        i.uname
    );
    assert!(i.tracer_version.as_deref().unwrap().starts_with("3.4.0"));
    assert!(r.meta().formats().filter(|f| f.system == "kvm").count() >= 92);
    assert!(r.meta().kallsyms().len() > 10_000);

    let mut r = DatReader::open(&dir.join("lisa-example_rtapp-v6.dat")).unwrap();
    let i = r.info().clone();
    assert_eq!(
        (i.version, i.cpus, i.clock.as_deref()),
        (6, 6, Some("local"))
    );
    assert_eq!(i.cpu_data.len(), 6);
    // CPUSTAT's "read events" is what each CPU's data holds.
    let read: Vec<u64> = i
        .cpustat
        .iter()
        .map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("read events:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap()
        })
        .collect();
    let mut per_cpu = [0u64; 6];
    while let Some(e) = r.next_event().unwrap() {
        per_cpu[e.cpu as usize] += 1;
    }
    assert_eq!(per_cpu.to_vec(), read);
    assert!(r.lost().iter().all(|l| l.1 == 0 && l.2 == 0));
}

/// A copy of `file` cut to `len` bytes.
fn cut(dir: &Path, file: &Path, len: usize) -> PathBuf {
    let bytes = std::fs::read(file).unwrap();
    let out = dir.join(format!("cut-{len}.dat"));
    std::fs::write(&out, &bytes[..len.min(bytes.len())]).unwrap();
    out
}

#[test]
fn a_truncated_file_keeps_the_events_before_the_damage_and_names_cpu_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let src = traces_dir().join("lisa-example_rtapp-v6.dat");
    let whole = ours(&src).len();
    let len = std::fs::metadata(&src).unwrap().len() as usize;
    // The last CPU's data (CPU 5, 45 056 bytes at the end) cut in its middle.
    let f = cut(dir.path(), &src, len - 20_000);
    let mut r = DatReader::open(&f).unwrap();
    let (mut n, mut errors) = (0, Vec::new());
    loop {
        match r.next_event() {
            Ok(Some(_)) => n += 1,
            Ok(None) => break,
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("CPU 5, byte "), "{}", errors[0]);
    assert!(errors[0].contains("cut short"), "{}", errors[0]);
    assert!(n > 7_000 && n < whole, "{n} of {whole}");

    // Cut in the header: a clear error, nothing to read.
    let f = cut(dir.path(), &src, 5_000);
    let e = DatReader::open(&f).err().unwrap().to_string();
    assert!(
        e.contains("more than the file holds") || e.contains("end of the file"),
        "{e}"
    );
}

#[test]
fn unknown_versions_and_compressions_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(traces_dir().join("aos-kvm-empty-v7.dat")).unwrap();
    let v = dir.path().join("v8.dat");
    bytes[10] = b'8';
    std::fs::write(&v, &bytes).unwrap();
    let e = DatReader::open(&v).err().unwrap().to_string();
    assert!(e.contains("file version `8`"), "{e}");
    bytes[10] = b'7';
    // `zstd` → `lz4x`.
    let at = bytes.windows(5).position(|w| w == b"zstd\0").unwrap();
    bytes[at..at + 4].copy_from_slice(b"lz4x");
    let c = dir.path().join("lz4.dat");
    std::fs::write(&c, &bytes).unwrap();
    let e = DatReader::open(&c).err().unwrap().to_string();
    assert!(e.contains("compression `lz4x`"), "{e}");
    let e = DatReader::open(&dir.path().join("missing.dat"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("missing.dat"), "{e}");
    std::fs::write(dir.path().join("text.dat"), b"not a trace").unwrap();
    let e = DatReader::open(&dir.path().join("text.dat"))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a trace-cmd .dat file"), "{e}");
}

/// zlib, which Debian's trace-cmd does not offer: the shared v6 file rewritten as version 7 with zlib
/// (and zstd, and none) sections and chunks gives the same events; trace-cmd itself reads the zstd and
/// uncompressed rewrites as it reads the source.
#[test]
fn zlib_and_other_rewrites_read_as_the_source() {
    use socscope_formats::tracecmd::Compression;
    use socscope_formats::tracecmd::rewrite::{Rewrite, rewrite};
    let dir = tempfile::tempdir().unwrap();
    let src = traces_dir().join("lisa-example_rtapp-v6.dat");
    let want = ours(&src);
    for (compression, name) in [
        (Compression::Zlib, "zlib"),
        (Compression::Zstd, "zstd"),
        (Compression::None, "none"),
    ] {
        let bytes = rewrite(
            &std::fs::read(&src).unwrap(),
            &Rewrite {
                version: 7,
                compression,
                formats: None,
                symbols: None,
                pages: None,
                cpus: None,
                chunk_pages: 10,
                repeat: 1,
            },
        )
        .unwrap();
        let f = dir.path().join(format!("v7-{name}.dat"));
        std::fs::write(&f, bytes).unwrap();
        let r = DatReader::open(&f).unwrap();
        assert_eq!(r.info().compression, compression);
        assert_eq!(ours(&f), want, "{name}");
        if compression != Compression::Zlib {
            assert_eq!(compare(&f), want.len(), "{name}");
        }
    }
}
