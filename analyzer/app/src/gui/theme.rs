//! Colours: one per event type and producer from the shared palette (the same in every view and in the PNG
//! renderings) unless the user picked another (kept per user, see [`Colours`]), and the few the chart
//! chrome needs in dark and light themes.

use eframe::egui;
use egui::Color32;

/// An sRGB colour of `socscope_analysis::palette` for egui.
pub fn rgb([r, g, b]: socscope_analysis::palette::Rgb) -> Color32 {
    Color32::from_rgb(r, g, b)
}

/// A colour the user picked, for the palette (and the colours file).
pub fn to_rgb(c: Color32) -> socscope_analysis::palette::Rgb {
    [c.r(), c.g(), c.b()]
}

/// The colours of event types and producers: the user's choices over the palette, with the file they are
/// kept in and a number bumped at every change (views redraw when it moves).
#[derive(Clone, Debug, Default)]
pub struct Colours {
    pub user: socscope_analysis::palette::UserColours,
    /// Where choices are saved; `None` keeps them for this run only (tests).
    pub path: Option<std::path::PathBuf>,
    pub generation: u64,
    /// Why the file could not be read or written, shown once in the views' toolbar.
    pub error: Option<String>,
}

/// A colour the user picked in a legend.
#[derive(Clone, Debug, PartialEq)]
pub enum ColourEdit {
    /// For every event type of this name.
    Type(String, Color32),
    /// For every producer of this name.
    Producer(String, Color32),
}

impl Colours {
    /// The choices saved in `path` (none yet when it does not exist).
    pub fn load(path: std::path::PathBuf) -> Self {
        let (user, error) = match socscope_analysis::palette::UserColours::load(&path) {
            Ok(u) => (u, None),
            Err(e) => (Default::default(), Some(e)),
        };
        Self {
            user,
            path: Some(path),
            generation: 0,
            error,
        }
    }

    /// Applies a choice, and saves every choice to the file.
    pub fn apply(&mut self, edit: &ColourEdit) {
        match edit {
            ColourEdit::Type(n, c) => self.user.types.insert(n.clone(), to_rgb(*c)),
            ColourEdit::Producer(n, c) => self.user.producers.insert(n.clone(), to_rgb(*c)),
        };
        self.generation += 1;
        if let Some(p) = &self.path {
            self.error = self.user.save(p).err();
        }
    }
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
