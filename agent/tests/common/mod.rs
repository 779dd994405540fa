//! What the agent's host tests share: a clock the test moves by hand, and a board's configuration.

use std::cell::Cell;
use std::rc::Rc;

use socscope_agent::{Clock, Config};

/// A clock the test sets; clones share it.
#[derive(Clone, Default)]
pub struct SharedClock(pub Rc<Cell<u64>>);

impl Clock for SharedClock {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
}

/// A two-CPU set-top box's configuration as a board keeps it in flash: its session id is given at
/// boot, apart ([`socscope_agent::Agent::new_static`]).
pub const FLASH_CONFIG: Config = Config {
    board: "stb-test",
    soc: "sti7105",
    os: "linux",
    application: "player",
    cpu_count: 2,
    tick_rate_hz: 1_000_000,
    session_id: 0,
    flush_latency_ticks: 1_000,
    heartbeat_ticks: 10_000,
    hello_every_ticks: 0,
    token: "",
};

/// A two-CPU set-top box's configuration.
pub fn config() -> Config {
    Config {
        session_id: 7,
        ..FLASH_CONFIG
    }
}
