//! `socscope bench aggregate`: the analysis numbers of BENCHMARKS.md — microscopic model, first partial
//! statistics and density, and the Ocelotl qualities with their bisection.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use socscope_analysis::density;
use socscope_analysis::loader;
use socscope_analysis::micro::{self, Metric, SliceGrid};
use socscope_analysis::stats::StatsConsumer;
use socscope_tracedb::Filter;

use crate::input::open_trace;
use crate::out::{errln, outln};

/// Milliseconds until the loader publishes its first snapshot (then the load is cancelled).
fn first_result_ms<S: Clone>(h: loader::LoaderHandle<S>) -> Result<f64> {
    let started = std::time::Instant::now();
    loop {
        let p = h.progress();
        if let Some(ms) = p.first_result_ms {
            h.cancel();
            return Ok(ms);
        }
        if let Some(e) = p.error {
            bail!("loading failed: {e}");
        }
        if p.finished || started.elapsed().as_secs() > 60 {
            bail!("the loader published no result");
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `socscope bench aggregate`.
pub fn run(
    events: u64,
    trace: Option<PathBuf>,
    dir: Option<PathBuf>,
    json_out: bool,
) -> Result<ExitCode> {
    // One JSON document with or without --json: these numbers go to BENCHMARKS.md and to scripts;
    // --json only silences the progress note.
    let (dir, _guard) = super::scratch_dir(dir)?;
    let (path, written) = match trace {
        Some(t) => (t, None),
        None => {
            let p = dir.join(format!("socscope-bench-{events}.db"));
            if !p.exists() {
                if !json_out {
                    errln!(
                        "writing a synthetic trace of {events} events in {}",
                        dir.display()
                    );
                }
                let r = socscope_tracedb::bench::write_synthetic(&p, events)?;
                (p, Some(r.seconds))
            } else {
                (p, None)
            }
        }
    };
    let reader = open_trace(&path)?;
    let info = reader.info()?;
    let range = micro::trace_range(&reader)?;
    let grid = SliceGrid::new(range, 1000).ok_or_else(|| anyhow!("empty trace"))?;
    // Microscopic model T = 1000 over the whole trace: best of three (the first also warms
    // the page cache).
    let mut micro_ms = Vec::new();
    let mut shape = (0, 0);
    for metric in [Metric::Count, Metric::Duration] {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            let m = micro::build(&reader, grid, metric, &Filter::all())?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            shape = (m.producers.len(), m.types.len());
        }
        micro_ms.push(best);
    }
    let stats_consumer = StatsConsumer::new(range);
    let req = stats_consumer.request(&path, &Filter::all());
    let stats_first = first_result_ms(loader::spawn(req, stats_consumer))?;
    let density_consumer = density::DensityConsumer::new(range, 1000).with_types();
    let req = density_consumer.request(&path, &Filter::all());
    let density_first = first_result_ms(loader::spawn(req, density_consumer))?;
    let t = Instant::now();
    let d = density::density(&reader, range, 1000, &Filter::all())?;
    let density_summary_ms = t.elapsed().as_secs_f64() * 1e3;
    let temporal = socscope_analysis::bench::temporal(1000, 100, 5);
    let spatio = socscope_analysis::bench::spatiotemporal(200, &[4, 4, 4], 4);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let v = json!({
        "trace": path,
        "events": info.event_count,
        "trace_s": range.len() as f64 * 1e-9,
        "write_s": written,
        "micro_t1000_count_ms": micro_ms[0],
        "micro_t1000_duration_ms": micro_ms[1],
        "micro_shape": {"slices": 1000, "producers": shape.0, "types": shape.1},
        "stats_first_result_ms": stats_first,
        "density_first_result_ms": density_first,
        "density_1000_bins_from_summary_ms": density_summary_ms,
        "density_total": d.total,
        "temporal_t1000_s100_u5": {
            "qualities_ms": ms(temporal.qualities),
            "bisection_ms": ms(temporal.bisection),
            "total_ms": ms(temporal.total()),
            "significant_ps": temporal.significant_ps,
        },
        "spatiotemporal_t200_4x4x4_u4": {
            "qualities_ms": ms(spatio.qualities),
            "bisection_ms": ms(spatio.bisection),
            "total_ms": ms(spatio.total()),
            "significant_ps": spatio.significant_ps,
        },
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

/// Arguments of the scale cases of `socscope bench aggregate --scale`.
pub struct ScaleArgs {
    /// Slice counts of the spatiotemporal case on the 10×10×10 tree.
    pub slices: Vec<usize>,
    /// The previous build's `socscope`, run on the same models in alternation.
    pub anchor: Option<PathBuf>,
    pub runs: usize,
    /// Slice counts of the temporal case (S = 100, U = 5).
    pub temporal_slices: Vec<usize>,
    pub temporal_runs: usize,
    pub memory_budget: Option<String>,
    /// Passed to this build's `aggregate --algorithm`.
    pub algorithm: Option<String>,
    pub dir: Option<PathBuf>,
}

/// `socscope bench aggregate --compare-algorithms`: the scalable algorithm against the exact
/// one on the scale case's tree, p by p.
pub fn compare(slices: &[usize]) -> Result<ExitCode> {
    let mut out = Vec::new();
    for &t in slices {
        let m = socscope_analysis::bench::synthetic_hierarchical_model(t, &[10, 10, 10], 4, 29);
        let h = m
            .hierarchy()
            .context("the generated model has a hierarchy")?;
        let started = Instant::now();
        let c = socscope_analysis::ocelotl::compare_algorithms(&m, h, 0.001);
        errln!(
            "10x10x10 U=4 T={t}: {} of {} p values of the exact list with another partition; \
             p lists {}; largest relative difference {:.3e} (partition qualities), {:.3e} \
             (area qualities); DPs: {} by the exact bisection, {} by the scalable search by \
             lines ({} at line crossings, {} midpoints answered from lines); {:.1} s",
            c.differing_partitions,
            c.exact_ps,
            if c.same_p_list { "equal" } else { "different" },
            c.max_relative_partition_quality_difference,
            c.max_relative_area_quality_difference,
            c.exact_evaluations,
            c.scalable_evaluations,
            c.scalable_crossing_evaluations,
            c.scalable_predicted_midpoints,
            started.elapsed().as_secs_f64()
        );
        out.push(json!({"case": format!("spatiotemporal 10x10x10 U=4 T={t}"), "comparison": c, "loadavg": loadavg()}));
    }
    outln!(
        "{}",
        serde_json::to_string_pretty(&json!({ "cases": out }))?
    );
    Ok(ExitCode::SUCCESS)
}

/// What one child `socscope aggregate` cost.
#[derive(Debug, Clone, serde::Serialize)]
struct ChildRun {
    build: &'static str,
    /// The spatiotemporal algorithm the child ran (its `engine:` line).
    algorithm: String,
    wall_s: f64,
    cpu_s: f64,
    peak_rss_mib: f64,
    loadavg: String,
    ok: bool,
    /// The first lines of what it said when it failed, or its summary (p list) when not.
    said: String,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `(peak RSS bytes, user + system CPU seconds, zombie)` of a running child, from /proc.
fn child_usage(pid: u32) -> Option<(u64, f64, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state is the first, utime and stime the
    // 12th and 13th (clock ticks of 1/100 s on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let zombie = f.first() == Some(&"Z");
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    Some((rss, ticks / 100.0, zombie))
}

/// Runs `bin aggregate --model FILE ...` and measures it: wall time, CPU time and peak RSS
/// (polled from /proc every 20 ms until the child is a zombie, before it is reaped).
fn measure(build: &'static str, bin: &Path, args: &[String]) -> Result<ChildRun> {
    use std::process::{Command, Stdio};
    let load = loadavg();
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let pid = child.id();
    // Drain the pipes on threads so a chatty child never blocks on a full pipe.
    let mut out = child.stdout.take().context("child stdout")?;
    let mut err = child.stderr.take().context("child stderr")?;
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let (mut rss, mut cpu) = (0u64, 0f64);
    let wall = loop {
        match child_usage(pid) {
            Some((r, c, zombie)) => {
                rss = rss.max(r);
                cpu = cpu.max(c);
                if zombie {
                    break started.elapsed();
                }
            }
            None => break started.elapsed(),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let status = child.wait()?;
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    // "engine: scalable algorithm, ..." (builds before the scalable one print no algorithm:
    // they are exact).
    let algorithm = stdout
        .lines()
        .find_map(|l| l.strip_prefix("engine: "))
        .and_then(|l| l.split_once(" algorithm,").map(|(a, _)| a))
        .unwrap_or("exact")
        .to_owned();
    let said = if status.success() {
        // The engine line exists only in the new build; the rest must be the same.
        stdout
            .lines()
            .filter(|l| !l.starts_with("engine:"))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        stderr.lines().take(3).collect::<Vec<_>>().join(" / ")
    };
    Ok(ChildRun {
        build,
        algorithm,
        wall_s: wall.as_secs_f64(),
        cpu_s: cpu,
        peak_rss_mib: rss as f64 / f64::from(1 << 20),
        loadavg: load,
        ok: status.success(),
        said,
    })
}

/// Writes a model in the reference vectors' input format (with its hierarchy, if any).
fn write_model(
    path: &Path,
    name: &str,
    m: &socscope_analysis::ocelotl::MicroscopicModel,
) -> Result<()> {
    use std::io::Write;
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let (t, s, u) = (m.slices(), m.producers(), m.types());
    write!(
        w,
        "{{\"name\":\"{name}\",\"T\":{t},\"S\":{s},\"U\":{u},\"threshold\":0.001,\"p_values\":[],\"values\":["
    )?;
    for ti in 0..t {
        w.write_all(if ti == 0 { b"[" } else { b",[" })?;
        for si in 0..s {
            w.write_all(if si == 0 { b"[" } else { b",[" })?;
            for ui in 0..u {
                if ui > 0 {
                    w.write_all(b",")?;
                }
                // Display prints the shortest text that parses back to the same double.
                write!(w, "{}", m.value(ti, si, ui))?;
            }
            w.write_all(b"]")?;
        }
        w.write_all(b"]")?;
    }
    w.write_all(b"]")?;
    if let Some(h) = m.hierarchy() {
        let parent: Vec<i64> = (0..h.len())
            .map(|v| h.parent(v).map_or(-1, |p| p as i64))
            .collect();
        let leaf: Vec<i64> = (0..h.len())
            .map(|v| h.leaf_producer(v).map_or(-1, |p| p as i64))
            .collect();
        let children: Vec<&[usize]> = (0..h.len()).map(|v| h.children(v)).collect();
        write!(
            w,
            ",\"hierarchy\":{}",
            json!({"parent": parent, "leaf_resource": leaf, "children": children})
        )?;
    }
    w.write_all(b"}")?;
    w.flush()?;
    Ok(())
}

/// `socscope bench aggregate --scale`: the large cases of issue 29, each build in its own
/// child process (the only fair way to read a peak RSS), alternated run by run.
pub fn scale(args: ScaleArgs) -> Result<ExitCode> {
    let (dir, _guard) = super::scratch_dir(args.dir.clone())?;
    let me = std::env::current_exe().context("cannot find this executable")?;
    let mut builds: Vec<(&'static str, PathBuf)> = Vec::new();
    if let Some(a) = &args.anchor {
        crate::input::require_file(a)?;
        builds.push(("before", a.clone()));
    }
    builds.push(("after", me));
    let budget: Vec<String> = args
        .memory_budget
        .iter()
        .flat_map(|b| ["--memory-budget".to_owned(), b.clone()])
        .chain(
            args.algorithm
                .iter()
                .flat_map(|a| ["--algorithm".to_owned(), a.clone()]),
        )
        .collect();
    let mut cases = Vec::new();
    let mut plan: Vec<(String, PathBuf, &'static str, usize)> = Vec::new();
    for &t in &args.slices {
        let path = dir.join(format!("scale-st-t{t}.json"));
        let m = socscope_analysis::bench::synthetic_hierarchical_model(t, &[10, 10, 10], 4, 29);
        write_model(&path, &format!("10x10x10 T={t}"), &m)?;
        plan.push((
            format!("spatiotemporal 10x10x10 U=4 T={t}"),
            path,
            "spatiotemporal",
            args.runs,
        ));
    }
    for &t in &args.temporal_slices {
        let path = dir.join(format!("scale-temporal-t{t}.json"));
        let m = socscope_analysis::bench::synthetic_model(t, 100, 5, 1);
        write_model(&path, &format!("temporal T={t} S=100 U=5"), &m)?;
        plan.push((
            format!("temporal T={t} S=100 U=5"),
            path,
            "temporal",
            args.temporal_runs,
        ));
    }
    for (name, path, mode, runs) in plan {
        let mut runs_out = Vec::new();
        let base = vec![
            "aggregate".to_owned(),
            "--model".to_owned(),
            path.display().to_string(),
            "--mode".to_owned(),
            mode.to_owned(),
        ];
        for run in 0..runs {
            // Alternate which build goes first, so a trend in the machine's load hits both.
            let order: Vec<&(&'static str, PathBuf)> = if run % 2 == 0 {
                builds.iter().collect()
            } else {
                builds.iter().rev().collect()
            };
            for (build, bin) in order {
                let mut a = base.clone();
                if *build == "after" {
                    a.extend(budget.iter().cloned());
                }
                let r = measure(build, bin, &a)?;
                errln!(
                    "{name} run {}: {build} ({}): {:.2} s wall, {:.2} s CPU, {:.0} MiB peak, load {}{}",
                    run + 1,
                    r.algorithm,
                    r.wall_s,
                    r.cpu_s,
                    r.peak_rss_mib,
                    r.loadavg,
                    if r.ok {
                        String::new()
                    } else {
                        format!(" — failed: {}", r.said)
                    }
                );
                runs_out.push(r);
            }
        }
        // Both builds must say the same (p list, qualities, areas) where both finished.
        let said: Vec<&str> = runs_out
            .iter()
            .filter(|r| r.ok)
            .map(|r| r.said.as_str())
            .collect();
        let same = said.windows(2).all(|w| w[0] == w[1]);
        let summary = |b: &str| {
            let xs: Vec<&ChildRun> = runs_out.iter().filter(|r| r.build == b && r.ok).collect();
            let range = |f: fn(&ChildRun) -> f64| {
                let v: Vec<f64> = xs.iter().map(|r| f(r)).collect();
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(0.0, f64::max);
                json!([lo, hi])
            };
            json!({
                "ok_runs": xs.len(),
                "wall_s": range(|r| r.wall_s),
                "cpu_s": range(|r| r.cpu_s),
                "peak_rss_mib": range(|r| r.peak_rss_mib),
            })
        };
        cases.push(json!({
            "case": name,
            "before": summary("before"),
            "after": summary("after"),
            "same_output": same,
            "runs": runs_out.iter().map(|r| json!({"build": r.build, "algorithm": r.algorithm, "wall_s": r.wall_s, "cpu_s": r.cpu_s, "peak_rss_mib": r.peak_rss_mib, "loadavg": r.loadavg, "ok": r.ok, "error": if r.ok { None } else { Some(&r.said) }})).collect::<Vec<_>>(),
        }));
    }
    let v = json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "anchor": args.anchor,
        "cases": cases,
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

/// CPU time of this process so far (every thread), from the scheduler's nanosecond counters.
fn process_cpu_s() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .sum::<f64>()
        * 1e-9
}

/// One listed p as bits: p, gain, loss, and the parts' slice ranges.
type ListedBits = (u32, u64, u64, Vec<(usize, usize)>);

/// `socscope bench aggregate --kernels`: the temporal case with the vector quality kernel and
/// the scalar one (the kernel before it, kept in this binary), alternated run by run in this
/// process: wall and CPU of qualities + bisection, and whether the two lists are the same bits.
pub fn kernels(slices: &[usize], runs: usize) -> Result<ExitCode> {
    use socscope_analysis::bench::{TemporalKernel, synthetic_model, temporal_with};
    let vector = socscope_analysis::bench::temporal_vector_kernel_in_use();
    if !vector {
        errln!(
            "note: this host's log is not the one the vector kernel reproduces; both runs use the scalar kernel"
        );
    }
    let mut cases = Vec::new();
    for &t in slices {
        let model = synthetic_model(t, 100, 5, 1);
        let mut rows = Vec::new();
        let mut lists = Vec::new();
        for run in 0..runs {
            let order = if run % 2 == 0 {
                [TemporalKernel::Scalar, TemporalKernel::Default]
            } else {
                [TemporalKernel::Default, TemporalKernel::Scalar]
            };
            for kernel in order {
                let load = loadavg();
                let cpu = process_cpu_s();
                let started = Instant::now();
                let (r, list) = temporal_with(&model, kernel);
                let wall = started.elapsed().as_secs_f64();
                let cpu = process_cpu_s() - cpu;
                let name = match kernel {
                    TemporalKernel::Scalar => "scalar (before)",
                    TemporalKernel::Default => "vector (after)",
                };
                errln!(
                    "temporal T={t} S=100 U=5 run {}: {name}: {wall:.3} s wall, {cpu:.3} s CPU (qualities {:.3} s, bisection {:.3} s), load {load}",
                    run + 1,
                    r.qualities.as_secs_f64(),
                    r.bisection.as_secs_f64(),
                );
                rows.push(json!({"kernel": name, "wall_s": wall, "cpu_s": cpu, "qualities_s": r.qualities.as_secs_f64(), "bisection_s": r.bisection.as_secs_f64(), "significant_ps": r.significant_ps, "loadavg": load}));
                // The p, the quality bits and the parts of every entry.
                let key: Vec<ListedBits> = list
                    .entries()
                    .iter()
                    .map(|e| {
                        (
                            e.p.to_bits(),
                            e.quality.gain.to_bits(),
                            e.quality.loss.to_bits(),
                            e.partition.ranges().to_vec(),
                        )
                    })
                    .collect();
                lists.push(key);
            }
        }
        let same = lists.windows(2).all(|w| w[0] == w[1]);
        if !same {
            bail!(
                "temporal T={t}: the two kernels gave different p lists, qualities or partitions"
            );
        }
        let range = |kernel: &str, field: &str| {
            let v: Vec<f64> = rows
                .iter()
                .filter(|r| r["kernel"] == kernel)
                .filter_map(|r| r[field].as_f64())
                .collect();
            json!([
                v.iter().copied().fold(f64::INFINITY, f64::min),
                v.iter().copied().fold(0.0, f64::max)
            ])
        };
        cases.push(json!({
            "case": format!("temporal T={t} S=100 U=5"),
            "before_scalar": {"wall_s": range("scalar (before)", "wall_s"), "cpu_s": range("scalar (before)", "cpu_s")},
            "after_vector": {"wall_s": range("vector (after)", "wall_s"), "cpu_s": range("vector (after)", "cpu_s")},
            "same_output": same,
            "runs": rows,
        }));
    }
    let v = json!({
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "vector_kernel": vector,
        "cases": cases,
    });
    outln!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}
