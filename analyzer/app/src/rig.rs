//! `socscope rig run SCENARIO.toml`: a scenario run N times, each run a board (or the simulator) started
//! by a command and captured by an in-process collector with the scenario's triggers, each ending in a
//! verdict — pass, fail (which triggers fired, when, with what score) or error (the board never
//! connected, the link died, the command failed) — written as JSON and as JUnit XML, with the traces
//! kept linked (full traces of failing runs only, unless told otherwise).
//!
//! Exit status: 0 every run passed, 3 some failed, 1 a run ended in error, 2 the scenario is wrong.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use socscope_collector::{IngestConfig, Notice, tcp};
use socscope_tracedb::{Catalog, units};
use tokio::sync::{mpsc, watch};

use crate::input::bad_argument;
use crate::out::outln;

/// Exit status when some run failed (as `socscope compare`).
pub const EXIT_FAILED: u8 = 3;

#[derive(clap::Subcommand, Debug)]
pub enum RigCommand {
    /// Run a scenario: each run starts a board, captures it with the triggers, and gets a verdict.
    #[command(
        after_help = "Examples:\n  socscope rig run examples/rig/vsync-stress.toml --out rig-results\n  \
        socscope rig run scenario.toml --out results --keep all --json\n\
        Writes OUT/verdicts.json and OUT/junit.xml (Jenkins, GitLab); exit status 0 all passed, 3 some\n\
        failed, 1 a run ended in error, 2 the scenario file is wrong."
    )]
    Run(RunArgs),
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The scenario file (TOML; see examples/rig/).
    pub scenario: PathBuf,
    /// Where the runs' traces, verdicts.json and junit.xml go.
    #[arg(long, default_value = "rig-results")]
    pub out: PathBuf,
    /// Which runs keep their traces: failing (and errors), all, or none (overrides the scenario).
    #[arg(long, value_name = "WHICH")]
    pub keep: Option<Keep>,
    /// Print the verdicts as one JSON document instead of a line per run.
    #[arg(long)]
    pub json: bool,
}

/// Which runs keep their traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// Failing runs and runs in error (the default).
    #[default]
    Failing,
    /// Every run.
    All,
    /// None (the verdicts only).
    None,
}

/// A scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    /// Name (the JUnit test suite).
    name: String,
    /// Runs.
    #[serde(default = "one")]
    runs: u32,
    /// The command starting the board or the simulator: program and arguments, with `{address}` (the
    /// collector's HOST:PORT), `{run}` (1, 2, ...) and `{dir}` (the run's directory) replaced.
    command: Vec<String>,
    /// How long a run may last (e.g. "20s"): the capture stops then.
    duration: String,
    /// How long the board has to connect (default 10 s).
    connect_timeout: Option<String>,
    /// Trigger rules (as `collect --trigger`).
    #[serde(default)]
    triggers: Vec<String>,
    /// A reference trace the runs are compared with online.
    reference: Option<Reference>,
    /// Which runs keep their traces (failing, all, none).
    #[serde(default)]
    keep: Keep,
    /// Keep only the last seconds of the stream and save windows on triggers instead of full traces.
    flight_recorder: Option<FlightSection>,
    /// Changes for some runs.
    #[serde(default, rename = "run")]
    overrides: Vec<RunOverride>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    /// The reference trace (relative to the scenario file).
    trace: PathBuf,
    /// Departure score (0 to 1).
    score: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FlightSection {
    seconds: f64,
    pre: Option<f64>,
    post: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunOverride {
    /// The runs it applies to (1-based).
    runs: Vec<u32>,
    /// Arguments added to the command.
    #[serde(default)]
    extra_args: Vec<String>,
    /// What the run is about (shown in its verdict).
    note: Option<String>,
}

/// One trigger firing in a verdict.
#[derive(Debug, Clone, Serialize)]
struct FiringVerdict {
    rule: String,
    at_s: f64,
    start_s: f64,
    end_s: f64,
    value: f64,
    detail: String,
    board: String,
}

/// The verdict of one run.
#[derive(Debug, Clone, Serialize)]
struct Verdict {
    run: u32,
    note: Option<String>,
    /// pass, fail or error.
    verdict: &'static str,
    /// Why, for fail and error.
    reason: String,
    command: Vec<String>,
    wall_seconds: f64,
    firings: Vec<FiringVerdict>,
    /// Departure scores of the reference rule, if any fired.
    departure_scores: Vec<f64>,
    /// Traces kept (paths).
    traces: Vec<PathBuf>,
    /// Traces written then deleted (passing runs when only failing ones are kept).
    traces_deleted: usize,
    sessions: Vec<serde_json::Value>,
    command_status: Option<i32>,
}

pub fn run(cmd: RigCommand) -> Result<ExitCode> {
    match cmd {
        RigCommand::Run(args) => run_scenario(args),
    }
}

fn load(path: &Path) -> Result<Scenario> {
    crate::input::require_file(path)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let scenario: Scenario = toml::from_str(&text).map_err(|e| {
        let (line, col) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((0, 0));
        bad_argument!(
            "{}:{line}:{col}: {}",
            path.display(),
            e.message().trim_end()
        )
    })?;
    if scenario.command.is_empty() {
        return Err(bad_argument!("{}: `command` is empty", path.display()));
    }
    if scenario.runs == 0 {
        return Err(bad_argument!(
            "{}: `runs` must be at least 1",
            path.display()
        ));
    }
    Ok(scenario)
}

/// 1-based line and column of byte `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn seconds(what: &str, text: &str) -> Result<Duration> {
    let s = crate::input::positive_seconds(text).map_err(|e| bad_argument!("{what}: {e}"))?;
    Ok(Duration::from_secs_f64(s))
}

/// A program named without a path is looked for beside this one first (a build's `target/…`), then on
/// the PATH.
fn resolve_program(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let beside = dir.join(program);
        if beside.is_file() {
            return beside;
        }
        // `cargo test` puts the test binaries in target/*/deps, the programs one level up.
        if let Some(up) = dir.parent() {
            let beside = up.join(program);
            if beside.is_file() {
                return beside;
            }
        }
    }
    PathBuf::from(program)
}

fn run_scenario(args: RunArgs) -> Result<ExitCode> {
    let scenario = load(&args.scenario)?;
    let base = args
        .scenario
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let duration = seconds("duration", &scenario.duration)?;
    let connect_timeout = match &scenario.connect_timeout {
        Some(t) => seconds("connect_timeout", t)?,
        None => Duration::from_secs(10),
    };
    let keep = args.keep.unwrap_or(scenario.keep);
    let mut trigger_args = crate::trigger::TriggerArgs {
        triggers: scenario.triggers.clone(),
        ..Default::default()
    };
    if let Some(r) = &scenario.reference {
        let trace = if r.trace.is_absolute() {
            r.trace.clone()
        } else {
            base.join(&r.trace)
        };
        trigger_args
            .triggers
            .push(format!("reference:{}>{}", trace.display(), r.score));
    }
    if let Some(f) = &scenario.flight_recorder {
        trigger_args.flight_recorder = Some(f.seconds);
        trigger_args.pre = f.pre;
        trigger_args.post = f.post;
    }
    // The rules and the reference are checked before anything is created or started.
    crate::trigger::setup(&trigger_args, &args.out)
        .with_context(|| format!("{}: triggers", args.scenario.display()))?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut verdicts = Vec::new();
    for run in 1..=scenario.runs {
        let dir = args.out.join(format!("run-{run:03}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot clear {}", dir.display()))?;
        }
        // The rules are parsed for every run (they are cheap); a bad one stops the scenario (exit 2).
        trigger_args.control = Some(dir.join(socscope_collector::control::CONTROL_SOCKET));
        let rig = crate::trigger::setup(&trigger_args, &dir)
            .with_context(|| format!("{}: triggers", args.scenario.display()))?;
        let overrides: Vec<&RunOverride> = scenario
            .overrides
            .iter()
            .filter(|o| o.runs.contains(&run))
            .collect();
        let v = one_run(
            &scenario,
            run,
            &dir,
            duration,
            connect_timeout,
            rig,
            &overrides,
        )?;
        let v = keep_traces(v, keep, &dir);
        if !args.json {
            outln!(
                "run {run}/{}: {}{}{}",
                scenario.runs,
                v.verdict,
                if v.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v.reason)
                },
                if v.traces.is_empty() {
                    String::new()
                } else {
                    format!(
                        " -> {}",
                        v.traces
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            );
        }
        verdicts.push(v);
    }
    let passed = verdicts.iter().filter(|v| v.verdict == "pass").count();
    let failed = verdicts.iter().filter(|v| v.verdict == "fail").count();
    let errors = verdicts.iter().filter(|v| v.verdict == "error").count();
    let doc = json!({
        "scenario": scenario.name,
        "file": args.scenario,
        "runs": verdicts.len(),
        "passed": passed,
        "failed": failed,
        "errors": errors,
        "verdicts": verdicts,
    });
    let json_path = args.out.join("verdicts.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let junit_path = args.out.join("junit.xml");
    std::fs::write(&junit_path, junit(&scenario.name, &verdicts))
        .with_context(|| format!("cannot write {}", junit_path.display()))?;
    if args.json {
        outln!("{doc}");
    } else {
        outln!(
            "{}: {passed} passed, {failed} failed, {errors} in error; {} and {}",
            scenario.name,
            json_path.display(),
            junit_path.display()
        );
    }
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else if failed > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Deletes the traces of a run that is not to be kept (their catalog entries too), and then the run's
/// directory if nothing else is left in it: a passing run leaves no `run-NNN/` holding only a catalog.
fn keep_traces(mut v: Verdict, keep: Keep, dir: &Path) -> Verdict {
    let wanted = match keep {
        Keep::All => true,
        Keep::None => false,
        Keep::Failing => v.verdict != "pass",
    };
    if wanted || v.traces.is_empty() {
        return v;
    }
    let mut emptied = false;
    if let Ok(catalog) = Catalog::open(dir)
        && let Ok(traces) = catalog.traces()
    {
        for t in traces {
            if catalog.delete_trace(t.id, true).unwrap_or(false) {
                v.traces_deleted += 1;
            }
        }
        emptied = catalog.traces().is_ok_and(|left| left.is_empty());
    }
    v.traces.clear();
    if emptied {
        remove_empty_run_dir(dir);
    }
    v
}

/// Removes a run directory whose catalog lists no trace any more: the catalog's files, then the
/// directory itself only if that left it empty (anything else in it, such as a file a user put there,
/// keeps it). Failing to remove it is harmless: the directory is only clutter.
fn remove_empty_run_dir(dir: &Path) {
    let catalog = dir.join(socscope_tracedb::CATALOG_FILE);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut s = catalog.clone().into_os_string();
        s.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(s));
    }
    let _ = std::fs::remove_dir(dir);
}

fn one_run(
    scenario: &Scenario,
    run: u32,
    dir: &Path,
    duration: Duration,
    connect_timeout: Duration,
    rig: crate::trigger::Rig,
    overrides: &[&RunOverride],
) -> Result<Verdict> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut config = IngestConfig::new(dir);
    config.triggers = rig.triggers.clone();
    config.flight = rig.flight.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let started = Instant::now();
    runtime.block_on(async {
        let listener = tcp::bind("127.0.0.1:0").await?;
        let address = listener
            .local_addr()
            .map(|a| a.to_string())
            .context("the collector's address")?;
        let (notice_tx, mut notices) = mpsc::unbounded_channel::<Notice>();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let serve = tokio::spawn(tcp::serve(
            listener,
            config.clone(),
            shutdown_rx.clone(),
            notice_tx,
        ));
        if let (Some(t), Some(path)) = (&config.triggers, &rig.control) {
            let control = socscope_collector::control::bind_control(path).await?;
            tokio::spawn(socscope_collector::control::serve_control(
                control,
                path.clone(),
                None,
                t.external.clone(),
                shutdown_rx.clone(),
            ));
        }
        let fill = |s: &str| {
            s.replace("{address}", &address)
                .replace("{run}", &run.to_string())
                .replace("{dir}", &dir.display().to_string())
        };
        let mut command: Vec<String> = scenario.command.iter().map(|s| fill(s)).collect();
        for o in overrides {
            command.extend(o.extra_args.iter().map(|s| fill(s)));
        }
        let note = overrides.iter().find_map(|o| o.note.clone());
        let mut child = tokio::process::Command::new(resolve_program(&command[0]))
            .args(&command[1..])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("run {run}: cannot start `{}`", command[0]));
        let mut verdict = Verdict {
            run,
            note,
            verdict: "pass",
            reason: String::new(),
            command: command.clone(),
            wall_seconds: 0.0,
            firings: Vec::new(),
            departure_scores: Vec::new(),
            traces: Vec::new(),
            traces_deleted: 0,
            sessions: Vec::new(),
            command_status: None,
        };
        let mut error: Option<String> = None;
        let mut connected = false;
        let mut ended = false;
        let mut complete = false;
        let mut paths: Vec<PathBuf> = Vec::new();
        let deadline = tokio::time::Instant::now() + duration;
        let connect_deadline = tokio::time::Instant::now() + connect_timeout;
        let mut child_done = false;
        match &mut child {
            Err(e) => error = Some(format!("{e:#}")),
            Ok(child) => loop {
                tokio::select! {
                    n = notices.recv() => {
                        let Some(n) = n else { break };
                        match &n {
                            Notice::SessionStarted { path, .. } => {
                                connected = true;
                                if !paths.contains(path) { paths.push(path.clone()); }
                            }
                            Notice::TriggerNote { message, .. } if message.starts_with("flight recorder: watching") => connected = true,
                            Notice::TriggerFired { firing, board, .. } => {
                                if firing.rule.starts_with("reference:") {
                                    verdict.departure_scores.push(firing.value);
                                }
                                verdict.firings.push(FiringVerdict {
                                    rule: firing.rule.clone(),
                                    at_s: firing.at as f64 / 1e9,
                                    start_s: firing.start as f64 / 1e9,
                                    end_s: firing.end as f64 / 1e9,
                                    value: firing.value,
                                    detail: firing.detail.clone(),
                                    board: board.clone(),
                                });
                            }
                            Notice::SessionEnded(r) => {
                                if !paths.contains(&r.path) { paths.push(r.path.clone()); }
                                if config.flight.is_none() {
                                    ended = true;
                                    complete = r.complete;
                                }
                                verdict.sessions.push(json!({
                                    "board": r.board, "file": r.path, "complete": r.complete,
                                    "records": r.records, "events": r.events,
                                    "lost_on_board": r.lost_on_board, "lost_in_transit": r.lost_in_transit,
                                    "interrupted": r.interrupted,
                                }));
                                if let Some(why) = &r.interrupted {
                                    error = Some(format!("the trace could not be written: {why}"));
                                }
                            }
                            Notice::WatchEnded(r) => {
                                ended = true;
                                complete = r.complete;
                                verdict.sessions.push(json!({
                                    "board": r.board, "complete": r.complete, "records": r.records,
                                    "lost_on_board": r.lost_on_board, "lost_in_transit": r.lost_in_transit,
                                    "windows_saved": r.saved, "peak_ring_bytes": r.peak_ring_bytes,
                                }));
                            }
                            _ => {}
                        }
                        if ended { break; }
                    }
                    status = child.wait(), if !child_done => {
                        child_done = true;
                        if let Ok(s) = status {
                            verdict.command_status = s.code();
                            if !s.success() && !connected {
                                error = Some(format!("the command `{}` failed ({s}) before its board connected", command[0]));
                                break;
                            }
                        }
                    }
                    _ = tokio::time::sleep_until(connect_deadline), if !connected => {
                        error = Some(format!("the board never connected within {}", units::duration(connect_timeout.as_nanos() as i64)));
                        break;
                    }
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            },
        }
        // The end of the run: the collector closes what is open, the command is stopped.
        let _ = shutdown_tx.send(true);
        let _ = serve.await;
        if let Ok(child) = &mut child {
            if !child_done {
                let _ = child.start_kill();
            }
            if let Some(mut stderr) = child.stderr.take() {
                use tokio::io::AsyncReadExt;
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text).await;
                if error.is_some() && !text.trim().is_empty() {
                    error = error.map(|e| format!("{e}: {}", text.lines().last().unwrap_or("").trim()));
                }
            }
            let _ = child.wait().await;
        }
        while let Ok(n) = notices.try_recv() {
            match n {
                Notice::SessionEnded(r) => {
                    if !paths.contains(&r.path) { paths.push(r.path.clone()); }
                    if let Some(why) = &r.interrupted {
                        error = Some(format!("the trace could not be written: {why}"));
                    }
                }
                Notice::TriggerFired { firing, board, .. } => {
                    verdict.firings.push(FiringVerdict {
                        rule: firing.rule.clone(),
                        at_s: firing.at as f64 / 1e9,
                        start_s: firing.start as f64 / 1e9,
                        end_s: firing.end as f64 / 1e9,
                        value: firing.value,
                        detail: firing.detail.clone(),
                        board,
                    });
                }
                _ => {}
            }
        }
        if error.is_none() && ended && !complete && tokio::time::Instant::now() < deadline {
            error = Some("the link died before the board ended its session (no Bye)".into());
        }
        verdict.wall_seconds = started.elapsed().as_secs_f64();
        verdict.traces = paths.into_iter().filter(|p| p.exists()).collect();
        match error {
            Some(e) => {
                verdict.verdict = "error";
                verdict.reason = e;
            }
            None if !verdict.firings.is_empty() => {
                verdict.verdict = "fail";
                let mut by_rule: BTreeMap<&str, usize> = BTreeMap::new();
                for f in &verdict.firings {
                    *by_rule.entry(f.rule.as_str()).or_default() += 1;
                }
                verdict.reason = by_rule
                    .iter()
                    .map(|(r, n)| format!("{r} fired {n}×"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if let Some(first) = verdict.firings.first() {
                    verdict.reason += &format!("; first at {:.3} s: {}", first.at_s, first.detail);
                }
            }
            None => {}
        }
        Ok::<_, anyhow::Error>(verdict)
    })
}

/// Escapes text for XML attributes and content.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The verdicts as JUnit XML: one test suite, a test case per run (a failure for fail, an error for
/// error), the traces in its system-out.
fn junit(name: &str, verdicts: &[Verdict]) -> String {
    let failures = verdicts.iter().filter(|v| v.verdict == "fail").count();
    let errors = verdicts.iter().filter(|v| v.verdict == "error").count();
    let time: f64 = verdicts.iter().map(|v| v.wall_seconds).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out += &format!(
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time:.3}\">\n",
        xml(name),
        verdicts.len()
    );
    out += &format!(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{time:.3}\">\n",
        xml(name),
        verdicts.len()
    );
    for v in verdicts {
        let case = match &v.note {
            Some(n) => format!("run {} ({n})", v.run),
            None => format!("run {}", v.run),
        };
        out += &format!(
            "    <testcase name=\"{}\" classname=\"rig.{}\" time=\"{:.3}\">\n",
            xml(&case),
            xml(name),
            v.wall_seconds
        );
        match v.verdict {
            "fail" => {
                out += &format!(
                    "      <failure message=\"{}\" type=\"trigger\">",
                    xml(&v.reason)
                );
                for f in &v.firings {
                    out += &xml(&format!(
                        "{} at {:.6} s on {}: {}\n",
                        f.rule, f.at_s, f.board, f.detail
                    ));
                }
                out += "</failure>\n";
            }
            "error" => {
                out += &format!(
                    "      <error message=\"{}\" type=\"rig\"/>\n",
                    xml(&v.reason)
                );
            }
            _ => {}
        }
        if !v.traces.is_empty() {
            out += "      <system-out>";
            for t in &v.traces {
                out += &xml(&format!("trace: {}\n", t.display()));
            }
            out += "</system-out>\n";
        }
        out += "    </testcase>\n";
    }
    out += "  </testsuite>\n</testsuites>\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        std::fs::write(
            &path,
            "name = \"x\"\ncommand = [\"true\"]\nduration = \"1s\"\ntriggerz = [\"loss\"]\n",
        )
        .unwrap();
        let e = load(&path).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("s.toml:4:1"), "{text}");
        assert!(text.contains("triggerz"), "{text}");
        assert_eq!(
            crate::input::exit_status(&e),
            crate::input::EXIT_BAD_ARGUMENTS
        );
    }

    #[test]
    fn junit_escapes_and_counts() {
        let v = Verdict {
            run: 1,
            note: Some("io <stress>".into()),
            verdict: "fail",
            reason: "gap:x>1ms fired 1× & more".into(),
            command: vec![],
            wall_seconds: 1.5,
            firings: vec![],
            departure_scores: vec![],
            traces: vec![PathBuf::from("a&b.db")],
            traces_deleted: 0,
            sessions: vec![],
            command_status: Some(0),
        };
        let x = junit("s", &[v]);
        assert!(x.contains("tests=\"1\" failures=\"1\" errors=\"0\""), "{x}");
        assert!(x.contains("run 1 (io &lt;stress&gt;)"), "{x}");
        assert!(x.contains("fired 1× &amp; more"), "{x}");
        assert!(x.contains("trace: a&amp;b.db"), "{x}");
    }
}
