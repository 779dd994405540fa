//! Annotation bands over a time chart: the intervals a saved result or a trigger marks, drawn the same
//! way by every view that shows time across (Gantt, density, TraceViz).

use eframe::egui;
use egui::{Color32, Pos2, Rect, Stroke, Ui};
use socscope_analysis::results::Band;
use socscope_tracedb::{TimeRange, units};

/// The colour of annotation bands (amber: apart from the palette's type colours and the selection blue).
pub const BAND: Color32 = Color32::from_rgb(255, 170, 0);

/// Draws `bands` over a time chart: `chart` spans `view` across; each band a translucent column with its
/// label at the top, its edges marked; hovering its label tells its interval, producers and value. With
/// `rows` (the producer of each row of a Gantt, `row_h` high from the chart's top), the rows of the
/// band's producers are tinted more.
///
/// Bands that overlap in time (the areas of a spatiotemporal partition: one per node at each time)
/// would pile their columns up into one colour: then a band of some producers is drawn on its rows
/// only (tinted, edged, labelled in its first row), and without rows only its edges are drawn.
pub fn draw_bands(
    ui: &Ui,
    chart: Rect,
    view: TimeRange,
    bands: &[Band],
    rows: Option<(&[socscope_tracedb::ProducerId], f32)>,
) {
    if bands.is_empty() || view.is_empty() {
        return;
    }
    let p = ui.painter_at(chart);
    let x_of = |t: i64| {
        chart.left() + ((t - view.start) as f64 / view.len() as f64) as f32 * chart.width()
    };
    let overlapping = {
        let mut iv: Vec<(i64, i64)> = bands.iter().map(|b| (b.start, b.end)).collect();
        iv.sort_unstable();
        iv.windows(2).any(|w| w[1].0 < w[0].1)
    };
    // Where each band's label may run to: a narrow band (a trigger firing) is labelled over the room
    // up to the next band, not only over its own width.
    let mut starts: Vec<f32> = bands.iter().map(|b| x_of(b.start)).collect();
    starts.sort_unstable_by(f32::total_cmp);
    let room_after = |x0: f32, x1: f32| {
        let next = starts
            .iter()
            .copied()
            .find(|s| *s > x0 + 0.5)
            .unwrap_or(chart.right())
            .min(chart.right());
        (next - 6.0).max(x1) - x0
    };
    let hover = ui.ctx().pointer_hover_pos().filter(|h| chart.contains(*h));
    let mut tip = None;
    let font = egui::FontId::proportional(11.0);
    for b in bands
        .iter()
        .filter(|b| b.end > view.start && b.start < view.end)
    {
        let (x0, x1) = (
            x_of(b.start).max(chart.left()),
            x_of(b.end).min(chart.right()),
        );
        let col = Rect::from_x_y_ranges(x0..=x1.max(x0 + 1.0), chart.y_range());
        // The chart's rows this band concerns, when it is drawn on them only.
        let own_rows: Option<Vec<Rect>> = match rows {
            Some((ids, row_h)) if overlapping && !b.producers.is_empty() => Some(
                ids.iter()
                    .enumerate()
                    .filter(|(_, id)| b.producers.contains(id))
                    .map(|(i, _)| {
                        let y = chart.top() + i as f32 * row_h;
                        Rect::from_x_y_ranges(col.x_range(), y..=y + row_h)
                    })
                    .collect(),
            ),
            _ => None,
        };
        let label_at = match &own_rows {
            Some(rs) => {
                for r in rs {
                    p.rect_filled(*r, 0.0, BAND.gamma_multiply(0.25));
                    for x in [x0, x1] {
                        p.line_segment(
                            [Pos2::new(x, r.top()), Pos2::new(x, r.bottom())],
                            Stroke::new(1.0, BAND),
                        );
                    }
                }
                rs.first()
                    .map(|r| Rect::from_min_max(r.min, Pos2::new(r.right(), r.top() + 14.0)))
            }
            None => {
                if !overlapping {
                    p.rect_filled(col, 0.0, BAND.gamma_multiply(0.12));
                    if let Some((ids, row_h)) = rows {
                        for (i, id) in ids.iter().enumerate() {
                            if b.producers.contains(id) {
                                let y = chart.top() + i as f32 * row_h;
                                p.rect_filled(
                                    Rect::from_x_y_ranges(col.x_range(), y..=y + row_h),
                                    0.0,
                                    BAND.gamma_multiply(0.25),
                                );
                            }
                        }
                    }
                }
                for x in [x0, x1] {
                    p.line_segment(
                        [Pos2::new(x, chart.top()), Pos2::new(x, chart.bottom())],
                        Stroke::new(1.0, BAND),
                    );
                }
                (!overlapping).then(|| {
                    Rect::from_min_max(col.min, Pos2::new(col.right(), chart.top() + 16.0))
                })
            }
        };
        let Some(label) = label_at else { continue };
        let room = if overlapping {
            x1 - x0
        } else {
            room_after(x0, x1)
        };
        if room > 40.0 {
            let clip = Rect::from_x_y_ranges(x0..=x0 + room, label.y_range());
            p.with_clip_rect(clip.intersect(chart)).text(
                Pos2::new(x0 + 3.0, label.top() + 2.0),
                egui::Align2::LEFT_TOP,
                &b.label,
                font.clone(),
                ui.visuals().text_color(),
            );
        }
        // Only over the label strip: elsewhere the chart's own tooltips (events) speak.
        if let Some(h) = hover
            && label.contains(h)
        {
            tip = Some(format!(
                "{}\n{} – {} s ({})\nvalue {:.4}\n{}",
                b.label,
                units::timestamp(b.start),
                units::timestamp(b.end),
                units::duration(b.end - b.start),
                b.value,
                b.who
            ));
        }
    }
    if let Some(t) = tip {
        egui::Tooltip::always_open(
            ui.ctx().clone(),
            ui.layer_id(),
            ui.scope_id().with("band-tip"),
            egui::PopupAnchor::Pointer,
        )
        .show(|ui| {
            ui.label(t);
        });
    }
}
