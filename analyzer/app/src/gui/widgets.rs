//! Small widgets the views' toolbars share: a setting's name before its control, kept together.

use eframe::egui::{self, Ui, WidgetText};

/// A drop-down with its name in front of it, as a toolbar reads left to right ("Metric [event count]"
/// rather than egui's "[event count] Metric"), the two never split over two lines of a wrapped toolbar.
pub fn labelled_combo(
    ui: &mut Ui,
    label: &str,
    selected: impl Into<WidgetText>,
    add_contents: impl FnOnce(&mut Ui),
) {
    ui.horizontal(|ui| {
        let l = ui.label(label);
        egui::ComboBox::from_id_salt(label)
            .selected_text(selected)
            .show_ui(ui, add_contents)
            .response
            .labelled_by(l.id);
    });
}
