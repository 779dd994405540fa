//! Bounded ingest over TCP (issue 10, row 9): a connection limit (more connections are closed at once,
//! each said), an idle timeout (a connection that sends nothing is closed), and a per-connection session
//! rate limit and a collector-wide one (a flood of `Hello`s, on one connection or on many, does not
//! become a flood of trace files) — while a good board is stored completely. Real TCP on 127.0.0.1.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use socscope_collector::{Notice, tcp::ServeLimits};
use socscope_sim::SimConfig;
use socscope_wire::WIRE_VERSION;
use socscope_wire::encode::encode_hello;
use socscope_wire::frame::Hello;
use support::{Collector, assert_exact_counts, hello, sim_over_tcp};

fn warnings(collector: &Collector) -> Vec<String> {
    collector
        .notices()
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Whether the collector closed `stream` within `within` (a read returns end of stream or an error).
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 16];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// At the connection limit, a newcomer takes the slot of the peer that has waited longest without a
/// session (issue 27, row 7); a board whose session started keeps its slot; once every slot holds a
/// session, more connections are refused, each said with a running count.
#[test]
fn connections_beyond_the_limit_close_peers_without_a_session_and_a_good_board_is_still_stored() {
    let limits = ServeLimits {
        max_connections: 8,
        // The idle peers would hold their slots for the whole test.
        hello_timeout: Duration::from_secs(300),
        idle_timeout: Duration::from_secs(300),
        ..ServeLimits::default()
    };
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    let mut idle: Vec<TcpStream> = (0..7)
        .map(|_| TcpStream::connect(collector.address()).unwrap())
        .collect();
    // Silent for longer than SILENT_AFTER: they may be closed to make room.
    std::thread::sleep(Duration::from_millis(700));
    // In real time: its session holds its slot while the newcomers arrive.
    let board = support::realtime_sim_over_tcp(
        SimConfig {
            seed: 31,
            duration_s: 3.0,
            realtime: true,
            board: "good",
            ..SimConfig::default()
        },
        collector.address(),
    );
    collector.wait_started(1);
    // Seven newcomers take the seven silent peers' slots; thirteen more find only connections silent
    // for less than SILENT_AFTER (the newcomers themselves) and are refused.
    let mut newcomers: Vec<TcpStream> = (0..20)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            TcpStream::connect(collector.address()).unwrap()
        })
        .collect();
    for s in &mut idle {
        assert!(
            closed_within(s, Duration::from_secs(10)),
            "the oldest peers without a session make room"
        );
    }
    let reports = collector.wait_sessions(1);
    let summary = board.join().unwrap();
    assert!(reports[0].complete);
    assert_exact_counts(&reports[0].path, &summary);
    collector.poll();
    let w = warnings(&collector);
    let evictions = w
        .iter()
        .filter(|m| m.starts_with("connection closed: no session after"))
        .count();
    assert_eq!(evictions, 7, "{w:#?}");
    let refusals: Vec<&String> = w
        .iter()
        .filter(|m| m.starts_with("connection refused: 8 connections open"))
        .collect();
    assert_eq!(refusals.len(), 13, "{w:#?}");
    assert!(
        refusals[12].ends_with("13 refused so far"),
        "{}",
        refusals[12]
    );
    for s in &mut newcomers[..7] {
        assert!(!closed_within(s, Duration::from_millis(100)), "kept");
    }
    drop(newcomers);
    collector.stop();

    // Every slot holding a session: the next connection is refused.
    let limits = ServeLimits {
        max_connections: 3,
        ..ServeLimits::default()
    };
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    let mut boards: Vec<TcpStream> = (0..3)
        .map(|i| {
            let mut s = TcpStream::connect(collector.address()).unwrap();
            s.write_all(&hello("flood", "app", 500 + i)).unwrap();
            s
        })
        .collect();
    collector.wait_started(3);
    let mut late = TcpStream::connect(collector.address()).unwrap();
    assert!(closed_within(&mut late, Duration::from_secs(10)));
    for s in &mut boards {
        assert!(!closed_within(s, Duration::from_millis(200)), "kept");
    }
    collector.poll();
    let w = warnings(&collector);
    assert!(
        w.iter()
            .any(|m| m.starts_with("connection refused: 3 connections open")
                && m.ends_with("1 refused so far")),
        "{w:#?}"
    );
    drop(boards);
    collector.stop();
}

/// Issue 27, row 7: a peer keeps ~70 idle connections open, reopening each one the collector closes;
/// five good boards connecting meanwhile are all stored completely (they got in within a second:
/// idle peers are closed for them, and one address holds at most its share of connections without a
/// session).
#[test]
fn an_idle_slot_attacker_does_not_keep_good_boards_out() {
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), ServeLimits::default());
    let address = collector.address();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacker = {
        let (address, stop) = (address.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            let mut opened = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                held.retain_mut(|s| !closed_within(s, Duration::from_millis(1)));
                while held.len() < 70 {
                    match TcpStream::connect(&address) {
                        Ok(s) => {
                            held.push(s);
                            opened += 1;
                        }
                        Err(_) => break,
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let boards: Vec<_> = (0..5)
        .map(|i| {
            sim_over_tcp(
                SimConfig {
                    seed: 60 + i,
                    duration_s: 1.0,
                    board: "good",
                    ..SimConfig::default()
                },
                address.clone(),
            )
        })
        .collect();
    let reports = collector.wait_sessions(5);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    assert!(
        opened > 70,
        "the attacker reopened what was closed: {opened}"
    );
    let summaries: Vec<_> = boards.into_iter().map(|b| b.join().unwrap()).collect();
    assert_eq!(reports.len(), 5);
    for r in &reports {
        assert!(r.complete, "{r:?}");
        let s = summaries
            .iter()
            .find(|s| s.events == r.records)
            .unwrap_or_else(|| panic!("a board sent {} records", r.records));
        assert_exact_counts(&r.path, s);
    }
    collector.stop();
}

#[test]
fn an_idle_connection_is_closed_after_the_timeout() {
    let limits = ServeLimits {
        idle_timeout: Duration::from_millis(800),
        ..ServeLimits::default()
    };
    let collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    let mut idle = TcpStream::connect(collector.address()).unwrap();
    let started = Instant::now();
    assert!(closed_within(&mut idle, Duration::from_secs(10)));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    collector.stop();
}

#[test]
fn a_flood_of_hellos_on_one_connection_makes_a_bounded_number_of_traces() {
    let limits = ServeLimits {
        max_sessions_per_minute: 10,
        ..ServeLimits::default()
    };
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    let mut flood = TcpStream::connect(collector.address()).unwrap();
    let bytes: Vec<u8> = (0..200).flat_map(|i| hello("flood", "app", i)).collect();
    assert!(
        bytes.len() < 16 * 1024,
        "200 Hellos in {} bytes",
        bytes.len()
    );
    flood.write_all(&bytes).unwrap();
    drop(flood);
    collector.wait_sessions(10);
    let notices = collector.stop();
    let ended = notices
        .iter()
        .filter(|n| matches!(n, Notice::SessionEnded(_)))
        .count();
    assert_eq!(ended, 10, "ten traces, not 200");
    let refusals: Vec<&String> = notices
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } if message.starts_with("Hello refused") => {
                Some(message)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        refusals.len(),
        20,
        "the first 20 refusals are said one by one"
    );
    assert!(refusals[0].contains("1 refused so far"));
}

#[test]
fn a_flood_of_short_connections_makes_a_bounded_number_of_traces() {
    // One Hello per connection passes every per-connection limit; the collector-wide one bounds
    // the trace files all of them create together.
    let limits = ServeLimits {
        max_new_sessions_per_minute: 12,
        ..ServeLimits::default()
    };
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    for i in 0..40 {
        let mut c = TcpStream::connect(collector.address()).unwrap();
        c.write_all(&hello("flood", "app", 1000 + i)).unwrap();
        drop(c);
    }
    collector.wait_sessions(12);
    // The connections' ingest threads see their Hellos at their own pace: wait until every one
    // of the 40 has been answered (a session or a refusal).
    let deadline = Instant::now() + Duration::from_secs(20);
    let refusal = "Hello refused: more than 12 sessions started by all connections within a minute";
    while Instant::now() < deadline
        && warnings(&collector)
            .iter()
            .filter(|m| m.starts_with(refusal))
            .count()
            < 28
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let notices = collector.stop();
    let ended = notices
        .iter()
        .filter(|n| matches!(n, Notice::SessionEnded(_)))
        .count();
    assert_eq!(ended, 12, "twelve traces, not 40");
    let refused = notices
        .iter()
        .filter(
            |n| matches!(n, Notice::FrameDropped { message, .. } if message.starts_with(refusal)),
        )
        .count();
    assert_eq!(refused, 28, "every other Hello refused and said");
}

#[test]
fn with_a_token_only_boards_that_carry_it_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = socscope_collector::IngestConfig::new(dir.path());
    config.token = Some("s3cret-token".into());
    let mut collector = Collector::start_configured(dir, config, ServeLimits::default());
    let board = |token: &'static str, name: &'static str| {
        sim_over_tcp(
            SimConfig {
                seed: 41,
                duration_s: 0.5,
                board: name,
                token,
                ..SimConfig::default()
            },
            collector.address(),
        )
    };
    let intruders = [board("", "no-token"), board("wrong", "wrong-token")];
    for b in intruders {
        b.join().unwrap();
    }
    let good = board("s3cret-token", "trusted");
    let reports = collector.wait_sessions(1);
    let summary = good.join().unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].board, "trusted");
    assert_exact_counts(&reports[0].path, &summary);
    let notices = collector.stop();
    let refusals: Vec<&String> = notices
        .iter()
        .filter_map(|n| match n {
            Notice::FrameDropped { message, .. } if message.contains("token") => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(
        refusals.len(),
        2,
        "one Hello per intruder (0.5 s: no repeat): {refusals:#?}"
    );
    assert!(
        refusals
            .iter()
            .any(|m| m.starts_with("Hello of board 'no-token' refused: no token"))
    );
    assert!(
        refusals
            .iter()
            .any(|m| m.starts_with("Hello of board 'wrong-token' refused: a wrong token"))
    );
    assert_eq!(
        notices
            .iter()
            .filter(|n| matches!(n, Notice::SessionStarted { .. }))
            .count(),
        1,
        "no trace for the intruders"
    );
}

#[test]
fn peers_that_start_no_session_free_their_slots_for_a_good_board() {
    let limits = ServeLimits {
        max_connections: 4,
        hello_timeout: Duration::from_millis(600),
        ..ServeLimits::default()
    };
    let mut collector = Collector::start_with(tempfile::tempdir().unwrap(), limits);
    // Four peers take every slot: two silent, two sending garbage (no Hello ever).
    let mut squatters: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(collector.address()).unwrap())
        .collect();
    squatters[2].write_all(&[0x55; 4096]).unwrap();
    squatters[3].write_all(b"GET / HTTP/1.1\r\n\r\n\0").unwrap();
    for s in &mut squatters {
        assert!(
            closed_within(s, Duration::from_secs(10)),
            "closed for starting no session"
        );
    }
    let board = sim_over_tcp(
        SimConfig {
            seed: 51,
            duration_s: 0.5,
            board: "after-squatters",
            ..SimConfig::default()
        },
        collector.address(),
    );
    let reports = collector.wait_sessions(1);
    let summary = board.join().unwrap();
    assert!(reports[0].complete);
    assert_exact_counts(&reports[0].path, &summary);
    collector.poll();
    let closed = warnings(&collector)
        .iter()
        .filter(|m| m.starts_with("connection closed: no session started within 0.6 s"))
        .count();
    assert_eq!(closed, 4);
    collector.stop();
}

/// Issue 27, row 6: a board refused for its token learns why over the link before it closes — a
/// `Refusal` frame (wire SPEC 5.8) as the agent decodes it — and the collector then closes the link.
#[test]
fn a_refused_board_is_told_why_before_the_link_closes() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = socscope_collector::IngestConfig::new(dir.path());
    config.token = Some("s3cret-token".into());
    let collector = Collector::start_configured(dir, config, ServeLimits::default());
    let mut link = TcpStream::connect(collector.address()).unwrap();
    link.write_all(&hello("flood", "app", 9)).unwrap();
    link.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut back = Vec::new();
    // Everything until the collector closes (it does, after the frame).
    let _ = link.read_to_end(&mut back);
    let refusal = socscope_agent::decode_refusal(&mut back).expect("a Refusal frame came back");
    assert_eq!(refusal.reason, socscope_wire::refusal::RefusalReason::Token);
    assert!(refusal.message.contains("no token"), "{}", refusal.message);
    collector.stop();
}

/// What a collector configured with `config` answers over TCP to a board sending `frame`: the
/// `Refusal` frame read back before the collector closes the link (panics when none came).
fn answer_to(
    config: socscope_collector::IngestConfig,
    dir: tempfile::TempDir,
    frame: &[u8],
) -> (socscope_wire::refusal::RefusalReason, String) {
    let collector = Collector::start_configured(dir, config, ServeLimits::default());
    let mut link = TcpStream::connect(collector.address()).unwrap();
    link.write_all(frame).unwrap();
    link.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut back = Vec::new();
    // Everything until the collector closes (it does, after the frame).
    let _ = link.read_to_end(&mut back);
    let refusal = socscope_agent::decode_refusal(&mut back).expect("a Refusal frame came back");
    let told = (refusal.reason, refusal.message.to_string());
    collector.stop();
    told
}

/// A `Hello` like [`hello`]'s with the token `token` and the wire version `version`.
fn hello_with(token: &str, version: u16) -> Vec<u8> {
    let mut frame = vec![0u8; 256];
    let n = encode_hello(
        &mut frame,
        &Hello {
            wire_version: version,
            agent_version: "1",
            board: "flood",
            soc: "soc",
            os: "linux",
            application: "app",
            cpu_count: 1,
            tick_rate_hz: 1_000_000,
            session_id: 5,
            start_ticks: 0,
            token,
        },
    )
    .unwrap();
    frame.truncate(n);
    frame
}

/// Issue 27, row 6 under `--flight-recorder`: the recorder refuses a board for the same reasons as a
/// capture stored whole — no token, a wrong token, a wire version it cannot read — and the board is
/// told the same way, with the same reason and message, before the link closes.
#[test]
fn a_flight_recorder_tells_a_refused_board_why_as_collect_does() {
    use socscope_collector::flight::FlightConfig;
    use socscope_wire::refusal::RefusalReason;
    const S: i64 = 1_000_000_000;
    let configured = |flight: bool| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = socscope_collector::IngestConfig::new(dir.path());
        config.token = Some("s3cret-token".into());
        if flight {
            config.flight = Some(FlightConfig::new(3 * S, S, S));
        }
        (config, dir)
    };
    let cases = [
        (
            hello_with("", WIRE_VERSION),
            RefusalReason::Token,
            "no token",
        ),
        (
            hello_with("not-it", WIRE_VERSION),
            RefusalReason::Token,
            "a wrong token",
        ),
        (
            hello_with("s3cret-token", WIRE_VERSION + 7),
            RefusalReason::Version,
            "version",
        ),
    ];
    // Each collector drains the refused link for a few seconds before closing it: all at once.
    let answers: Vec<_> = cases
        .iter()
        .flat_map(|(frame, _, _)| {
            [false, true].map(|flight| {
                let frame = frame.clone();
                std::thread::spawn(move || {
                    let (config, dir) = configured(flight);
                    answer_to(config, dir, &frame)
                })
            })
        })
        .collect();
    let answers: Vec<_> = answers.into_iter().map(|a| a.join().unwrap()).collect();
    for ((_, reason, said), pair) in cases.iter().zip(answers.chunks(2)) {
        let (whole, flight) = (&pair[0], &pair[1]);
        assert_eq!(whole.0, *reason, "{whole:?}");
        assert!(whole.1.contains(said), "{whole:?}");
        assert_eq!(flight, whole, "the flight recorder says what collect says");
    }
}
