//! Whether a window can be opened here, asked before opening one: winit reports a missing or dead display
//! with an error naming its own source file, and only once per process (it cannot build a second event
//! loop), so `demo` could not fall back to its headless run after trying.

use std::time::Duration;

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
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

#[cfg(not(unix))]
fn wayland_answers(_: &str) -> bool {
    true
}

/// `[host]:display[.screen]`: a local server listens on `/tmp/.X11-unix/X<display>` (and on Linux on the
/// abstract socket of that name), a remote one on TCP port 6000 + display.
#[cfg(unix)]
fn x11_answers(display: &str) -> bool {
    let Some((host, rest)) = display.rsplit_once(':') else {
        return false;
    };
    let Some(number) = rest.split('.').next().and_then(|n| n.parse::<u16>().ok()) else {
        return false;
    };
    if host.is_empty() || host == "unix" {
        let path = format!("/tmp/.X11-unix/X{number}");
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return true;
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use std::os::linux::net::SocketAddrExt;
            if let Ok(addr) = std::os::unix::net::SocketAddr::from_abstract_name(path.as_bytes())
                && std::os::unix::net::UnixStream::connect_addr(&addr).is_ok()
            {
                return true;
            }
        }
        if host == "unix" {
            return false;
        }
    }
    let host = if host.is_empty() { "localhost" } else { host };
    let Some(port) = 6000u16.checked_add(number) else {
        return false;
    };
    use std::net::ToSocketAddrs;
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
}

#[cfg(not(unix))]
fn x11_answers(_: &str) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_display_nobody_listens_on_does_not_answer() {
        // A display number no X server uses, and a malformed one.
        assert!(!x11_answers(":65000"));
        assert!(!x11_answers("unix:64999"));
        assert!(!x11_answers("garbage"));
        assert!(!wayland_answers("/nonexistent/wayland-socket"));
    }
}
