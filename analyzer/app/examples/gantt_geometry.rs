//! What one frame of the Gantt chart costs to draw, without a window: opens a trace in the Gantt view,
//! replays the Gantt part of `socscope view --script pan-zoom` (zoom in, pan right, pan left, zoom out)
//! and prints, over those frames, the median and 95th percentile of
//!
//! - the UI pass and the tessellation, in ms (what eframe's `cpu_usage` adds up, minus the GL calls);
//! - shapes, vertices and triangles;
//! - 4x4-pixel blocks touched, summed over triangles: Mesa llvmpipe shades every block a triangle
//!   touches, so this tracks the time a software renderer spends rasterising the frame.
//!
//! ```sh
//! cargo run --release -p socscope-analyzer --example gantt_geometry -- TRACE.db [FRAMES]
//! ```

use std::time::{Duration, Instant};

use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::GuiApp;
use socscope_analyzer::gui::egui::{self, Pos2, Rect, epaint::Primitive};

/// Window size in points, as in the benchmark (`--size 1280x760`, one pixel per point under Xvfb).
const SIZE: egui::Vec2 = egui::vec2(1280.0, 760.0);
/// Blocks are counted on every this many frames (counting is slow).
const BLOCKS_EVERY: usize = 10;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let trace = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: gantt_geometry TRACE.db [FRAMES]"))?;
    let frames: usize = args.next().map_or(Ok(400), |s| s.parse())?;
    let mut app = GuiApp::new(None, &[trace.into()], ViewKind::Gantt, true);
    // As in the window: cleared with the panel colour, panels not filled.
    app.window_cleared = true;
    let ctx = egui::Context::default();
    let input = || egui::RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, SIZE)),
        ..Default::default()
    };
    let started = Instant::now();
    loop {
        let _ = ctx.run_ui(input(), |ui| app.ui(ui));
        let loaded = app.active.is_some_and(|a| {
            let s = &app.open_traces[a];
            s.names.is_some() && s.views[s.active_group].gantt.model.events() > 0
        });
        if loaded && !app.busy() {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "the Gantt chart never finished loading"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Once more, so the last data is drawn.
    let _ = ctx.run_ui(input(), |ui| app.ui(ui));
    let a = app.active.expect("loaded");
    let whole = app.open_traces[a].whole();
    eprintln!(
        "{} events loaded in {:.1} s",
        app.open_traces[a].views[app.open_traces[a].active_group]
            .gantt
            .model
            .events(),
        started.elapsed().as_secs_f64()
    );
    let mut ui_ms = Vec::new();
    let mut tess_ms = Vec::new();
    let mut shapes = Vec::new();
    let mut vertices = Vec::new();
    let mut triangles = Vec::new();
    let mut blocks = Vec::new();
    for i in 0..frames {
        let s = &mut app.open_traces[a];
        let g = &mut s.views[s.active_group].gantt;
        match i * 4 / frames {
            0 => g.zoom(0.97, 0.5, whole),
            1 => g.pan(0.01),
            2 => g.pan(-0.01),
            _ => g.zoom(1.0 / 0.97, 0.5, whole),
        }
        let t0 = Instant::now();
        let out = ctx.run_ui(input(), |ui| app.ui(ui));
        let t1 = Instant::now();
        shapes.push(out.shapes.len() as f64);
        let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
        ui_ms.push((t1 - t0).as_secs_f64() * 1e3);
        tess_ms.push(t1.elapsed().as_secs_f64() * 1e3);
        let (mut v, mut t, mut b) = (0, 0, 0);
        for p in &prims {
            if let Primitive::Mesh(m) = &p.primitive {
                v += m.vertices.len();
                t += m.indices.len() / 3;
                if i % BLOCKS_EVERY == 0 {
                    for tri in m.indices.chunks_exact(3) {
                        let pts = [0, 1, 2].map(|k| m.vertices[tri[k] as usize].pos);
                        b += blocks_touched(pts, p.clip_rect.intersect(screen()));
                    }
                }
            }
        }
        vertices.push(v as f64);
        triangles.push(t as f64);
        if i % BLOCKS_EVERY == 0 {
            blocks.push(b as f64);
        }
    }
    println!("{frames} frames (median / p95):");
    for (name, v) in [
        ("UI pass (ms)", &mut ui_ms),
        ("tessellation (ms)", &mut tess_ms),
        ("shapes", &mut shapes),
        ("vertices", &mut vertices),
        ("triangles", &mut triangles),
        ("4x4 blocks shaded", &mut blocks),
    ] {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        println!("  {name:<20} {:>10.2} {:>10.2}", at(0.5), at(0.95));
    }
    Ok(())
}

fn screen() -> Rect {
    Rect::from_min_size(Pos2::ZERO, SIZE)
}

/// How many 4x4-pixel blocks of `clip` the triangle overlaps (separating axes: the block's sides,
/// then the triangle's edges).
fn blocks_touched(t: [Pos2; 3], clip: Rect) -> usize {
    let cross = |o: Pos2, a: Pos2, b: Pos2| (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
    if cross(t[0], t[1], t[2]).abs() < 1e-6 {
        return 0;
    }
    let bbox = Rect::from_points(&t).intersect(clip);
    if !bbox.is_positive() {
        return 0;
    }
    let (bx0, bx1) = (
        (bbox.min.x / 4.0).floor() as i32,
        (bbox.max.x / 4.0).ceil() as i32,
    );
    let (by0, by1) = (
        (bbox.min.y / 4.0).floor() as i32,
        (bbox.max.y / 4.0).ceil() as i32,
    );
    let mut n = 0;
    for by in by0..by1 {
        for bx in bx0..bx1 {
            let (x, y) = (bx as f32 * 4.0, by as f32 * 4.0);
            let corners = [
                Pos2::new(x, y),
                Pos2::new(x + 4.0, y),
                Pos2::new(x, y + 4.0),
                Pos2::new(x + 4.0, y + 4.0),
            ];
            let separated = (0..3).any(|e| {
                let (a, b, c) = (t[e], t[(e + 1) % 3], t[(e + 2) % 3]);
                let inside = cross(a, b, c);
                corners.iter().all(|&p| cross(a, b, p) * inside < 0.0)
            });
            n += usize::from(!separated);
        }
    }
    n
}
