//! The time bar widget (RT-460 §2.2) over [`TimeBar`]: the slider with its two handles, the arrows, and the
//! whole / start-end / resync / load buttons.

use eframe::egui;
use egui::{Pos2, Rect, Sense, Stroke, Ui, Vec2};
use socscope_analysis::timebar::TimeBar;
use socscope_tracedb::units;

/// What the user asked for with the bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarAction {
    None,
    /// Load the selection in the view.
    Load,
}

/// Text of the start and end fields while they are edited.
#[derive(Default)]
pub struct BarEdit {
    start: String,
    end: String,
    editing: bool,
    /// Why the last typed time was refused (shown until a time is accepted).
    error: Option<String>,
}

pub fn show(ui: &mut Ui, bar: &mut TimeBar, edit: &mut BarEdit, cursor: Option<i64>) -> BarAction {
    let mut action = BarAction::None;
    // egui reports a lost focus on two frames when Enter ends the edit; the second one sees the
    // field already reset, so only a field edited until now is read.
    let was_editing = edit.editing;
    if !edit.editing {
        edit.start = units::timestamp(bar.selection.start);
        edit.end = units::timestamp(bar.selection.end);
    }
    // The start and end fields fit their text (`1234.567890123`) whatever the window: they and the
    // buttons are laid out first, from the right, and the slider takes the width that is left.
    let field_w = {
        let font = egui::TextStyle::Body.resolve(ui.style());
        let widest = if edit.start.len() >= edit.end.len() {
            &edit.start
        } else {
            &edit.end
        };
        let text_w = ui
            .painter()
            .layout_no_wrap(widest.clone(), font, ui.visuals().text_color())
            .size()
            .x;
        (text_w + 24.0).max(90.0)
    };
    ui.horizontal(|ui| {
        if ui
            .button("<")
            .on_hover_text("Move the selection left")
            .clicked()
        {
            bar.shift(-0.5);
        }
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let differs = bar.selection != bar.displayed;
            if ui
                .add_enabled(differs, egui::Button::new("Load"))
                .on_hover_text("Load the selection in the view")
                .clicked()
            {
                action = BarAction::Load;
            }
            if ui
                .button("Resync")
                .on_hover_text("Back to what the view shows")
                .clicked()
            {
                bar.resync();
            }
            if ui
                .button("Whole")
                .on_hover_text("Select the whole trace")
                .clicked()
            {
                bar.select_whole();
            }
            let e = ui.add(
                egui::TextEdit::singleline(&mut edit.end)
                    .hint_text("end")
                    .desired_width(field_w),
            );
            ui.label("–");
            let s = ui.add(
                egui::TextEdit::singleline(&mut edit.start)
                    .hint_text("start")
                    .desired_width(field_w),
            );
            edit.editing = s.has_focus() || e.has_focus();

            if s.lost_focus() && was_editing {
                match units::parse_time(&edit.start) {
                    Ok(t) => {
                        bar.set_start(t);
                        edit.error = None;
                    }
                    Err(err) => edit.error = Some(format!("start: {err}")),
                }
            }
            if e.lost_focus() && was_editing {
                match units::parse_time(&edit.end) {
                    Ok(t) => {
                        bar.set_end(t);
                        edit.error = None;
                    }
                    Err(err) => edit.error = Some(format!("end: {err}")),
                }
            }
            if ui
                .button(">")
                .on_hover_text("Move the selection right")
                .clicked()
            {
                bar.shift(0.5);
            }
            let width = ui.available_width().max(60.0);
            let (rect, resp) =
                ui.allocate_exact_size(Vec2::new(width, 18.0), Sense::click_and_drag());
            slider(ui, rect, &resp, bar, cursor);
        });
    });
    if let Some(e) = &edit.error {
        ui.colored_label(ui.visuals().error_fg_color, e);
    }
    action
}

fn slider(ui: &Ui, rect: Rect, resp: &egui::Response, bar: &mut TimeBar, cursor: Option<i64>) {
    let visuals = ui.visuals();
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 3.0, visuals.extreme_bg_color);
    let x = |t: i64| rect.left() + rect.width() * bar.fraction_of(t) as f32;
    let shown = Rect::from_x_y_ranges(
        x(bar.displayed.start)..=x(bar.displayed.end).max(x(bar.displayed.start) + 1.0),
        rect.y_range(),
    );
    p.rect_filled(
        shown.shrink2(Vec2::new(0.0, 6.0)),
        0.0,
        visuals.weak_text_color(),
    );
    let sel = Rect::from_x_y_ranges(
        x(bar.selection.start)..=x(bar.selection.end).max(x(bar.selection.start) + 2.0),
        rect.y_range(),
    );
    p.rect_filled(
        sel.shrink2(Vec2::new(0.0, 3.0)),
        2.0,
        visuals.selection.bg_fill,
    );
    for hx in [sel.left(), sel.right()] {
        p.line_segment(
            [Pos2::new(hx, rect.top()), Pos2::new(hx, rect.bottom())],
            Stroke::new(3.0, visuals.selection.stroke.color),
        );
    }
    if let Some(c) = cursor {
        let cx = x(c);
        p.line_segment(
            [Pos2::new(cx, rect.top()), Pos2::new(cx, rect.bottom())],
            Stroke::new(1.5, super::theme::cursor()),
        );
    }
    // Dragging near a handle moves it; elsewhere it draws a new selection.
    let id = resp.id.with("grab");
    if resp.drag_started()
        && let Some(pos) = resp.interact_pointer_pos()
    {
        let grab = if (pos.x - sel.left()).abs() < 6.0 {
            1u8
        } else if (pos.x - sel.right()).abs() < 6.0 {
            2
        } else if sel.contains(pos) && sel.width() > 14.0 {
            3
        } else {
            0
        };
        let anchor = bar.time_at(((pos.x - rect.left()) / rect.width()) as f64);
        ui.ctx()
            .data_mut(|d| d.insert_temp(id, (grab, anchor, bar.selection.start)));
    }
    if resp.dragged()
        && let Some(pos) = resp.interact_pointer_pos()
    {
        let t = bar.time_at(((pos.x - rect.left()) / rect.width()) as f64);
        let (grab, anchor, start0): (u8, i64, i64) =
            ui.ctx()
                .data(|d| d.get_temp(id))
                .unwrap_or((0, t, bar.selection.start));
        match grab {
            1 => bar.set_start(t),
            2 => bar.set_end(t),
            3 => {
                let len = bar.selection.len();
                let start = (start0 + t - anchor).clamp(bar.whole.start, bar.whole.end - len);
                bar.select(start, start + len);
            }
            _ => bar.select(anchor, t),
        }
    }
}
