//! Whether a window can be opened here, asked before opening one: winit reports a missing or dead display
//! with an error naming its own source file, and only once per process (it cannot build a second event
//! loop), so `demo` could not fall back to its headless run after trying.

/// Why no window can be opened here, or `None` when a display answers (always `None` off Linux and the BSDs,
/// where the system has one).
pub fn unavailable() -> Option<String> {
    if !cfg!(all(unix, not(target_os = "macos"))) {
        return None;
    }
    let wayland = std::env::var("WAYLAND_DISPLAY")
        .ok()
        .filter(|d| !d.is_empty());
    let x11 = std::env::var("DISPLAY").ok().filter(|d| !d.is_empty());
    if wayland.is_none() && x11.is_none() {
        return Some("no display: DISPLAY and WAYLAND_DISPLAY are unset".into());
    }
    if let Some(w) = &wayland
        && wayland_answers(w)
    {
        return None;
    }
    if let Some(d) = &x11
        && x11_answers(d)
    {
        return None;
    }
    let named: Vec<String> = [("WAYLAND_DISPLAY", &wayland), ("DISPLAY", &x11)]
        .iter()
        .filter_map(|(n, v)| v.as_ref().map(|v| format!("{n}={v}")))
        .collect();
    Some(format!("no display answers at {}", named.join(" or ")))
}

/// What to do without a display, for the one-line error of `view`.
pub const HINT: &str = "run it under a virtual display (`xvfb-run socscope view ...`), or save a picture \
                        with `xvfb-run socscope view TRACE --screenshot out.png`";

/// winit's message without the `at /…/winit-0.30/src/….rs:123` its errors carry (a path in the cargo
/// registry means nothing to a user): what the display said.
pub fn without_source_location(message: &str) -> String {
    let Some(rs) = message.find(".rs:") else {
        return message.to_string();
    };
    let start = message[..rs].rfind([' ', '"', '(']).map_or(0, |i| i + 1);
    let rest = message[rs + 4..].trim_start_matches(|c: char| c.is_ascii_digit() || c == ':');
    let before = message[..start]
        .trim_end()
        .trim_end_matches(" at")
        .trim_end();
    let after = rest.trim_start_matches([':', ',', '"', ' ']);
    match (before.is_empty(), after.is_empty()) {
        (true, _) => after.to_string(),
        (_, true) => before.to_string(),
        _ => format!("{before}: {after}"),
    }
}

/// Whether a socket of that path exists. The X server is not connected to: a server that has had no
/// client resets when its first one leaves, and the window's own connection would then be refused.
#[cfg(unix)]
fn socket_exists(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(unix)]
fn wayland_answers(name: &str) -> bool {
    let path = if name.starts_with('/') {
        std::path::PathBuf::from(name)
    } else {
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) => std::path::Path::new(&dir).join(name),
            None => return false,
        }
    };
    socket_exists(&path)
}

#[cfg(not(unix))]
fn wayland_answers(_: &str) -> bool {
    true
}

/// `[host]:display[.screen]`: a local server listens on `/tmp/.X11-unix/X<display>` (or, on Linux, only on
/// the abstract socket of that name, listed in /proc/net/unix); a remote display is taken at its word (a
/// failure to connect is then reported by the window itself, in one line).
#[cfg(unix)]
fn x11_answers(display: &str) -> bool {
    let Some((host, rest)) = display.rsplit_once(':') else {
        return false;
    };
    let Some(number) = rest.split('.').next().and_then(|n| n.parse::<u16>().ok()) else {
        return false;
    };
    if !(host.is_empty() || host == "unix") {
        return true;
    }
    let path = format!("/tmp/.X11-unix/X{number}");
    if socket_exists(std::path::Path::new(&path)) {
        return true;
    }
    let abstract_name = format!("@{path}");
    std::fs::read_to_string("/proc/net/unix").is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_whitespace().last() == Some(abstract_name.as_str()))
    })
}

#[cfg(not(unix))]
fn x11_answers(_: &str) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn winit_messages_lose_their_source_location() {
        assert_eq!(
            without_source_location(
                "os error at /root/.cargo/registry/src/x/winit-0.30.13/src/platform_impl/linux/x11/mod.rs:814: XOpenDisplay failed"
            ),
            "os error: XOpenDisplay failed"
        );
        assert_eq!(without_source_location("no display"), "no display");
    }

    #[test]
    fn a_display_nobody_listens_on_does_not_answer() {
        // A display number no X server uses, and a malformed one.
        assert!(!x11_answers(":65000"));
        assert!(!x11_answers("unix:64999"));
        assert!(!x11_answers("garbage"));
        assert!(!wayland_answers("/nonexistent/wayland-socket"));
        // A socket that exists answers; a plain file of that name does not.
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("wayland-9");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(wayland_answers(sock.to_str().unwrap()));
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        assert!(!wayland_answers(file.to_str().unwrap()));
    }
}
