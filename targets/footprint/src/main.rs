//! A bare-metal Cortex-M image that links the agent, so its flash footprint can be measured and its freedom
//! from panics proven at link time.
//!
//! The image records every built-in event type from volatile inputs (so nothing is optimised away) and
//! polls the agent into a memory-mapped UART data register. The panic handler calls a symbol that does not
//! exist: if any panicking path survives optimisation, the link fails.
#![no_std]
#![no_main]

use core::ptr::read_volatile;
#[cfg(not(feature = "probe"))]
use core::ptr::write_volatile;

#[cfg(not(feature = "probe"))]
use socscope_agent::StaticConfig;
use socscope_agent::{Clock, Config};
#[cfg(not(feature = "probe"))]
use socscope_agent::{Transport, TransportError, frame_buffer_len};

// The agent masks interrupts through the `critical-section` crate; cortex-m provides its PRIMASK one.
use cortex_m as _;

/// DWT cycle counter of a Cortex-M.
const DWT_CYCCNT: *const u32 = 0xE000_1004 as *const u32;
/// A UART data register (the address of a typical STM32 USART).
#[cfg(not(feature = "probe"))]
const UART_DR: *mut u32 = 0x4000_4404 as *mut u32;
/// Where the image reads its "events" from, so the compiler cannot know them.
const INPUT: *const u32 = 0x2000_0000 as *const u32;

struct CycleCounter {
    high: u32,
    last: u32,
}

impl Clock for CycleCounter {
    fn now(&mut self) -> u64 {
        // SAFETY: DWT_CYCCNT is a read-only hardware register on every Cortex-M4.
        let low = unsafe { read_volatile(DWT_CYCCNT) };
        if low < self.last {
            self.high = self.high.wrapping_add(1);
        }
        self.last = low;
        (u64::from(self.high) << 32) | u64::from(low)
    }
}

/// The probe build's agent: the same rings as `SmallAgent`, no control-frame buffer and no drain state
/// (nothing drains on the board), no dictionary storage.
#[cfg(feature = "probe")]
type SmallAgent<C> =
    socscope_agent::Agent<C, 2, 256, 4, 0, 0, 0, 0, socscope_agent::ProbeConfig<2>>;
/// The streaming build's agent: the library's `SmallAgent`, its configuration referenced in flash.
#[cfg(not(feature = "probe"))]
type SmallAgent<C> =
    socscope_agent::Agent<C, 2, 256, 4, { frame_buffer_len(256) }, 16, 8, 1, StaticConfig>;

/// The configuration, in flash (the agent references it; the session id is given at boot).
static CONFIG: Config = Config {
    board: "footprint",
    soc: "cortex-m4f",
    os: "bare-metal",
    application: "footprint",
    cpu_count: 1,
    tick_rate_hz: 168_000_000,
    session_id: 0,
    flush_latency_ticks: 16_800_000,
    heartbeat_ticks: 168_000_000,
    hello_every_ticks: 168_000_000,
    token: "",
};

/// The probe build's names image (the host's `Hello` names).
#[cfg(feature = "probe")]
static NAMES: [u8; socscope_agent::probe::names_image_len(
    "footprint",
    "cortex-m4f",
    "bare-metal",
    "footprint",
    "",
)] = socscope_agent::probe::names_image("footprint", "cortex-m4f", "bare-metal", "footprint", "");

/// The probe build's control block.
#[cfg(feature = "probe")]
static PROBE: socscope_agent::probe::ProbeControl<2> = socscope_agent::probe::ProbeControl::new();

#[cfg(not(feature = "probe"))]
struct Uart;

#[cfg(not(feature = "probe"))]
impl Transport for Uart {
    fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        for &b in frame {
            // SAFETY: UART_DR is the UART's data register; writing a byte sends it.
            unsafe { write_volatile(UART_DR, u32::from(b)) };
        }
        Ok(())
    }
}

fn input() -> u32 {
    // SAFETY: INPUT is the start of RAM, always readable.
    unsafe { read_volatile(INPUT) }
}

unsafe extern "C" {
    /// Deliberately undefined: referenced only from the panic handler.
    fn socscope_agent_must_not_panic() -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: never linked; a reference to it that survives optimisation fails the build, which is the point.
    unsafe { socscope_agent_must_not_panic() }
}

#[unsafe(link_section = ".vector_table.reset")]
#[unsafe(no_mangle)]
static RESET_VECTOR: extern "C" fn() -> ! = reset;

#[unsafe(no_mangle)]
extern "C" fn reset() -> ! {
    #[cfg(not(feature = "probe"))]
    let agent = SmallAgent::new_static(
        CycleCounter { high: 0, last: 0 },
        &CONFIG,
        u64::from(input()),
    );
    #[cfg(feature = "probe")]
    let agent = SmallAgent::new_probe(
        CycleCounter { high: 0, last: 0 },
        &CONFIG,
        u64::from(input()),
        &PROBE,
    );
    #[cfg_attr(not(feature = "probe"), allow(unused_mut))]
    let Ok(mut agent) = agent else {
        loop {
            cortex_m::asm::wfi();
        }
    };
    #[cfg(feature = "probe")]
    {
        // In a register-sized slot the agent would move; here it stays on this never-returning stack.
        agent.attach_probe(&PROBE, &[], &NAMES);
    }
    #[cfg(not(feature = "probe"))]
    let mut uart = Uart;
    loop {
        let v = input();
        let _ = match v % 16 {
            0 => agent.context_switch(0, v, v >> 3),
            1 => agent.irq_entry(0, v & 63),
            2 => agent.irq_exit(0),
            3 => agent.softirq_entry(0, u64::from(v)),
            4 => agent.softirq_exit(0),
            5 => agent.syscall_entry(0, v & 511, [u64::from(v), 0, 4096, 0]),
            6 => agent.syscall_exit(0, v & 511, i64::from(v as i32)),
            7 => agent.wakeup(0, v),
            8 => agent.marker(0, "frame decoded"),
            9 => agent.mark(0, u64::from(v)),
            10 => agent.user_entry(0, u64::from(v)),
            11 => agent.user_exit(0),
            12 => agent.thread_create(0, v, "decoder"),
            13 => agent.thread_exit(0, v),
            14 => agent.kmalloc(0, u64::from(v & 4095), u64::from(v)),
            _ => agent.kfree(0, u64::from(v)),
        };
        #[cfg(not(feature = "probe"))]
        let _ = agent.poll(&mut uart);
        #[cfg(feature = "probe")]
        agent.probe_close_blocks();
    }
}
