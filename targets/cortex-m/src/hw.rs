//! The mps2-an386 devices the firmware uses (as QEMU models them, after ARM's AN386 and the CMSDK APB
//! peripherals), ARM semihosting for the run's parameters and exit, and a panic-free number printer.

use core::ptr::{read_volatile, write_volatile};

/// Every clock of the board (CPU, SysTick, APB timers): 25 MHz, so one tick is 40 ns.
pub const SYSCLK_HZ: u32 = 25_000_000;

/// CMSDK APB UART 0 (`-serial` 0 in QEMU): DATA, STATE, CTRL, INTSTATUS, BAUDDIV.
const UART0: usize = 0x4000_4000;
/// CMSDK APB timer 0: the "vsync" interrupt (NVIC IRQ 8).
const TIMER0: usize = 0x4000_0000;
/// CMSDK APB timer 1: free-running, the agent's clock.
const TIMER1: usize = 0x4000_1000;

/// NVIC line of timer 0.
pub const TIMER0_IRQ: u16 = 8;

const UART_STATE_TXFULL: u32 = 1;
const UART_CTRL_TX_ENABLE: u32 = 1;
const TIMER_CTRL_ENABLE: u32 = 1;
const TIMER_CTRL_IRQ_ENABLE: u32 = 1 << 3;

fn reg(base: usize, offset: usize) -> *mut u32 {
    (base + offset) as *mut u32
}

/// Enables UART 0's transmitter (the baud divisor only matters to real hardware; QEMU needs it ≥ 16).
pub fn uart_init() {
    // SAFETY: UART0 is the CMSDK UART's register block on this board; these writes configure it.
    unsafe {
        write_volatile(reg(UART0, 0x10), SYSCLK_HZ / 115_200);
        write_volatile(reg(UART0, 0x08), UART_CTRL_TX_ENABLE);
    }
}

/// Writes one byte if the transmitter can take it.
pub fn uart_try_send(byte: u8) -> bool {
    // SAFETY: reads the UART's STATE register and writes its DATA register.
    unsafe {
        if read_volatile(reg(UART0, 0x04)) & UART_STATE_TXFULL != 0 {
            return false;
        }
        write_volatile(reg(UART0, 0x00), u32::from(byte));
    }
    true
}

/// Whether the transmitter still holds a byte.
pub fn uart_busy() -> bool {
    // SAFETY: reads the UART's STATE register.
    unsafe { read_volatile(reg(UART0, 0x04)) & UART_STATE_TXFULL != 0 }
}

/// Starts timer 1 counting down from 2³²−1 without interrupts: the free-running clock.
pub fn clock_init() {
    // SAFETY: TIMER1 is a CMSDK APB timer; these writes configure it.
    unsafe {
        write_volatile(reg(TIMER1, 0x00), 0);
        write_volatile(reg(TIMER1, 0x08), u32::MAX);
        write_volatile(reg(TIMER1, 0x04), u32::MAX);
        write_volatile(reg(TIMER1, 0x00), TIMER_CTRL_ENABLE);
    }
}

/// Timer 1's raw count (it counts down).
#[inline(always)]
#[cfg_attr(not(feature = "timed-masking"), allow(dead_code))]
pub fn clock_count() -> u32 {
    // SAFETY: reads timer 1's VALUE register.
    unsafe { read_volatile(reg(TIMER1, 0x04)) }
}

/// Timer 1's raw count, read so that the compiler may take one read for two made with no memory
/// write between them: the masked section's start and the agent's clock read right after it are then
/// one load (the same instant, which they are within a tick anyway). Only for reads a memory write
/// separates from the next one (a clock that stores its state): `pure` lets the compiler drop or
/// merge reads that nothing else orders.
#[inline(always)]
pub fn clock_count_merged() -> u32 {
    let count: u32;
    // SAFETY: reads timer 1's VALUE register, always readable; no side effect.
    unsafe {
        core::arch::asm!("ldr {c}, [{r}]", c = out(reg) count, r = in(reg) reg(TIMER1, 0x04),
            options(pure, readonly, nostack, preserves_flags));
    }
    count
}

/// Timer 1's count, turned into an up-counter.
pub fn clock_raw() -> u32 {
    // SAFETY: reads timer 1's VALUE register.
    u32::MAX - unsafe { read_volatile(reg(TIMER1, 0x04)) }
}

/// Starts timer 0 interrupting every `period` ticks.
pub fn vsync_timer_start(period: u32) {
    // SAFETY: TIMER0 is a CMSDK APB timer; these writes configure it.
    unsafe {
        write_volatile(reg(TIMER0, 0x00), 0);
        write_volatile(reg(TIMER0, 0x08), period);
        write_volatile(reg(TIMER0, 0x04), period);
        write_volatile(reg(TIMER0, 0x00), TIMER_CTRL_ENABLE | TIMER_CTRL_IRQ_ENABLE);
    }
}

/// Stops timer 0.
pub fn vsync_timer_stop() {
    // SAFETY: writes timer 0's CTRL register.
    unsafe { write_volatile(reg(TIMER0, 0x00), 0) }
}

/// Timer 0's count (down from its period; it reloads when it expires and interrupts).
pub fn vsync_timer_value() -> u32 {
    // SAFETY: reads timer 0's VALUE register.
    unsafe { read_volatile(reg(TIMER0, 0x04)) }
}

/// Acknowledges timer 0's interrupt.
pub fn vsync_timer_clear() {
    // SAFETY: writes timer 0's INTCLEAR register.
    unsafe { write_volatile(reg(TIMER0, 0x0c), 1) }
}

// ARM semihosting (QEMU `-semihosting-config enable=on`): `bkpt 0xab` with the operation in r0.
const SYS_WRITE0: u32 = 0x04;
const SYS_GET_CMDLINE: u32 = 0x15;
const SYS_EXIT: u32 = 0x18;
const ADP_STOPPED_APPLICATION_EXIT: usize = 0x20026;
const ADP_STOPPED_RUNTIME_ERROR: usize = 0x20023;

fn semihost(op: u32, arg: usize) -> u32 {
    let mut r0 = op;
    // SAFETY: the semihosting call reads only the block `arg` points to (or `arg` itself for SYS_EXIT),
    // which the callers keep alive for the call.
    unsafe {
        core::arch::asm!("bkpt #0xab", inout("r0") r0, in("r1") arg, options(nostack));
    }
    r0
}

/// The command line QEMU was given (`-semihosting-config ...,arg=...`), in `buf`.
pub fn command_line(buf: &mut [u8]) -> &[u8] {
    let mut block = [buf.as_mut_ptr() as usize, buf.len().saturating_sub(1)];
    if semihost(SYS_GET_CMDLINE, block.as_mut_ptr() as usize) != 0 {
        return &[];
    }
    let len = block[1].min(buf.len());
    buf.get(..len).unwrap_or_default()
}

/// Prints a NUL-terminated text on the host's console.
pub fn host_print(text: &[u8]) {
    if text.last() == Some(&0) {
        semihost(SYS_WRITE0, text.as_ptr() as usize);
    }
}

/// Ends QEMU: exit status 0 when `ok`, 1 otherwise.
pub fn exit(ok: bool) -> ! {
    let reason = if ok {
        ADP_STOPPED_APPLICATION_EXIT
    } else {
        ADP_STOPPED_RUNTIME_ERROR
    };
    loop {
        semihost(SYS_EXIT, reason);
    }
}

/// A line of text built without formatting machinery (no panicking paths), printed with [`host_print`].
pub struct Line {
    buf: [u8; 320],
    len: usize,
}

impl Line {
    /// An empty line.
    pub const fn new() -> Self {
        Self {
            buf: [0; 320],
            len: 0,
        }
    }

    /// Appends text (cut at the buffer's end).
    pub fn text(&mut self, s: &str) -> &mut Self {
        for &b in s.as_bytes() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
        self
    }

    /// Appends a decimal number.
    pub fn num(&mut self, mut v: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut n = 0;
        loop {
            if let Some(d) = digits.get_mut(n) {
                *d = b'0' + (v % 10) as u8;
            }
            n += 1;
            v /= 10;
            if v == 0 || n >= digits.len() {
                break;
            }
        }
        while n > 0 {
            n -= 1;
            let d = digits.get(n).copied().unwrap_or(b'?');
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = d;
                self.len += 1;
            }
        }
        self
    }

    /// Prints the line (with a newline) on the host's console and empties it.
    pub fn print(&mut self) {
        let end = self.len.min(self.buf.len() - 2);
        if let Some(s) = self.buf.get_mut(end..end + 2) {
            s.copy_from_slice(b"\n\0");
            host_print(self.buf.get(..end + 2).unwrap_or_default());
        }
        self.len = 0;
    }
}

/// The value of `key=` in a command line of space-separated `key=value` words.
pub fn arg<'a>(cmdline: &'a [u8], key: &str) -> Option<&'a [u8]> {
    cmdline.split(|&b| b == b' ').find_map(|word| {
        let rest = word.strip_prefix(key.as_bytes())?;
        rest.strip_prefix(b"=")
    })
}

/// A decimal number, or `None` if `s` is not one.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    Some(v)
}
