//! The C API called as C calls it (through the exported functions): its error statuses, drops and their
//! counters, a transport that pushes back, and the frames it writes decoded by the wire decoder.

use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};

use socscope_agent_capi::*;
use socscope_wire::WIRE_VERSION;
use socscope_wire::decode::{Frame, StreamDecoder};

#[repr(C, align(8))]
struct Memory([u8; AGENT_SIZE + 8]);

unsafe extern "C" fn clock(user: *mut c_void) -> u64 {
    // SAFETY: the tests pass a pointer to a live u64.
    unsafe {
        let t = user.cast::<u64>();
        *t += 10;
        *t
    }
}

/// What the write callback does.
struct Sink {
    bytes: Vec<u8>,
    /// Frames it refuses (WouldBlock) before taking any.
    refuse: usize,
}

unsafe extern "C" fn write(user: *mut c_void, frame: *const u8, len: usize) -> c_int {
    // SAFETY: the tests pass a live Sink and the agent a valid frame.
    unsafe {
        let sink = &mut *user.cast::<Sink>();
        if sink.refuse > 0 {
            sink.refuse -= 1;
            return WRITE_WOULD_BLOCK;
        }
        sink.bytes
            .extend_from_slice(std::slice::from_raw_parts(frame, len));
    }
    WRITE_OK
}

fn config() -> CConfig {
    CConfig {
        board: c"c-board".as_ptr(),
        soc: c"host".as_ptr(),
        os: c"linux".as_ptr(),
        application: c"api-test".as_ptr(),
        token: null(),
        cpu_count: 1,
        tick_rate_hz: 1_000_000,
        session_id: 7,
        flush_latency_ticks: 1_000_000,
        heartbeat_ticks: 1_000_000,
        hello_every_ticks: 0,
    }
}

/// An agent in `memory`, its clock at `ticks`.
fn agent(memory: &mut Memory, ticks: &mut u64) -> *mut Instance {
    let mut a = null_mut();
    let cfg = config();
    // SAFETY: valid memory, config, clock and out pointer.
    let rc = unsafe {
        socscope_agent_init(
            memory.0.as_mut_ptr().cast(),
            AGENT_SIZE,
            &cfg,
            Some(clock),
            (ticks as *mut u64).cast(),
            &mut a,
        )
    };
    assert_eq!(rc, OK);
    a
}

fn stats(a: *mut Instance) -> CStats {
    let mut s = CStats::default();
    // SAFETY: a live agent and a valid out pointer.
    assert_eq!(unsafe { socscope_get_stats(a, &mut s) }, OK);
    s
}

#[test]
fn init_refuses_bad_memory_and_arguments() {
    let mut memory = Box::new(Memory([0; AGENT_SIZE + 8]));
    let mut ticks = 0u64;
    let cfg = config();
    let mut a = null_mut();
    let base = memory.0.as_mut_ptr();
    let mut init = |mem: *mut u8, size: usize, cfg: *const CConfig, out: *mut *mut Instance| {
        // SAFETY: the pointers are valid or NULL, as each case intends.
        unsafe {
            socscope_agent_init(
                mem.cast(),
                size,
                cfg,
                Some(clock),
                (&mut ticks as *mut u64).cast(),
                out,
            )
        }
    };
    assert_eq!(init(null_mut(), AGENT_SIZE, &cfg, &mut a), ERR_NULL);
    assert_eq!(init(base, AGENT_SIZE, null(), &mut a), ERR_NULL);
    assert_eq!(init(base, AGENT_SIZE, &cfg, null_mut()), ERR_NULL);
    assert_eq!(init(base, 100, &cfg, &mut a), ERR_MEMORY);
    // SAFETY: one byte in, still inside the buffer.
    assert_eq!(
        init(unsafe { base.add(1) }, AGENT_SIZE, &cfg, &mut a),
        ERR_MEMORY
    );
    let bad = CConfig {
        board: c"\xff\xfe".as_ptr(),
        ..config()
    };
    assert_eq!(init(base, AGENT_SIZE, &bad, &mut a), ERR_UTF8);
    assert!(a.is_null(), "nothing was handed out");
    // Memory never initialised is refused, not used.
    let mut zeroed = Box::new(Memory([0; AGENT_SIZE + 8]));
    let fake = zeroed.0.as_mut_ptr().cast::<Instance>();
    // SAFETY: zeroed memory of the right size: the magic number tells it is not an agent.
    unsafe {
        assert_eq!(socscope_mark(fake, 0, 1), ERR_NOT_INITIALISED);
        assert_eq!(socscope_mark(null_mut(), 0, 1), ERR_NULL);
    }
}

#[test]
fn records_are_checked_and_drops_are_counted() {
    let mut memory = Box::new(Memory([0; AGENT_SIZE + 8]));
    let mut ticks = 0u64;
    let a = agent(&mut memory, &mut ticks);
    let params = [
        CParam {
            name: c"level".as_ptr(),
            ty: 1,
        },
        CParam {
            name: c"note".as_ptr(),
            ty: 3,
        },
    ];
    // SAFETY: a live agent; valid strings and arrays.
    unsafe {
        assert_eq!(
            socscope_register_type(a, 64, c"buffer".as_ptr(), 0, 0, params.as_ptr(), 2),
            OK
        );
        assert_eq!(
            socscope_register_type(a, 64, c"again".as_ptr(), 0, 0, null(), 0),
            ERR_DUPLICATE_TYPE
        );
        assert_eq!(
            socscope_register_type(a, 12, c"reserved".as_ptr(), 0, 0, null(), 0),
            ERR_RESERVED_TYPE
        );
        assert_eq!(
            socscope_register_type(a, 70, c"x".as_ptr(), 9, 0, null(), 0),
            ERR_BAD_ARGUMENT
        );
        assert_eq!(
            socscope_register_producer(a, 1, -1, 1, 42, c"worker".as_ptr()),
            OK
        );
        assert_eq!(
            socscope_register_producer(a, 2, -1, 9, 42, c"bad".as_ptr()),
            ERR_BAD_ARGUMENT
        );
        let values = [
            CValue {
                ty: 1,
                i: 0,
                u: 5,
                f: 0.0,
                s: null(),
            },
            CValue {
                ty: 3,
                i: 0,
                u: 0,
                f: 0.0,
                s: c"ok".as_ptr(),
            },
        ];
        assert_eq!(socscope_record(a, 0, 64, values.as_ptr(), 2), STORED);
        assert_eq!(
            socscope_record(a, 0, 64, values.as_ptr(), 1),
            ERR_PARAM_MISMATCH
        );
        assert_eq!(
            socscope_record(a, 0, 99, values.as_ptr(), 2),
            ERR_UNKNOWN_TYPE
        );
        assert_eq!(socscope_mark(a, 3, 1), ERR_BAD_CPU);
        let bad_text = c"\xc3\x28";
        assert_eq!(socscope_marker(a, 0, bad_text.as_ptr()), ERR_UTF8);
        assert_eq!(socscope_marker(a, 0, c"hello".as_ptr()), STORED);
    }
    let s = stats(a);
    assert_eq!((s.records, s.dropped), (2, 0));
    assert_eq!(s.rejected, 3, "mismatch, unknown type, bad CPU");
    // Nothing drained: the ring (8 blocks of 256 bytes) fills, then records are dropped and counted.
    let mut stored = 2;
    let mut dropped = 0;
    for i in 0..2000u64 {
        // SAFETY: a live agent.
        match unsafe { socscope_user_entry(a, 0, 0x1000 + i * 64) } {
            STORED => stored += 1,
            DROPPED => dropped += 1,
            other => panic!("status {other}"),
        }
    }
    assert!(
        dropped > 0 && stored > 100,
        "{stored} stored, {dropped} dropped"
    );
    let s = stats(a);
    assert_eq!((s.records, s.dropped), (stored, dropped));

    // A transport that pushes back twice: the rest stays queued, then everything goes, with the Loss.
    let mut sink = Sink {
        bytes: Vec::new(),
        refuse: 2,
    };
    let user = (&mut sink as *mut Sink).cast();
    // SAFETY: a live agent and sink.
    unsafe {
        assert_eq!(socscope_finish(a, Some(write), user), ERR_WOULD_BLOCK);
        assert_eq!(socscope_finish(a, Some(write), user), ERR_WOULD_BLOCK);
        assert_eq!(socscope_finish(a, Some(write), user), OK);
        assert_eq!(socscope_poll(a, None, user), OK, "nothing left to send");
    }
    let mut decoder = StreamDecoder::new(&[WIRE_VERSION]);
    decoder.feed(&sink.bytes);
    let (mut records, mut lost, mut bye) = (0u64, 0u64, None);
    while let Some(frame) = decoder.next_frame() {
        match frame.expect("every frame decodes").frame {
            Frame::Events(batch) => records += batch.len() as u64,
            Frame::Loss(l) => lost += l.count,
            Frame::Bye(b) => bye = Some((b.records, b.dropped)),
            _ => {}
        }
    }
    assert_eq!(records, stored);
    assert_eq!(lost, dropped);
    assert_eq!(bye, Some((stored, dropped)));
}

#[test]
fn post_mortem_mode_overwrites_and_dumps_on_demand() {
    let mut memory = Box::new(Memory([0; AGENT_SIZE + 8]));
    let mut ticks = 0u64;
    let a = agent(&mut memory, &mut ticks);
    // SAFETY: `a` is a live agent.
    unsafe {
        assert_eq!(socscope_set_mode(a, 7), ERR_BAD_ARGUMENT);
        assert_eq!(socscope_set_mode(a, MODE_POST_MORTEM), OK);
    }
    let mut sink = Sink {
        bytes: Vec::new(),
        refuse: 0,
    };
    for i in 0..5000u64 {
        // SAFETY: as above; `sink` outlives the calls.
        unsafe {
            assert_eq!(socscope_mark(a, 0, i), STORED);
            assert_eq!(
                socscope_poll(a, Some(write), (&mut sink as *mut Sink).cast()),
                OK
            );
        }
    }
    assert!(sink.bytes.is_empty(), "nothing is sent before the dump");
    let s = stats(a);
    assert_eq!((s.records, s.dropped), (5000, 0));
    assert!(s.overwritten > 3000, "{s:?}");
    // A transport that pushes back: the dump goes on where it stopped.
    sink.refuse = 3;
    let mut calls = 0;
    loop {
        calls += 1;
        // SAFETY: as above.
        match unsafe { socscope_agent_dump(a, Some(write), (&mut sink as *mut Sink).cast()) } {
            OK => break,
            ERR_WOULD_BLOCK => assert!(calls < 10),
            other => panic!("dump: {other}"),
        }
    }
    let mut d = StreamDecoder::default();
    d.feed(&sink.bytes);
    let mut marks = Vec::new();
    let mut window = None;
    while let Some(f) = d.next_frame() {
        match f.unwrap().frame {
            Frame::Window(w) => window = Some(w),
            Frame::Events(b) => marks.extend(b.iter().map(|r| r.unsigned(0).unwrap())),
            _ => {}
        }
    }
    let w = window.expect("a Window frame");
    assert_eq!((w.first_seq, w.overwritten), (s.overwritten, s.overwritten));
    assert_eq!(marks, (s.overwritten..5000).collect::<Vec<_>>());
}
