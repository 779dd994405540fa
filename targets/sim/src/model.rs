//! The discrete-event model of the board: per-CPU priority schedulers, interrupts, and the threads'
//! behaviours as small state machines that emit records through the real agent.
//!
//! Time is in ticks of the announced tick rate; the workload is written in microseconds of workload time
//! (one tick at the base rate), so a faster `--rate` only changes how ticks map to seconds.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use socscope_agent::{Agent, Clock, Config, Transport, TransportError, frame_buffer_len};
use socscope_wire::dict::{BUILTINS, Builtin, ProducerDef, ProducerKind};

use crate::{SimConfig, SimError, SimProgress, SimSummary};

/// How often to report progress, and to whom.
pub(crate) type ProgressReport<'a> = (Duration, &'a mut dyn FnMut(&SimProgress));

/// The most CPUs a simulated board can have.
pub const MAX_CPUS: usize = 8;
const BLOCK: usize = 4096;
const BLOCKS: usize = 16;
const PRODUCERS: usize = 1024;

type SimAgent = Agent<SimClock, MAX_CPUS, BLOCK, BLOCKS, { frame_buffer_len(BLOCK) }, PRODUCERS, 8>;

/// The agent's clock: the simulated time, set before every record.
pub struct SimClock {
    now: u64,
}

impl Clock for SimClock {
    #[inline]
    fn now(&mut self) -> u64 {
        self.now
    }
}

/// The agent is polled this often (ticks), so rings never fill on a blocking output.
const POLL_EVERY: u64 = 1_000;

// Workload constants, in microseconds of workload time.
const TIMER_PERIOD: u64 = 4_000; // HZ = 250
const VSYNC_PERIOD: u64 = 20_000; // 50 Hz
const NET_PERIOD: u64 = 700; // ~15 Mbit/s of 1316-byte datagrams (an HD stream)
const PACKETS_PER_VIDEO_FRAME: u32 = 57; // 25 fps
const PACKETS_PER_AUDIO_FRAME: u32 = 33; // ~43 frames/s
const VIDEO_SLICES: u32 = 12;
const VQUEUE_MAX: u32 = 6;
const DQUEUE_MAX: u32 = 3;

// Interrupt lines.
const IRQ_TIMER: u32 = 29;
const IRQ_VSYNC: u32 = 45;
const IRQ_MMC: u32 = 47;
const IRQ_ETH: u32 = 58;
const IRQ_VDEC: u32 = 72;

// ARM EABI system call numbers.
const NR_READ: u32 = 3;
const NR_WRITE: u32 = 4;
const NR_IOCTL: u32 = 54;
const NR_NANOSLEEP: u32 = 162;
const NR_POLL: u32 = 168;
const NR_FUTEX: u32 = 240;

// Code addresses: kernel text and user libraries of a 32-bit ARM set-top box.
const K_RUN_TIMER_SOFTIRQ: u64 = 0xc003_2d40;
const K_NET_RX_ACTION: u64 = 0xc03b_6a10;
const K_BLK_DONE_SOFTIRQ: u64 = 0xc020_9c88;
const U_DEMUX_PARSE: u64 = 0xb6e4_1a30;
const U_VDEC_CHAIN: u64 = 0xb6f0_2c10;
const U_VDEC_HEADER: u64 = 0xb6f0_4e80;
const U_VDEC_SLICE: u64 = 0xb6f0_7a24;
const U_ADEC_FRAME: u64 = 0xb6f2_3310;
const U_PLAYER_TICK: u64 = 0x0001_2f40;
const KHEAP: u64 = 0xc6a0_0000;

// System call arguments: user buffers and request codes.
const U_NET_BUF: u64 = 0xb4a0_0000;
const U_AUDIO_BUF: u64 = 0xb4e2_1000;
const U_DD_BUF: u64 = 0xb6c0_0008;
const U_VSYNC_ARG: u64 = 0xbeb3_f9ac;
const U_VAR_SCREENINFO: u64 = 0xb6ff_1e40;
const U_VDEC_ARG: u64 = 0xb4c1_2000;
const U_TIMESPEC: u64 = 0xbe8f_fa10;
const U_POLLFDS: u64 = 0x0187_a2c0;
const FUTEX_VDEC: u64 = 0xb6d3_e07c;
const FUTEX_ADEC: u64 = 0xb6d3_e0a4;
const FUTEX_ASINK: u64 = 0xb6d3_e0c8;
const FUTEX_WAIT_PRIVATE: u64 = 128;
const FBIO_WAITFORVSYNC: u64 = 0x4004_4620;
const FBIOPAN_DISPLAY: u64 = 0x4606;
const VDEC_IOCTL_DECODE: u64 = 0xc020_5603;

const FRAME_DECODED: &str = "frame decoded";
const ZAP_START: &str = "zap start";
const ZAP_END: &str = "zap end";

/// Producer ids: threads are their pid, the rest is offset by kind.
const PROCESS_ID: u32 = 1 << 20;
const IRQ_ID: u32 = 2 << 20;
const SOFTIRQ_ID: u32 = 3 << 20;
const CPU_ID: u32 = 4 << 20;

type Tid = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Idle,
    KWorker,
    Jbd2,
    Player,
    Demux,
    VDec,
    ADec,
    ASink,
    VsyncCb,
    Burn,
    Dd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    Runnable,
    Blocked,
    Dead,
}

struct Thread {
    pid: u32,
    name: &'static str,
    prio: u8,
    cpu: usize,
    state: State,
    role: Role,
    phase: u8,
    /// Compute left in the current chunk when not running.
    remaining: u64,
    /// The system call it is blocked in (0 for none).
    in_syscall: u32,
    exit_requested: bool,
    counter: u32,
    scratch: u64,
}

enum Next {
    /// Keep the CPU for this many ticks, then take the next step.
    Compute(u64),
    /// Give up the CPU until woken.
    Block,
    /// Give up the CPU for this many ticks.
    Sleep(u64),
    /// The thread is gone.
    Exit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EvKind {
    SliceEnd { cpu: u8, generation: u32 },
    Resched { cpu: u8 },
    Timer { cpu: u8 },
    Vsync,
    NetRx,
    VdecDone,
    MmcDone,
    WakeTimer { tid: u32 },
    Zap,
    CpuStress { start: bool },
    IoStress { start: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Ev {
    t: u64,
    seq: u64,
    kind: EvKind,
}

struct Cpu {
    current: Tid,
    idle: Tid,
    runq: Vec<Tid>,
    /// The CPU has emitted records up to here; work for it starts no earlier.
    free_at: u64,
    /// When the current thread's compute chunk ends (`u64::MAX` when none is running).
    slice_end: u64,
    generation: u32,
}

/// The threads of the playing channel, replaced at each zap.
#[derive(Clone, Copy)]
struct Pipeline {
    demux: Tid,
    vdec: Tid,
    adec: Tid,
}

pub(crate) struct Board<'c> {
    config: &'c SimConfig,
    agent: Box<SimAgent>,
    rng: ChaCha8Rng,
    heap: BinaryHeap<Reverse<Ev>>,
    seq: u64,
    cpus: Vec<Cpu>,
    threads: Vec<Thread>,
    end: u64,
    counts: [u64; BUILTINS.len() + 1],
    next_pid: u32,
    // Shared pipeline state.
    pipeline: Pipeline,
    player: Tid,
    asink: Tid,
    vsync_cb: Tid,
    jbd2: Tid,
    burners: Vec<Tid>,
    dd: Option<Tid>,
    packets: u32,
    vqueue: u32,
    aqueue: u32,
    squeue: u32,
    dqueue: u32,
    dirty: u32,
    shown_frame: u64,
    decoded_frames: u64,
    pushed_frames: u64,
    zaps: u64,
    zap_pending: bool,
    zap_requested: bool,
    /// Packets and frames to discard while the new channel's stream synchronises.
    sync_packets: u32,
    sync_frames: u32,
    io_stress: bool,
    cpu_stress: bool,
}

impl<'c> Board<'c> {
    pub(crate) fn new(config: &'c SimConfig) -> Self {
        let tick_rate_hz = config.tick_rate_hz();
        let session_id = if config.session_id == 0 {
            config.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
        } else {
            config.session_id
        };
        let agent_config = Config {
            board: config.board,
            soc: "sim-st40-2core",
            os: "linux-3.10",
            application: "player",
            cpu_count: config.cpus,
            tick_rate_hz,
            session_id,
            flush_latency_ticks: tick_rate_hz / 20,
            heartbeat_ticks: tick_rate_hz,
            hello_every_ticks: tick_rate_hz,
            token: config.token,
        };
        let end = (config.duration_s * tick_rate_hz as f64).round() as u64;
        let mut board = Self {
            config,
            agent: Box::new(SimAgent::new(SimClock { now: 0 }, agent_config)),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            heap: BinaryHeap::with_capacity(256),
            seq: 0,
            cpus: Vec::new(),
            threads: Vec::new(),
            end,
            counts: [0; BUILTINS.len() + 1],
            next_pid: 400,
            pipeline: Pipeline {
                demux: 0,
                vdec: 0,
                adec: 0,
            },
            player: 0,
            asink: 0,
            vsync_cb: 0,
            jbd2: 0,
            burners: Vec::new(),
            dd: None,
            packets: 0,
            vqueue: 0,
            aqueue: 0,
            squeue: 0,
            dqueue: 0,
            dirty: 0,
            shown_frame: 0,
            decoded_frames: 0,
            pushed_frames: 0,
            zaps: 0,
            zap_pending: false,
            zap_requested: false,
            sync_packets: 0,
            sync_frames: 0,
            io_stress: false,
            cpu_stress: false,
        };
        board.build();
        board
    }

    /// Workload microseconds to ticks: one tick is one workload microsecond whatever the rate, so the
    /// stream looks the same in ticks and only the announced tick rate changes.
    #[inline]
    fn us(&self, us: u64) -> u64 {
        us
    }

    /// A random duration in `[lo, hi)` workload microseconds, in ticks.
    #[inline]
    fn jitter(&mut self, lo: u64, hi: u64) -> u64 {
        let us = self.rng.gen_range(lo..hi);
        self.us(us)
    }

    fn seconds(&self, s: f64) -> u64 {
        (s * self.config.tick_rate_hz() as f64).round() as u64
    }

    fn producer(&mut self, def: ProducerDef<'static>) {
        // The dictionary is bounded; beyond it threads are still announced by their `Kc` records.
        let _ = self.agent.register_producer(def);
    }

    fn spawn(
        &mut self,
        pid: u32,
        process: u32,
        name: &'static str,
        role: Role,
        prio: u8,
        cpu: usize,
    ) -> Tid {
        let cpu = cpu % self.cpus.len().max(1);
        self.producer(ProducerDef {
            id: pid,
            parent: Some(PROCESS_ID + process),
            kind: ProducerKind::Thread,
            local_id: pid.into(),
            name,
        });
        self.threads.push(Thread {
            pid,
            name,
            prio,
            cpu,
            state: State::Blocked,
            role,
            phase: 0,
            remaining: 0,
            in_syscall: 0,
            exit_requested: false,
            counter: 0,
            scratch: 0,
        });
        self.threads.len() - 1
    }

    fn process(&mut self, pid: u32, name: &'static str) {
        self.producer(ProducerDef {
            id: PROCESS_ID + pid,
            parent: None,
            kind: ProducerKind::Process,
            local_id: pid.into(),
            name,
        });
    }

    fn build(&mut self) {
        let ncpu = usize::from(self.config.cpus);
        for (cpu, &name) in CPU_NAMES.iter().enumerate().take(ncpu) {
            self.producer(ProducerDef {
                id: CPU_ID + cpu as u32,
                parent: None,
                kind: ProducerKind::Cpu,
                local_id: cpu as u64,
                name,
            });
        }
        for (irq, name) in [
            (IRQ_TIMER, "twd-timer"),
            (IRQ_VSYNC, "vsync"),
            (IRQ_MMC, "mmc0"),
            (IRQ_ETH, "eth0"),
            (IRQ_VDEC, "vdec-hw"),
        ] {
            self.producer(ProducerDef {
                id: IRQ_ID + irq,
                parent: None,
                kind: ProducerKind::Irq,
                local_id: irq.into(),
                name,
            });
        }
        // A soft IRQ is known by the handler its `S` records carry, named by its vector.
        for (vec, handler, name) in [
            (1, K_RUN_TIMER_SOFTIRQ, "TIMER"),
            (3, K_NET_RX_ACTION, "NET_RX"),
            (4, K_BLK_DONE_SOFTIRQ, "BLOCK"),
        ] {
            self.producer(ProducerDef {
                id: SOFTIRQ_ID + vec,
                parent: None,
                kind: ProducerKind::SoftIrq,
                local_id: handler,
                name,
            });
        }
        self.process(0, "kernel");
        for cpu in 0..ncpu {
            self.cpus.push(Cpu {
                current: 0,
                idle: 0,
                runq: Vec::with_capacity(64),
                free_at: 0,
                slice_end: u64::MAX,
                generation: 0,
            });
            let idle = self.spawn_idle(cpu);
            self.cpus[cpu].current = idle;
            self.cpus[cpu].idle = idle;
        }
        for cpu in 0..ncpu {
            let t = self.spawn(
                KWORKER_PIDS[cpu],
                0,
                KWORKER_NAMES[cpu],
                Role::KWorker,
                18,
                cpu,
            );
            let at = self.jitter(1_000, 10_000);
            self.push(at, EvKind::WakeTimer { tid: t as u32 });
        }
        self.jbd2 = self.spawn(92, 0, "jbd2/mmcblk0p2-8", Role::Jbd2, 25, 0);
        self.process(312, "player");
        self.player = self.spawn(312, 312, "player", Role::Player, 5, 1);
        self.vsync_cb = self.spawn(316, 312, "vsync-cb", Role::VsyncCb, 20, 0);
        self.asink = self.spawn(317, 312, "alsa-sink", Role::ASink, 12, 1);
        self.pipeline = Pipeline {
            demux: self.spawn(318, 312, "demux", Role::Demux, 11, 1),
            vdec: self.spawn(319, 312, "vdec", Role::VDec, 10, 0),
            adec: self.spawn(320, 312, "adec", Role::ADec, 10, 1),
        };
        // The thread table at the start of the trace, as KPTrace dumps it.
        for i in 0..self.threads.len() {
            let th = &self.threads[i];
            if th.role != Role::Idle {
                let (pid, name) = (th.pid, th.name);
                self.at(0, Builtin::ThreadCreate);
                let _ = self.agent.exclusive().thread_create(0, pid, name);
            }
        }
        self.process(600, "stress");
        self.process(610, "dd");
        // Everything starts blocked in its first wait; make the pipeline runnable at time 0.
        for t in [
            self.player,
            self.vsync_cb,
            self.asink,
            self.pipeline.demux,
            self.pipeline.vdec,
            self.pipeline.adec,
        ] {
            self.make_runnable(t);
        }
        for cpu in 0..ncpu {
            let at = self.us(TIMER_PERIOD * cpu as u64 / ncpu as u64);
            self.push(at, EvKind::Timer { cpu: cpu as u8 });
            self.push(0, EvKind::Resched { cpu: cpu as u8 });
        }
        let vsync = self.us(VSYNC_PERIOD / 2);
        self.push(vsync, EvKind::Vsync);
        let net = self.us(NET_PERIOD);
        self.push(net, EvKind::NetRx);
        if let Some(z) = self.config.zap_every_s {
            let at = self.seconds(z);
            self.push(at, EvKind::Zap);
        }
        for s in self.config.cpu_stress.clone() {
            let (a, b) = (self.seconds(s.at), self.seconds(s.at + s.duration));
            self.push(a, EvKind::CpuStress { start: true });
            self.push(b, EvKind::CpuStress { start: false });
        }
        for s in self.config.io_stress.clone() {
            let (a, b) = (self.seconds(s.at), self.seconds(s.at + s.duration));
            self.push(a, EvKind::IoStress { start: true });
            self.push(b, EvKind::IoStress { start: false });
        }
    }

    fn spawn_idle(&mut self, cpu: usize) -> Tid {
        if cpu == 0 {
            self.producer(ProducerDef {
                id: 0,
                parent: Some(PROCESS_ID),
                kind: ProducerKind::Thread,
                local_id: 0,
                name: "swapper",
            });
        }
        self.threads.push(Thread {
            pid: 0,
            name: "swapper",
            prio: 0,
            cpu,
            state: State::Running,
            role: Role::Idle,
            phase: 0,
            remaining: 0,
            in_syscall: 0,
            exit_requested: false,
            counter: 0,
            scratch: 0,
        });
        self.threads.len() - 1
    }

    #[inline]
    fn push(&mut self, t: u64, kind: EvKind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev {
            t,
            seq: self.seq,
            kind,
        }));
    }

    // ----- recording -----

    #[inline]
    fn at(&mut self, t: u64, ty: Builtin) {
        self.agent.clock_mut().now = t;
        self.counts[usize::from(ty.id())] += 1;
    }

    #[inline]
    fn rec_switch(&mut self, cpu: usize, t: u64, prev: u32, next: u32) {
        self.at(t, Builtin::ContextSwitch);
        let _ = self
            .agent
            .exclusive()
            .context_switch(cpu as u16, prev, next);
    }

    #[inline]
    fn rec_wakeup(&mut self, cpu: usize, t: u64, pid: u32) {
        self.at(t, Builtin::Wakeup);
        let _ = self.agent.exclusive().wakeup(cpu as u16, pid);
    }

    #[inline]
    fn rec_syscall(&mut self, cpu: usize, t: u64, nr: u32, args: [u64; 4]) {
        self.at(t, Builtin::SyscallEntry);
        let _ = self.agent.exclusive().syscall_entry(cpu as u16, nr, args);
    }

    #[inline]
    fn rec_sysret(&mut self, cpu: usize, t: u64, nr: u32, ret: i64) {
        self.at(t, Builtin::SyscallExit);
        let _ = self.agent.exclusive().syscall_exit(cpu as u16, nr, ret);
    }

    #[inline]
    fn rec_user(&mut self, cpu: usize, t: u64, address: u64) {
        self.at(t, Builtin::UserEntry);
        let _ = self.agent.exclusive().user_entry(cpu as u16, address);
    }

    #[inline]
    fn rec_user_exit(&mut self, cpu: usize, t: u64) {
        self.at(t, Builtin::UserExit);
        let _ = self.agent.exclusive().user_exit(cpu as u16);
    }

    #[inline]
    fn rec_marker(&mut self, cpu: usize, t: u64, text: &str) {
        self.at(t, Builtin::Marker);
        let _ = self.agent.exclusive().marker(cpu as u16, text);
    }

    // ----- the main loop -----

    pub(crate) fn run<T: Transport>(
        mut self,
        transport: &mut T,
        mut progress: Option<ProgressReport<'_>>,
    ) -> Result<SimSummary, SimError> {
        let started = Instant::now();
        let mut reported = started;
        let tick_rate_hz = self.config.tick_rate_hz();
        let poll_every = self.us(POLL_EVERY);
        let mut next_poll = 0;
        // What was sent when the link failed: the summary goes out in every case.
        let closed = |board: &Self| SimError::Closed {
            bytes: board.agent.stats().bytes,
            summary: Box::new(board.summary(started)),
        };
        while let Some(Reverse(ev)) = self.heap.pop() {
            if ev.t >= self.end {
                break;
            }
            if ev.t >= next_poll {
                self.agent.clock_mut().now = ev.t;
                if self.config.realtime {
                    pace(started, ev.t, tick_rate_hz);
                }
                if self.poll(transport, !self.config.realtime).is_err() {
                    return Err(closed(&self));
                }
                next_poll = ev.t + poll_every;
                if let Some((every, report)) = progress.as_mut()
                    && reported.elapsed() >= *every
                {
                    reported = Instant::now();
                    let stats = self.agent.stats();
                    report(&SimProgress {
                        simulated_s: ev.t as f64 / tick_rate_hz as f64,
                        duration_s: self.config.duration_s,
                        events: stats.records,
                        dropped: stats.dropped,
                        bytes: stats.bytes,
                        wall_s: started.elapsed().as_secs_f64(),
                    });
                }
            }
            self.dispatch(ev);
        }
        let last = self.cpus.iter().map(|c| c.free_at).max().unwrap_or(0);
        self.agent.clock_mut().now = self.end.max(last);
        if self.config.realtime {
            pace(started, self.end, tick_rate_hz);
        }
        loop {
            match self.agent.finish(transport) {
                Ok(()) => break,
                Err(TransportError::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
                Err(_) => return Err(closed(&self)),
            }
        }
        Ok(self.summary(started))
    }

    /// What the agent sent so far.
    fn summary(&self, started: Instant) -> SimSummary {
        let tick_rate_hz = self.config.tick_rate_hz();
        let stats = self.agent.stats();
        let mut per_type = BTreeMap::new();
        for b in BUILTINS {
            per_type.insert(b.def().name, self.counts[usize::from(b.id())]);
        }
        let duration_s = self.config.duration_s;
        SimSummary {
            events: stats.records,
            bytes: stats.bytes,
            bytes_per_event: if stats.records == 0 {
                0.0
            } else {
                stats.bytes as f64 / stats.records as f64
            },
            dropped: stats.dropped,
            duration_s,
            frames: stats.frames,
            seed: self.config.seed,
            cpus: self.config.cpus,
            tick_rate_hz,
            events_per_s: stats.records as f64 / duration_s,
            wall_s: started.elapsed().as_secs_f64(),
            frames_decoded: self.decoded_frames,
            frames_pushed: self.pushed_frames,
            zaps: self.zaps,
            per_type,
        }
    }

    /// Polls the agent. Off real time the simulation waits for a link that would block, as a board's idle
    /// loop would, so nothing is dropped; in real time it goes on, and full rings drop (and count) records.
    fn poll<T: Transport>(&mut self, transport: &mut T, wait: bool) -> Result<(), ()> {
        loop {
            match self.agent.poll(transport) {
                Ok(()) => return Ok(()),
                Err(TransportError::WouldBlock) if wait => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(TransportError::WouldBlock) => return Ok(()),
                Err(_) => return Err(()),
            }
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev.kind {
            EvKind::SliceEnd { cpu, generation } => {
                let cpu = usize::from(cpu);
                let c = &self.cpus[cpu];
                if generation != c.generation {
                    return;
                }
                if ev.t < c.slice_end {
                    // Interrupts stretched the chunk.
                    let end = c.slice_end;
                    self.push(end, ev.kind);
                    return;
                }
                let tid = c.current;
                self.cpus[cpu].slice_end = u64::MAX;
                self.threads[tid].remaining = 0;
                self.run_cpu(cpu, ev.t);
            }
            EvKind::Resched { cpu } => self.resched(usize::from(cpu), ev.t),
            EvKind::Timer { cpu } => self.timer(usize::from(cpu), ev.t),
            EvKind::Vsync => self.vsync(ev.t),
            EvKind::NetRx => self.net_rx(ev.t),
            EvKind::VdecDone => self.vdec_done(ev.t),
            EvKind::MmcDone => self.mmc_done(ev.t),
            EvKind::WakeTimer { tid } => {
                let tid = tid as usize;
                if self.threads[tid].state == State::Blocked {
                    let cpu = self.threads[tid].cpu;
                    let t = ev.t.max(self.cpus[cpu].free_at);
                    self.wake(cpu, t, tid);
                    self.cpus[cpu].free_at = t + 1;
                }
            }
            EvKind::Zap => {
                self.zap_requested = true;
                let player = self.player;
                self.push(ev.t, EvKind::WakeTimer { tid: player as u32 });
                if let Some(z) = self.config.zap_every_s {
                    let next = ev.t + self.seconds(z);
                    self.push(next, EvKind::Zap);
                }
            }
            EvKind::CpuStress { start } => self.cpu_stress(ev.t, start),
            EvKind::IoStress { start } => self.io_stress(ev.t, start),
        }
    }

    // ----- scheduling -----

    fn make_runnable(&mut self, tid: Tid) {
        let th = &mut self.threads[tid];
        if th.state == State::Blocked {
            th.state = State::Runnable;
            let cpu = th.cpu;
            self.cpus[cpu].runq.push(tid);
        }
    }

    /// The running thread on `cpu` wakes `tid` (a `W` record) and asks its CPU to reschedule.
    fn wake(&mut self, cpu: usize, t: u64, tid: Tid) {
        if self.threads[tid].state != State::Blocked {
            return;
        }
        let pid = self.threads[tid].pid;
        self.rec_wakeup(cpu, t, pid);
        self.make_runnable(tid);
        let target = self.threads[tid].cpu;
        let current = self.cpus[target].current;
        if self.threads[tid].prio > self.threads[current].prio {
            // An IPI when the target is another CPU.
            let at = if target == cpu { t } else { t + self.us(3) };
            self.push(at, EvKind::Resched { cpu: target as u8 });
        }
    }

    /// The best runnable thread of `cpu`, removed from its run queue (FIFO among equal priorities).
    fn pick(&mut self, cpu: usize, min_prio: Option<u8>) -> Option<Tid> {
        let c = &self.cpus[cpu];
        let mut best: Option<(usize, u8)> = None;
        for (i, &tid) in c.runq.iter().enumerate() {
            let p = self.threads[tid].prio;
            if best.is_none_or(|(_, bp)| p > bp) {
                best = Some((i, p));
            }
        }
        let (i, p) = best?;
        if min_prio.is_some_and(|m| p < m) {
            return None;
        }
        Some(self.cpus[cpu].runq.remove(i))
    }

    /// Preempts the running thread if a better one is runnable (or, with `round_robin`, an equal one).
    fn resched_with(&mut self, cpu: usize, t: u64, round_robin: bool) {
        let t = t.max(self.cpus[cpu].free_at);
        let cur = self.cpus[cpu].current;
        let cur_prio = self.threads[cur].prio;
        let min = if self.threads[cur].role == Role::Idle {
            0
        } else if round_robin {
            cur_prio
        } else {
            cur_prio + 1
        };
        let Some(next) = self.pick(cpu, Some(min)) else {
            return;
        };
        if self.threads[cur].role != Role::Idle {
            let c = &mut self.cpus[cpu];
            let running = c.slice_end != u64::MAX;
            let left = c.slice_end.saturating_sub(t);
            c.slice_end = u64::MAX;
            c.generation = c.generation.wrapping_add(1);
            let th = &mut self.threads[cur];
            if running {
                th.remaining = left.max(1);
            }
            th.state = State::Runnable;
            self.cpus[cpu].runq.push(cur);
        }
        self.switch_to(cpu, t, cur, next);
        self.run_cpu(cpu, t + 1);
    }

    fn resched(&mut self, cpu: usize, t: u64) {
        self.resched_with(cpu, t, false);
    }

    fn switch_to(&mut self, cpu: usize, t: u64, prev: Tid, next: Tid) {
        let (pp, np) = (self.threads[prev].pid, self.threads[next].pid);
        self.rec_switch(cpu, t, pp, np);
        self.threads[next].state = State::Running;
        self.cpus[cpu].current = next;
        self.cpus[cpu].free_at = t;
    }

    /// Runs the current thread of `cpu` from `t`: resumes its compute, or takes its steps until it computes,
    /// blocking and switching as it goes.
    fn run_cpu(&mut self, cpu: usize, t: u64) {
        let mut t = t.max(self.cpus[cpu].free_at);
        loop {
            let tid = self.cpus[cpu].current;
            if self.threads[tid].role == Role::Idle {
                self.cpus[cpu].free_at = t;
                self.cpus[cpu].slice_end = u64::MAX;
                return;
            }
            let remaining = self.threads[tid].remaining;
            if remaining > 0 {
                self.threads[tid].remaining = 0;
                let c = &mut self.cpus[cpu];
                c.slice_end = t + remaining;
                c.generation = c.generation.wrapping_add(1);
                c.free_at = t;
                let generation = c.generation;
                self.push(
                    t + remaining,
                    EvKind::SliceEnd {
                        cpu: cpu as u8,
                        generation,
                    },
                );
                return;
            }
            let next = if self.threads[tid].exit_requested {
                self.exit_thread(cpu, &mut t, tid)
            } else {
                self.step(cpu, &mut t, tid)
            };
            match next {
                Next::Compute(d) => {
                    self.threads[tid].remaining = d.max(1);
                    // A thread woken by this one with a higher priority takes over first.
                    if self.cpus[cpu]
                        .runq
                        .iter()
                        .any(|&r| self.threads[r].prio > self.threads[tid].prio)
                    {
                        self.cpus[cpu].free_at = t;
                        self.resched(cpu, t);
                        return;
                    }
                }
                Next::Block | Next::Sleep(_) | Next::Exit => {
                    match next {
                        Next::Sleep(d) => {
                            self.threads[tid].state = State::Blocked;
                            self.push(t + d, EvKind::WakeTimer { tid: tid as u32 });
                        }
                        Next::Exit => self.threads[tid].state = State::Dead,
                        _ => self.threads[tid].state = State::Blocked,
                    }
                    let next = self.pick(cpu, None).unwrap_or(self.cpus[cpu].idle);
                    t += 1;
                    self.switch_to(cpu, t, tid, next);
                    t += 1;
                }
            }
        }
    }

    /// An interrupt on `cpu` at `t`: stretches the running chunk by the time spent in the handler.
    fn irq_span(&mut self, cpu: usize, start: u64, end: u64) {
        let c = &mut self.cpus[cpu];
        c.free_at = end;
        if c.slice_end != u64::MAX {
            c.slice_end += end - start;
        }
    }

    fn timer(&mut self, cpu: usize, t: u64) {
        let s = t.max(self.cpus[cpu].free_at);
        self.at(s, Builtin::IrqEntry);
        let _ = self.agent.exclusive().irq_entry(cpu as u16, IRQ_TIMER);
        let mut e = s + self.jitter(2, 5);
        self.at(e, Builtin::IrqExit);
        let _ = self.agent.exclusive().irq_exit(cpu as u16);
        e += 1;
        self.at(e, Builtin::SoftIrqEntry);
        let _ = self
            .agent
            .exclusive()
            .softirq_entry(cpu as u16, K_RUN_TIMER_SOFTIRQ);
        e += self.jitter(2, 8);
        self.at(e, Builtin::SoftIrqExit);
        let _ = self.agent.exclusive().softirq_exit(cpu as u16);
        self.irq_span(cpu, s, e + 1);
        let next = t + self.us(TIMER_PERIOD);
        self.push(next, EvKind::Timer { cpu: cpu as u8 });
        // Round robin among equal priorities at each tick.
        self.resched_with(cpu, e + 1, true);
    }

    fn vsync(&mut self, t: u64) {
        let cpu = 0;
        let s = t.max(self.cpus[cpu].free_at);
        self.at(s, Builtin::IrqEntry);
        let _ = self.agent.exclusive().irq_entry(cpu as u16, IRQ_VSYNC);
        let w = s + self.jitter(2, 4);
        let cb = self.vsync_cb;
        self.wake(cpu, w, cb);
        let e = w + self.jitter(1, 3);
        self.at(e, Builtin::IrqExit);
        let _ = self.agent.exclusive().irq_exit(cpu as u16);
        self.irq_span(cpu, s, e + 1);
        let next = t + self.us(VSYNC_PERIOD);
        self.push(next, EvKind::Vsync);
    }

    fn net_rx(&mut self, t: u64) {
        let cpu = 1 % self.cpus.len();
        let s = t.max(self.cpus[cpu].free_at);
        self.at(s, Builtin::IrqEntry);
        let _ = self.agent.exclusive().irq_entry(cpu as u16, IRQ_ETH);
        let mut e = s + self.jitter(2, 5);
        self.at(e, Builtin::IrqExit);
        let _ = self.agent.exclusive().irq_exit(cpu as u16);
        e += 1;
        self.at(e, Builtin::SoftIrqEntry);
        let _ = self
            .agent
            .exclusive()
            .softirq_entry(cpu as u16, K_NET_RX_ACTION);
        e += self.jitter(4, 12);
        self.packets = (self.packets + 1).min(256);
        let demux = self.pipeline.demux;
        if self.threads[demux].state == State::Blocked && self.threads[demux].in_syscall == NR_READ
        {
            self.wake(cpu, e, demux);
            e += 1;
        }
        self.at(e, Builtin::SoftIrqExit);
        let _ = self.agent.exclusive().softirq_exit(cpu as u16);
        self.irq_span(cpu, s, e + 1);
        let next = t + self.jitter(NET_PERIOD * 3 / 4, NET_PERIOD * 5 / 4);
        self.push(next, EvKind::NetRx);
    }

    fn vdec_done(&mut self, t: u64) {
        let cpu = 0;
        let s = t.max(self.cpus[cpu].free_at);
        self.at(s, Builtin::IrqEntry);
        let _ = self.agent.exclusive().irq_entry(cpu as u16, IRQ_VDEC);
        let w = s + self.jitter(2, 4);
        let vdec = self.pipeline.vdec;
        self.wake(cpu, w, vdec);
        let e = w + 1;
        self.at(e, Builtin::IrqExit);
        let _ = self.agent.exclusive().irq_exit(cpu as u16);
        self.irq_span(cpu, s, e + 1);
    }

    fn mmc_done(&mut self, t: u64) {
        let cpu = 0;
        let s = t.max(self.cpus[cpu].free_at);
        self.at(s, Builtin::IrqEntry);
        let _ = self.agent.exclusive().irq_entry(cpu as u16, IRQ_MMC);
        let mut e = s + self.jitter(2, 6);
        self.at(e, Builtin::IrqExit);
        let _ = self.agent.exclusive().irq_exit(cpu as u16);
        e += 1;
        self.at(e, Builtin::SoftIrqEntry);
        let _ = self
            .agent
            .exclusive()
            .softirq_entry(cpu as u16, K_BLK_DONE_SOFTIRQ);
        e += self.jitter(5, 20);
        if let Some(dd) = self.dd {
            self.wake(cpu, e, dd);
            e += 1;
        }
        self.at(e, Builtin::SoftIrqExit);
        let _ = self.agent.exclusive().softirq_exit(cpu as u16);
        self.irq_span(cpu, s, e + 1);
    }

    fn cpu_stress(&mut self, t: u64, start: bool) {
        if start == self.cpu_stress {
            return;
        }
        self.cpu_stress = start;
        let creator = 0;
        let mut at = t.max(self.cpus[creator].free_at);
        if start {
            for cpu in 0..self.cpus.len() {
                let pid = self.new_pid();
                let tid = self.spawn(pid, 600, "cpu-burn", Role::Burn, 15, cpu);
                self.at(at, Builtin::ThreadCreate);
                let _ = self
                    .agent
                    .exclusive()
                    .thread_create(creator as u16, pid, "cpu-burn");
                at += 1;
                self.wake(creator, at, tid);
                at += 1;
                self.burners.push(tid);
            }
        } else {
            for tid in std::mem::take(&mut self.burners) {
                self.threads[tid].exit_requested = true;
            }
        }
        self.cpus[creator].free_at = at;
    }

    fn io_stress(&mut self, t: u64, start: bool) {
        if start == self.io_stress {
            return;
        }
        self.io_stress = start;
        let creator = 1 % self.cpus.len();
        let mut at = t.max(self.cpus[creator].free_at);
        if start {
            let pid = self.new_pid();
            let tid = self.spawn(pid, 610, "dd", Role::Dd, 8, creator);
            self.at(at, Builtin::ThreadCreate);
            let _ = self
                .agent
                .exclusive()
                .thread_create(creator as u16, pid, "dd");
            at += 1;
            self.wake(creator, at, tid);
            at += 1;
            self.dd = Some(tid);
        } else if let Some(dd) = self.dd.take() {
            self.threads[dd].exit_requested = true;
            self.wake(creator, at, dd);
            at += 1;
        }
        self.cpus[creator].free_at = at;
    }

    fn new_pid(&mut self) -> u32 {
        self.next_pid += 1;
        self.next_pid
    }

    /// Ends a thread that was asked to: it leaves its system call and exits (`KX`).
    fn exit_thread(&mut self, cpu: usize, t: &mut u64, tid: Tid) -> Next {
        let th = &self.threads[tid];
        let (pid, nr) = (th.pid, th.in_syscall);
        if nr != 0 {
            self.rec_sysret(cpu, *t, nr, -4);
            self.threads[tid].in_syscall = 0;
            *t += 1;
        }
        self.at(*t, Builtin::ThreadExit);
        let _ = self.agent.exclusive().thread_exit(cpu as u16, pid);
        *t += 1;
        Next::Exit
    }

    /// Enters a blocking system call.
    fn block_in(&mut self, cpu: usize, t: &mut u64, tid: Tid, nr: u32, args: [u64; 4]) -> Next {
        self.rec_syscall(cpu, *t, nr, args);
        *t += 1;
        self.threads[tid].in_syscall = nr;
        Next::Block
    }

    /// Leaves the system call it was blocked in, if any.
    fn leave_syscall(&mut self, cpu: usize, t: &mut u64, tid: Tid, ret: i64) {
        let nr = self.threads[tid].in_syscall;
        if nr != 0 {
            self.rec_sysret(cpu, *t, nr, ret);
            self.threads[tid].in_syscall = 0;
            *t += 1;
        }
    }

    /// One step of a thread's behaviour: records at `*t` (advanced per record), then what it does next.
    fn step(&mut self, cpu: usize, t: &mut u64, tid: Tid) -> Next {
        let role = self.threads[tid].role;
        let phase = self.threads[tid].phase;
        match role {
            Role::Idle => Next::Block,
            Role::KWorker => {
                if phase == 0 {
                    self.threads[tid].phase = 1;
                    let size = 64 << self.rng.gen_range(0..4);
                    // Each kworker allocates from its own slab page: two live allocations never share a pointer.
                    let ptr = KHEAP
                        + 0x1000 * (tid as u64 % 16)
                        + 0x40 * u64::from(self.rng.gen_range(0..64u32));
                    self.threads[tid].scratch = ptr;
                    self.at(*t, Builtin::Kmalloc);
                    let _ = self.agent.exclusive().kmalloc(cpu as u16, size, ptr);
                    *t += 1;
                    Next::Compute(self.jitter(40, 200))
                } else {
                    self.threads[tid].phase = 0;
                    let ptr = self.threads[tid].scratch;
                    self.at(*t, Builtin::Kfree);
                    let _ = self.agent.exclusive().kfree(cpu as u16, ptr);
                    *t += 1;
                    Next::Sleep(self.jitter(8_000, 30_000))
                }
            }
            Role::Jbd2 => {
                if phase == 0 {
                    self.threads[tid].phase = 1;
                    let ptr = KHEAP + 0x1_0000 + 0x100 * u64::from(self.rng.gen_range(0..16u32));
                    self.threads[tid].scratch = ptr;
                    self.at(*t, Builtin::Kmalloc);
                    let _ = self.agent.exclusive().kmalloc(cpu as u16, 4096, ptr);
                    *t += 1;
                    // A commit's length grows with the dirty data behind it.
                    let dirty = u64::from(std::mem::take(&mut self.dirty));
                    let commit = 150 + dirty * self.rng.gen_range(400..1_200);
                    Next::Compute(self.us(commit))
                } else {
                    self.threads[tid].phase = 0;
                    let ptr = self.threads[tid].scratch;
                    self.at(*t, Builtin::Kfree);
                    let _ = self.agent.exclusive().kfree(cpu as u16, ptr);
                    *t += 1;
                    if self.io_stress {
                        Next::Block
                    } else {
                        Next::Sleep(self.jitter(4_000_000, 5_000_000))
                    }
                }
            }
            Role::Player => self.step_player(cpu, t, tid, phase),
            Role::Demux => self.step_demux(cpu, t, tid, phase),
            Role::VDec => self.step_vdec(cpu, t, tid, phase),
            Role::ADec => match phase {
                0 => {
                    self.leave_syscall(cpu, t, tid, 0);
                    if self.aqueue == 0 {
                        return self.block_in(
                            cpu,
                            t,
                            tid,
                            NR_FUTEX,
                            [FUTEX_ADEC, FUTEX_WAIT_PRIVATE, 1, 0],
                        );
                    }
                    self.aqueue -= 1;
                    self.threads[tid].phase = 1;
                    self.rec_user(cpu, *t, U_ADEC_FRAME);
                    *t += 1;
                    Next::Compute(self.jitter(500, 900))
                }
                _ => {
                    self.threads[tid].phase = 0;
                    self.rec_user_exit(cpu, *t);
                    *t += 1;
                    self.squeue = (self.squeue + 1).min(8);
                    let sink = self.asink;
                    self.wake(cpu, *t, sink);
                    *t += 1;
                    Next::Compute(self.us(3))
                }
            },
            Role::ASink => match phase {
                0 => {
                    self.leave_syscall(cpu, t, tid, 0);
                    if self.squeue == 0 {
                        return self.block_in(
                            cpu,
                            t,
                            tid,
                            NR_FUTEX,
                            [FUTEX_ASINK, FUTEX_WAIT_PRIVATE, 1, 0],
                        );
                    }
                    self.squeue -= 1;
                    self.threads[tid].phase = 1;
                    self.rec_syscall(cpu, *t, NR_WRITE, [12, U_AUDIO_BUF, 4096, 0]);
                    *t += 1;
                    Next::Compute(self.jitter(30, 80))
                }
                _ => {
                    self.threads[tid].phase = 0;
                    self.rec_sysret(cpu, *t, NR_WRITE, 4096);
                    *t += 1;
                    Next::Compute(self.us(2))
                }
            },
            Role::VsyncCb => {
                match phase {
                    0 => {
                        self.threads[tid].phase = 1;
                        // FBIO_WAITFORVSYNC
                        self.block_in(
                            cpu,
                            t,
                            tid,
                            NR_IOCTL,
                            [5, FBIO_WAITFORVSYNC, U_VSYNC_ARG, 0],
                        )
                    }
                    1 => {
                        self.leave_syscall(cpu, t, tid, 0);
                        if self.dqueue > 0 {
                            self.dqueue -= 1;
                            self.shown_frame += 1;
                        }
                        self.pushed_frames += 1;
                        let frame = self.shown_frame;
                        self.at(*t, Builtin::Mark);
                        let _ = self.agent.exclusive().mark(cpu as u16, frame);
                        *t += 1;
                        self.threads[tid].phase = 2;
                        // FBIOPAN_DISPLAY
                        self.rec_syscall(
                            cpu,
                            *t,
                            NR_IOCTL,
                            [5, FBIOPAN_DISPLAY, U_VAR_SCREENINFO, 0],
                        );
                        *t += 1;
                        Next::Compute(self.jitter(20, 60))
                    }
                    _ => {
                        self.rec_sysret(cpu, *t, NR_IOCTL, 0);
                        *t += 1;
                        self.threads[tid].phase = 1;
                        self.block_in(
                            cpu,
                            t,
                            tid,
                            NR_IOCTL,
                            [5, FBIO_WAITFORVSYNC, U_VSYNC_ARG, 0],
                        )
                    }
                }
            }
            Role::Burn => match phase {
                0 => {
                    self.leave_syscall(cpu, t, tid, 0);
                    self.threads[tid].phase = 1;
                    Next::Compute(self.jitter(15_000, 25_000))
                }
                _ => {
                    self.threads[tid].phase = 0;
                    self.rec_syscall(cpu, *t, NR_NANOSLEEP, [U_TIMESPEC, 0, 0, 0]);
                    self.threads[tid].in_syscall = NR_NANOSLEEP;
                    *t += 1;
                    Next::Sleep(self.jitter(1_000, 3_000))
                }
            },
            Role::Dd => {
                if phase == 0 {
                    self.leave_syscall(cpu, t, tid, 65536);
                    self.threads[tid].phase = 1;
                    self.rec_syscall(cpu, *t, NR_WRITE, [1, U_DD_BUF, 65536, 0]);
                    *t += 1;
                    Next::Compute(self.jitter(200, 400))
                } else {
                    self.threads[tid].phase = 0;
                    self.dirty += 1;
                    if self.dirty >= 8 {
                        let jbd2 = self.jbd2;
                        self.wake(cpu, *t, jbd2);
                        *t += 1;
                    }
                    // Dirty throttling: the write waits for the block layer, which completes on CPU 0.
                    let done = *t + self.jitter(600, 1_400);
                    self.push(done, EvKind::MmcDone);
                    self.threads[tid].in_syscall = NR_WRITE;
                    Next::Block
                }
            }
        }
    }

    fn step_player(&mut self, cpu: usize, t: &mut u64, tid: Tid, phase: u8) -> Next {
        match phase {
            0 => {
                self.leave_syscall(cpu, t, tid, 0);
                if self.zap_requested {
                    self.zap_requested = false;
                    self.zaps += 1;
                    self.rec_marker(cpu, *t, ZAP_START);
                    *t += 1;
                    // The old channel's threads are told to exit.
                    let old = self.pipeline;
                    for th in [old.demux, old.vdec, old.adec] {
                        self.threads[th].exit_requested = true;
                        if self.threads[th].state == State::Blocked {
                            self.wake(cpu, *t, th);
                            *t += 1;
                        }
                    }
                    self.vqueue = 0;
                    self.aqueue = 0;
                    self.threads[tid].phase = 1;
                    self.rec_syscall(cpu, *t, NR_NANOSLEEP, [U_TIMESPEC, 0, 0, 0]);
                    self.threads[tid].in_syscall = NR_NANOSLEEP;
                    *t += 1;
                    return Next::Sleep(self.jitter(20_000, 40_000));
                }
                self.threads[tid].phase = 2;
                self.rec_user(cpu, *t, U_PLAYER_TICK);
                *t += 1;
                Next::Compute(self.jitter(100, 300))
            }
            1 => {
                // Tune to the new channel: new pipeline threads.
                self.leave_syscall(cpu, t, tid, 0);
                let mut made = [0; 3];
                for (i, (name, role, prio, on)) in [
                    ("demux", Role::Demux, 11, 1),
                    ("vdec", Role::VDec, 10, 0),
                    ("adec", Role::ADec, 10, 1),
                ]
                .into_iter()
                .enumerate()
                {
                    let pid = self.new_pid();
                    let th = self.spawn(pid, 312, name, role, prio, on);
                    self.at(*t, Builtin::ThreadCreate);
                    let _ = self.agent.exclusive().thread_create(cpu as u16, pid, name);
                    *t += 1;
                    self.wake(cpu, *t, th);
                    *t += 1;
                    made[i] = th;
                }
                self.pipeline = Pipeline {
                    demux: made[0],
                    vdec: made[1],
                    adec: made[2],
                };
                self.packets = 0;
                self.sync_packets = self.rng.gen_range(40..120);
                self.sync_frames = self.rng.gen_range(0..12);
                self.zap_pending = true;
                self.threads[tid].phase = 3;
                Next::Compute(self.jitter(200, 500))
            }
            2 => {
                self.rec_user_exit(cpu, *t);
                *t += 1;
                self.threads[tid].phase = 3;
                Next::Compute(self.us(2))
            }
            _ => {
                self.threads[tid].phase = 0;
                self.rec_syscall(cpu, *t, NR_POLL, [U_POLLFDS, 3, 100, 0]);
                self.threads[tid].in_syscall = NR_POLL;
                *t += 1;
                Next::Sleep(self.jitter(90_000, 110_000))
            }
        }
    }

    fn step_demux(&mut self, cpu: usize, t: &mut u64, tid: Tid, phase: u8) -> Next {
        match phase {
            0 => {
                if self.threads[tid].in_syscall == 0 {
                    self.rec_syscall(
                        cpu,
                        *t,
                        NR_READ,
                        [
                            9,
                            U_NET_BUF + 2048 * u64::from(self.threads[tid].counter % 64),
                            1316,
                            0,
                        ],
                    );
                    self.threads[tid].in_syscall = NR_READ;
                    *t += 1;
                }
                if self.packets == 0 {
                    return Next::Block;
                }
                self.packets -= 1;
                self.leave_syscall(cpu, t, tid, 1316);
                self.threads[tid].phase = 1;
                self.rec_user(cpu, *t, U_DEMUX_PARSE);
                *t += 1;
                Next::Compute(self.jitter(20, 50))
            }
            _ => {
                self.threads[tid].phase = 0;
                self.rec_user_exit(cpu, *t);
                *t += 1;
                if self.sync_packets > 0 {
                    self.sync_packets -= 1;
                    return Next::Compute(self.us(2));
                }
                let n = self.threads[tid].counter + 1;
                self.threads[tid].counter = n;
                if n.is_multiple_of(PACKETS_PER_VIDEO_FRAME) {
                    if self.sync_frames > 0 {
                        self.sync_frames -= 1;
                    } else if self.vqueue < VQUEUE_MAX {
                        self.vqueue += 1;
                        let vdec = self.pipeline.vdec;
                        self.wake(cpu, *t, vdec);
                        *t += 1;
                    }
                }
                if n.is_multiple_of(PACKETS_PER_AUDIO_FRAME) {
                    self.aqueue = (self.aqueue + 1).min(8);
                    let adec = self.pipeline.adec;
                    self.wake(cpu, *t, adec);
                    *t += 1;
                }
                Next::Compute(self.us(2))
            }
        }
    }

    fn step_vdec(&mut self, cpu: usize, t: &mut u64, tid: Tid, phase: u8) -> Next {
        match phase {
            0 => {
                self.leave_syscall(cpu, t, tid, 0);
                if self.vqueue == 0 {
                    return self.block_in(
                        cpu,
                        t,
                        tid,
                        NR_FUTEX,
                        [FUTEX_VDEC, FUTEX_WAIT_PRIVATE, 1, 0],
                    );
                }
                self.vqueue -= 1;
                self.rec_user(cpu, *t, U_VDEC_CHAIN);
                *t += 1;
                let n = self.threads[tid].counter;
                let ptr = KHEAP + 0x20_0000 + 0x8_0000 * u64::from(n % 4);
                self.at(*t, Builtin::Kmalloc);
                let _ = self.agent.exclusive().kmalloc(cpu as u16, 0x7_e900, ptr);
                *t += 1;
                self.rec_user(cpu, *t, U_VDEC_HEADER);
                *t += 1;
                self.threads[tid].phase = 1;
                Next::Compute(self.jitter(200, 400))
            }
            1 => {
                self.rec_user_exit(cpu, *t);
                *t += 1;
                self.threads[tid].phase = 2;
                // The hardware decoder signals completion with an interrupt.
                let done = *t + self.jitter(2_000, 5_000);
                self.push(done, EvKind::VdecDone);
                self.block_in(
                    cpu,
                    t,
                    tid,
                    NR_IOCTL,
                    [11, VDEC_IOCTL_DECODE, U_VDEC_ARG, 0],
                )
            }
            2 => {
                self.leave_syscall(cpu, t, tid, 0);
                self.threads[tid].scratch = 0;
                self.threads[tid].phase = 3;
                self.rec_user(cpu, *t, U_VDEC_SLICE);
                *t += 1;
                Next::Compute(self.jitter(400, 800))
            }
            3 => {
                self.rec_user_exit(cpu, *t);
                *t += 1;
                let s = self.threads[tid].scratch + 1;
                self.threads[tid].scratch = s;
                if s < u64::from(VIDEO_SLICES) {
                    self.rec_user(cpu, *t, U_VDEC_SLICE);
                    *t += 1;
                    return Next::Compute(self.jitter(400, 800));
                }
                let n = self.threads[tid].counter;
                // Four frame buffers in rotation: the one from two frames ago is released, once it exists.
                if n >= 2 {
                    let old = KHEAP + 0x20_0000 + 0x8_0000 * u64::from((n + 2) % 4);
                    self.at(*t, Builtin::Kfree);
                    let _ = self.agent.exclusive().kfree(cpu as u16, old);
                    *t += 1;
                }
                self.threads[tid].counter = n + 1;
                self.rec_user_exit(cpu, *t);
                *t += 1;
                self.rec_marker(cpu, *t, FRAME_DECODED);
                *t += 1;
                self.decoded_frames += 1;
                self.dqueue = (self.dqueue + 1).min(DQUEUE_MAX);
                if self.zap_pending {
                    self.zap_pending = false;
                    self.rec_marker(cpu, *t, ZAP_END);
                    *t += 1;
                }
                self.threads[tid].phase = 0;
                Next::Compute(self.us(3))
            }
            _ => Next::Block,
        }
    }
}

/// Sleeps until wall time catches up with simulated time `ticks`.
fn pace(started: Instant, ticks: u64, tick_rate_hz: u64) {
    let target = Duration::from_secs_f64(ticks as f64 / tick_rate_hz as f64);
    let elapsed = started.elapsed();
    if target > elapsed {
        std::thread::sleep(target - elapsed);
    }
}

const CPU_NAMES: [&str; MAX_CPUS] = [
    "cpu0", "cpu1", "cpu2", "cpu3", "cpu4", "cpu5", "cpu6", "cpu7",
];
const KWORKER_NAMES: [&str; MAX_CPUS] = [
    "kworker/0:1",
    "kworker/1:1",
    "kworker/2:1",
    "kworker/3:1",
    "kworker/4:1",
    "kworker/5:1",
    "kworker/6:1",
    "kworker/7:1",
];
const KWORKER_PIDS: [u32; MAX_CPUS] = [21, 22, 23, 24, 25, 26, 27, 28];
