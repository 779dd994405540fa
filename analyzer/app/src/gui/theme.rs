//! Colours: one per event type from the shared palette (the same in every view and in the PNG renderings),
//! and the few the chart chrome needs in dark and light themes.

use eframe::egui;
use egui::Color32;

/// The colour of an event type, from `socscope_analysis::palette`.
pub fn type_colour(name: &str) -> Color32 {
    let [r, g, b] = socscope_analysis::palette::colour(name);
    Color32::from_rgb(r, g, b)
}

/// The aggregation marker: black on light backgrounds, white on dark ones.
pub fn marker(dark: bool) -> Color32 {
    if dark { Color32::WHITE } else { Color32::BLACK }
}

/// Lost-event hatching.
pub fn loss(dark: bool) -> Color32 {
    if dark {
        Color32::from_rgb(255, 90, 90)
    } else {
        Color32::from_rgb(200, 0, 0)
    }
}

/// The cursor set from the event table.
pub fn cursor() -> Color32 {
    Color32::from_rgb(255, 170, 0)
}

/// A row's alternate background.
pub fn stripe(dark: bool) -> Color32 {
    if dark {
        Color32::from_gray(38)
    } else {
        Color32::from_gray(238)
    }
}
