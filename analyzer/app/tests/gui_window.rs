//! The real program in a real X window: `socscope view` under Xvfb draws a window that is not blank,
//! both as the app reads back its own framebuffer (`--screenshot`) and as the X server shows it (`xwd`).
//! Needs Xvfb and xwd (scripts/install-test-deps.sh installs them); fails, never skips, without them.
#![cfg(feature = "gui")]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{tool} is missing: run scripts/install-test-deps.sh (apt-get install xvfb x11-apps)"
    );
}

struct Xvfb {
    child: Child,
    display: String,
}

/// How long a server may take to come up. A first start on a new machine under the load of the whole
/// suite (fonts, keymaps compiled for the first time) took over 20 s once; a working server is ready in
/// well under a second, so a long bound costs nothing when all is well.
const XVFB_READY_WITHIN: Duration = Duration::from_secs(180);

impl Xvfb {
    fn start() -> Self {
        require("Xvfb");
        // `-displayfd`: the server picks a free display number itself and writes it to standard output
        // once it accepts connections — no race for numbers between parallel tests, no polling for its
        // socket. Its own messages go to a log shown if it does not come up.
        let log = tempfile::NamedTempFile::new().expect("a log file for Xvfb");
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1280x800x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("the Xvfb log"))
            .spawn()
            .expect("Xvfb starts");
        let stdout = child.stdout.take().expect("Xvfb's standard output");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let started = Instant::now();
        let number = rx
            .recv_timeout(XVFB_READY_WITHIN)
            .ok()
            .and_then(|l| l.trim().parse::<u32>().ok());
        let Some(n) = number else {
            let exited = child.try_wait().ok().flatten();
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "Xvfb did not come up within {:.0} s ({}); its log:\n{}",
                started.elapsed().as_secs_f64(),
                match exited {
                    Some(status) => format!("it exited: {status}"),
                    None => "still running, no display number written".to_string(),
                },
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        };
        Self {
            child,
            display: format!(":{n}"),
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        // SIGTERM lets Xvfb remove its lock file and socket; SIGKILL only if it does not go.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(2) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn trace(dir: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args([
            "demo",
            "--headless",
            "--json",
            "--duration",
            "2",
            "--seed",
            "3",
            "--dir",
        ])
        .arg(dir)
        .output()
        .expect("socscope runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    PathBuf::from(doc["file"].as_str().unwrap())
}

fn view(x: &Xvfb, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_socscope"));
    c.arg("view")
        .args(args)
        .env("DISPLAY", &x.display)
        .env_remove("WAYLAND_DISPLAY");
    c
}

/// Distinct RGB colours of an RGBA PNG.
fn png_colours(path: &Path) -> (usize, (u32, u32)) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let colours: HashSet<[u8; 3]> = buf[..info.buffer_size()]
        .chunks(px)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (colours.len(), (info.width, info.height))
}

#[test]
fn the_window_shows_the_gantt_chart() {
    let x = Xvfb::start();
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let shot = dir.path().join("gantt.png");
    let out = view(
        &x,
        &[
            t.to_str().unwrap(),
            "--screenshot",
            shot.to_str().unwrap(),
            "--size",
            "1000x600",
        ],
    )
    .output()
    .expect("socscope view runs");
    assert!(
        out.status.success(),
        "socscope view failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (colours, size) = png_colours(&shot);
    assert!(size.0 >= 1000 && size.1 >= 600, "{size:?}");
    // A blank or half-drawn window has a handful of colours; the Gantt chart has dozens.
    assert!(colours >= 20, "only {colours} colours in the window");
}

#[test]
fn the_window_opens_on_ocelotl_and_traceviz() {
    let x = Xvfb::start();
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    for view_name in ["ocelotl", "traceviz"] {
        let shot = dir.path().join(format!("{view_name}.png"));
        let out = view(
            &x,
            &[
                t.to_str().unwrap(),
                "--view",
                view_name,
                "--screenshot",
                shot.to_str().unwrap(),
                "--size",
                "1000x600",
            ],
        )
        .output()
        .expect("socscope view runs");
        assert!(
            out.status.success(),
            "socscope view --view {view_name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (colours, size) = png_colours(&shot);
        assert!(size.0 >= 1000 && size.1 >= 600, "{size:?}");
        assert!(
            colours >= 20,
            "only {colours} colours in the {view_name} window"
        );
    }
    // `--aggregation spatiotemporal` opens Ocelotl on the producers' map, not the temporal chart.
    let shot = dir.path().join("spatiotemporal.png");
    let out = view(
        &x,
        &[
            t.to_str().unwrap(),
            "--view",
            "ocelotl",
            "--aggregation",
            "spatiotemporal",
            "--screenshot",
            shot.to_str().unwrap(),
            "--size",
            "1000x600",
        ],
    )
    .output()
    .expect("socscope view runs");
    assert!(out.status.success(), "{out:?}");
    assert_ne!(
        std::fs::read(&shot).unwrap(),
        std::fs::read(dir.path().join("ocelotl.png")).unwrap(),
        "the spatiotemporal window looks like the temporal one"
    );
    let out = view(&x, &[t.to_str().unwrap(), "--aggregation", "spatial"])
        .output()
        .expect("socscope view runs");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("temporal or spatiotemporal"),
        "{out:?}"
    );
}

/// Distinct pixel values of an `xwd -root` dump (TrueColor, 24 or 32 bits per pixel).
fn xwd_colours(dump: &[u8]) -> usize {
    let be = |i: usize| u32::from_be_bytes(dump[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
    let (header, bpp, bytes_per_line, height, ncolors) = (be(0), be(11), be(12), be(5), be(19));
    assert!(
        bpp == 24 || bpp == 32,
        "expected a TrueColor screen, got {bpp} bits per pixel"
    );
    let data = header + ncolors * 12;
    let mut colours = HashSet::new();
    for row in dump[data..].chunks(bytes_per_line).take(height) {
        for p in row.chunks_exact(bpp / 8) {
            colours.insert([p[0], p[1], p[2]]);
        }
    }
    colours.len()
}

#[test]
fn the_x_server_shows_a_drawn_window() {
    require("xwd");
    let x = Xvfb::start();
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let mut app = view(&x, &[t.to_str().unwrap(), "--view", "density", "--light"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("socscope view starts");
    let started = Instant::now();
    let mut best = 0;
    while started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(Some(status)) = app.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = app.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("socscope view exited early: {status}: {err}");
        }
        let out = Command::new("xwd")
            .args(["-root", "-silent", "-display", &x.display])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "xwd failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        best = xwd_colours(&out.stdout);
        if best >= 20 {
            break;
        }
    }
    // SIGTERM (a terminal's Ctrl-C is SIGINT, handled alike) closes the window as its close button
    // does: a clean exit, and the trace read leaves no `-wal`/`-shm` beside it.
    let term = Command::new("kill")
        .args(["-TERM", &app.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = app.try_wait().unwrap() {
            break Some(status);
        }
        if asked.elapsed() > Duration::from_secs(20) {
            let _ = app.kill();
            let _ = app.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(best >= 20, "the screen shows only {best} colours");
    assert!(
        status.is_some_and(|s| s.success()),
        "socscope view did not close on SIGTERM: {status:?}"
    );
    for suffix in ["-wal", "-shm"] {
        let mut p = t.clone().into_os_string();
        p.push(suffix);
        assert!(!Path::new(&p).exists(), "{p:?} left beside the trace");
    }
}
