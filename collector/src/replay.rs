//! Replay of `.wire` captures: the same ingest as a live link, from a file.

use std::io::Read;
use std::path::Path;

use crate::intake::Intake;
use crate::session::{IngestConfig, Notice, SessionReport};
use crate::{CollectorError, Result};

/// Ingests a capture file; returns its sessions and the notices (drops, version errors) it produced.
/// A file in which no session starts (random bytes, another format, a board of an unreadable wire
/// version) is an error saying so, in one message, rather than a success with a warning per frame. Under
/// a flight recorder a session watched with no trigger firing gives no report and is no error.
pub fn replay_file(path: &Path, config: IngestConfig) -> Result<(Vec<SessionReport>, Vec<Notice>)> {
    let io = |source| CollectorError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut ingest = Intake::new(config, format!("file {}", path.display()));
    let mut buf = vec![0u8; 1 << 20];
    let mut notices = Vec::new();
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        ingest.feed(&buf[..n])?;
        notices.extend(ingest.take_notices());
    }
    let unreadable = ingest.orphan_frames();
    // A flight recorder whose triggers never fired watched a session and stored nothing: that is its
    // job, not an unreadable input.
    let had_session = ingest.has_had_session();
    let (reports, rest) = ingest.finish()?;
    notices.extend(rest);
    if reports.is_empty() && !had_session {
        let version = notices.iter().find_map(|n| match n {
            Notice::VersionRejected { message, .. } => Some(message.clone()),
            _ => None,
        });
        return Err(CollectorError::Invalid(match version {
            Some(why) => format!("{}: no session could be read: {why}", path.display()),
            None => format!(
                "{}: no session found in the input ({bytes} bytes, no readable Hello; {unreadable} frames or fragments dropped): not a socscope .wire capture?",
                path.display()
            ),
        }));
    }
    Ok((reports, notices))
}
