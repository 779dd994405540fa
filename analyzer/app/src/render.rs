//! PNG renderings of the analysis views for reports (plotters, bitmap backend). Text uses the
//! DejaVu Sans font shipped in `assets/`, so pictures look the same on machines without fonts.
//! Colours come from `socscope_analysis::palette`, as in the GUI.

use std::path::Path;
use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use socscope_analysis::compare::Comparison;
use socscope_analysis::density::Density;
use socscope_analysis::micro::TraceMicroscopicModel;
use socscope_analysis::ocelotl::{
    self, MicroscopicModel, SpatiotemporalAggregation, TemporalAggregation,
};
use socscope_analysis::palette::{self, Rgb, UserColours};
use socscope_analysis::stats::StatisticsSnapshot;
use socscope_analysis::traceviz::Timeline;
use socscope_tracedb::units::{self, TimeAxis};

/// DejaVu Sans (Bitstream Vera licence, see `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An invalid font would leave text undrawn, never fail the picture.
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("{e}")
}

/// Labels of a time axis in seconds from 0 to `span_s`, in the unit that fits it (`7.5 s`, `120 ms`,
/// `35 µs`), as the GUI's axes. The label decimals suit a step finer than plotters' ticks, and trailing
/// zeros go, so every tick plotters picks reads exactly.
fn time_label(span_s: f64) -> impl Fn(&f64) -> String {
    let axis = TimeAxis::new(0, (span_s * 1e9).round() as i64, 40);
    move |v| axis.label((v * 1e9).round() as i64)
}

/// The colours the user picked in the GUI (types and producers by name), as the pictures use them too.
pub fn user() -> &'static UserColours {
    static USER: std::sync::OnceLock<UserColours> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        UserColours::default_path()
            .and_then(|p| UserColours::load(&p).ok())
            .unwrap_or_default()
    })
}

fn rgb(c: Rgb) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

fn font(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

fn canvas(path: &Path, w: u32, h: u32) -> Result<Area<'_>> {
    fonts();
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    Ok(root)
}

/// A legend row of colour boxes and names at the top right of `area`.
fn legend(area: &Area, items: &[(String, Rgb)], x0: i32, y0: i32) -> Result<()> {
    let mut y = y0;
    for (name, c) in items {
        area.draw(&Rectangle::new(
            [(x0, y), (x0 + 12, y + 12)],
            rgb(*c).filled(),
        ))
        .map_err(err)?;
        area.draw(&Text::new(name.clone(), (x0 + 18, y), font(13)))
            .map_err(err)?;
        y += 18;
    }
    Ok(())
}

/// Horizontal bars, one per slice, with value and share.
pub fn stats(path: &Path, s: &StatisticsSnapshot) -> Result<()> {
    let n = s.slices.len().max(1);
    let h = (80 + 26 * n) as u32;
    let root = canvas(path, 900, h)?;
    let max = s
        .slices
        .iter()
        .map(|x| x.value)
        .fold(0.0, f64::max)
        .max(1e-9);
    let title = format!("{:?} — total {:.0} {}", s.operator, s.total, s.unit);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, font(18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(220)
        .build_cartesian_2d(0.0..max * 1.15, 0.0..n as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .label_style(font(12))
        .x_desc(s.unit)
        .draw()
        .map_err(err)?;
    for (i, x) in s.slices.iter().enumerate() {
        let (_, py) = chart.backend_coord(&(0.0, (n - i) as f64 - 0.5));
        let label: String = x.label.chars().take(30).collect();
        root.draw(&Text::new(label, (14, py - 7), font(12)))
            .map_err(err)?;
    }
    chart
        .draw_series(s.slices.iter().enumerate().map(|(i, x)| {
            let y = (n - 1 - i) as f64;
            Rectangle::new(
                [(0.0, y + 0.15), (x.value, y + 0.85)],
                rgb(x.colour).filled(),
            )
        }))
        .map_err(err)?;
    chart
        .draw_series(s.slices.iter().enumerate().map(|(i, x)| {
            let y = (n - 1 - i) as f64;
            let share = if s.total > 0.0 {
                100.0 * x.value / s.total
            } else {
                0.0
            };
            Text::new(
                format!("{:.4} ({share:.1} %)", units::count_compact(x.value)),
                (x.value, y + 0.75),
                font(12),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)
}

/// Stacked bars per bin, one colour per type.
pub fn density(path: &Path, d: &Density) -> Result<()> {
    let root = canvas(path, 1000, 420)?;
    let span = (d.end - d.start) as f64 * 1e-9;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Event density — {} events", d.total), font(18))
        .margin(12)
        .margin_right(170)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span, 0.0..(d.max.max(1) as f64 * 1.05))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time from the start of the interval")
        .x_label_formatter(&time_label(span))
        .y_desc("events per bin")
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    let colours: Vec<RGBColor> = d.types.iter().map(|t| rgb(user().type_colour(t))).collect();
    for b in &d.bins {
        let (x0, x1) = (
            (b.start - d.start) as f64 * 1e-9,
            (b.end - d.start) as f64 * 1e-9,
        );
        let mut y = 0.0;
        for (u, &c) in b.per_type.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let y1 = y + c as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y), (x1, y1)],
                    colours[u].filled(),
                )))
                .map_err(err)?;
            y = y1;
        }
    }
    let items: Vec<(String, Rgb)> = d
        .types
        .iter()
        .map(|t| (t.clone(), user().type_colour(t)))
        .collect();
    legend(&root, &items, 840, 50)?;
    root.present().map_err(err)
}

/// Ocelotl temporal overview: stacked type proportions per part over time, and the gain/loss
/// curves of the significant p with the drawn p marked.
pub fn temporal(
    path: &Path,
    m: &TraceMicroscopicModel,
    model: &MicroscopicModel,
    agg: &TemporalAggregation,
    p: f64,
) -> Result<()> {
    let root = canvas(path, 1100, 700)?;
    let (top, bottom) = root.split_vertically(440);
    let part = agg.best_partition(p);
    let stacked = ocelotl::stacked_proportions(model, part.ranges());
    let slice_s = m.grid.slice_ns() * 1e-9;
    let span = m.grid.slices as f64 * slice_s;
    let ymax = stacked.max_total.max(1e-12) * 1.05;
    let unit = match m.metric {
        socscope_analysis::micro::Metric::Duration => "time share (producers in state)",
        socscope_analysis::micro::Metric::Count => "events per second",
        socscope_analysis::micro::Metric::Mean => "mean value",
    };
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!(
                "Temporal aggregation ({}, p = {p:.4}): {} parts of {} slices",
                m.metric,
                part.n_parts(),
                m.grid.slices
            ),
            font(18),
        )
        .margin(12)
        .margin_right(190)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..span, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time from the start of the interval")
        .x_label_formatter(&time_label(span))
        .y_desc(unit)
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    let colours: Vec<Rgb> = m
        .types
        .iter()
        .map(|t| user().type_colour(&t.name))
        .collect();
    for sp in &stacked.parts {
        let x0 = sp.range.0 as f64 * slice_s;
        let x1 = (sp.range.1 + 1) as f64 * slice_s;
        let mut y = 0.0;
        for (u, v) in sp.values.iter().enumerate() {
            if *v <= 0.0 {
                continue;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y), (x1, y + v)],
                    rgb(colours[u]).filled(),
                )))
                .map_err(err)?;
            y += v;
        }
        // Part borders.
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, ymax / 1.05)],
                BLACK.mix(0.5).stroke_width(1),
            )))
            .map_err(err)?;
    }
    let items: Vec<(String, Rgb)> = m
        .types
        .iter()
        .zip(&colours)
        .map(|(t, c)| (t.name.clone(), *c))
        .collect();
    legend(&top, &items, 925, 50)?;

    // Gain and loss along the significant p.
    let plist = agg.significant_ps(ocelotl::DEFAULT_THRESHOLD);
    // Relative to their largest value (raw qualities scale with the metric's unit).
    let raw: Vec<(f64, f64, f64)> = plist
        .entries()
        .iter()
        .map(|e| (f64::from(e.p), e.quality.gain, e.quality.loss))
        .collect();
    let gmax = raw
        .iter()
        .map(|x| x.1.abs())
        .fold(0.0, f64::max)
        .max(1e-300);
    let lmax = raw
        .iter()
        .map(|x| x.2.abs())
        .fold(0.0, f64::max)
        .max(1e-300);
    let pts: Vec<(f64, f64, f64)> = raw.iter().map(|x| (x.0, x.1 / gmax, x.2 / lmax)).collect();
    let lo = pts.iter().flat_map(|x| [x.1, x.2]).fold(0.0f64, f64::min);
    let hi = 1.0f64;
    let mut chart = ChartBuilder::on(&bottom)
        .caption(
            format!(
                "Gain and loss (relative to their maximum) of the {} significant p",
                pts.len()
            ),
            font(16),
        )
        .margin(12)
        .margin_right(190)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..1.0, lo..hi * 1.05)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("p")
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    let gain = RGBColor(0x2c, 0xa0, 0x2c);
    let loss = RGBColor(0xd6, 0x27, 0x28);
    // Each partition holds from its p to the next one: step curves.
    let steps = |f: fn(&(f64, f64, f64)) -> f64| -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for (i, x) in pts.iter().enumerate() {
            let next = pts.get(i + 1).map_or(1.0, |n| n.0);
            out.push((x.0, f(x)));
            out.push((next, f(x)));
        }
        out
    };
    chart
        .draw_series(LineSeries::new(steps(|x| x.1), gain.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(steps(|x| x.2), loss.stroke_width(2)))
        .map_err(err)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(p, lo), (p, hi)],
            BLACK.stroke_width(1),
        )))
        .map_err(err)?;
    legend(
        &bottom,
        &[
            ("gain".into(), [0x2c, 0xa0, 0x2c]),
            ("loss".into(), [0xd6, 0x27, 0x28]),
            (format!("p = {p:.4}"), [0, 0, 0]),
        ],
        925,
        50,
    )?;
    root.present().map_err(err)
}

/// Ocelotl spatiotemporal mode map: producers (hierarchy leaves) down, time across, each area
/// in the colour of its mode type, opacity by its amplitude.
pub fn spatiotemporal(
    path: &Path,
    m: &TraceMicroscopicModel,
    model: &MicroscopicModel,
    p: f64,
) -> Result<()> {
    let (h, nodes) = m.hierarchy();
    let agg = SpatiotemporalAggregation::new(model, &h);
    let part = agg.best_partition(p);
    let modes = ocelotl::spatiotemporal_modes(model, &h, part.aggregates());
    // Leaf span of every node: producers are in leaf order, so a node covers a contiguous
    // range of them.
    let mut span = vec![(usize::MAX, 0usize); h.len()];
    for &node in h.post_order() {
        span[node] = match h.leaf_producer(node) {
            Some(p) => (p, p),
            None => h.children(node).iter().fold((usize::MAX, 0), |acc, &c| {
                (acc.0.min(span[c].0), acc.1.max(span[c].1))
            }),
        };
    }
    let np = m.producers.len();
    let height = (160 + (np * 14).clamp(200, 900)) as u32;
    let root = canvas(path, 1200, height)?;
    let slice_s = m.grid.slice_ns() * 1e-9;
    let t_span = m.grid.slices as f64 * slice_s;
    let names: Vec<String> = m.producers.iter().map(|p| p.name.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Spatiotemporal aggregation ({}, p = {p:.4}): {} areas, {} nodes",
                m.metric,
                part.aggregates().len(),
                nodes.len()
            ),
            font(18),
        )
        .margin(12)
        .margin_right(190)
        .x_label_area_size(35)
        .y_label_area_size(200)
        .build_cartesian_2d(0.0..t_span, 0.0..np as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_y_axis()
        .x_desc("time from the start of the interval")
        .x_label_formatter(&time_label(t_span))
        .label_style(font(11))
        .draw()
        .map_err(err)?;
    // Producer names at the left of their rows (every k-th when they would overlap).
    let every = (np / 45).max(1);
    for (i, name) in names.iter().enumerate().step_by(every) {
        let (_, py) = chart.backend_coord(&(0.0, (np - i) as f64 - 0.5));
        let label: String = name.chars().take(28).collect();
        root.draw(&Text::new(label, (14, py - 6), font(11)))
            .map_err(err)?;
    }
    for am in &modes {
        let (a, b) = span[am.area.node];
        if a == usize::MAX {
            continue;
        }
        let x0 = am.area.start as f64 * slice_s;
        let x1 = (am.area.end + 1) as f64 * slice_s;
        let (y0, y1) = ((np - 1 - b) as f64, (np - a) as f64);
        let colour = match am.mode {
            Some(u) => palette::lighten(
                user().type_colour(&m.types[u].name),
                1.0 - f64::from(am.alpha) / 255.0,
            ),
            None => palette::VOID,
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, y0), (x1, y1)],
                rgb(colour).filled(),
            )))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, y0), (x1, y1)],
                WHITE.stroke_width(1),
            )))
            .map_err(err)?;
    }
    let items: Vec<(String, Rgb)> = m
        .types
        .iter()
        .map(|t| (t.name.clone(), user().type_colour(&t.name)))
        .collect();
    legend(&root, &items, 1025, 50)?;
    root.present().map_err(err)
}

/// TraceViz: the outline (actors stacked) over its Slick Graph shading band, then one small
/// histogram per actor (the largest 24) and per group.
pub fn timeline(
    path: &Path,
    t: &Timeline,
    groups: &[serde_json::Value],
    smoothed: &[f64],
    lum: &[f64],
) -> Result<()> {
    let mut actors: Vec<&socscope_analysis::traceviz::ActorHist> = t.actors.iter().collect();
    actors.sort_by(|a, b| {
        b.values
            .iter()
            .sum::<f64>()
            .total_cmp(&a.values.iter().sum::<f64>())
    });
    actors.truncate(24);
    let rows: Vec<(String, Vec<f64>, Rgb)> = groups
        .iter()
        .map(|g| {
            let name = g["name"].as_str().unwrap_or("group").to_owned();
            let values: Vec<f64> = g["values"]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_f64().unwrap_or(0.0)).collect())
                .unwrap_or_default();
            let c = palette::colour(&name);
            (
                format!("[{}] {name}", g["op"].as_str().unwrap_or("")),
                values,
                c,
            )
        })
        .chain(actors.iter().map(|a| {
            (
                a.name.clone(),
                a.values.clone(),
                user().producer_colour(&a.name),
            )
        }))
        .collect();
    let w = t.outline.len().max(1);
    let row_h = 34u32;
    let outline_h = 260u32;
    let height = outline_h + 60 + row_h * rows.len() as u32 + 20;
    let width = 1200u32;
    let root = canvas(path, width, height)?;
    root.draw(&Text::new(
        format!(
            "TraceViz — {:?}, {} actors, {} bins",
            t.statistic,
            t.actors.len(),
            w
        ),
        (12, 8),
        font(18),
    ))
    .map_err(err)?;
    let left = 200i32;
    let plot_w = (width as i32 - left - 20).max(10);
    let x_of = |i: usize| left + (i as i64 * plot_w as i64 / w as i64) as i32;
    // Slick Graph band: luminance per bin (white = local minimum, black = local maximum).
    let band = (36, 60);
    for (i, l) in lum.iter().enumerate() {
        let g = (l.clamp(0.0, 1.0) * 255.0).round() as u8;
        let c = if t.outline[i] == 0.0 {
            RGBColor(255, 255, 255)
        } else {
            RGBColor(g, g, g)
        };
        root.draw(&Rectangle::new(
            [(x_of(i), band.0), (x_of(i + 1).max(x_of(i) + 1), band.1)],
            c.filled(),
        ))
        .map_err(err)?;
    }
    root.draw(&Text::new("Slick Graph", (12, band.0 + 4), font(13)))
        .map_err(err)?;
    // Outline: actors stacked per bin, with the smoothed curve.
    let top = band.1 + 8;
    let bottom = outline_h as i32 + 40;
    let max = t.outline.iter().copied().fold(0.0, f64::max).max(1e-12);
    let y_of = |v: f64| bottom - ((v / max) * f64::from(bottom - top)) as i32;
    for i in 0..t.outline.len() {
        let mut acc = 0.0;
        for a in &t.actors {
            let v = a.values[i];
            if v <= 0.0 {
                continue;
            }
            let (y0, y1) = (y_of(acc), y_of(acc + v));
            root.draw(&Rectangle::new(
                [(x_of(i), y1), (x_of(i + 1).max(x_of(i) + 1), y0)],
                rgb(user().producer_colour(&a.name)).filled(),
            ))
            .map_err(err)?;
            acc += v;
        }
    }
    let curve: Vec<(i32, i32)> = smoothed
        .iter()
        .enumerate()
        .map(|(i, v)| ((x_of(i) + x_of(i + 1)) / 2, y_of(*v)))
        .collect();
    root.draw(&PathElement::new(curve, BLACK.stroke_width(2)))
        .map_err(err)?;
    root.draw(&Text::new(
        format!("outline (max {})", units::count_compact(max)),
        (12, top + 4),
        font(13),
    ))
    .map_err(err)?;
    root.draw(&Rectangle::new(
        [(left, top), (left + plot_w, bottom)],
        BLACK.stroke_width(1),
    ))
    .map_err(err)?;
    // One row per group and actor, each scaled to its own maximum.
    let mut y = bottom + 20;
    for (name, values, c) in &rows {
        let m = values.iter().copied().fold(0.0, f64::max).max(1e-12);
        let base = y + row_h as i32 - 4;
        for (i, v) in values.iter().enumerate() {
            if *v <= 0.0 {
                continue;
            }
            let hgt = ((v / m) * f64::from(row_h - 8)).max(1.0) as i32;
            root.draw(&Rectangle::new(
                [(x_of(i), base - hgt), (x_of(i + 1).max(x_of(i) + 1), base)],
                rgb(*c).filled(),
            ))
            .map_err(err)?;
        }
        root.draw(&PathElement::new(
            vec![(left, base), (left + plot_w, base)],
            BLACK.mix(0.3).stroke_width(1),
        ))
        .map_err(err)?;
        let label: String = name.chars().take(26).collect();
        root.draw(&Text::new(label, (12, y + 8), font(12)))
            .map_err(err)?;
        y += row_h as i32;
    }
    root.present().map_err(err)
}

/// Compare: the score of every window over time, departures in red, the threshold dashed.
pub fn compare(path: &Path, c: &Comparison) -> Result<()> {
    let root = canvas(path, 1100, 420)?;
    let span = c.windows.last().map_or(1.0, |w| w.end_s);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Run vs reference: {} departing window(s) of {} (threshold {})",
                c.departures,
                c.windows.len(),
                c.threshold
            ),
            font(18),
        )
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span, 0.0..1.0)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time from each trace's start")
        .x_label_formatter(&time_label(span))
        .y_desc("score")
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(c.windows.iter().map(|w| {
            let colour = if w.departure {
                RGBColor(0xd6, 0x27, 0x28)
            } else {
                RGBColor(0x1f, 0x77, 0xb4)
            };
            Rectangle::new([(w.start_s, 0.0), (w.end_s, w.score)], colour.filled())
        }))
        .map_err(err)?;
    chart
        .draw_series(c.windows.iter().filter(|w| w.departure).map(|w| {
            let who = w
                .producers
                .first()
                .map(|d| format!("{} {:+.2}", d.name, d.delta))
                .unwrap_or_default();
            Text::new(who, (w.start_s, (w.score + 0.08).min(0.95)), font(12))
        }))
        .map_err(err)?;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, c.threshold), (span, c.threshold)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
    root.present().map_err(err)
}
