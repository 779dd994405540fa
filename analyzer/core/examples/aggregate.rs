//! `cargo run --example aggregate -- FILE.json temporal|spatiotemporal [--normalize] [P...]`:
//! what `socscope aggregate --json` prints, without the CLI crate.

use socscope_analysis::ocelotl::{AggregationMode, RunOptions, run_model_file};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: aggregate FILE.json temporal|spatiotemporal [--normalize] [P...]";
    let path = args.next().ok_or(usage)?;
    let mode = match args.next().as_deref() {
        Some("temporal") => AggregationMode::Temporal,
        Some("spatiotemporal") => AggregationMode::Spatiotemporal,
        _ => return Err(usage.into()),
    };
    let mut options = RunOptions {
        mode,
        normalize: false,
        ps: Vec::new(),
        threshold: None,
    };
    for arg in args {
        if arg == "--normalize" {
            options.normalize = true;
        } else {
            options.ps.push(arg.parse()?);
        }
    }
    let report = run_model_file(path.as_ref(), &options)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
