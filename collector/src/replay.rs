//! Replay of `.wire` captures: the same ingest as a live link, from a file.

use std::io::Read;
use std::path::Path;

use crate::intake::Intake;
use crate::session::{IngestConfig, Notice, SessionReport};
use crate::{CollectorError, Result};

/// Ingests a capture file; returns its sessions and the notices (drops, version errors) it produced.
pub fn replay_file(path: &Path, config: IngestConfig) -> Result<(Vec<SessionReport>, Vec<Notice>)> {
    let io = |source| CollectorError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut ingest = Intake::new(config, format!("file {}", path.display()));
    let mut buf = vec![0u8; 1 << 20];
    let mut notices = Vec::new();
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        ingest.feed(&buf[..n])?;
        notices.extend(ingest.take_notices());
    }
    let (reports, rest) = ingest.finish()?;
    notices.extend(rest);
    Ok((reports, notices))
}
