//! `socscope import`: text captures and binary Linux captures (trace-cmd `.dat`, CTF directories) into a
//! trace of the catalog.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use socscope_collector::import::{ImportOptions, detect_format, import, import_unregistered};
use socscope_formats::Format;

use crate::DEFAULT_DIR;
use crate::out::{errln, outln};

/// `--format`: a format of the registry ([`Format::ALL`], named and described by its spec) or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    Given(Format),
    Auto,
}

impl clap::ValueEnum for FormatArg {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<FormatArg>> = std::sync::LazyLock::new(|| {
            Format::ALL
                .iter()
                .map(|f| FormatArg::Given(*f))
                .chain([FormatArg::Auto])
                .collect()
        });
        ALL.as_slice()
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(match self {
            FormatArg::Given(f) => clap::builder::PossibleValue::new(f.name()).help(f.spec().help),
            FormatArg::Auto => clap::builder::PossibleValue::new("auto")
                .help("told from the file's magic number or its first lines"),
        })
    }
}

/// The `import` command's description: `Import captures (TEXT FORMATS; BINARY FORMATS) as a trace.`
pub fn about() -> String {
    let titles = |binary: bool| {
        Format::ALL
            .iter()
            .filter(|f| f.spec().is_binary() == binary)
            .map(|f| f.spec().title)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Import captures ({}; {}) as a trace.",
        titles(false),
        titles(true)
    )
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The files: one trace file (a CTF trace: its directory), or KPTrace per-CPU files (`trace0`,
    /// `trace1`, ...) with an optional System.map and format-description file.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The format; `auto` tells it from the file's magic or its first lines.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// The trace file to write, alone: it is registered in the catalog of its directory only when
    /// that directory has one already (a `catalog.db`), or with --register.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "TRACE.db",
        conflicts_with = "dir"
    )]
    pub output: Option<PathBuf>,
    /// With -o: register the trace in the catalog of its directory, creating `catalog.db` there if
    /// it has none (`socscope ls --dir DIR` then lists it). Without -o the trace always goes into
    /// the --dir catalog.
    #[arg(long, requires = "output")]
    pub register: bool,
    /// Catalog directory to write the trace into (named after the first file).
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Stop (exit 1) at the first line that does not follow the format.
    #[arg(long)]
    pub strict: bool,
}

fn unique_in(dir: &std::path::Path, stem: &str) -> PathBuf {
    let mut p = dir.join(format!("{stem}.db"));
    let mut n = 2;
    while p.exists() {
        p = dir.join(format!("{stem}-{n}.db"));
        n += 1;
    }
    p
}

pub fn run(args: ImportArgs) -> Result<ExitCode> {
    // The process does nothing but this import.
    socscope_collector::import::keep_freed_memory_for_reuse();
    for f in &args.files {
        crate::input::require_file(f)?;
    }
    let format = match args.format {
        FormatArg::Given(format) => format,
        FormatArg::Auto => detect_format(&args.files)?,
    };
    // One trace for KPTrace (all its files), one per file otherwise.
    let groups: Vec<Vec<PathBuf>> = if format == Format::Kptrace {
        vec![args.files.clone()]
    } else {
        args.files.iter().map(|f| vec![f.clone()]).collect()
    };
    if args.output.is_some() && groups.len() > 1 {
        return Err(crate::input::bad_argument!(
            "-o names one trace but {} files make {} traces; use --dir",
            args.files.len(),
            groups.len()
        ));
    }
    let total: u64 = args
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let bar = crate::out::progress_bar(
        false,
        Some(total),
        "{spinner} importing {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {wide_bar}",
    );
    // Hidden files of imports killed before they finished, in the directory this one writes to.
    let out_dir = match &args.output {
        Some(o) => o
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf(),
        None => args.dir.clone(),
    };
    for path in socscope_collector::import::remove_abandoned_imports(&out_dir) {
        errln!(
            "note: removed {}, left by an import that was killed before it finished",
            path.display()
        );
    }
    let mut done_before = 0u64;
    for group in groups {
        let out = match &args.output {
            Some(o) => o.clone(),
            None => {
                std::fs::create_dir_all(&args.dir)
                    .with_context(|| format!("creating {}", args.dir.display()))?;
                let stem = group[0].file_stem().map_or_else(
                    || "import".to_string(),
                    |s| s.to_string_lossy().into_owned(),
                );
                unique_in(&args.dir, &stem)
            }
        };
        let mut on_skip = |e: &socscope_formats::ParseError, n: u64| {
            let line = format!("warning: {e} (skipped; {n} lines skipped in all)");
            match &bar {
                Some(b) => b.println(line),
                None => errln!("{line}"),
            }
        };
        let mut on_progress = |bytes: u64| {
            if let Some(b) = &bar {
                b.set_position(done_before + bytes);
            }
        };
        let mut opts = ImportOptions {
            strict: args.strict,
            on_skip: &mut on_skip,
            on_progress: &mut on_progress,
        };
        let names: Vec<String> = group.iter().map(|p| p.display().to_string()).collect();
        // `-o FILE` writes FILE alone unless its directory is a catalog directory already or
        // --register asks for one: no `catalog.db` appears unasked in the working directory.
        let register = args.output.is_none()
            || args.register
            || out
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .join(socscope_tracedb::CATALOG_FILE)
                .is_file();
        let import = if register {
            import
        } else {
            import_unregistered
        };
        let report = import(&group, format, &out, &mut opts)
            .with_context(|| format!("while importing {}", names.join(", ")))?;
        done_before += report.bytes;
        for w in &report.warnings {
            let line = format!("warning: {w} (the events before it were kept)");
            match &bar {
                Some(b) => b.println(line),
                None => errln!("{line}"),
            }
        }
        let line = format!(
            "imported {} ({}): {} records -> {} events, {} lines skipped -> {}",
            names.join(", "),
            format.name(),
            report.records,
            report.info.event_count,
            report.lines_skipped,
            report.path.display()
        );
        match &bar {
            Some(b) => b.println(line),
            None => outln!("{line}"),
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(ExitCode::SUCCESS)
}
