//! trace-cmd `.dat` imports: the same trace as the same capture's `trace-cmd report` text imported
//! through the ftrace importer (on every shared `.dat` with events and on a zstd version-7 copy), damage
//! read past with the events before it kept, and kernel stacks attached to the event they follow.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{dump, import_file as run, real};
use socscope_formats::Format;
use socscope_tracedb::{Filter, TimeRange, TraceReader};

fn trace_cmd(args: &[&str]) -> Vec<u8> {
    let out = Command::new("trace-cmd")
        .args(args)
        .output()
        .expect("trace-cmd runs (Debian package trace-cmd, scripts/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "trace-cmd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Imports `dat` and its `trace-cmd report` text; both traces must be the same.
fn same_as_report_text(dat: &Path, dir: &Path) -> usize {
    let text = dir.join("report.txt");
    std::fs::write(&text, trace_cmd(&["report", "-t", dat.to_str().unwrap()])).unwrap();
    let a = dir.join("dat.db");
    let b = dir.join("text.db");
    let ra = run(dat, Format::TraceCmd, &a, true).unwrap();
    let rb = run(&text, Format::Ftrace, &b, true).unwrap();
    assert_eq!(ra.records, rb.records);
    let (da, db) = (dump(&a), dump(&b));
    assert_eq!(da.0, db.0, "types");
    assert_eq!(da.1, db.1, "producers");
    assert_eq!(da.2.len(), db.2.len());
    for (x, y) in da.2.iter().zip(&db.2) {
        assert_eq!(x, y);
    }
    da.2.len()
}

#[test]
fn a_dat_file_gives_the_trace_its_report_text_gives() {
    let dir = tempfile::tempdir().unwrap();
    let src = real("trace-cmd/lisa-example_rtapp-v6.dat");
    let n = same_as_report_text(&src, dir.path());
    // 7 826 events of the threads, IRQs and markers, and 1 553 slices of the CPU tracks (on_cpu,
    // cpu_idle) built from its context switches.
    assert_eq!(n, 9379);
    // A zstd-compressed version-7 copy.
    let v7 = dir.path().join("v7.dat");
    trace_cmd(&[
        "convert",
        "-i",
        src.to_str().unwrap(),
        "--file-version",
        "7",
        "--compression",
        "zstd",
        "-o",
        v7.to_str().unwrap(),
    ]);
    let sub = dir.path().join("v7");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(same_as_report_text(&v7, &sub), n);
}

#[test]
fn detected_by_magic_and_an_empty_capture_is_said_to_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let f = real("trace-cmd/lisa-example_rtapp-v6.dat");
    assert_eq!(
        socscope_collector::import::detect_format(&[f]).unwrap(),
        Format::TraceCmd
    );
    let e = run(
        &real("trace-cmd/aos-kvm-empty-v7.dat"),
        Format::TraceCmd,
        &dir.path().join("e.db"),
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("the capture holds no events"), "{e}");
    assert!(!dir.path().join("e.db").exists());
}

#[test]
fn a_truncated_dat_keeps_the_events_before_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(real("trace-cmd/lisa-example_rtapp-v6.dat")).unwrap();
    let f = dir.path().join("cut.dat");
    std::fs::write(&f, &bytes[..bytes.len() - 20_000]).unwrap();
    let r = run(&f, Format::TraceCmd, &dir.path().join("cut.db"), false).unwrap();
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("CPU 5, byte "), "{}", r.warnings[0]);
    assert!(r.records > 7_000 && r.records < 7_820, "{}", r.records);
    let e = run(&f, Format::TraceCmd, &dir.path().join("strict.db"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("CPU 5") && e.contains("cut short"), "{e}");
    assert!(!dir.path().join("strict.db").exists());
    // Cut in the header: nothing read, a clear error.
    std::fs::write(&f, &bytes[..3000]).unwrap();
    let e = run(&f, Format::TraceCmd, &dir.path().join("h.db"), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut.dat") && e.contains("byte "), "{e}");
    // Cut before the last CPUs' data begins: the first CPUs' events kept, each missing CPU named.
    std::fs::write(&f, &bytes[..3_900_000]).unwrap();
    let r = run(&f, Format::TraceCmd, &dir.path().join("cpus.db"), false).unwrap();
    assert!(!r.warnings.is_empty());
    for w in &r.warnings {
        assert!(
            w.contains("cut.dat: CPU ") && w.contains(", byte ") && w.contains("cut short"),
            "{w}"
        );
    }
    let named = |what: &str| r.warnings.iter().any(|w| w.contains(what));
    assert_eq!(r.warnings.len(), 4, "{:?}", r.warnings);
    assert!(named(
        "CPU 2, byte 3900000: the CPU's data is cut short: 213600 of its 237568 bytes"
    ));
    assert!(named(
        "CPU 3, byte 3923968: the CPU's data is cut short: 0 of its 12288 bytes"
    ));
    assert!(named("CPU 4, byte ") && named("CPU 5, byte "));
    assert!(r.records > 0 && r.records < 7_820, "{}", r.records);
}

#[test]
fn a_wrong_format_is_named_with_the_one_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let dat = real("trace-cmd/lisa-example_rtapp-v6.dat");
    let ctf = real("ctf/lttng-ust-ros2");
    let text = real("ftrace/tci-ftrace_syscalls.txt");
    let err = |f: &Path, format: Format| {
        run(f, format, &dir.path().join("x.db"), false)
            .unwrap_err()
            .to_string()
    };
    let e = err(&dat, Format::Ctf);
    assert!(
        e.contains("lisa-example_rtapp-v6.dat: byte 0: expected a CTF trace directory")
            && e.contains("it reads as trace-cmd: import it with --format trace-cmd"),
        "{e}"
    );
    let e = err(&text, Format::Ctf);
    assert!(
        e.contains("it reads as ftrace: import it with --format ftrace"),
        "{e}"
    );
    let e = err(&dat, Format::Ftrace);
    assert!(
        e.contains("a trace-cmd .dat file, not ftrace text: import it with --format trace-cmd"),
        "{e}"
    );
    for format in [Format::TraceCmd, Format::Ftrace] {
        let e = err(&ctf, format);
        assert!(
            e.contains("lttng-ust-ros2: a CTF trace directory, not a ")
                && e.contains("file: import it with --format ctf (or auto)"),
            "{e}"
        );
    }
    let e = err(&ctf.join("ros2_0"), Format::TraceCmd);
    assert!(
        e.contains("ros2_0: byte 0: expected the trace-cmd magic"),
        "{e}"
    );
    assert!(!dir.path().join("x.db").exists());
}

/// The shared v6 file with CPU 4's only page replaced by records written here: a `cpu_frequency`
/// followed by a `kernel_stack`, a `sched_switch` followed by a `kernel_stack`, before every other
/// event of the capture.
fn with_stacks(dir: &Path) -> (PathBuf, u64, u64) {
    use socscope_formats::tracecmd::DatReader;
    let src = real("trace-cmd/lisa-example_rtapp-v6.dat");
    let mut bytes = std::fs::read(&src).unwrap();
    let find = |b: &[u8], pat: &[u8]| b.windows(pat.len()).position(|w| w == pat);
    let table = find(&bytes, b"flyrecord\0").unwrap() + 10 + 16 * 4;
    let off = u64::from_le_bytes(bytes[table..table + 8].try_into().unwrap()) as usize;
    let sym = |name: &str| -> u64 {
        let at = find(&bytes, format!(" T {name}\n").as_bytes())
            .or_else(|| find(&bytes, format!(" t {name}\n").as_bytes()))
            .unwrap();
        u64::from_str_radix(std::str::from_utf8(&bytes[at - 16..at]).unwrap(), 16).unwrap()
    };
    let (schedule, mark) = (sym("schedule"), sym("tracing_mark_write"));
    let r = DatReader::open(&src).unwrap();
    let id = |n: &str| r.meta().formats().find(|f| f.name == n).unwrap().id;
    let (stack, freq, switch) = (id("kernel_stack"), id("cpu_frequency"), id("sched_switch"));
    let mut data = Vec::new();
    let mut rec = |delta: u32, payload: Vec<u8>| {
        assert_eq!(payload.len() % 4, 0);
        let hdr = (payload.len() as u32 / 4) | (delta << 5);
        data.extend_from_slice(&hdr.to_le_bytes());
        data.extend_from_slice(&payload);
    };
    let head = |id: u16| {
        let mut p = id.to_le_bytes().to_vec();
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        p
    };
    let mut p = head(freq);
    p.extend_from_slice(&1000u32.to_le_bytes());
    p.extend_from_slice(&4u32.to_le_bytes());
    rec(0, p);
    let mut p = head(stack);
    p.extend_from_slice(&2i32.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    for a in [schedule, mark, u64::MAX] {
        p.extend_from_slice(&a.to_le_bytes());
    }
    rec(0, p);
    let mut p = head(switch);
    let comm = |s: &str| {
        let mut c = s.as_bytes().to_vec();
        c.resize(16, 0);
        c
    };
    p.extend(comm("swapper/4"));
    p.extend_from_slice(&0i32.to_le_bytes());
    p.extend_from_slice(&120i32.to_le_bytes());
    p.extend_from_slice(&0i64.to_le_bytes());
    p.extend(comm("crafted"));
    p.extend_from_slice(&4242i32.to_le_bytes());
    p.extend_from_slice(&120i32.to_le_bytes());
    rec(1000, p);
    let mut p = head(stack);
    p.extend_from_slice(&1i32.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    for a in [mark, u64::MAX] {
        p.extend_from_slice(&a.to_le_bytes());
    }
    rec(0, p);
    let t0: u64 = 259_445_000_000_000;
    let mut page = t0.to_le_bytes().to_vec();
    page.extend_from_slice(&(data.len() as u64).to_le_bytes());
    page.extend(data);
    page.resize(4096, 0);
    bytes[off..off + 4096].copy_from_slice(&page);
    let out = dir.join("stacks.dat");
    std::fs::write(&out, bytes).unwrap();
    (out, schedule, mark)
}

#[test]
fn kernel_stacks_are_attached_to_the_event_they_follow() {
    let dir = tempfile::tempdir().unwrap();
    let (f, schedule, mark) = with_stacks(dir.path());
    let db = dir.path().join("s.db");
    let r = run(&f, Format::TraceCmd, &db, true).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let t = TraceReader::open(&db).unwrap();
    let types = t.event_types().unwrap();
    let freq = types.iter().find(|t| t.name == "cpu_frequency").unwrap();
    let names: Vec<&str> = freq.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["state", "cpu_id", "stack"]);
    let (schedule, mark) = (
        format!("schedule ({schedule:x})"),
        format!("tracing_mark_write ({mark:x})"),
    );
    let alone = types.iter().find(|t| t.name == "kernel_stack").unwrap();
    let mut seen = (0, 0);
    for e in t.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        let text = format!("{:?}", e.params);
        if e.type_id == freq.id && e.ts == 259_445_000_000_000 {
            // Frames as `trace-cmd report` prints them (`=> schedule (ffffffc0006f6628)`).
            assert!(text.contains(&format!("{schedule} <- {mark}\"")), "{text}");
            seen.0 += 1;
        }
        if e.type_id == alone.id {
            assert_eq!(e.ts, 259_445_000_001_000);
            assert!(text.contains(&format!("\"{mark}\"")), "{text}");
            seen.1 += 1;
        }
    }
    assert_eq!(seen, (1, 1));
    let stat = |n: &str| {
        t.ingest_stats()
            .unwrap()
            .into_iter()
            .find(|s| s.name == n)
            .unwrap()
            .value
    };
    assert_eq!(
        (stat("dat.stacks_attached"), stat("dat.stacks_alone")),
        (1, 1)
    );
    // The thread the crafted switch ran is named from its record.
    assert!(
        t.producers()
            .unwrap()
            .iter()
            .any(|p| p.local_id == 4242 && p.name == "crafted")
    );
}

/// `trace-cmd report` prints a kernel stack as a `kernel_stack` line and one `=> FUNCTION (ADDRESS)`
/// line per frame: the text importer attaches it as the `.dat` importer does, so the capture with
/// stacks gives the same trace either way.
#[test]
fn report_text_with_kernel_stacks_gives_the_trace_the_dat_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (f, schedule, mark) = with_stacks(dir.path());
    let text = String::from_utf8(trace_cmd(&["report", "-t", f.to_str().unwrap()])).unwrap();
    let frames = format!("=> schedule ({schedule:x})\n=> tracing_mark_write ({mark:x})\n");
    assert!(
        text.contains(&frames),
        "trace-cmd prints the frames: {text:.600}"
    );
    let n = same_as_report_text(&f, dir.path());
    // 9 379 of the shared file, less CPU 4's page the stacks' page replaced.
    assert_eq!(n, 9367);
    // The text import holds both stacks: one attached, one an event of its own.
    let t = TraceReader::open(dir.path().join("text.db")).unwrap();
    let types = t.event_types().unwrap();
    let freq = types.iter().find(|t| t.name == "cpu_frequency").unwrap();
    assert!(freq.params.iter().any(|p| p.name == "stack"));
    let alone = types.iter().find(|t| t.name == "kernel_stack").unwrap();
    let stacks = t
        .events(TimeRange::all(), &Filter::all())
        .unwrap()
        .map(|e| e.unwrap().event)
        .filter(|e| e.type_id == alone.id || (e.type_id == freq.id && e.ts == 259_445_000_000_000))
        .count();
    assert_eq!(stacks, 2);
}

/// Stack frame lines anywhere but after a `kernel_stack` line are bad lines, named.
#[test]
fn a_stack_frame_line_out_of_place_is_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("t.txt");
    std::fs::write(
        &f,
        "cpus=1\n\
         a-1 [000] 1.000000: cpu_frequency: state=1 cpu_id=0\n\
         => schedule (ffffffc0006f6628)\n",
    )
    .unwrap();
    let err = run(&f, Format::Ftrace, &dir.path().join("t.db"), true).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("t.txt:3:1: ") && msg.contains("kernel_stack"),
        "{msg}"
    );
}
