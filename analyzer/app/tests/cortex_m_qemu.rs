//! The agent on an emulated board: `targets/cortex-m/run.sh` builds the mps2-an386 firmware, runs it on
//! QEMU with its UART on a pseudo-terminal read by `socscope collect --serial` (and, in the second run, on a
//! TCP connection to `socscope collect --listen`), and the trace must hold exactly what the firmware says it
//! recorded (its own counters, printed on the semihosting console, and its `Bye`). The second run's UART
//! is modelled at 115 200 baud, too slow for the firmware's event rate: the board drops records, counts
//! them, and the trace shows them as loss intervals.
//!
//! Both runs use QEMU's `-icount` (one instruction = 16 ns of board time), so they do not depend on the
//! host's load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use socscope_tracedb::{Catalog, Filter, ProducerKind, TimeRange, TraceReader};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("the workspace")
        .to_path_buf()
}

/// The wire names of the firmware's record types.
const NAMES: &[(u16, &str)] = &[
    (1, "context_switch"),
    (2, "irq"),
    (3, "irq_exit"),
    (4, "softirq"),
    (5, "softirq_exit"),
    (6, "syscall"),
    (7, "syscall_exit"),
    (8, "wakeup"),
    (9, "marker"),
    (10, "mark"),
    (11, "user_function"),
    (12, "user_function_exit"),
    (13, "thread_create"),
    (14, "thread_exit"),
    (15, "kmalloc"),
    (16, "kfree"),
    (64, "vsync_job"),
    (65, "vsync_job_exit"),
    (66, "deadline_miss"),
    (67, "vsync_slack_us"),
    (68, "audio_fill"),
];

/// What the firmware printed about itself.
#[derive(Debug, Default)]
struct Board {
    stored: BTreeMap<String, u64>,
    dropped_per_type: BTreeMap<String, u64>,
    summary: BTreeMap<String, String>,
}

impl Board {
    fn total(&self, key: &str) -> u64 {
        self.summary[key].parse().expect("a number")
    }
}

fn run(dir: &Path, args: &[&str]) -> Board {
    let out = Command::new(workspace().join("targets/cortex-m/run.sh"))
        .args(["--dir"])
        .arg(dir)
        .args(args)
        .env("SOCSCOPE", env!("CARGO_BIN_EXE_socscope"))
        .output()
        .expect("run.sh starts");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "run.sh {args:?} succeeds:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: BTreeMap<u16, &str> = NAMES.iter().copied().collect();
    let mut board = Board::default();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("socscope-board: ") else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words.as_slice() {
            ["type", t, "stored", s, "dropped", d] => {
                let name = names[&t.parse::<u16>().unwrap()].to_string();
                board.stored.insert(name.clone(), s.parse().unwrap());
                board.dropped_per_type.insert(name, d.parse().unwrap());
            }
            ["mode", ..] | ["dump", ..] | ["systicks", ..] => {
                // `mode NAME key value...`, `systicks N key value...`, `dump key value...`.
                let pairs = if words[0] == "dump" {
                    &words[1..]
                } else {
                    &words[..]
                };
                for pair in pairs.chunks(2) {
                    if let [k, v] = pair {
                        board.summary.insert(k.to_string(), v.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        stdout.contains("agent-agrees"),
        "the firmware's counters equal the agent's: {stdout}"
    );
    board
}

fn only_trace(dir: &Path) -> PathBuf {
    let catalog = Catalog::open(dir).expect("the catalog opens");
    let traces = catalog.traces().expect("the catalog lists traces");
    assert_eq!(traces.len(), 1, "one trace in {dir:?}");
    catalog.resolve(&traces[0])
}

fn stats(reader: &TraceReader) -> BTreeMap<String, i64> {
    reader
        .ingest_stats()
        .expect("ingest statistics")
        .into_iter()
        .map(|s| (s.name, s.value))
        .collect()
}

/// Replays a `.wire` capture into its own catalog with `socscope collect --replay`.
fn replay(capture: &Path, dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args(["collect", "--no-listen", "--replay"])
        .arg(capture)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("socscope collect starts");
    assert!(
        out.status.success(),
        "replay of {capture:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A capture against what the board counted: the same, or — when bytes were lost or altered between
/// QEMU and the collector, which happens on a loaded machine whatever the firmware (it happened with
/// the c612609 build too) — short by exactly what the collector reports lost in transit, with every
/// other count intact. A loss is never hidden: it is printed, and it must be accounted for to the
/// record.
fn check_pty_capture(dir: &Path, board: &Board) {
    let reader = TraceReader::open(only_trace(dir)).expect("the pty trace opens");
    let stats = stats(&reader);
    let records = board.total("records");
    assert_eq!(stats["board_records"] as u64, records, "Bye's records");
    assert_eq!(stats["board_dropped"] as u64, board.total("dropped"));
    assert_eq!(
        stats["records_lost_on_board"] as u64,
        board.total("dropped")
    );
    let lost = stats["records_lost_in_transit"] as u64;
    assert_eq!(
        stats["records"] as u64 + lost,
        records,
        "every record the board sent is in the trace or counted lost in transit: {stats:?}"
    );
    if lost > 0 || stats["frames_dropped"] > 0 {
        assert!(
            stats["frames_dropped"] > 0,
            "a transit loss comes with a damaged frame"
        );
        eprintln!(
            "note: bytes were lost or altered between the board and the collector: {lost} records in \
             {} frames, counted as lost in transit",
            stats["frames_dropped"]
        );
    }
}

/// The checks both runs share: the trace holds what the board counted, per type, and its timestamps
/// never go backwards.
/// The board dropped records (`why` says why it must have), and the trace's loss intervals are exactly
/// those drops: numbered, on CPU 0, adding up to the board's count.
fn losses_match_the_boards_drops(reader: &TraceReader, board: &Board, why: &str) {
    let dropped = board.total("dropped");
    assert!(dropped > 0, "{why}: {:?}", board.summary);
    let losses = reader.losses().unwrap();
    assert_eq!(
        losses.iter().map(|l| l.count).sum::<u64>(),
        dropped,
        "the loss intervals add up to the board's count: {losses:?}"
    );
    for l in &losses {
        let (Some(from), Some(to)) = (l.seq_from, l.seq_to) else {
            panic!("a board loss has its sequence numbers: {l:?}");
        };
        assert_eq!(to - from + 1, l.count, "{l:?}");
        assert_eq!(l.cpu, Some(0), "{l:?}");
    }
}

fn check_trace(dir: &Path, board: &Board) -> TraceReader {
    let reader = TraceReader::open(only_trace(dir)).expect("the trace opens");
    let stats = stats(&reader);
    let records = board.total("records");
    let dropped = board.total("dropped");
    assert_eq!(stats["records"] as u64, records, "{stats:?}");
    assert_eq!(stats["board_records"] as u64, records, "Bye's records");
    assert_eq!(stats["board_dropped"] as u64, dropped, "Bye's dropped");
    assert_eq!(stats["records_lost_on_board"] as u64, dropped);
    assert_eq!(stats["records_lost_in_transit"], 0);
    assert_eq!(stats["frames_dropped"], 0);
    let per_type: BTreeMap<String, u64> = stats
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("records.")?.to_string(), *v as u64)))
        .collect();
    let expected: BTreeMap<String, u64> = board
        .stored
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    assert_eq!(per_type, expected, "records per type");

    let info = reader.info().expect("trace info");
    assert_eq!(info.meta.board, "mps2-an386");
    assert!(info.complete, "the board said Bye");
    // Zero is the board's session start (`Hello`): nothing before it, so every view and export
    // starts at 0 or after (issue 28).
    assert!(info.t_min >= 0, "the first event at {} ns", info.t_min);
    let mut last = None;
    let mut events = 0u64;
    for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap();
        if let Some(last) = last {
            assert!(e.ts >= last, "timestamps never go backwards");
        }
        last = Some(e.ts);
        events += 1;
    }
    assert!(events > 0);
    reader
}

#[test]
fn the_firmware_on_qemu_is_captured_exactly_and_its_drops_are_counted() {
    // 1. A UART fast enough (921 600 baud), through the pty and `socscope collect --serial`; QEMU also
    // logs every byte the UART sent, which must replay into an exact trace.
    let dir = tempfile::tempdir().unwrap();
    let pty_dir = dir.path().join("pty");
    let uart_log = dir.path().join("uart.wire");
    let board = run(
        &pty_dir,
        &[
            "--seconds",
            "3",
            "--baud",
            "921600",
            "--icount",
            "4",
            "--uart-log",
            uart_log.to_str().expect("a UTF-8 temporary path"),
        ],
    );
    check_pty_capture(&pty_dir, &board);
    let replayed = dir.path().join("replayed");
    replay(&uart_log, &replayed);
    // The board counts the bytes it wrote into the UART's data register. Equal to the log's length:
    // the log is the board's output and must replay exactly (a damaged frame there would be the
    // agent's). Not equal: QEMU 7.2 logs a byte twice when its first write to a full pty is retried
    // (QEMU's own UART trace and the pty capture show it sent once; this happens only while the
    // host holds the UART back), so the log is held to the same exact accounting as the pty capture.
    let sent = board.total("uart-bytes");
    let logged = std::fs::metadata(&uart_log).expect("the UART log").len();
    let stalled = board.total("uart-host-stalled-ms");
    let reader = if logged == sent {
        check_trace(&replayed, &board)
    } else {
        assert!(
            stalled > 0,
            "QEMU logged {logged} bytes, the board sent {sent}, and the host never held the UART back"
        );
        eprintln!(
            "note: QEMU's UART log holds {logged} bytes for the board's {sent} (a byte written to \
             a full pty and retried is logged twice); its damage is counted, not hidden"
        );
        check_pty_capture(&replayed, &board);
        TraceReader::open(only_trace(&replayed)).expect("the replayed trace opens")
    };
    // What the firmware made of each type: stored, or dropped (when the host held the UART back).
    let made = |name: &str| {
        board.stored.get(name).copied().unwrap_or(0)
            + board.dropped_per_type.get(name).copied().unwrap_or(0)
    };
    for (_, name) in NAMES {
        assert!(made(name) > 0, "{name} recorded: {:?}", board.stored);
    }
    // A fast UART keeps up: the board drops nothing unless the host held its UART back (QEMU's UART
    // has no speed: its transmitter stays full only while the pty is not read, e.g. a collector
    // descheduled on a loaded machine). Then the board's drops are a real loss, counted exactly and
    // checked above against the trace — never hidden — but not the board's fault.
    let dropped = board.total("dropped");
    assert!(
        dropped == 0 || stalled > 0,
        "the board dropped {dropped} records while the host always took its bytes: {:?}",
        board.summary
    );
    if dropped > 0 {
        eprintln!(
            "note: the host held the board's UART back for {stalled} ms (a loaded machine): \
             {dropped} records dropped on the board, all accounted for in the trace"
        );
    }
    // Interrupts are masked for one record at most (the longest, a system call with four 64-bit
    // arguments, about 4 µs at the emulated 62.5 M instructions/s), never for a frame: so the vsync
    // interrupt, the most urgent, starts within that and its own entry while PendSV drains.
    let masked = board.total("masked-max-ticks");
    let latency = board.total("irq-latency-max-ticks");
    assert!(
        masked > 0 && masked <= 125,
        "masked {masked} ticks of 40 ns"
    );
    assert!(
        latency <= masked + 50,
        "vsync latency {latency} ticks, masked at most {masked}"
    );
    let losses = reader.losses().unwrap();
    assert_eq!(
        losses
            .iter()
            .filter(|l| l.seq_from.is_some() && l.reason == "agent ring buffer full")
            .map(|l| l.count)
            .sum::<u64>(),
        dropped,
        "{losses:?}"
    );
    let producers = reader.producers().unwrap();
    let named =
        |kind: ProducerKind, name: &str| producers.iter().any(|p| p.kind == kind && p.name == name);
    for task in ["idle", "input", "decoder", "render", "audio", "zapper"] {
        assert!(
            named(ProducerKind::Thread, task),
            "thread {task}: {producers:?}"
        );
    }
    for irq in ["SysTick", "vsync (TIMER0)"] {
        assert!(
            named(ProducerKind::Irq, irq),
            "interrupt {irq}: {producers:?}"
        );
    }
    assert!(
        named(ProducerKind::SoftIrq, "vsync bottom half (PendSV)"),
        "{producers:?}"
    );
    // 60 vsyncs a second: one mark and one vsync job each.
    let marks = made("mark");
    assert!((175..=181).contains(&marks), "{marks} vsync marks in 3 s");
    assert_eq!(made("vsync_job"), made("vsync_job_exit"));
    assert!(made("deadline_miss") > 0, "one frame in 40 is late");

    // 2. A UART too slow (115 200 baud), over TCP to `socscope collect --listen`.
    let dir = tempfile::tempdir().unwrap();
    let board = run(
        dir.path(),
        &[
            "--seconds",
            "3",
            "--baud",
            "115200",
            "--icount",
            "4",
            "--tcp",
        ],
    );
    let reader = check_trace(dir.path(), &board);
    losses_match_the_boards_drops(&reader, &board, "a slow UART loses records");
}

#[test]
fn a_post_mortem_dump_on_qemu_is_stored_as_the_window_of_the_ring() {
    // The agent in post-mortem mode: nothing streams; the vsync job's deadline check dumps the rings
    // at its first missed deadline after 2 s, over the UART (pty, `collect --serial`).
    let dir = tempfile::tempdir().unwrap();
    let board = run(
        dir.path(),
        &[
            "--mode",
            "postmortem",
            "--seconds",
            "4",
            "--dump-after",
            "2",
            "--baud",
            "921600",
            "--icount",
            "4",
        ],
    );
    let reader = TraceReader::open(only_trace(dir.path())).expect("the trace opens");
    let info = reader.info().unwrap();
    assert!(info.complete, "the dump ends with Bye");
    assert!(
        info.meta
            .params
            .iter()
            .any(|(n, v)| n == socscope_tracedb::CAPTURE_WINDOW_PARAM
                && v.to_string() == socscope_tracedb::POST_MORTEM_RING),
        "marked as a post-mortem window: {:?}",
        info.meta.params
    );
    let stats = stats(&reader);
    let overwritten = board.total("overwritten");
    assert!(
        overwritten > 1000,
        "the ring went round many times: {overwritten}"
    );
    assert_eq!(stats["records_overwritten_on_board"] as u64, overwritten);
    assert_eq!(stats["records_lost_in_transit"], 0);
    assert_eq!(stats["records_lost_on_board"], 0);
    assert!(
        reader.losses().unwrap().is_empty(),
        "what the ring overwrote is not a loss"
    );
    // The window is the ring's last records before the dump, by the firmware's own numbering: its
    // Bye counts every record numbered up to the dump, the window holds the last of them, and the
    // dump's marker (numbered by the firmware in the same masked section) is among the last.
    let given_out = stats["board_records"] as u64 + stats["board_dropped"] as u64;
    let marker_seq = board.total("marker-seq");
    assert!(
        marker_seq < given_out && given_out <= marker_seq + 16,
        "the dump's snapshot follows its marker: marker {marker_seq}, given out {given_out}"
    );
    assert!(given_out <= board.total("numbered"));
    assert_eq!(stats["records"] as u64, given_out - overwritten);
    let marker = socscope_tracedb::ParamValue::String("deadline missed: post-mortem dump".into());
    let found = reader
        .events(TimeRange::all(), &Filter::all())
        .unwrap()
        .map(|e| e.unwrap())
        .any(|e| e.params.contains(&marker));
    assert!(found, "the dump's own marker is in the window");
}

#[test]
fn the_firmware_in_probe_mode_is_read_through_the_debug_port_exactly() {
    // 1. Probe mode: the firmware built with its `probe` feature only records; `socscope collect
    // --probe` reads its rings through QEMU's gdbstub and frames them on the host. The trace holds what
    // the board counted, per type, with the dictionary from the board's flash image.
    let dir = tempfile::tempdir().unwrap();
    let board = run(dir.path(), &["--probe", "--seconds", "3", "--icount", "4"]);
    assert_eq!(board.total("frames"), 0, "the board framed nothing");
    assert_eq!(board.total("uart-bytes"), 0, "nor used its UART");
    let reader = check_trace(dir.path(), &board);
    let made = |name: &str| {
        board.stored.get(name).copied().unwrap_or(0)
            + board.dropped_per_type.get(name).copied().unwrap_or(0)
    };
    for (_, name) in NAMES {
        assert!(made(name) > 0, "{name} recorded: {:?}", board.stored);
    }
    let dropped = board.total("dropped");
    let losses = reader.losses().unwrap();
    assert_eq!(
        losses.iter().map(|l| l.count).sum::<u64>(),
        dropped,
        "{losses:?}"
    );
    let producers = reader.producers().unwrap();
    assert!(
        producers
            .iter()
            .any(|p| p.kind == ProducerKind::SoftIrq && p.name == "vsync bottom half (PendSV)"),
        "{producers:?}"
    );
    for task in ["idle", "input", "decoder", "render", "audio", "zapper"] {
        assert!(
            producers
                .iter()
                .any(|p| p.kind == ProducerKind::Thread && p.name == task),
            "thread {task}: {producers:?}"
        );
    }
    // The vsync job is a state: one per job the board stored (each closed by its exit record).
    let types = reader.event_types().unwrap();
    let job = types
        .iter()
        .find(|t| t.name == "vsync_job")
        .expect("the board's vsync_job type")
        .id;
    let jobs = reader
        .states_overlapping(TimeRange::all(), &Filter::all())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.type_id == job)
        .count() as u64;
    assert_eq!(jobs, board.stored["vsync_job"], "vsync_job states");
    let marks = made("mark");
    assert!((175..=181).contains(&marks), "{marks} vsync marks in 3 s");

    // 2. Flood: thread mode records faster than the host reads; the board drops records, numbered,
    // and the trace's loss intervals add up to its count.
    let dir = tempfile::tempdir().unwrap();
    let board = run(
        dir.path(),
        &[
            "--probe",
            "--mode",
            "flood",
            "--seconds",
            "2",
            "--icount",
            "4",
        ],
    );
    let reader = check_trace(dir.path(), &board);
    losses_match_the_boards_drops(&reader, &board, "a flood outruns the probe");
}
