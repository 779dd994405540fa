//! PNG renderings of the analysis views for reports (plotters, bitmap backend). Text uses the
//! DejaVu Sans font shipped in `assets/`, so pictures look the same on machines without fonts.
//! Colours come from `socscope_analysis::palette`, as in the GUI.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor;
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};
use socscope_analysis::compare::Comparison;
use socscope_analysis::density::Density;
use socscope_analysis::micro::TraceMicroscopicModel;
use socscope_analysis::ocelotl::{
    self, MicroscopicModel, SpatiotemporalAggregation, TemporalAggregation,
};
use socscope_analysis::palette::{self, Rgb, UserColours};
use socscope_analysis::stats::StatisticsSnapshot;
use socscope_analysis::traceviz::{Statistic, Timeline};
use socscope_tracedb::ProducerId;
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

/// plotters' bitmap backend with text laid out here: plotters 0.3.7 draws each glyph's outline
/// at the pen position without the glyph's left side bearing (and rounds the pen per glyph), so
/// letters drift apart or together ("user_fun ction", "runnin g"); here each outline goes where the
/// font puts it, kerned, at its fractional pen position. Everything else is the bitmap backend's.
struct Typeset<'a>(BitMapBackend<'a>);

impl<'a> DrawingBackend for Typeset<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        use ab_glyph::{Font, ScaleFont};
        let color = style.color();
        let Ok(font) = ab_glyph::FontRef::try_from_slice(FONT) else {
            return self.0.draw_text(text, style, pos);
        };
        if color.alpha == 0.0 {
            return Ok(());
        }
        // Anchored and rotated as plotters does, from the same layout box (whose width, the sum of
        // the advances and kerning, was right: only the glyphs were misplaced).
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            text_anchor::HPos::Left => 0,
            text_anchor::HPos::Right => -width,
            text_anchor::HPos::Center => -width / 2,
        };
        let dy = match anchor.v_pos {
            text_anchor::VPos::Top => 0,
            text_anchor::VPos::Center => -height / 2,
            text_anchor::VPos::Bottom => -height,
        };
        let transform = style.transform();
        let (w, h) = self.get_size();
        let size = style.size() as f32;
        let scaled = font.as_scaled(size);
        let mut pen = 0f32;
        let mut prev = None;
        let mut pixels = Vec::new();
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = prev {
                pen += scaled.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(scaled.scale(), ab_glyph::point(pen, 0.0));
            if let Some(outline) = font.outline_glyph(glyph) {
                let r = outline.px_bounds();
                // Vertically as plotters places it (half the size above the glyph's top).
                let (x0, y0) = (r.min.x as i32, (size / 2.0 + r.min.y) as i32);
                outline
                    .draw(|x, y, coverage| pixels.push((x0 + x as i32, y0 + y as i32, coverage)));
            }
            pen += scaled.h_advance(id);
        }
        for (x, y, coverage) in pixels {
            let (x, y) = transform.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                let c = BackendColor {
                    alpha: color.alpha * f64::from(coverage),
                    rgb: color.rgb,
                };
                self.0.draw_pixel((x, y), c)?;
            }
        }
        Ok(())
    }
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

type Area<'a> = DrawingArea<Typeset<'a>, Shift>;

fn canvas(path: &Path, w: u32, h: u32) -> Result<Area<'_>> {
    // The file must be writable before anything is drawn: the image library says so only when the
    // picture is written, as a debug dump of its error ("ImageError(IoError(Os { code: 2, …").
    std::fs::File::create(path).map_err(err)?;
    fonts();
    let root = Typeset(BitMapBackend::new(path, (w, h))).into_drawing_area();
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

/// Width in pixels of `text` at `size` (an estimate from the font's metrics).
fn text_width(text: &str, size: u32) -> i32 {
    fonts();
    (FAMILY, size).into_font().box_size(text).map_or(
        text.chars().count() as i32 * size as i32 * 6 / 10,
        |(w, _)| w as i32,
    )
}

/// `text` cut with an ellipsis to at most `max` pixels at `size`.
fn fit(text: &str, size: u32, max: i32) -> String {
    if text_width(text, size) <= max {
        return text.to_owned();
    }
    let mut t: String = text.to_owned();
    while !t.is_empty() && text_width(&format!("{t}…"), size) > max {
        t.pop();
    }
    format!("{t}…")
}

/// Distinct colours for event types (user and known types keep theirs).
fn type_colours<S: AsRef<str>>(names: &[S]) -> Vec<Rgb> {
    let u = user();
    let want: Vec<(Rgb, bool)> = names
        .iter()
        .map(|n| {
            let n = n.as_ref();
            (
                u.type_colour(n),
                u.types.contains_key(n) || palette::is_known(n),
            )
        })
        .collect();
    palette::distinct(&want)
}

/// Distinct colours for producers by name (user choices keep theirs; two of one name differ).
fn producer_colours<S: AsRef<str>>(names: &[S]) -> Vec<Rgb> {
    let u = user();
    let want: Vec<(Rgb, bool)> = names
        .iter()
        .map(|n| {
            let n = n.as_ref();
            (u.producer_colour(n), u.producers.contains_key(n))
        })
        .collect();
    palette::distinct(&want)
}

/// The value and share printed after a statistics bar: `16.01k (33.7 %)`, `1.2 ms (4.0 %)`.
fn value_label(v: f64, total: f64, unit: &str) -> String {
    let share = if total > 0.0 { 100.0 * v / total } else { 0.0 };
    let value = if unit == "ns" {
        units::duration_compact(v)
    } else {
        units::count_compact(v)
    };
    format!("{value} ({share:.1} %)")
}

/// Horizontal bars, one per slice, with value and share; the label column and the right margin
/// are as wide as their longest text, so no label is cut.
pub fn stats(path: &Path, s: &StatisticsSnapshot) -> Result<()> {
    const SIZE: u32 = 12;
    let n = s.slices.len().max(1);
    let h = (90 + 26 * n) as u32;
    let width = 1000u32;
    let values: Vec<String> = s
        .slices
        .iter()
        .map(|x| value_label(x.value, s.total, s.unit))
        .collect();
    let right = values
        .iter()
        .map(|v| text_width(v, SIZE))
        .max()
        .unwrap_or(0)
        + 20;
    let left = (s
        .slices
        .iter()
        .map(|x| text_width(&x.label, SIZE))
        .max()
        .unwrap_or(0)
        + 28)
        .clamp(80, 420);
    let root = canvas(path, width, h)?;
    let max = s
        .slices
        .iter()
        .map(|x| x.value)
        .fold(0.0, f64::max)
        .max(1e-9);
    let total = if s.unit == "ns" {
        units::duration_compact(s.total)
    } else {
        format!("{} events", units::count_compact(s.total))
    };
    let title = format!("{} — total {total}", s.operator.label());
    let unit = s.unit;
    let x_label = move |v: &f64| {
        if unit == "ns" {
            units::duration_compact(*v)
        } else {
            units::count_compact(*v)
        }
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, font(18))
        .margin(12)
        .margin_right(right)
        .x_label_area_size(30)
        .y_label_area_size(left)
        .build_cartesian_2d(0.0..max, 0.0..n as f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .label_style(font(SIZE))
        .x_label_formatter(&x_label)
        .x_desc(if unit == "ns" { "time" } else { "events" })
        .draw()
        .map_err(err)?;
    // Slices of one colour would read as one: the chart's colours are made distinct (groups,
    // `others` and the user's choices keep theirs).
    let u = user();
    let want: Vec<(Rgb, bool)> = s
        .slices
        .iter()
        .map(|x| {
            let fixed = x.colour_key == "others"
                || x.members.len() > 1
                || u.types.contains_key(&x.colour_key)
                || u.producers.contains_key(&x.colour_key)
                || palette::is_known(&x.colour_key);
            (x.colour, fixed)
        })
        .collect();
    let colours = palette::distinct(&want);
    for (i, x) in s.slices.iter().enumerate() {
        let (_, py) = chart.backend_coord(&(0.0, (n - i) as f64 - 0.5));
        root.draw(&Text::new(
            fit(&x.label, SIZE, left - 28),
            (14, py - 7),
            font(SIZE),
        ))
        .map_err(err)?;
        let (px, _) = chart.backend_coord(&(x.value, 0.0));
        root.draw(&Text::new(values[i].clone(), (px + 4, py - 7), font(SIZE)))
            .map_err(err)?;
    }
    chart
        .draw_series(
            s.slices
                .iter()
                .zip(&colours)
                .enumerate()
                .map(|(i, (x, c))| {
                    let y = (n - 1 - i) as f64;
                    Rectangle::new([(0.0, y + 0.15), (x.value, y + 0.85)], rgb(*c).filled())
                }),
        )
        .map_err(err)?;
    root.present().map_err(err)
}

/// Stacked bars per bin, one colour per type.
/// The density chart's time axis, in seconds from `origin` (the trace's start, from which `--range` is
/// counted), so that `--range 4..6` is labelled 4 s to 6 s.
fn density_axis(d: &Density, origin: i64) -> std::ops::Range<f64> {
    (d.start - origin) as f64 * 1e-9..(d.end - origin) as f64 * 1e-9
}

/// The density histogram, its time axis counted from `origin` (the trace's start).
pub fn density(path: &Path, d: &Density, origin: i64) -> Result<()> {
    let root = canvas(path, 1000, 420)?;
    let axis = density_axis(d, origin);
    let labels = TimeAxis::new(
        (axis.start * 1e9).round() as i64,
        (axis.end * 1e9).round() as i64,
        40,
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Event density — {} events", d.total), font(18))
        .margin(12)
        .margin_right(170)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(axis.clone(), 0.0..(d.max.max(1) as f64 * 1.05))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time from the start of the trace")
        .x_label_formatter(&|v| labels.label((v * 1e9).round() as i64))
        .y_desc("events per bin")
        .y_label_formatter(&|v| units::count_compact(*v))
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    let palette_colours = type_colours(&d.types);
    let colours: Vec<RGBColor> = palette_colours.iter().map(|c| rgb(*c)).collect();
    for b in &d.bins {
        let (x0, x1) = (
            (b.start - origin) as f64 * 1e-9,
            (b.end - origin) as f64 * 1e-9,
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
    let items: Vec<(String, Rgb)> = d.types.iter().cloned().zip(palette_colours).collect();
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
        .y_label_formatter(&|v| units::count_compact(*v))
        .label_style(font(12))
        .draw()
        .map_err(err)?;
    let colours = type_colours(&m.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>());
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
        .y_desc("share of its maximum")
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
    // The drawn p: a blue line kept off the axes (p = 0 or 1 would sit on them, unseen), named at
    // its top.
    let marker = [0x1f, 0x77, 0xb4];
    let (x0, y_top) = chart.backend_coord(&(0.0, hi * 1.05));
    let (x1, y_bottom) = chart.backend_coord(&(1.0, lo));
    let x = marker_x(chart.backend_coord(&(p, lo)).0, x0, x1);
    // `backend_coord` is in the whole picture's pixels: drawn on the root.
    root.draw(&PathElement::new(
        vec![(x, y_top), (x, y_bottom)],
        rgb(marker).stroke_width(2),
    ))
    .map_err(err)?;
    let name = format!("p = {p:.4}");
    let name_x = (x + 4).min(x1 - text_width(&name, 12) - 2);
    root.draw(&Text::new(name.clone(), (name_x, y_top + 2), font(12)))
        .map_err(err)?;
    legend(
        &bottom,
        &[
            ("gain".into(), [0x2c, 0xa0, 0x2c]),
            ("loss".into(), [0xd6, 0x27, 0x28]),
            (name, marker),
        ],
        925,
        50,
    )?;
    root.present().map_err(err)
}

/// Where the p marker is drawn: at `x`, but never on the plot's left or right edge (`x0`, `x1`),
/// where the axis lines would hide it.
fn marker_x(x: i32, x0: i32, x1: i32) -> i32 {
    x.clamp(x0 + 3, (x1 - 3).max(x0 + 3))
}

/// Ocelotl spatiotemporal mode map: producers (hierarchy leaves) down, time across, each area
/// in the colour of its mode type, opacity by its amplitude.
pub fn spatiotemporal(
    path: &Path,
    m: &TraceMicroscopicModel,
    labels: &HashMap<ProducerId, String>,
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
    let names: Vec<String> = m
        .producers
        .iter()
        .map(|p| labels.get(&p.id).cloned().unwrap_or_else(|| p.name.clone()))
        .collect();
    let type_colour = type_colours(&m.types.iter().map(|t| t.name.as_str()).collect::<Vec<_>>());
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
    // The producer hierarchy left of the rows, as Ocelotl draws it: a box per node over the rows
    // of its producers, one column per level, each named when it is tall enough (leaves every k-th
    // when they would overlap).
    let boxes = hierarchy_boxes(&h, &nodes, &names);
    let (plot_left, plot_top) = chart.backend_coord(&(0.0, np as f64));
    let row_h = f64::from(chart.backend_coord(&(0.0, 0.0)).1 - plot_top) / np.max(1) as f64;
    let area = (HIERARCHY_X, plot_left - 6);
    let every = if row_h >= 11.0 { 1 } else { (np / 45).max(1) };
    for b in &boxes {
        let (x0, x1) = hierarchy_box_x(area, b, boxes.iter().map(|b| b.depth).max().unwrap_or(1));
        let y0 = plot_top + (b.rows.0 as f64 * row_h).round() as i32;
        let y1 = plot_top + ((b.rows.1 + 1) as f64 * row_h).round() as i32;
        root.draw(&Rectangle::new(
            [(x0, y0), (x1, y1)],
            rgb(HIERARCHY_LINE).stroke_width(1),
        ))
        .map_err(err)?;
        let tall = f64::from(y1 - y0) >= 11.0;
        if tall || (b.leaf && b.rows.0 % every == 0) {
            let label = fit(&b.name, 11, x1 - x0 - 5);
            root.draw(&Text::new(label, (x0 + 3, (y0 + y1) / 2 - 6), font(11)))
                .map_err(err)?;
        }
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
            Some(u) => palette::lighten(type_colour[u], 1.0 - f64::from(am.alpha) / 255.0),
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
        .map(|t| t.name.clone())
        .zip(type_colour)
        .collect();
    legend(&root, &items, 1025, 50)?;
    root.present().map_err(err)
}

/// Left edge of the producer hierarchy beside a spatiotemporal map.
const HIERARCHY_X: i32 = 14;
/// The hierarchy's box lines.
const HIERARCHY_LINE: Rgb = [150, 150, 150];

/// One box of the producer hierarchy beside a spatiotemporal map: a node other than the root,
/// over the rows of its producers.
#[derive(Debug, Clone, PartialEq)]
struct HierarchyBox {
    name: String,
    /// 1 for a child of the root.
    depth: usize,
    /// First and last row (producer index, top down) under the node.
    rows: (usize, usize),
    leaf: bool,
}

/// The boxes of hierarchy `h` (its nodes named by `nodes`), parents before children. A leaf is
/// named by its producer's label in `leaf_names` (told apart by id where names repeat); a
/// producer's own events under its children stay `NAME (self)`.
fn hierarchy_boxes(
    h: &ocelotl::SpatialHierarchy,
    nodes: &[socscope_analysis::micro::SpatialNode],
    leaf_names: &[String],
) -> Vec<HierarchyBox> {
    let mut span = vec![(usize::MAX, 0usize); h.len()];
    for &node in h.post_order() {
        span[node] = match h.leaf_producer(node) {
            Some(p) => (p, p),
            None => h.children(node).iter().fold((usize::MAX, 0), |acc, &c| {
                (acc.0.min(span[c].0), acc.1.max(span[c].1))
            }),
        };
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, usize)> =
        h.children(h.root()).iter().rev().map(|&c| (c, 1)).collect();
    while let Some((n, depth)) = stack.pop() {
        if span[n].0 == usize::MAX {
            continue;
        }
        let node_name = nodes.get(n).map_or("", |x| x.name.as_str());
        let name = match h.leaf_producer(n).and_then(|p| leaf_names.get(p)) {
            Some(label) if node_name.ends_with(" (self)") => format!("{label} (self)"),
            Some(label) => label.clone(),
            None => node_name.to_owned(),
        };
        out.push(HierarchyBox {
            name,
            depth,
            rows: span[n],
            leaf: h.is_leaf(n),
        });
        stack.extend(h.children(n).iter().rev().map(|&c| (c, depth + 1)));
    }
    out
}

/// The x extent of a hierarchy box in `area` (left, right): a column per level, at most 90 px
/// wide and leaving the leaves at least 100 px; a leaf reaches the area's right edge.
fn hierarchy_box_x(area: (i32, i32), b: &HierarchyBox, max_depth: usize) -> (i32, i32) {
    let (left, right) = area;
    let inner = max_depth.saturating_sub(1).max(1) as i32;
    let col = ((right - left - 100) / inner).clamp(20, 90);
    let x0 = left + (b.depth as i32 - 1) * col;
    let x1 = if b.leaf { right } else { x0 + col };
    (x0.min(right - 10), x1)
}

/// A time axis along `y` under a plot of `plot_w` pixels from `left`, for an interval of `span_ns`:
/// ticks, labels from the interval's start, and what it is.
fn time_axis(root: &Area, left: i32, plot_w: i32, y: i32, span_ns: i64) -> Result<()> {
    time_axis_between(root, left, plot_w, y, 0, span_ns.max(1))
}

/// A time axis under a plot of `plot_w` pixels showing `from..to` (ns, `to > from`), ticks labelled.
fn time_axis_between(
    root: &Area,
    left: i32,
    plot_w: i32,
    y: i32,
    from: i64,
    to: i64,
) -> Result<()> {
    let axis = TimeAxis::new(from, to, (plot_w / 110).max(2) as usize);
    for t in axis.ticks(from, to) {
        let x = left + ((t - from) as f64 / (to - from) as f64 * f64::from(plot_w)).round() as i32;
        root.draw(&PathElement::new(
            vec![(x, y), (x, y + 5)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
        let label = axis.label(t);
        let w = text_width(&label, 11);
        root.draw(&Text::new(label, (x - w / 2, y + 7), font(11)))
            .map_err(err)?;
    }
    root.draw(&PathElement::new(
        vec![(left, y), (left + plot_w, y)],
        BLACK.stroke_width(1),
    ))
    .map_err(err)?;
    Ok(())
}

/// One TraceViz bin's value with its unit: events, time in states, or the longest delay.
fn bin_value(s: Statistic, v: f64) -> String {
    match s {
        Statistic::Density => format!("{} events", units::count_compact(v)),
        Statistic::Activity => format!("{} in states", units::duration_compact(v)),
        Statistic::Delay => format!("{} longest delay", units::duration_compact(v)),
    }
}

/// The outline's caption, two lines: how wide a bin is, and the top of the scale with its unit.
fn outline_caption(t: &Timeline, max: f64) -> [String; 2] {
    let bin_ns = (t.end - t.start) as f64 / t.outline.len().max(1) as f64;
    [
        format!("outline, bins of {}", units::duration_compact(bin_ns)),
        format!("max {}", bin_value(t.statistic, max)),
    ]
}

/// TraceViz: the outline (actors stacked, one colour each, named in the legend beside it) over its
/// Slick Graph shading band, with a time axis; then one small histogram per group and per actor (the
/// largest 24) and the time axis again. Actors are named by their `labels`
/// ([`socscope_analysis::hierarchy::producer_labels`]: producers of one name told apart by id).
pub fn timeline(
    path: &Path,
    t: &Timeline,
    labels: &HashMap<ProducerId, String>,
    groups: &[serde_json::Value],
    smoothed: &[f64],
    lum: &[f64],
) -> Result<()> {
    let names: Vec<String> = t
        .actors
        .iter()
        .map(|a| {
            labels
                .get(&a.producer)
                .cloned()
                .unwrap_or_else(|| a.name.clone())
        })
        .collect();
    let colours = producer_colours(&t.actors.iter().map(|a| a.name.as_str()).collect::<Vec<_>>());
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let mut by_size: Vec<usize> = (0..t.actors.len()).collect();
    by_size.sort_by(|&a, &b| sum(&t.actors[b].values).total_cmp(&sum(&t.actors[a].values)));
    let shown_actors: Vec<usize> = by_size.iter().copied().take(24).collect();
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
        .chain(
            shown_actors
                .iter()
                .map(|&i| (names[i].clone(), t.actors[i].values.clone(), colours[i])),
        )
        .collect();
    let w = t.outline.len().max(1);
    let row_h = 34u32;
    let outline_h = 260u32;
    let axis_h = 34u32;
    let height = outline_h + 60 + axis_h + 20 + row_h * rows.len() as u32 + axis_h + 10;
    let width = 1200u32;
    let root = canvas(path, width, height)?;
    let span_ns = t.end - t.start;
    root.draw(&Text::new(
        format!(
            "TraceViz — {:?} of {} actors over {} in {} bins",
            t.statistic,
            t.actors.len(),
            units::duration(span_ns),
            w
        ),
        (12, 8),
        font(18),
    ))
    .map_err(err)?;
    let left = 200i32;
    let legend_w = 200i32;
    let plot_w = (width as i32 - left - legend_w - 20).max(10);
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
    root.draw(&Text::new("Slick Graph", (12, band.0 - 2), font(13)))
        .map_err(err)?;
    // What the shading means (Slick Graph, eq. 2), in the space beside the band's name.
    root.draw(&Text::new(
        "dark: above its smoothed neighbourhood",
        (12, band.0 + 11),
        font(10),
    ))
    .map_err(err)?;
    // Outline: actors stacked per bin, with the smoothed curve.
    let top = band.1 + 8;
    let bottom = outline_h as i32 + 40;
    let max = t.outline.iter().copied().fold(0.0, f64::max).max(1e-12);
    let y_of = |v: f64| bottom - ((v / max) * f64::from(bottom - top)) as i32;
    for i in 0..t.outline.len() {
        let mut acc = 0.0;
        for (a, c) in t.actors.iter().zip(&colours) {
            let v = a.values[i];
            if v <= 0.0 {
                continue;
            }
            let (y0, y1) = (y_of(acc), y_of(acc + v));
            root.draw(&Rectangle::new(
                [(x_of(i), y1), (x_of(i + 1).max(x_of(i) + 1), y0)],
                rgb(*c).filled(),
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
    for (i, line) in outline_caption(t, max).iter().enumerate() {
        root.draw(&Text::new(
            fit(line, 12, left - 16),
            (12, top + 4 + 15 * i as i32),
            font(12),
        ))
        .map_err(err)?;
    }
    root.draw(&Rectangle::new(
        [(left, top), (left + plot_w, bottom)],
        BLACK.stroke_width(1),
    ))
    .map_err(err)?;
    time_axis(&root, left, plot_w, bottom, span_ns)?;
    // The outline's legend: its actors, largest first, as many as fit beside it.
    let fits = ((bottom - top) / 18).max(1) as usize;
    let listed: Vec<usize> = if by_size.len() > fits {
        by_size[..fits - 1].to_vec()
    } else {
        by_size.clone()
    };
    let items: Vec<(String, Rgb)> = listed
        .iter()
        .map(|&i| (fit(&names[i], 13, legend_w - 30), colours[i]))
        .collect();
    let lx = left + plot_w + 12;
    legend(&root, &items, lx, top)?;
    if listed.len() < by_size.len() {
        root.draw(&Text::new(
            format!("+ {} smaller actors", by_size.len() - listed.len()),
            (lx, top + 18 * listed.len() as i32),
            font(12),
        ))
        .map_err(err)?;
    }
    // One row per group and actor, each scaled to its own maximum.
    let mut y = bottom + axis_h as i32 + 20;
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
        root.draw(&Text::new(fit(name, 12, left - 20), (12, y + 4), font(12)))
            .map_err(err)?;
        // Each row has its own scale: its top says what it stands for.
        root.draw(&Text::new(
            fit(&format!("max {}", bin_value(t.statistic, m)), 11, left - 20),
            (12, y + 18),
            font(11),
        ))
        .map_err(err)?;
        y += row_h as i32;
    }
    if shown_actors.len() < t.actors.len() {
        root.draw(&Text::new(
            format!(
                "(the {} largest of {} actors)",
                shown_actors.len(),
                t.actors.len()
            ),
            (left + plot_w + 12, bottom + axis_h as i32 + 28),
            font(12),
        ))
        .map_err(err)?;
    }
    time_axis(&root, left, plot_w, y + 2, span_ns)?;
    root.present().map_err(err)
}

/// One row of the Gantt PNG: its name (indented by depth) and whether it is in the CPU section.
pub struct GanttLine {
    pub label: String,
    pub cpu: bool,
}

/// What the Gantt PNG draws.
pub struct GanttPicture<'a> {
    pub trace: &'a str,
    /// Picture width in pixels.
    pub width: u32,
    /// The frame, [`gantt_plot_width`] columns wide.
    pub frame: &'a socscope_analysis::gantt::GanttFrame,
    /// One per row of the frame.
    pub lines: &'a [GanttLine],
    /// Rows left out (beyond --rows).
    pub hidden_rows: usize,
    pub producers: &'a [socscope_tracedb::Producer],
    pub types: &'a [socscope_tracedb::EventType],
    /// Where the interval starts, from the trace's start (the axis is labelled in trace time).
    pub from_start_ns: i64,
}

const GANTT_LEFT: i32 = 230;
const GANTT_LEGEND_W: i32 = 190;
const GANTT_ROW_H: i32 = 16;
const GANTT_TOP: i32 = 40;
const GANTT_SECTION_H: i32 = 20;
/// A CPU's idle task, dimmed.
const IDLE: Rgb = [222, 222, 222];

/// The plot's width (one column per pixel) in a Gantt picture `width` pixels wide.
pub fn gantt_plot_width(width: u32) -> u32 {
    (width as i32 - GANTT_LEFT - GANTT_LEGEND_W - 20).max(10) as u32
}

/// Where row `i` of a Gantt picture starts: below the title, the CPU section's heading, and the
/// producers' heading once the CPU rows are past.
fn gantt_row_y(lines: &[GanttLine], i: usize) -> i32 {
    let cpu_rows = lines.iter().filter(|l| l.cpu).count();
    let mut y = GANTT_TOP + i as i32 * GANTT_ROW_H;
    if cpu_rows > 0 {
        y += GANTT_SECTION_H;
    }
    if i >= cpu_rows && cpu_rows < lines.len() {
        y += GANTT_SECTION_H;
    }
    y
}

/// The Gantt chart as the GUI draws it: a CPU section above the producers (each CPU's row the
/// thread that ran, coloured by its process, the idle task dimmed, and its IRQ and soft IRQ lanes),
/// states as bars as high as they cover their pixel, punctual events as ticks, a time axis in trace
/// time and a legend of the types and processes drawn.
pub fn gantt(path: &Path, g: &GanttPicture) -> Result<()> {
    use socscope_analysis::gantt::{FULL_COVERAGE, thread_of_key};
    let f = g.frame;
    let plot_w = f.width as i32;
    let rows_h = gantt_row_y(g.lines, g.lines.len()) - GANTT_TOP;
    let height = (GANTT_TOP + rows_h + 60).max(200) as u32;
    let root = canvas(path, g.width, height)?;
    let type_names: Vec<&str> = g.types.iter().map(|t| t.name.as_str()).collect();
    let picked = type_colours(&type_names);
    let type_rgb: HashMap<u32, Rgb> = g.types.iter().map(|t| t.id).zip(picked.clone()).collect();
    let producer_names: Vec<&str> = g.producers.iter().map(|p| p.name.as_str()).collect();
    let mut producer_rgb: HashMap<ProducerId, Rgb> = g
        .producers
        .iter()
        .map(|p| p.id)
        .zip(producer_colours(&producer_names))
        .collect();
    // A process colours its threads on the CPU rows, beside states in type colours: never a
    // type's colour (as in the GUI).
    let top: Vec<&socscope_tracedb::Producer> =
        g.producers.iter().filter(|p| p.parent.is_none()).collect();
    let top_rgb = user().top_level_colours(
        &picked,
        &top.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
    );
    for (p, c) in top.iter().zip(top_rgb) {
        producer_rgb.insert(p.id, c);
    }
    let parent: HashMap<ProducerId, Option<ProducerId>> =
        g.producers.iter().map(|p| (p.id, p.parent)).collect();
    // A thread that ran on a CPU takes its process's colour, as in the GUI.
    let process_of = |thread: ProducerId| parent.get(&thread).copied().flatten().unwrap_or(thread);
    let colour = |t: u32| -> Rgb {
        if let Some(thread) = thread_of_key(t) {
            return producer_rgb
                .get(&process_of(thread))
                .copied()
                .unwrap_or([128, 128, 128]);
        }
        if t == socscope_tracedb::CPU_IDLE_TYPE {
            return IDLE;
        }
        type_rgb.get(&t).copied().unwrap_or([128, 128, 128])
    };
    root.draw(&Text::new(
        format!(
            "Gantt — {} ({} rows{})",
            g.trace,
            g.lines.len(),
            if g.hidden_rows > 0 {
                format!(", {} more left out", g.hidden_rows)
            } else {
                String::new()
            }
        ),
        (12, 8),
        font(16),
    ))
    .map_err(err)?;
    let cpu_rows = g.lines.iter().filter(|l| l.cpu).count();
    if cpu_rows > 0 {
        root.draw(&Text::new("CPUs", (12, GANTT_TOP + 3), font(13)))
            .map_err(err)?;
    }
    if cpu_rows < g.lines.len() {
        let y = gantt_row_y(g.lines, cpu_rows) - GANTT_SECTION_H;
        root.draw(&Text::new("Producers", (12, y + 3), font(13)))
            .map_err(err)?;
        root.draw(&PathElement::new(
            vec![(12, y), (GANTT_LEFT + plot_w, y)],
            BLACK.mix(0.4).stroke_width(1),
        ))
        .map_err(err)?;
    }
    let mut processes_drawn: std::collections::BTreeSet<ProducerId> = Default::default();
    for (i, (row, line)) in f.rows.iter().zip(g.lines).enumerate() {
        let y = gantt_row_y(g.lines, i);
        let bottom = y + GANTT_ROW_H - 2;
        let full = GANTT_ROW_H - 3;
        root.draw(&Text::new(
            fit(&line.label, 11, GANTT_LEFT - 20),
            (12, y + 1),
            font(11),
        ))
        .map_err(err)?;
        for s in &row.spans {
            let h =
                (full * i32::from(s.coverage.min(FULL_COVERAGE)) / i32::from(FULL_COVERAGE)).max(1);
            if let Some(thread) = thread_of_key(s.type_id) {
                processes_drawn.insert(process_of(thread));
            }
            root.draw(&Rectangle::new(
                [
                    (GANTT_LEFT + s.x0 as i32, bottom - h),
                    (GANTT_LEFT + s.x1 as i32, bottom),
                ],
                rgb(colour(s.type_id)).filled(),
            ))
            .map_err(err)?;
        }
        for t in &row.ticks {
            let x = GANTT_LEFT + t.x as i32;
            root.draw(&PathElement::new(
                vec![(x, y + 2), (x, bottom)],
                rgb(colour(t.type_id)).stroke_width(1),
            ))
            .map_err(err)?;
        }
    }
    let axis_y = GANTT_TOP + rows_h + 4;
    // The axis in trace time: a chart of 4 s to 6 s reads 4 s to 6 s.
    let (from, to) = (g.from_start_ns, g.from_start_ns + f.view.len().max(1));
    time_axis_between(&root, GANTT_LEFT, plot_w, axis_y, from, to)?;
    root.draw(&Text::new(
        "time from the start of the trace",
        (GANTT_LEFT, axis_y + 24),
        font(11),
    ))
    .map_err(err)?;
    // Legend: the processes whose threads ran on the CPUs, then the types drawn.
    let name_of = |p: ProducerId| {
        g.producers
            .iter()
            .find(|x| x.id == p)
            .map_or_else(|| format!("#{p}"), |x| x.name.clone())
    };
    let mut items: Vec<(String, Rgb)> = processes_drawn
        .iter()
        .map(|&p| {
            (
                fit(&format!("on CPU: {}", name_of(p)), 13, GANTT_LEGEND_W - 30),
                colour(socscope_analysis::gantt::THREAD_KEY | p),
            )
        })
        .collect();
    for t in f.types() {
        if t == socscope_tracedb::ON_CPU_TYPE {
            continue;
        }
        let name = g
            .types
            .iter()
            .find(|x| x.id == t)
            .map_or_else(|| format!("type {t}"), |x| x.name.clone());
        items.push((fit(&name, 13, GANTT_LEGEND_W - 30), colour(t)));
    }
    let fits = (rows_h / 18).max(1) as usize;
    let more = items.len().saturating_sub(fits);
    if more > 0 {
        items.truncate(fits.saturating_sub(1));
    }
    let lx = GANTT_LEFT + plot_w + 14;
    legend(&root, &items, lx, GANTT_TOP)?;
    if more > 0 {
        root.draw(&Text::new(
            format!("+ {} more", more + 1),
            (lx, GANTT_TOP + 18 * items.len() as i32),
            font(12),
        ))
        .map_err(err)?;
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
    // Who departs most, above each departing window, kept inside the plot at its right end.
    let (right, _) = chart.backend_coord(&(span, 0.0));
    for w in c.windows.iter().filter(|w| w.departure) {
        let who = w
            .producers
            .first()
            .map(|d| format!("{} {:+.2}", d.name, d.delta))
            .unwrap_or_default();
        let (x, y) = chart.backend_coord(&(w.start_s, (w.score + 0.08).min(0.95)));
        let x = x.min(right - text_width(&who, 12) - 2);
        root.draw(&Text::new(who, (x, y), font(12))).map_err(err)?;
    }
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

#[cfg(feature = "fleet")]
/// `fleet report --png`: a boards × nights heat map of one metric, each cell shaded from white (the
/// lowest value) to the palette's warm end (the highest) and labelled with its value; grey where a
/// board has no run that night.
pub fn heatmap(path: &Path, map: &socscope_fleet::report::HeatMap) -> Result<()> {
    let (rows, cols) = (map.boards.len().max(1), map.dates.len().max(1));
    let cell_w = (900 / cols).clamp(60, 160) as i32;
    let cell_h = (700 / rows).clamp(18, 40) as i32;
    let (left, top) = (220, 70);
    // Room for the title and the legend line even with one night.
    let width = (left + cell_w * cols as i32 + 40).max(640) as u32;
    let height = (top + cell_h * rows as i32 + 80) as u32;
    let root = canvas(path, width, height)?;
    root.draw(&Text::new(
        format!("{} per board and night", map.metric),
        (left, 20),
        font(18),
    ))
    .map_err(err)?;
    let values: Vec<f64> = map.values.iter().flatten().flatten().copied().collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let hot: Rgb = [0xd6, 0x27, 0x28];
    for (c, date) in map.dates.iter().enumerate() {
        let x = left + c as i32 * cell_w;
        root.draw(&Text::new(
            fit(date, 12, cell_w - 4),
            (x + 2, top - 18),
            font(12),
        ))
        .map_err(err)?;
    }
    for (r, board) in map.boards.iter().enumerate() {
        let y = top + r as i32 * cell_h;
        root.draw(&Text::new(
            fit(board, 12, left - 16),
            (10, y + cell_h / 2 - 7),
            font(12),
        ))
        .map_err(err)?;
        for (c, v) in map.values[r].iter().enumerate() {
            let x = left + c as i32 * cell_w;
            let fill = match v {
                Some(v) => {
                    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
                    rgb(palette::lighten(hot, 1.0 - t.clamp(0.0, 1.0) * 0.9))
                }
                None => RGBColor(0xdd, 0xdd, 0xdd),
            };
            root.draw(&Rectangle::new(
                [(x, y), (x + cell_w, y + cell_h)],
                fill.filled(),
            ))
            .map_err(err)?;
            root.draw(&Rectangle::new(
                [(x, y), (x + cell_w, y + cell_h)],
                WHITE.stroke_width(1),
            ))
            .map_err(err)?;
            if let Some(v) = v {
                let label = if v.fract() == 0.0 {
                    units::count_compact(*v)
                } else {
                    format!("{v:.3}")
                };
                root.draw(&Text::new(
                    fit(&label, 11, cell_w - 4),
                    (x + 3, y + cell_h / 2 - 6),
                    font(11),
                ))
                .map_err(err)?;
            }
        }
    }
    if lo.is_finite() {
        root.draw(&Text::new(
            format!(
                "white: {}   red: {}   grey: no run",
                units::count(lo),
                units::count(hi)
            ),
            (left, top + cell_h * rows as i32 + 20),
            font(12),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_analysis::density::DensityBin;
    use socscope_analysis::stats::{Operator, StatSlice};
    use socscope_analysis::traceviz::ActorHist;

    /// Width, height and RGB pixels of a PNG.
    fn decode(path: &Path) -> (usize, usize, Vec<[u8; 3]>) {
        let mut r = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()))
            .read_info()
            .unwrap();
        let mut buf = vec![0; r.output_buffer_size().unwrap()];
        let info = r.next_frame(&mut buf).unwrap();
        let n = info.color_type.samples();
        let px = buf[..info.buffer_size()]
            .chunks(n)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        (info.width as usize, info.height as usize, px)
    }

    fn at(img: &(usize, usize, Vec<[u8; 3]>), x: i32, y: i32) -> [u8; 3] {
        img.2[y as usize * img.0 + x as usize]
    }

    #[test]
    fn value_labels_say_the_whole_value() {
        assert_eq!(value_label(16_011.0, 47_497.0, "events"), "16.01k (33.7 %)");
        assert_eq!(value_label(21.35e9, 33.96e9, "ns"), "21.35 s (62.9 %)");
        assert_eq!(value_label(0.0, 0.0, "events"), "0 (0.0 %)");
    }

    #[test]
    fn density_legend_gives_each_type_its_own_colour() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.png");
        let types: Vec<String> = ["thread_exit", "running", "irq", "cpu-burn"]
            .map(String::from)
            .to_vec();
        let d = Density {
            start: 0,
            end: 1000,
            types: types.clone(),
            bins: vec![DensityBin {
                start: 0,
                end: 1000,
                count: 10,
                per_type: vec![1, 2, 3, 4],
            }],
            max: 10,
            total: 10,
            loaded_until: 1000,
        };
        density(&path, &d, 0).unwrap();
        let img = decode(&path);
        // Legend boxes: 12 px squares from (840, 50), one every 18 px.
        let boxes: Vec<[u8; 3]> = (0..types.len() as i32)
            .map(|i| at(&img, 846, 56 + 18 * i))
            .collect();
        let set: std::collections::BTreeSet<[u8; 3]> = boxes.iter().copied().collect();
        assert_eq!(set.len(), types.len(), "{boxes:?}");
        assert_eq!(
            boxes[1],
            palette::colour("running"),
            "the known type keeps its colour"
        );
        assert!(!set.contains(&[255, 255, 255]));
    }

    #[test]
    fn a_density_over_4_to_6_s_is_drawn_on_a_4_to_6_s_axis() {
        let d = Density {
            start: 4_000_000_100,
            end: 6_000_000_100,
            types: vec!["running".into()],
            bins: vec![],
            max: 0,
            total: 0,
            loaded_until: 6_000_000_100,
        };
        let axis = density_axis(&d, 100);
        assert!((axis.start - 4.0).abs() < 1e-9 && (axis.end - 6.0).abs() < 1e-9);
    }

    #[test]
    fn stats_value_labels_are_never_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.png");
        let slice = |label: &str, value: f64| StatSlice {
            label: label.into(),
            value,
            colour_key: label.into(),
            colour: palette::colour("irq"),
            members: vec![1],
        };
        let s = StatisticsSnapshot {
            operator: Operator::StateDurationPerType,
            unit: "ns",
            slices: vec![
                slice("a state type with a rather long name indeed", 9.1e15),
                slice("b", 5e15),
            ],
            total: 9.1e15 + 5e15,
        };
        stats(&path, &s).unwrap();
        let img = decode(&path);
        let (w, h) = (img.0 as i32, img.1 as i32);
        let ink = |x: i32| (0..h).any(|y| at(&img, x, y) != [255, 255, 255]);
        // Nothing touches the right edge, and the widest label is drawn right of its bar.
        assert!(
            (w - 6..w).all(|x| !ink(x)),
            "a label runs into the right edge"
        );
        let right = text_width(&value_label(9.1e15, s.total, "ns"), 12) + 20;
        assert!(
            (w - right..w - 6).any(ink),
            "the value label of the longest bar is drawn"
        );
        // The two slices are of one colour in the snapshot: the chart makes them two.
        let left = (text_width(&s.slices[0].label, 12) + 28).clamp(80, 420);
        let x = 12 + left + 4;
        let saturated: std::collections::BTreeSet<[u8; 3]> = (0..h)
            .map(|y| at(&img, x, y))
            .filter(|c| c.iter().max().unwrap() - c.iter().min().unwrap() > 60)
            .collect();
        assert_eq!(saturated.len(), 2, "{saturated:?}");
        assert!(saturated.contains(&palette::colour("irq")));
    }

    #[test]
    fn the_hierarchy_beside_a_spatiotemporal_map_boxes_each_node_over_its_rows() {
        use socscope_analysis::micro::SpatialNode;
        // all -> player -> (player (self), demux, demux); all -> kernel -> swapper; all -> cpu0.
        let children: Vec<Vec<usize>> = vec![
            vec![1, 5, 7],
            vec![2, 3, 4],
            vec![],
            vec![],
            vec![],
            vec![6],
            vec![],
            vec![],
        ];
        let leaf = vec![
            None,
            None,
            Some(0),
            Some(1),
            Some(2),
            None,
            Some(3),
            Some(4),
        ];
        let h = ocelotl::SpatialHierarchy::new(children, leaf, 5).unwrap();
        let node = |name: &str| SpatialNode {
            name: name.into(),
            producer: None,
        };
        let nodes = vec![
            node("all"),
            node("player"),
            node("player (self)"),
            node("demux"),
            node("demux"),
            node("kernel"),
            node("swapper"),
            node("cpu0"),
        ];
        let labels: Vec<String> = ["player", "demux #3", "demux #4", "swapper", "cpu0"]
            .map(String::from)
            .to_vec();
        let boxes = hierarchy_boxes(&h, &nodes, &labels);
        let got: Vec<(&str, usize, (usize, usize), bool)> = boxes
            .iter()
            .map(|b| (b.name.as_str(), b.depth, b.rows, b.leaf))
            .collect();
        assert_eq!(
            got,
            [
                ("player", 1, (0, 2), false),
                ("player (self)", 2, (0, 0), true),
                ("demux #3", 2, (1, 1), true),
                ("demux #4", 2, (2, 2), true),
                ("kernel", 1, (3, 3), false),
                ("swapper", 2, (3, 3), true),
                ("cpu0", 1, (4, 4), true),
            ]
        );
        // Columns: the processes' left of the threads', a leaf to the right edge.
        let area = (14, 214);
        assert_eq!(hierarchy_box_x(area, &boxes[0], 2), (14, 104));
        assert_eq!(hierarchy_box_x(area, &boxes[2], 2), (104, 214));
        assert_eq!(hierarchy_box_x(area, &boxes[6], 2), (14, 214));
    }

    #[test]
    fn the_p_marker_is_never_on_an_axis() {
        assert_eq!(marker_x(82, 82, 900), 85);
        assert_eq!(marker_x(900, 82, 900), 897);
        assert_eq!(marker_x(400, 82, 900), 400);
    }

    #[test]
    fn traceviz_scales_say_their_unit() {
        assert_eq!(bin_value(Statistic::Activity, 1.04e9), "1.04 s in states");
        assert_eq!(bin_value(Statistic::Density, 1_500.0), "1.5k events");
        assert_eq!(bin_value(Statistic::Delay, 2.5e6), "2.5 ms longest delay");
        let t = Timeline {
            start: 0,
            end: 2_000_000_000,
            statistic: Statistic::Activity,
            actors: vec![],
            outline: vec![0.0; 200],
        };
        assert_eq!(
            outline_caption(&t, 1.04e9),
            ["outline, bins of 10 ms", "max 1.04 s in states"]
        );
    }

    #[test]
    fn timeline_has_a_time_axis_a_legend_and_tells_same_named_actors_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.png");
        let actor = |producer: u32, name: &str, v: f64| ActorHist {
            producer,
            name: name.into(),
            values: vec![v; 100],
        };
        let t = Timeline {
            start: 5_000_000_000,
            end: 7_000_000_000,
            statistic: Statistic::Density,
            actors: vec![
                actor(27, "cpu-burn", 3.0),
                actor(28, "cpu-burn", 2.0),
                actor(3, "vdec", 1.0),
            ],
            outline: vec![6.0; 100],
        };
        let flat = vec![6.0; 100];
        let labels = socscope_analysis::hierarchy::producer_labels(
            &t.actors
                .iter()
                .map(|a| socscope_tracedb::Producer {
                    id: a.producer,
                    parent: None,
                    kind: socscope_tracedb::ProducerKind::Thread,
                    local_id: i64::from(a.producer),
                    name: a.name.clone(),
                })
                .collect::<Vec<_>>(),
        );
        timeline(&path, &t, &labels, &[], &flat, &vec![0.5; 100]).unwrap();
        let img = decode(&path);
        // Layout of `timeline`: plot from x = 200, 780 px wide; outline box from y = 68 to 300;
        // rows of 34 px from y = 354; legend boxes from (992, 68), one every 18 px.
        let (left, plot_w, bottom) = (200, 780, 300);
        let axis = TimeAxis::new(0, 2_000_000_000, (plot_w / 110) as usize);
        let ticks: Vec<i64> = axis.ticks(0, 2_000_000_000).collect();
        assert!(ticks.len() >= 3, "{ticks:?}");
        for tk in ticks {
            let x = left + (tk as f64 / 2e9 * f64::from(plot_w)).round() as i32;
            assert!(
                (bottom + 2..bottom + 5).all(|y| at(&img, x, y) == [0, 0, 0]),
                "a tick at {x} for {}",
                axis.label(tk)
            );
        }
        // The legend lists the three actors, largest first, each in a colour of its own that
        // is the colour of its row below.
        let legend: Vec<[u8; 3]> = (0..3).map(|i| at(&img, 998, 74 + 18 * i)).collect();
        let set: std::collections::BTreeSet<[u8; 3]> = legend.iter().copied().collect();
        assert_eq!(set.len(), 3, "{legend:?}");
        let row = |i: i32| at(&img, left + 10, 354 + 34 * i + 20);
        assert_eq!((row(0), row(1), row(2)), (legend[0], legend[1], legend[2]));
        assert_eq!(legend[0], palette::colour("cpu-burn"));
    }
}
