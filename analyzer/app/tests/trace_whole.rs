//! Reliability, second pass (issue 27), from the command line: a trace file is always whole and its
//! state always true, whatever ends the capture (a full disk, a signal, a window closed) and whatever
//! command wrote to it last; every command that prints names from a trace escapes them.
//!
//! Real files, a real tmpfs (mounted by the tests that need one: root only, CI runs as root), real
//! sockets and signals; the `socscope` binary of this build.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::collect::Collect;
use common::socscope;
use serde_json::Value;
use socscope_sim::SimConfig;
use socscope_tracedb::{Filter, TimeRange, TraceReader};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A tmpfs of `size` mounted on a temporary directory, unmounted when dropped; `None` (the test is
/// skipped, and says so) only outside CI.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot mount a tmpfs: CI runs this test as root, it must not be skipped there"
            );
            eprintln!("skipped: cannot mount a tmpfs here (needs root)");
            return None;
        }
        Some(Self(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// A simulated board streaming as fast as it can to `address` (its errors ignored: the collector may
/// close the link when the disk is full).
fn board(address: &str, seed: u64, seconds: f64) -> std::thread::JoinHandle<()> {
    let address = address.to_string();
    std::thread::spawn(move || {
        let Ok(stream) = socscope_sim::transport::tcp(&address) else {
            return;
        };
        let mut link = socscope_sim::transport::WriterTransport::new(stream);
        let config = SimConfig {
            seed,
            duration_s: seconds,
            ..SimConfig::default()
        };
        let _ = socscope_sim::run(&config, &mut link);
        let _ = link.finish();
    })
}

/// Every event of every chunk, decoded (an unreadable chunk fails).
fn decoded_events(path: &Path) -> u64 {
    let r = TraceReader::open(path).unwrap();
    let mut n = 0;
    for e in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        e.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    n
}

fn assert_alone(path: &Path) {
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        assert!(
            !Path::new(&p).exists(),
            "{} left beside the trace",
            Path::new(&p).display()
        );
    }
}

fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "db")
                && p.file_name().is_some_and(|n| n != "catalog.db")
        })
        .collect();
    v.sort();
    v
}

/// Row 1: a reserve too small to close every trace that can be open at once is refused at start;
/// with the smallest one accepted, a board filling the disk leaves a trace readable as a whole
/// (every chunk decodes, `info`, `sql` and the chunks agree) at every fill point, and SIGINT after
/// it changes nothing.
#[test]
fn a_full_disk_leaves_every_trace_readable_whole() {
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let dir = disk.path().to_str().unwrap().to_string();
    let refused = socscope(&[
        "collect",
        "--listen",
        "127.0.0.1:0",
        "--dir",
        &dir,
        "--disk-reserve",
        "1048576",
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("too small to close the 64 traces"),
        "{}",
        stderr(&refused)
    );
    let needed = socscope_collector::DiskReserve::needed(1).to_string();
    for (run, filler_mib) in [0usize, 5].into_iter().enumerate() {
        for entry in std::fs::read_dir(disk.path()).unwrap().flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
        if filler_mib > 0 {
            std::fs::write(disk.path().join("filler"), vec![3u8; filler_mib << 20]).unwrap();
        }
        let mut collect = Collect::start(
            disk.path(),
            &["--max-connections", "1", "--disk-reserve", &needed],
        );
        let sim = board(&collect.address, 40 + run as u64, 600.0);
        let ended = collect.wait_for("session_ended");
        assert!(
            ended["interrupted"]
                .as_str()
                .is_some_and(|m| m.contains("full")),
            "{ended}"
        );
        collect.signal("INT");
        assert_eq!(collect.wait_exit(), Some(1), "a session was cut short");
        let _ = sim.join();
        let trace = PathBuf::from(ended["file"].as_str().unwrap());
        let info = TraceReader::open(&trace).unwrap().info().unwrap();
        assert!(info.finished && !info.complete);
        assert!(info.event_count > 0);
        assert_eq!(ended["events"].as_u64(), Some(info.event_count));
        assert_eq!(decoded_events(&trace), info.event_count, "run {run}");
        let sql = socscope(&[
            "sql",
            trace.to_str().unwrap(),
            "SELECT count(*) AS n FROM events",
            "--json",
        ]);
        assert!(sql.status.success(), "{}", stderr(&sql));
        let rows: Value = serde_json::from_str(&stdout(&sql)).unwrap();
        assert_eq!(rows[0]["n"].as_u64(), Some(info.event_count));
        // Nothing is left to repair, and repair says so.
        let again = socscope(&["repair", trace.to_str().unwrap()]);
        assert!(again.status.success(), "{}", stderr(&again));
        assert!(
            stdout(&again).contains("already finished")
                || stdout(&again).contains("WAL is now folded"),
            "{}",
            stdout(&again)
        );
    }
}

/// Row 5: `socscope repair DIR/*.db` — the shape of its own help example — skips the catalog,
/// repairs every trace and ends with a summary line; a file that is not a trace is said, the others
/// are repaired all the same, and the exit status is 1.
/// The refusal of a reserve too small counts every source that can hold a trace open, probes included,
/// so that its figures add up to the traces it names.
#[test]
fn a_reserve_too_small_is_refused_with_every_source_counted() {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("empty.wire");
    std::fs::write(&wire, b"").unwrap();
    let traces = dir.path().join("traces");
    let out = socscope(&[
        "collect",
        "--no-listen",
        "--probe",
        "127.0.0.1:9",
        "--replay",
        wire.to_str().unwrap(),
        "--dir",
        traces.to_str().unwrap(),
        "--disk-reserve",
        "1000",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "too small to close the 2 traces that can be open at once (0 connections, 0 serial ports, 1 probes, 1 replays)"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!traces.exists(), "nothing is created");
}

#[test]
fn repair_of_a_whole_directory_skips_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for seed in [1, 2] {
        let wire = dir.path().join(format!("c{seed}.wire"));
        let mut file = socscope_sim::transport::file(&wire).unwrap();
        socscope_sim::run(
            &SimConfig {
                seed,
                duration_s: 0.5,
                ..SimConfig::default()
            },
            &mut file,
        )
        .unwrap();
        file.finish().unwrap();
        let out = socscope(&[
            "collect",
            "--no-listen",
            "--replay",
            wire.to_str().unwrap(),
            "--dir",
            d,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut args: Vec<String> = vec!["repair".into()];
    let mut files: Vec<PathBuf> = traces_in(dir.path());
    assert_eq!(files.len(), 2);
    files.push(dir.path().join("catalog.db"));
    files.sort();
    args.extend(files.iter().map(|p| p.to_str().unwrap().to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = socscope(&argv);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("catalog.db: the catalog, not a trace: skipped"),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().contains(
            "3 files: 0 repaired, 2 already finished, 0 being written, 1 catalog skipped, 0 failed"
        ),
        "{text}"
    );
    // A file that is not a trace: said, the others still repaired, exit status 1.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"not a database at all").unwrap();
    let mut argv = argv.clone();
    argv.insert(1, junk.to_str().unwrap());
    let out = socscope(&argv);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("junk.db"), "{}", stderr(&out));
    assert!(stdout(&out).contains("1 failed"), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("2 already finished"),
        "{}",
        stdout(&out)
    );
}

/// The `.db` files of `dir` (the catalog aside).
fn single_trace(dir: &Path) -> PathBuf {
    let t = traces_in(dir);
    assert_eq!(t.len(), 1, "{t:?}");
    t.into_iter().next().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Row 2: `ls` and `info` say the same state and counts while a capture is live, and after the
/// collector was killed (before any repair).
#[test]
fn ls_and_info_agree_live_and_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut collect = Collect::start(dir.path(), &[]);
    let address = collect.address.clone();
    let _board = std::thread::spawn(move || {
        let Ok(stream) = socscope_sim::transport::tcp(&address) else {
            return;
        };
        let mut link = socscope_sim::transport::WriterTransport::new(stream);
        let config = SimConfig {
            seed: 5,
            duration_s: 60.0,
            realtime: true,
            ..SimConfig::default()
        };
        let _ = socscope_sim::run(&config, &mut link);
    });
    let started = collect.wait_for("session_started");
    let trace = PathBuf::from(started["file"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while TraceReader::open(&trace)
        .and_then(|r| r.info())
        .map_or(0, |i| i.event_count)
        == 0
    {
        assert!(Instant::now() < deadline, "no events committed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let ls = json_of(&socscope(&["ls", "--json", "--dir", d]));
    let info = json_of(&socscope(&["info", "--json", trace.to_str().unwrap()]));
    let row = &ls["traces"][0];
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(info["state"], "live");
    let (listed, described) = (
        row["events"].as_u64().unwrap(),
        info["events"].as_u64().unwrap(),
    );
    assert!(
        listed > 0 && listed <= described,
        "ls {listed}, info {described}"
    );
    assert!(row["duration_ns"].as_i64().unwrap() > 0);
    // kill -9: nobody writes it any more, nobody closed it.
    collect.signal("KILL");
    let _ = collect.wait_exit();
    let ls = json_of(&socscope(&["ls", "--json", "--dir", d]));
    let info = json_of(&socscope(&["info", "--json", trace.to_str().unwrap()]));
    let row = &ls["traces"][0];
    assert_eq!(row["state"], "left live", "{row}");
    assert_eq!(info["state"], "left live");
    assert_eq!(row["events"], info["events"]);
    assert_eq!(row["duration_ns"], info["duration_ns"]);
    assert_eq!(row["finished"], false);
}

/// Row 3: the demo ended by SIGTERM or SIGINT before its board finished leaves one self-contained
/// file, closed (incomplete), whatever the signal.
#[test]
fn the_demo_stopped_by_a_signal_leaves_one_closed_file() {
    for signal in ["TERM", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let demo = Command::new(env!("CARGO_BIN_EXE_socscope"))
            .args([
                "demo",
                "--headless",
                "--realtime",
                "--duration",
                "60",
                "--dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let trace = loop {
            let found = traces_in(dir.path()).into_iter().find(|t| {
                TraceReader::open(t)
                    .and_then(|r| r.info())
                    .is_ok_and(|i| i.event_count > 0)
            });
            if let Some(t) = found {
                break t;
            }
            assert!(Instant::now() < deadline, "no trace grew");
            std::thread::sleep(Duration::from_millis(100));
        };
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &demo.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let out = demo.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!("stopped (SIG{signal}) before the board finished")),
            "{}",
            stdout(&out)
        );
        assert_alone(&trace);
        let info = json_of(&socscope(&["info", "--json", trace.to_str().unwrap()]));
        assert_eq!(info["state"], "incomplete", "SIG{signal}");
        assert!(info["events"].as_u64().unwrap() > 0);
    }
}

/// Row 4: every command that saves into a finished trace leaves it one self-contained file: the `.db`
/// copied alone holds every saved result.
#[test]
fn saving_results_leaves_one_self_contained_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for seed in [1, 2] {
        let out = socscope(&[
            "demo",
            "--headless",
            "--json",
            "--duration",
            "2",
            "--seed",
            &seed.to_string(),
            "--dir",
            d,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let traces = traces_in(dir.path());
    let (reference, run) = (traces[0].to_str().unwrap(), traces[1].to_str().unwrap());
    assert_alone(&traces[1]);
    for args in [
        vec!["aggregate", run, "--slices", "10", "--save"],
        vec![
            "aggregate",
            run,
            "--slices",
            "10",
            "--save",
            "--processed-trace",
        ],
        vec!["compare", reference, run, "--save"],
    ] {
        let out = socscope(&args);
        assert!(
            out.status.code().is_some_and(|c| c == 0 || c == 3),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_alone(&traces[1]);
    }
    let count = |path: &Path| {
        let listed = json_of(&socscope(&["results", path.to_str().unwrap(), "--json"]));
        listed
            .as_array()
            .or_else(|| listed["results"].as_array())
            .map_or(0, Vec::len)
    };
    let saved = count(&traces[1]);
    assert!(saved >= 3, "{saved}");
    let copy = dir.path().join("copy.db");
    std::fs::copy(&traces[1], &copy).unwrap();
    assert_eq!(
        count(&copy),
        saved,
        "the file copied alone holds every result"
    );
}

/// Row 8: names with terminal escapes, line breaks, BEL and a bidi override reach no terminal raw —
/// not from `sql`, not from `stats` — and `--json` keeps them as JSON escapes that read back as they are.
#[test]
fn names_with_control_characters_are_escaped_by_every_command() {
    let hostile = "\u{1b}]0;pwned\u{7}\r\nname\u{202e}txt";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = socscope(&[
        "demo",
        "--headless",
        "--json",
        "--duration",
        "1",
        "--dir",
        d,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace = single_trace(dir.path());
    let t = trace.to_str().unwrap();
    {
        let c = rusqlite::Connection::open(&trace).unwrap();
        c.execute("UPDATE trace_info SET board = ?1", [hostile])
            .unwrap();
        c.execute("UPDATE event_type SET name = ?1 || id", [hostile])
            .unwrap();
    }
    let raw = |out: &Output| {
        let text = format!("{}{}", stdout(out), stderr(out));
        for bad in ['\u{1b}', '\u{7}', '\r', '\u{202e}'] {
            assert!(!text.contains(bad), "{bad:?} printed raw: {text:?}");
        }
        text
    };
    for args in [
        vec!["sql", t, "SELECT board FROM trace_info"],
        vec!["sql", t, "SELECT name FROM event_type"],
        vec!["stats", t],
        vec!["info", t],
        vec!["ls", "--dir", d],
    ] {
        let out = socscope(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = raw(&out);
        if args[0] == "sql" && args[2].contains("board") {
            assert!(text.contains("\\u001b]0;pwned\\u0007"), "{text}");
        }
    }
    let out = socscope(&["sql", t, "SELECT board FROM trace_info", "--json"]);
    raw(&out);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rows[0]["board"], hostile,
        "the JSON reads back the same text"
    );
}

/// Row 9: a KPTrace import of a file with no KPTrace record — one line of text, random bytes — is
/// refused, with or without --strict; a real capture is still read.
#[test]
fn kptrace_import_refuses_a_file_with_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("one-line.txt");
    std::fs::write(&text, "hello world, this is not a trace\n").unwrap();
    let random = dir.path().join("random.bin");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..65_536)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    std::fs::write(&random, bytes).unwrap();
    for file in [&text, &random] {
        for strict in [true, false] {
            let out_db = dir.path().join("out.db");
            let _ = std::fs::remove_file(&out_db);
            let mut args = vec![
                "import",
                file.to_str().unwrap(),
                "--format",
                "kptrace",
                "-o",
                out_db.to_str().unwrap(),
            ];
            if strict {
                args.push("--strict");
            }
            let out = socscope(&args);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stdout(&out));
            let err = stderr(&out);
            assert!(
                err.contains("no KPTrace record") || err.contains("not binary bytes"),
                "{args:?}: {err}"
            );
            assert!(!out_db.exists(), "no trace left behind");
        }
    }
}

/// Row 10: `collect --replay` of random bytes is an error saying that no session was found.
#[test]
fn a_replay_of_random_bytes_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let random = dir.path().join("random.wire");
    let bytes: Vec<u8> = (0..65_536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&random, bytes).unwrap();
    let out = socscope(&[
        "collect",
        "--no-listen",
        "--replay",
        random.to_str().unwrap(),
        "--dir",
        dir.path().join("t").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no session found in the input"), "{err}");
}

/// An import killed at any moment (here while its trace is being written) leaves no file under the
/// trace's name and no catalog: the trace is built under a hidden name and linked to its own only once
/// whole and synced.
#[test]
fn an_import_killed_midway_leaves_no_trace_under_its_name() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/traces/ctf/lttng-kernel-arm-bug446190");
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args([
            "import",
            source.to_str().unwrap(),
            "--format",
            "ctf",
            "--dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed as soon as the file being built is there (31 556 events: long enough in any build
    // to be caught in the middle; if the import ever finishes first, the test says so).
    let deadline = Instant::now() + Duration::from_secs(60);
    let building = loop {
        let found = std::fs::read_dir(dir.path()).unwrap().find_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.starts_with(".lttng-kernel-arm-bug446190.db.importing-")
                .then_some(name)
        });
        if let Some(name) = found {
            break name;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before its file being built was seen"
        );
        assert!(Instant::now() < deadline, "no file being built");
        std::thread::sleep(Duration::from_millis(2));
    };
    child.kill().unwrap();
    let _ = child.wait();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        std::slice::from_ref(&building),
        "what the killed import left"
    );
    // The same import run to its end: the trace under its name, registered, and the killed one's
    // file removed (said on stderr); nothing else.
    let out = socscope(&[
        "import",
        source.to_str().unwrap(),
        "--format",
        "ctf",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("removed {}", dir.path().join(&building).display())),
        "{}",
        stderr(&out)
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["catalog.db", "lttng-kernel-arm-bug446190.db"]);
    let info = TraceReader::open(dir.path().join("lttng-kernel-arm-bug446190.db"))
        .unwrap()
        .info()
        .unwrap();
    assert!(info.finished && info.complete && info.event_count > 0);
}
