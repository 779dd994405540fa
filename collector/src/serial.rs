//! Serial capture through the serialport crate: a real UART or a pty.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::intake::Intake;
use crate::session::{IngestConfig, Notice, SessionReport};
use crate::{CollectorError, Result};

/// A serial source: `PATH` or `PATH:BAUD` (115200 when not given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SerialSpec {
    /// Device path.
    pub path: String,
    /// Baud rate.
    pub baud: u32,
}

impl std::str::FromStr for SerialSpec {
    type Err = CollectorError;

    fn from_str(s: &str) -> Result<Self> {
        match s.rsplit_once(':') {
            Some((path, baud))
                if !path.is_empty()
                    && baud.chars().all(|c| c.is_ascii_digit())
                    && !baud.is_empty() =>
            {
                let baud = baud.parse().map_err(|_| {
                    CollectorError::Invalid(format!(
                        "serial spec {s:?}: baud rate {baud:?} is not a number"
                    ))
                })?;
                Ok(Self {
                    path: path.to_string(),
                    baud,
                })
            }
            _ if s.is_empty() => Err(CollectorError::Invalid(
                "serial spec is empty: expected PATH[:BAUD]".into(),
            )),
            _ => Ok(Self {
                path: s.to_string(),
                baud: 115_200,
            }),
        }
    }
}

/// Opens the port (so errors come at once), then returns a capture function to run on its own thread.
pub fn open(spec: &SerialSpec) -> Result<Box<dyn serialport::SerialPort>> {
    serialport::new(&spec.path, spec.baud)
        .timeout(Duration::from_millis(100))
        .open()
        .map_err(|e| CollectorError::Serial {
            path: spec.path.clone(),
            message: e.to_string(),
        })
}

/// Reads `port` until `stop` is set or the port fails, ingesting everything; calls `notify` with each notice.
pub fn capture(
    mut port: Box<dyn serialport::SerialPort>,
    spec: &SerialSpec,
    config: IngestConfig,
    stop: Arc<AtomicBool>,
    mut notify: impl FnMut(Notice),
) -> Result<Vec<SessionReport>> {
    let mut ingest = Intake::new(config, format!("serial {}", spec.path));
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match port.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => ingest.feed(&buf[..n])?,
            Err(e)
                if e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                ingest.tick()?
            }
            // A pty whose other end closed reads as EIO: the board went away.
            Err(_) => break,
        }
        for n in ingest.take_notices() {
            notify(n);
        }
    }
    let (reports, notices) = ingest.finish()?;
    for n in notices {
        notify(n);
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            "/dev/ttyUSB0:921600".parse::<SerialSpec>().unwrap(),
            SerialSpec {
                path: "/dev/ttyUSB0".into(),
                baud: 921_600
            }
        );
        assert_eq!("/dev/pts/3".parse::<SerialSpec>().unwrap().baud, 115_200);
        assert!("".parse::<SerialSpec>().is_err());
    }
}
