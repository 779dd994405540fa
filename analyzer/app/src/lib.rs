//! The socscope GUI as a library, so its views can be tested headless (egui_kittest) and the `socscope`
//! binary stays a thin command-line shell.
//!
//! Start here: [`gui::run`] (opens the window), [`gui::GuiApp`] (the whole UI, drawable into any `Ui`).

#[cfg(feature = "gui")]
pub mod gui;
pub mod out;
