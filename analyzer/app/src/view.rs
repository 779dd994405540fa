//! `socscope view [TRACE|DIR]`: the GUI on a trace file, or on the trace browser of a catalog directory.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// A trace file (.db) to open, or a catalog directory to browse.
    #[arg(default_value = crate::DEFAULT_DIR)]
    pub target: PathBuf,
    /// The view a trace opens in: density, statistics (pie), gantt, table, ocelotl or traceviz.
    #[arg(long, default_value = "gantt")]
    pub view: String,
    /// Light theme instead of dark.
    #[arg(long)]
    pub light: bool,
    /// Window size in points, WIDTHxHEIGHT.
    #[arg(long, default_value = "1280x800")]
    pub size: String,
    /// Save a PNG of the window (after --exit-after-frames frames and once loaded), then exit.
    #[arg(long, value_name = "FILE")]
    pub screenshot: Option<PathBuf>,
    /// Exit after this many frames (with --screenshot: take it then).
    #[arg(long, value_name = "N")]
    pub exit_after_frames: Option<u64>,
    /// Write per-frame times (ms) to FILE (vsync off).
    #[arg(long, value_name = "FILE")]
    pub frame_log: Option<PathBuf>,
    /// Drive the app with a scripted interaction, then exit: pan-zoom.
    #[arg(long, value_name = "NAME")]
    pub script: Option<String>,
    /// Open the Gantt charts without their CPU tracks (the toolbar's "CPUs" shows them again).
    #[arg(long)]
    pub no_cpu_tracks: bool,
    /// The Ocelotl views' aggregation at opening: temporal or spatiotemporal (the view's
    /// "Aggregation" changes it).
    #[arg(long, value_name = "MODE", default_value = "temporal")]
    pub aggregation: String,
}

#[cfg(feature = "gui")]
pub fn options(args: &ViewArgs) -> Result<socscope_analyzer::gui::ViewOptions> {
    use crate::input::bad_argument;
    use socscope_analysis::sync::ViewKind;
    let first_view = ViewKind::from_name(&args.view).ok_or_else(|| {
        bad_argument!(
            "unknown view {:?} (density, statistics, gantt, table, ocelotl, traceviz)",
            args.view
        )
    })?;
    let (w, h) = args
        .size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<f32>().ok()?, h.parse::<f32>().ok()?)))
        .ok_or_else(|| bad_argument!("--size wants WIDTHxHEIGHT, got {:?}", args.size))?;
    let spatiotemporal = match args.aggregation.as_str() {
        "temporal" => false,
        "spatiotemporal" => true,
        other => {
            return Err(bad_argument!(
                "unknown aggregation {other:?} (temporal or spatiotemporal)"
            ));
        }
    };
    let script = match &args.script {
        Some(s) => Some(s.parse().map_err(|e: String| bad_argument!("{e}"))?),
        None => None,
    };
    let (dir, traces) = if args.target.is_dir() {
        (Some(args.target.clone()), Vec::new())
    } else if args.target.is_file() {
        // The browser shows the trace's own directory when it is a catalog.
        let parent = args
            .target
            .parent()
            .filter(|p| p.join("catalog.db").is_file())
            .map(PathBuf::from);
        (parent, vec![args.target.clone()])
    } else {
        anyhow::bail!(
            "{}: no such file or directory (make traces with `socscope demo` or `socscope collect`)",
            args.target.display()
        );
    };
    Ok(socscope_analyzer::gui::ViewOptions {
        dir,
        traces,
        first_view,
        dark: !args.light,
        size: [w, h],
        screenshot: args.screenshot.clone(),
        exit_after_frames: args
            .exit_after_frames
            .or(args.screenshot.as_ref().map(|_| 10)),
        frame_log: args.frame_log.clone(),
        script,
        cpu_tracks: !args.no_cpu_tracks,
        spatiotemporal,
    })
}

pub fn run(args: ViewArgs) -> Result<ExitCode> {
    #[cfg(feature = "gui")]
    {
        let options = options(&args)?;
        // A script drives the window for a while on its own: say so on the terminal.
        let spinner = options.script.as_ref().and_then(|_| {
            crate::out::progress_bar(
                false,
                None,
                "{spinner} {elapsed} view: running the script in the window",
            )
        });
        let result = socscope_analyzer::gui::run(options);
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        result?;
        Ok(ExitCode::SUCCESS)
    }
    #[cfg(not(feature = "gui"))]
    {
        let _ = args;
        anyhow::bail!("this socscope was built without the GUI (cargo feature `gui`)")
    }
}
