//! The collector's local control socket: `socscope trigger` fires an external trigger in a running
//! collector over a Unix socket in its catalog directory (only the collector's user can open it), with the
//! collector's token when it has one.
//!
//! The protocol is lines of text: the client sends `token SECRET` (when the collector has a token) and
//! `trigger REASON`; the collector answers `ok N` (N: external triggers so far) or `error WHAT`.
//!
//! Start here: [`serve_control`], [`send_trigger`].

use std::path::{Path, PathBuf};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio::sync::watch;

use crate::trigger::ExternalTriggers;
use crate::{CollectorError, Result};

/// The control socket's file name in a catalog directory.
pub const CONTROL_SOCKET: &str = ".socscope-control";

/// The default control socket of the collector writing `dir`.
pub fn control_path(dir: &Path) -> PathBuf {
    dir.join(CONTROL_SOCKET)
}

/// Longest line a client may send (a reason is one short line).
const MAX_LINE: usize = 4096;

/// Binds the control socket at `path` (replacing a stale one that no collector answers; refusing when
/// one does). Only the current user may connect (mode 0600).
pub async fn bind_control(path: &Path) -> Result<UnixListener> {
    if path.exists() {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(CollectorError::Invalid(format!(
                "{}: another collector is already running on this directory (its control socket answers); give this one its own --dir or --control",
                path.display()
            )));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|e| CollectorError::Net {
        what: format!("cannot open the control socket {}", path.display()),
        source: e,
    })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
        CollectorError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    })?;
    Ok(listener)
}

/// Serves `listener` until `shutdown`: each `trigger` line fires `external`; removes the socket file at
/// the end.
pub async fn serve_control(
    listener: UnixListener,
    path: PathBuf,
    token: Option<String>,
    external: ExternalTriggers,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let (token, external) = (token.clone(), external.clone());
                tokio::spawn(async move {
                    let _ = client(stream, token, external).await;
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    let _ = std::fs::remove_file(&path);
}

async fn client(
    stream: tokio::net::UnixStream,
    token: Option<String>,
    external: ExternalTriggers,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read.take(MAX_LINE as u64 * 4)).lines();
    let mut authorised = token.is_none();
    while let Ok(Some(line)) =
        tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
            .await
            .unwrap_or(Ok(None))
    {
        let (verb, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let answer = match verb {
            "token" => {
                authorised = token.as_deref().is_some_and(|t| {
                    t.len() == rest.len()
                        && t.bytes()
                            .zip(rest.bytes())
                            .fold(0u8, |a, (x, y)| a | (x ^ y))
                            == 0
                }) || token.is_none();
                if authorised {
                    continue;
                }
                "error wrong token (the collector's --token / --token-file)".to_string()
            }
            "trigger" if !authorised => {
                "error this collector has a token: give it (socscope trigger --token-file FILE)"
                    .to_string()
            }
            "trigger" => {
                let reason = if rest.trim().is_empty() {
                    "socscope trigger"
                } else {
                    rest.trim()
                };
                format!("ok {}", external.fire(reason))
            }
            other => format!("error unknown request `{other}` (expected token or trigger)"),
        };
        write.write_all(answer.as_bytes()).await?;
        write.write_all(b"\n").await?;
    }
    Ok(())
}

/// Fires an external trigger in the collector whose control socket is `path`; returns how many external
/// triggers it has had.
pub fn send_trigger(path: &Path, token: Option<&str>, reason: &str) -> Result<u64> {
    use std::io::{BufRead, Write};
    let net = |what: String| move |e: std::io::Error| CollectorError::Net { what, source: e };
    let what = format!(
        "no collector answers on {} (is `socscope collect --trigger … / --flight-recorder …` running on that directory?)",
        path.display()
    );
    let mut stream = std::os::unix::net::UnixStream::connect(path).map_err(net(what))?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(net(format!("{}", path.display())))?;
    let mut request = String::new();
    if let Some(t) = token {
        request.push_str(&format!("token {t}\n"));
    }
    request.push_str(&format!("trigger {}\n", reason.replace('\n', " ")));
    stream
        .write_all(request.as_bytes())
        .map_err(net(format!("while writing to {}", path.display())))?;
    let mut answer = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(net(format!("while reading from {}", path.display())))?;
    let answer = answer.trim();
    match answer.split_once(' ') {
        Some(("ok", n)) => Ok(n.parse().unwrap_or(0)),
        Some(("error", why)) => Err(CollectorError::Invalid(format!(
            "the collector refused: {why}"
        ))),
        _ => Err(CollectorError::Invalid(format!(
            "{}: unexpected answer `{answer}`",
            path.display()
        ))),
    }
}
