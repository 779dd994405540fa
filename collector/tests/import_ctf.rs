//! CTF imports: the shared LTTng and perf traces mapped like ftrace (counts checked against babeltrace2's
//! reading of the same traces), and a trace written here — big-endian, with a little-endian field, enums,
//! a variant, a sequence, a float, bit fields, 16-bit timestamps that wrap, discarded events — read as
//! babeltrace2 reads it, its losses stored as intervals, and its damage (a cut stream, a missing
//! stream, a metadata syntax error) reported with the events before it kept.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::real;
use socscope_collector::import::{ImportReport, detect_format};
use socscope_formats::Format;
use socscope_formats::ctf::CtfReader;
use socscope_tracedb::{EventCategory, Filter, TimeRange, TraceReader};

fn run(dir: &Path, out: &Path, strict: bool) -> socscope_collector::Result<ImportReport> {
    common::import_file(dir, Format::Ctf, out, strict)
}

/// babeltrace2's text of `dir`: one line per event.
fn babeltrace(dir: &Path) -> String {
    let out = Command::new("babeltrace2")
        .arg("--clock-seconds")
        .arg(dir)
        .output()
        .expect("babeltrace2 runs (Debian package babeltrace2, scripts/install-test-deps.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn names(text: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let rest = l.split_once(") ").unwrap().1;
        let head = rest.split_once(": ").unwrap().0;
        *m.entry(head.rsplit(' ').next().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

/// Events per type name and category.
fn stored(db: &Path) -> HashMap<(String, EventCategory), u64> {
    let r = TraceReader::open(db).unwrap();
    let names: HashMap<_, _> = r
        .event_types()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let mut m = HashMap::new();
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        *m.entry((names[&e.type_id].clone(), e.category()))
            .or_default() += 1;
    }
    m
}

#[test]
fn lttng_kernel_events_become_states_and_links() {
    let dir = tempfile::tempdir().unwrap();
    let src = real("ctf/lttng-kernel-arm-bug446190");
    assert_eq!(
        detect_format(std::slice::from_ref(&src)).unwrap(),
        Format::Ctf
    );
    let db = dir.path().join("k.db");
    let r = run(&src, &db, true).unwrap();
    let bt = names(&babeltrace(&src));
    assert_eq!(r.records, bt.values().sum::<u64>());
    let s = stored(&db);
    let get = |n: &str, c: EventCategory| s.get(&(n.to_string(), c)).copied().unwrap_or(0);
    assert_eq!(get("irq", EventCategory::State), bt["irq_handler_entry"]);
    assert_eq!(get("softirq", EventCategory::State), bt["softirq_entry"]);
    assert_eq!(
        get("wakeup", EventCategory::Link),
        bt["sched_wakeup"] + bt["sched_wakeup_new"]
    );
    // Every switch ends a running state; the CPUs' last ones close at the end.
    assert_eq!(get("running", EventCategory::State), bt["sched_switch"] + 4);
    let entries: u64 = bt
        .iter()
        .filter(|(n, _)| n.starts_with("sys_"))
        .map(|(_, c)| c)
        .sum();
    assert!(get("syscall", EventCategory::State) >= entries);
    // Events of no rule are kept whole, one type each.
    for n in [
        "kmem_kfree",
        "rcu_utilization",
        "lttng_statedump_process_state",
        "hrtimer_start",
    ] {
        assert_eq!(get(n, EventCategory::Punctual), bt[n], "{n}");
    }
    // Statedump names the threads and their processes.
    let t = TraceReader::open(&db).unwrap();
    let producers = t.producers().unwrap();
    assert!(producers.iter().any(|p| p.name == "lttng-consumerd"));
    assert!(producers.iter().any(|p| p.parent.is_some()));
    let named = producers
        .iter()
        .filter(|p| p.kind.name() == "thread" && !p.name.starts_with("thread "))
        .count();
    assert!(named > 150, "{named} threads named");
}

#[test]
fn ust_and_perf_traces_import_with_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    for (rel, n) in [
        ("ctf/lttng-ust-ros2", 99_338),
        ("ctf/perf-ctf-taskset2", 1_500),
    ] {
        let src = real(rel);
        let db = dir.path().join(format!("{n}.db"));
        let r = run(&src, &db, true).unwrap();
        assert_eq!(r.records, n);
        let bt = names(&babeltrace(&src));
        let s = stored(&db);
        if rel.contains("ros2") {
            // User events, one type per event name, fields as parameters; threads named by procname.
            for (name, count) in &bt {
                assert_eq!(
                    s[&(name.clone(), EventCategory::Punctual)],
                    *count,
                    "{name}"
                );
            }
            let t = TraceReader::open(&db).unwrap();
            let ty = t
                .event_types()
                .unwrap()
                .into_iter()
                .find(|t| t.name == "ros2:rcl_init")
                .unwrap();
            let p: Vec<&str> = ty.params.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(p, ["context_handle", "version"]);
            assert!(
                t.producers()
                    .unwrap()
                    .iter()
                    .any(|p| p.name == "sync_one_to_one")
            );
        } else {
            // perf's `sched:` events, on the CPU of their `perf_cpu` field.
            let running = s[&("running".to_string(), EventCategory::State)];
            assert!(running >= bt["sched:sched_switch"], "{running}");
            assert_eq!(
                s[&("wakeup".to_string(), EventCategory::Link)],
                bt["sched:sched_wakeup"]
            );
            assert_eq!(
                s[&("sched_stat_runtime".to_string(), EventCategory::Punctual)],
                585
            );
        }
    }
}

/// Bits written in a byte order, with CTF's alignment.
struct Bits {
    bytes: Vec<u8>,
    bits: u64,
}

impl Bits {
    fn new() -> Self {
        Self {
            bytes: Vec::new(),
            bits: 0,
        }
    }
    fn align(&mut self, a: u64) {
        while !self.bits.is_multiple_of(a) {
            self.put(0, 1, true);
        }
    }
    /// `size` bits of `v`, big-endian (most significant bit first) or little-endian.
    fn put(&mut self, v: u64, size: u32, big: bool) {
        for k in 0..size {
            let bit = if big {
                (v >> (size - 1 - k)) & 1
            } else {
                (v >> k) & 1
            };
            let (byte, off) = ((self.bits / 8) as usize, (self.bits % 8) as u32);
            if byte == self.bytes.len() {
                self.bytes.push(0);
            }
            if bit == 1 {
                self.bytes[byte] |= if big { 0x80 >> off } else { 1 << off };
            }
            self.bits += 1;
        }
    }
    fn int(&mut self, v: u64, size: u32, align: u64) {
        self.align(align);
        self.put(v, size, true);
    }
    fn str(&mut self, s: &str) {
        self.align(8);
        for b in s.bytes().chain([0]) {
            self.put(u64::from(b), 8, true);
        }
    }
}

const METADATA: &str = r#"/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
trace {
    major = 1; minor = 8;
    byte_order = be;
    packet.header := struct { uint32_t magic; uint32_t stream_id; };
};
env { hostname = "synth"; domain = "kernel"; sysname = "Linux"; kernel_release = "6.1.0"; };
clock { name = mono; freq = 1000000; offset_s = 1700000000; offset = 500; };
typealias integer { size = 16; align = 8; signed = false; map = clock.mono.value; } := ts16_t;
typealias integer { size = 64; align = 8; signed = false; map = clock.mono.value; } := ts64_t;
enum state_e : integer { size = 3; align = 1; signed = false; } { RUNNING = 0, SLEEPING = 1, BLOCKED = 2 ... 4 };
stream {
    id = 0;
    packet.context := struct {
        ts64_t timestamp_begin; ts64_t timestamp_end;
        uint64_t content_size; uint64_t packet_size;
        uint32_t events_discarded; uint32_t cpu_id;
    };
    event.header := struct { uint8_t id; ts16_t timestamp; };
};
event {
    name = "sched_switch"; id = 0; stream_id = 0;
    fields := struct {
        integer { size = 8; align = 8; signed = 0; encoding = UTF8; } _prev_comm[16];
        integer { size = 32; align = 8; signed = 1; } _prev_tid;
        integer { size = 32; align = 8; signed = 1; } _prev_prio;
        integer { size = 64; align = 8; signed = 1; } _prev_state;
        integer { size = 8; align = 8; signed = 0; encoding = UTF8; } _next_comm[16];
        integer { size = 32; align = 8; signed = 1; } _next_tid;
        integer { size = 32; align = 8; signed = 1; } _next_prio;
    };
};
event {
    name = "synth_sample"; id = 1; stream_id = 0;
    fields := struct {
        enum state_e _st;
        integer { size = 5; align = 1; signed = true; } _small;
        uint8_t _n;
        uint16_t _vals[_n];
        integer { size = 32; align = 8; signed = false; byte_order = le; base = 16; } _le;
        floating_point { exp_dig = 11; mant_dig = 53; align = 8; } _f;
        string _s;
        variant <_st> { uint32_t RUNNING; string SLEEPING; uint8_t BLOCKED; } _v;
    };
};
"#;

/// One event: id, low 16 bits of the clock, payload writer.
fn event(b: &mut Bits, id: u8, ts: u64, payload: &dyn Fn(&mut Bits)) {
    b.int(u64::from(id), 8, 8);
    b.int(ts & 0xffff, 16, 8);
    payload(b);
}

fn switch(prev: (&str, u64), next: (&str, u64)) -> impl Fn(&mut Bits) {
    let (prev, next) = ((prev.0.to_string(), prev.1), (next.0.to_string(), next.1));
    move |b: &mut Bits| {
        let comm = |b: &mut Bits, s: &str| {
            let mut bytes = s.as_bytes().to_vec();
            bytes.resize(16, 0);
            for x in bytes {
                b.int(u64::from(x), 8, 8);
            }
        };
        comm(b, &prev.0);
        b.int(prev.1, 32, 8);
        b.int(120, 32, 8);
        b.int(1, 64, 8);
        comm(b, &next.0);
        b.int(next.1, 32, 8);
        b.int(120, 32, 8);
    }
}

fn sample(st: u64, small: i64, vals: &[u16], s: &str) -> impl Fn(&mut Bits) {
    let vals = vals.to_vec();
    let s = s.to_string();
    move |b: &mut Bits| {
        b.put(st, 3, true);
        b.put(small as u64 & 0x1f, 5, true);
        b.int(vals.len() as u64, 8, 8);
        for v in &vals {
            b.int(u64::from(*v), 16, 8);
        }
        b.align(8);
        b.put(0xdead_beef, 32, false);
        b.int(2.5f64.to_bits(), 64, 8);
        b.str(&s);
        match st {
            0 => b.int(77, 32, 8),
            1 => b.str("asleep"),
            _ => b.int(9, 8, 8),
        }
    }
}

/// An event to write: its id, its clock value, its payload.
type Written<'a> = (u8, u64, &'a dyn Fn(&mut Bits));

/// A packet of `events`, its context saying `discarded` so far.
fn packet(cpu: u32, discarded: u32, begin: u64, end: u64, events: &[Written<'_>]) -> Vec<u8> {
    let mut body = Bits::new();
    // The header and context are written once the sizes are known; their length is fixed: 8 + 40.
    let header_bits = (8 + 40) * 8;
    body.bits = header_bits;
    body.bytes = vec![0; (header_bits / 8) as usize];
    for (id, ts, p) in events {
        event(&mut body, *id, *ts, *p);
    }
    let content = body.bits;
    body.align(8);
    let size = (body.bytes.len() as u64 + 16) * 8;
    let mut h = Bits::new();
    h.int(0xC1FC_1FC1, 32, 8);
    h.int(0, 32, 8);
    h.int(begin, 64, 8);
    h.int(end, 64, 8);
    h.int(content, 64, 8);
    h.int(size, 64, 8);
    h.int(u64::from(discarded), 32, 8);
    h.int(u64::from(cpu), 32, 8);
    let mut out = h.bytes;
    out.extend_from_slice(&body.bytes[out.len()..]);
    out.resize((size / 8) as usize, 0);
    out
}

/// The synthetic trace: CPU 0 in two packets (5 events discarded between them, 16-bit timestamps
/// wrapping in the second), CPU 1 in one.
fn synthetic(dir: &Path) -> PathBuf {
    let t = dir.join("synth");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(t.join("metadata"), METADATA).unwrap();
    let mut c0 = packet(
        0,
        0,
        1_000_000,
        1_000_900,
        &[
            (0, 1_000_100, &switch(("swapper/0", 0), ("worker", 42))),
            (1, 1_000_200, &sample(0, -3, &[1, 2, 3], "first")),
            (1, 1_000_300, &sample(1, 15, &[], "second")),
        ],
    );
    // 65 536 µs later: the 16-bit clock wraps between the two events of the second packet.
    c0.extend(packet(
        0,
        5,
        1_065_000,
        1_131_100,
        &[
            (1, 1_065_500, &sample(3, -16, &[65535], "third")),
            (0, 1_066_100, &switch(("worker", 42), ("swapper/0", 0))),
            (1, 1_131_072, &sample(2, 0, &[7, 8], "wrapped")),
        ],
    ));
    std::fs::write(t.join("chan_0"), c0).unwrap();
    let c1 = packet(
        1,
        0,
        1_000_000,
        1_002_000,
        &[(1, 1_000_250, &sample(0, 1, &[4], "cpu one"))],
    );
    std::fs::write(t.join("chan_1"), c1).unwrap();
    t
}

#[test]
fn a_written_trace_reads_as_babeltrace2_reads_it_and_its_losses_are_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let t = synthetic(dir.path());
    let bt = babeltrace(&t);
    let mut r = CtfReader::open(&t).unwrap();
    let mut mine = Vec::new();
    let mut losses = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        let mut groups = vec![format!("{{ cpu_id = {} }}", e.cpu.unwrap())];
        groups.extend(e.fields.iter().map(|f| f.to_string()));
        mine.push(format!(
            "{}.{:09} {}: {}",
            e.ns / 1_000_000_000,
            e.ns % 1_000_000_000,
            e.name,
            groups.join(", ")
        ));
        losses.extend(r.take_losses());
    }
    let theirs: Vec<String> = bt
        .lines()
        .map(|l| {
            let (ts, rest) = l[1..].split_once("] ").unwrap();
            let rest = rest.split_once(") ").unwrap().1;
            let rest = rest.strip_prefix("synth ").unwrap();
            format!("{ts} {rest}")
        })
        .collect();
    assert_eq!(mine, theirs);
    assert_eq!(mine.len(), 7);
    // The wrapped timestamp: 1 131 072 µs, rebuilt from its 16 low bits.
    assert!(
        mine[6].starts_with("1700000001.131572000 synth_sample"),
        "{}",
        mine[6]
    );
    assert!(
        mine[1].contains("st = ( \"RUNNING\" : container = 0 ), small = -3"),
        "{}",
        mine[1]
    );
    assert!(mine[1].contains("le = 0xDEADBEEF, f = 2.5"), "{}", mine[1]);
    assert_eq!(losses.len(), 1);
    assert_eq!((losses[0].cpu, losses[0].count), (Some(0), 5));
    // From the previous packet's end to this packet's end, as babeltrace2 reports it.
    assert_eq!(
        (losses[0].from_ns, losses[0].to_ns),
        (1_700_000_001_001_400_000, 1_700_000_001_131_600_000)
    );

    // Imported: the loss as an interval on CPU 0, the switch as running states.
    let db = dir.path().join("s.db");
    let rep = run(&t, &db, true).unwrap();
    assert_eq!(rep.records, 7);
    let tr = TraceReader::open(&db).unwrap();
    let l = tr.losses().unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(
        (l[0].cpu, l[0].count, l[0].ts),
        (Some(0), 5, 1_700_000_001_001_400_000)
    );
    assert!(
        l[0].reason.contains("and 1700000001131600000 ns"),
        "{}",
        l[0].reason
    );
    let s = stored(&db);
    assert_eq!(s[&("synth_sample".to_string(), EventCategory::Punctual)], 5);
    assert!(
        tr.producers()
            .unwrap()
            .iter()
            .any(|p| p.local_id == 42 && p.name == "worker")
    );
}

#[test]
fn damage_is_named_and_the_events_before_it_kept() {
    let dir = tempfile::tempdir().unwrap();
    let t = synthetic(dir.path());
    // CPU 0's second packet cut in its last event (past the 16 bytes of padding): the events before
    // the cut kept, of both packets, and CPU 1's.
    let c0 = std::fs::read(t.join("chan_0")).unwrap();
    std::fs::write(t.join("chan_0"), &c0[..c0.len() - 30]).unwrap();
    let rep = run(&t, &dir.path().join("cut.db"), false).unwrap();
    assert_eq!(rep.records, 6);
    assert_eq!(rep.warnings.len(), 1, "{:?}", rep.warnings);
    assert!(
        rep.warnings[0].contains("chan_0: stream chan_0, byte "),
        "{}",
        rep.warnings[0]
    );
    assert!(rep.warnings[0].contains("cut short"), "{}", rep.warnings[0]);
    let e = run(&t, &dir.path().join("strict.db"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut short"), "{e}");
    std::fs::write(t.join("chan_0"), &c0).unwrap();

    // A stream the index names but the directory lacks.
    std::fs::create_dir(t.join("index")).unwrap();
    for n in ["chan_0", "chan_1", "chan_2"] {
        std::fs::write(t.join("index").join(format!("{n}.idx")), b"").unwrap();
    }
    let rep = run(&t, &dir.path().join("missing.db"), false).unwrap();
    assert_eq!(rep.records, 7);
    assert!(
        rep.warnings
            .iter()
            .any(|w| w.contains("chan_2") && w.contains("stream missing")),
        "{:?}",
        rep.warnings
    );
    std::fs::remove_dir_all(t.join("index")).unwrap();

    // A metadata syntax error: its line and column.
    let bad = METADATA.replace("byte_order = be;", "byte_order = be");
    std::fs::write(t.join("metadata"), bad).unwrap();
    let e = run(&t, &dir.path().join("meta.db"), false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("metadata:9:5: expected `;` after an entry"),
        "{e}"
    );

    // Not a CTF directory at all.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = detect_format(std::slice::from_ref(&empty))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a CTF trace"), "{e}");
    let e = run(&empty, &dir.path().join("e.db"), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no CTF trace here"), "{e}");
}

/// Per `vtid`: how many events babeltrace2 gives (its event-context group `{ vtid = N, ... }`).
fn per_vtid(text: &str) -> BTreeMap<i64, u64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let vtid = l
            .split_once("vtid = ")
            .and_then(|(_, r)| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no vtid in {l}"));
        *m.entry(vtid).or_default() += 1;
    }
    m
}

/// Stored events of user-space types (`provider:event`) per thread (its local id), and each thread's name.
fn ust_per_thread(db: &Path) -> (BTreeMap<i64, u64>, HashMap<i64, String>) {
    let r = TraceReader::open(db).unwrap();
    let ust: std::collections::HashSet<_> = r
        .event_types()
        .unwrap()
        .into_iter()
        .filter(|t| t.name.contains(':'))
        .map(|t| t.id)
        .collect();
    let producers: HashMap<_, _> = r
        .producers()
        .unwrap()
        .into_iter()
        .map(|p| (p.id, p))
        .collect();
    let mut m = BTreeMap::new();
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap().event;
        if ust.contains(&e.type_id) {
            let p = &producers[&e.producer];
            assert_eq!(p.kind.name(), "thread", "{p:?}");
            *m.entry(p.local_id).or_default() += 1;
        }
    }
    let names = producers
        .values()
        .filter(|p| p.kind.name() == "thread")
        .map(|p| (p.local_id, p.name.clone()))
        .collect();
    (m, names)
}

#[test]
fn user_space_events_belong_to_the_thread_that_emitted_them() {
    // A user-space-only trace names no running thread: each event is its `vtid`'s, as babeltrace2
    // reads that context.
    let dir = tempfile::tempdir().unwrap();
    let src = real("ctf/lttng-ust-ros2");
    let db = dir.path().join("ros2.db");
    run(&src, &db, true).unwrap();
    let bt = babeltrace(&src);
    let (stored, names) = ust_per_thread(&db);
    assert_eq!(stored, per_vtid(&bt));
    assert_eq!(stored.len(), 6);
    // Named by their context's procname.
    assert_eq!(names[&427_932], "sync_one_to_one");
    assert_eq!(names[&427_930], "source");
}

/// Copies the CTF trace `from` into `to` (created).
fn copy_trace(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_trace(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn an_lttng_session_with_kernel_and_user_space_traces_imports_whole() {
    // LTTng's session layout: `kernel/` and `ust/uid/UID/64-bit/`, each a trace of its own clock.
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    copy_trace(
        &real("ctf/lttng-kernel-arm-bug446190"),
        &session.join("kernel"),
    );
    copy_trace(
        &real("ctf/lttng-ust-ros2"),
        &session.join("ust/uid/1000/64-bit"),
    );
    assert_eq!(
        detect_format(std::slice::from_ref(&session)).unwrap(),
        Format::Ctf
    );
    let reader = CtfReader::open(&session).unwrap();
    assert_eq!(reader.traces().len(), 2);
    drop(reader);
    let db = dir.path().join("session.db");
    let r = run(&session, &db, true).unwrap();
    let text = babeltrace(&session);
    let bt = names(&text);
    assert_eq!(r.records, bt.values().sum::<u64>());
    assert_eq!(r.records, 31_556 + 99_338);
    let s = stored(&db);
    let get = |n: &str, c: EventCategory| s.get(&(n.to_string(), c)).copied().unwrap_or(0);
    // The kernel trace mapped as alone (its names bare), the user-space one kept whole.
    assert_eq!(get("irq", EventCategory::State), bt["irq_handler_entry"]);
    assert_eq!(get("running", EventCategory::State), bt["sched_switch"] + 4);
    assert_eq!(
        get("wakeup", EventCategory::Link),
        bt["sched_wakeup"] + bt["sched_wakeup_new"]
    );
    for (name, count) in bt.iter().filter(|(n, _)| n.contains(':')) {
        assert_eq!(get(name, EventCategory::Punctual), *count, "{name}");
    }
    // User-space events (named `provider:event`) on their threads, as babeltrace2 reads their vtid
    // (the kernel's statedump events carry a `vtid` too, as a payload field).
    let ust_lines: String = text
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(3)
                .is_some_and(|n| n.trim_end_matches(':').contains(':'))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(ust_per_thread(&db).0, per_vtid(&ust_lines));
    // Both traces merged in time: the stored range spans from the kernel trace's first event to the
    // user-space trace's last.
    let span = (r.info.t_min, r.info.t_max);
    let first_last = |text: &str| {
        let ts = |l: &str| -> i64 {
            let (s, ns) = l[1..].split_once(']').unwrap().0.split_once('.').unwrap();
            s.parse::<i64>().unwrap() * 1_000_000_000 + ns.parse::<i64>().unwrap()
        };
        (
            ts(text.lines().next().unwrap()),
            ts(text.lines().last().unwrap()),
        )
    };
    assert_eq!(span, first_last(&text));
}

/// The packets of an LTTng stream file (offset, length): each packet context's `packet_size` (bits),
/// after the 32-byte header and three 64-bit fields, little-endian.
fn packets(stream: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let bits = u64::from_le_bytes(stream[at + 56..at + 64].try_into().unwrap());
        let len = (bits / 8) as usize;
        out.push((at, len));
        at += len;
    }
    out
}

#[test]
fn lost_packets_are_a_loss_as_babeltrace2_reports_them() {
    // Packets 2 and 3 of one stream of the ros2 trace cut out: its packet_seq_num jumps from 1 to 4.
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("gap");
    std::fs::create_dir(&t).unwrap();
    let src = real("ctf/lttng-ust-ros2");
    std::fs::copy(src.join("metadata"), t.join("metadata")).unwrap();
    let bytes = std::fs::read(src.join("ros2_0")).unwrap();
    let kept: Vec<u8> = packets(&bytes)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 2 && *i != 3)
        .flat_map(|(_, (at, len))| bytes[at..at + len].to_vec())
        .collect();
    std::fs::write(t.join("ros2_0"), kept).unwrap();

    let out = Command::new("babeltrace2")
        .arg("--clock-seconds")
        .arg(&t)
        .output()
        .unwrap();
    let warning = String::from_utf8_lossy(&out.stderr);
    // `WARNING: Tracer discarded 2 packets between [S.NS] and [S.NS] ...`
    let between = |w: &str| -> (u64, i64, i64) {
        let (n, rest) = w
            .split_once("discarded ")
            .unwrap()
            .1
            .split_once(" packets between [")
            .unwrap();
        let (from, rest) = rest.split_once("] and [").unwrap();
        let to = rest.split_once(']').unwrap().0;
        let ns = |s: &str| s.replace('.', "").parse::<i64>().unwrap();
        (n.parse().unwrap(), ns(from), ns(to))
    };
    let (n, from, to) = between(&warning);
    assert_eq!(n, 2);

    let mut r = CtfReader::open(&t).unwrap();
    let mut events = 0u64;
    let mut losses = Vec::new();
    while r.next_event().unwrap().is_some() {
        events += 1;
        losses.extend(r.take_losses());
    }
    assert_eq!(
        events,
        String::from_utf8_lossy(&out.stdout).lines().count() as u64
    );
    assert_eq!(losses.len(), 1);
    assert_eq!(
        (
            losses[0].packets,
            losses[0].count,
            losses[0].from_ns,
            losses[0].to_ns
        ),
        (2, 0, from, to)
    );
    assert_eq!(r.streams()[0].missing_packets, 2);

    // Imported: a loss row at the interval's start, saying how many packets; counted.
    let db = dir.path().join("gap.db");
    let rep = run(&t, &db, true).unwrap();
    assert_eq!(rep.records, events);
    let l = TraceReader::open(&db).unwrap().losses().unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].cpu, l[0].ts, l[0].count), (Some(0), from, 0));
    assert!(l[0].reason.starts_with("2 packets lost"), "{}", l[0].reason);
    let stats = TraceReader::open(&db).unwrap().ingest_stats().unwrap();
    assert!(
        stats
            .iter()
            .any(|s| s.name == "ctf.missing_packets" && s.value == 2),
        "{stats:?}"
    );
}

/// A trace as comparable text, one line per type, producer (by kind and board id) and event (time,
/// end, type, producer, CPU, parameters), each part sorted.
fn dump(path: &Path) -> Vec<String> {
    let (t, p, e) = common::dump(path);
    t.into_iter()
        .map(|l| format!("type {l}"))
        .chain(p.into_iter().map(|l| format!("producer {l}")))
        .chain(e)
        .collect()
}

/// FNV-1a (64 bits) of `lines`, each ended by a newline: a digest that does not change from build
/// to build.
fn fnv1a(lines: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for l in lines {
        for b in l.bytes().chain([b'\n']) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The kernel events the importer maps straight from their decoded fields (sched_switch, wake-ups,
/// IRQs, soft IRQs, syscalls) give the trace they gave when they were rendered as ftrace text and
/// read back by the ftrace rules (up to commit cdf4590): the same types, producers and events, each
/// with its parameters. The digest was taken once that trace's CSV export was found equal, line for
/// line, to the export of the text round trip's trace (a change of the rules themselves changes it
/// too: then check the new trace and take its digest).
#[test]
fn the_kernel_trace_is_the_one_the_ftrace_text_round_trip_gave() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    run(&real("ctf/lttng-kernel-arm-bug446190"), &db, true).unwrap();
    let lines = dump(&db);
    let count = |what: &str| lines.iter().filter(|l| l.starts_with(what)).count();
    assert_eq!(
        (count("type "), count("producer "), lines.len()),
        (79, 227, 28871)
    );
    assert_eq!(format!("{:016x}", fnv1a(&lines)), "0374562f602cc530");
}
