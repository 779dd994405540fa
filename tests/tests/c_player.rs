//! The agent from C: `examples/c/player.c`, compiled with the system `cc` against `socscope_agent.h` and
//! the host static library of `agent/capi`, streams over TCP to a collector on loopback; the trace holds
//! exactly what the player says it recorded, per type.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use socscope_tracedb::{Filter, TimeRange, TraceReader};
use support::{Collector, ingest_stats, records_by_type};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Builds the host static library (the test binary's own profile and target directory) and returns it.
fn static_library() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-q", "-p", "socscope-agent-capi"])
        .current_dir(workspace())
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the C API library builds");
    // target/debug/deps/c_player-HASH → target/debug
    let exe = std::env::current_exe().expect("the test's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the profile directory");
    let lib = profile_dir.join("libsocscope_agent_capi.a");
    assert!(lib.is_file(), "{lib:?} was built");
    lib
}

#[test]
fn a_c_player_streams_its_records_to_the_collector() {
    let lib = static_library();
    let dir = tempfile::tempdir().unwrap();
    let player = dir.path().join("player");
    let root = workspace();
    let out = Command::new("cc")
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("agent/capi/include"))
        .arg(root.join("examples/c/player.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&player)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "player.c compiles and links: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut collector = Collector::start();
    let address = collector.address();
    let (host, port) = address.rsplit_once(':').unwrap();
    let frames = 400u64;
    let run = Command::new(&player)
        .args([host, port, &frames.to_string()])
        .output()
        .expect("the player runs");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(
        run.status.success(),
        "the player succeeds: {stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let reports = collector.wait_sessions(1);
    let report = &reports[0];
    assert!(report.complete, "the player said Bye: {report:?}");

    // What the player says it recorded.
    let mut per_type = BTreeMap::new();
    let mut totals = BTreeMap::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["player:", "type", t, "stored", n] => {
                per_type.insert(t.parse::<u16>().unwrap(), n.parse::<u64>().unwrap());
            }
            ["player:", "records", ..] => {
                for pair in words[1..].chunks(2) {
                    totals.insert(pair[0].to_string(), pair[1].parse::<u64>().unwrap());
                }
            }
            _ => {}
        }
    }
    assert_eq!(totals["records"], totals["agent_records"], "{stdout}");
    assert_eq!(totals["dropped"], totals["agent_dropped"], "{stdout}");
    assert_eq!(totals["dropped"], 0, "a TCP link keeps up: {stdout}");

    let reader = TraceReader::open(&report.path).expect("the trace opens");
    let stats = ingest_stats(&reader);
    assert_eq!(stats["records"] as u64, totals["records"]);
    assert_eq!(stats["board_records"] as u64, totals["agent_records"]);
    assert_eq!(stats["records_lost_on_board"], 0);
    assert_eq!(stats["records_lost_in_transit"], 0);
    // Per type, by the names the player declared or the built-ins'.
    let names: BTreeMap<u16, &str> = [
        (1, "context_switch"),
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
        (64, "render_frame"),
        (65, "render_frame_exit"),
        (66, "buffer_level"),
        (67, "frame_decoded"),
    ]
    .into_iter()
    .collect();
    let expected: BTreeMap<String, u64> = per_type
        .iter()
        .map(|(t, n)| (names[t].to_string(), *n))
        .collect();
    assert_eq!(records_by_type(&stats), expected);
    assert_eq!(expected["mark"], frames);
    assert_eq!(expected["user_function"], 3 * frames);

    // The stored events: the player's custom types and its threads are there, in time order.
    let types = reader.event_types().unwrap();
    for name in ["render_frame", "buffer_level", "frame_decoded", "marker"] {
        assert!(
            types.iter().any(|t| t.name == name),
            "type {name} in {types:?}"
        );
    }
    let producers = reader.producers().unwrap();
    for name in ["demux", "video", "audio"] {
        assert!(
            producers.iter().any(|p| p.name == name),
            "producer {name} in {producers:?}"
        );
    }
    let mut last = None;
    let mut events = 0u64;
    for e in reader.events(TimeRange::all(), &Filter::all()).unwrap() {
        let e = e.unwrap();
        if let Some(last) = last {
            assert!(e.ts >= last, "events in time order");
        }
        last = Some(e.ts);
        events += 1;
    }
    assert_eq!(events, report.events);
}
