//! `socscope collect --json` run as a child process, as the capture tests drive it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `socscope collect --json` on a loopback port, its standard output read line by line.
pub struct Collect {
    pub child: Child,
    pub lines: BufReader<ChildStdout>,
    pub address: String,
}

impl Collect {
    /// Starts it in `dir` with `extra` arguments; waits for its `listening` line.
    pub fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_socscope"))
            .args(["collect", "--listen", "127.0.0.1:0", "--json", "--dir"])
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("socscope collect starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let address = loop {
            let v = next_json(&mut lines);
            if v["event"] == "listening" {
                break v["address"].as_str().unwrap().to_string();
            }
        };
        Self {
            child,
            lines,
            address,
        }
    }

    /// Waits for the JSON line whose `event` is `event`.
    pub fn wait_for(&mut self, event: &str) -> Value {
        loop {
            let v = next_json(&mut self.lines);
            if v["event"] == event {
                return v;
            }
        }
    }

    /// Sends signal `name` (`TERM`, `INT`, ...) to it.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits (at most 60 s) for the process to exit; returns its exit code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "socscope collect did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The next line of `socscope collect --json`'s output, as JSON.
pub fn next_json(lines: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    let n = lines.read_line(&mut line).unwrap();
    assert!(n > 0, "socscope collect closed its output");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}
