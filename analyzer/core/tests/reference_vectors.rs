//! The engine against the outputs of the original lpaggreg library (shared/data/ocelotl),
//! compared as the vectors' README prescribes, and stricter: the arithmetic is meant to be the
//! original's, so partitions, p lists and part ids must match exactly, gains and losses to the
//! bit.

use std::path::{Path, PathBuf};

use serde_json::Value;
use socscope_analysis::ocelotl::{
    AggregationMode, AlgorithmChoice, Area, MemoryPlan, ModelFile, RunControl, RunOptions,
    SpatiotemporalAggregation, TemporalAggregation, compare_algorithms, run_model, run_model_with,
    spatiotemporal_modes, stacked_proportions,
};

fn vector_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SOCSCOPE_OCELOTL_VECTORS") {
        return dir.into();
    }
    // The repository is cloned with shared/ beside it.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ocelotl")
}

fn vectors() -> Vec<(String, ModelFile, Value)> {
    let dir = vector_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reference vectors not found in {}: {e}", dir.display()))
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".input.json").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no *.input.json in {}", dir.display());
    names
        .into_iter()
        .map(|name| {
            let input = ModelFile::load(&dir.join(format!("{name}.input.json"))).unwrap();
            let text = std::fs::read_to_string(dir.join(format!("{name}.expected.json"))).unwrap();
            let expected: Value = serde_json::from_str(&text).unwrap();
            (name, input, expected)
        })
        .collect()
}

/// Collects every difference instead of stopping at the first, so one run shows the picture.
struct Diffs(Vec<String>);

impl Diffs {
    fn exact(&mut self, at: &str, got: &Value, want: &Value) {
        if got != want {
            self.0.push(format!("{at}: got {got}, want {want}"));
        }
    }

    /// Bit-for-bit; the README's tolerance would hide a wrong summation order.
    fn number(&mut self, at: &str, got: &Value, want: &Value) {
        match (got.as_f64(), want.as_f64()) {
            (Some(g), Some(w)) if g.to_bits() == w.to_bits() || (g == 0.0 && w == 0.0) => {}
            _ => self.0.push(format!("{at}: got {got}, want {want}")),
        }
    }

    fn close(&mut self, at: &str, got: f64, want: f64, rel: f64) {
        if (got - want).abs() > rel * want.abs().max(1.0) {
            self.0.push(format!("{at}: got {got}, want {want}"));
        }
    }

    fn assert_none(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}: {} differences:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn compare_section(
    diffs: &mut Diffs,
    name: &str,
    section: &str,
    got: &Value,
    want: &Value,
    fields: &[&str],
) {
    diffs.number(
        &format!("{name}.{section}.whole_gain"),
        &got["whole_gain"],
        &want["whole_gain"],
    );
    diffs.number(
        &format!("{name}.{section}.whole_loss"),
        &got["whole_loss"],
        &want["whole_loss"],
    );
    diffs.exact(
        &format!("{name}.{section}.normalized"),
        &got["normalized"],
        &want["normalized"],
    );
    diffs.number(
        &format!("{name}.{section}.ocelotl_default_p"),
        &got["ocelotl_default_p"],
        &want["ocelotl_default_p"],
    );
    for list in ["dichotomy", "at_p"] {
        let (g, w) = (
            got[list].as_array().unwrap(),
            want[list].as_array().unwrap(),
        );
        if g.len() != w.len() {
            let ps = |v: &Vec<Value>| {
                v.iter()
                    .map(|e| e["p"].to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            diffs.0.push(format!(
                "{name}.{section}.{list}: p list [{}] want [{}]",
                ps(g),
                ps(w)
            ));
            continue;
        }
        for (i, (g, w)) in g.iter().zip(w).enumerate() {
            let at = format!("{name}.{section}.{list}[{i}] (p={})", w["p"]);
            for f in ["p", "gain", "loss"] {
                diffs.number(&format!("{at}.{f}"), &g[f], &w[f]);
            }
            if list == "at_p" {
                diffs.number(&format!("{at}.p_used"), &g["p_used"], &w["p_used"]);
            }
            for f in fields {
                diffs.exact(&format!("{at}.{f}"), &g[*f], &w[*f]);
            }
        }
    }
}

fn options(mode: AggregationMode, normalize: bool, file: &ModelFile) -> RunOptions {
    RunOptions {
        mode,
        normalize,
        ps: file.p_values.clone(),
        threshold: None,
    }
}

#[test]
fn temporal_sections_match_the_original_exactly() {
    let mut diffs = Diffs(Vec::new());
    for (name, file, expected) in vectors() {
        for (section, normalize) in [("temporal", false), ("temporal_normalized", true)] {
            let want = &expected[section];
            if want.get("omitted").is_some() {
                continue;
            }
            let report =
                run_model(&file, &options(AggregationMode::Temporal, normalize, &file)).unwrap();
            let got = serde_json::to_value(&report).unwrap();
            compare_section(
                &mut diffs,
                &name,
                section,
                &got,
                want,
                &["n_parts", "ranges", "parts"],
            );
        }
    }
    diffs.assert_none("temporal");
}

#[test]
fn every_interval_quality_matches_where_the_vectors_list_them() {
    let mut diffs = Diffs(Vec::new());
    let mut checked = 0;
    for (name, file, expected) in vectors() {
        let Some(list) = expected["temporal"]["aggregate_qualities"].as_array() else {
            continue;
        };
        let agg = TemporalAggregation::new(&file.model, false);
        for row in list {
            let r: Vec<f64> = row
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let (s, e) = (r[0] as usize, r[1] as usize);
            let q = agg.qualities().quality(s, e);
            diffs.number(
                &format!("{name} [{s},{e}] gain"),
                &q.gain.into(),
                &r[2].into(),
            );
            diffs.number(
                &format!("{name} [{s},{e}] loss"),
                &q.loss.into(),
                &r[3].into(),
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no vector lists aggregate_qualities");
    diffs.assert_none("aggregate qualities");
}

/// Compares a report's spatiotemporal section with the original's, partitions included.
fn compare_spatiotemporal(
    diffs: &mut Diffs,
    name: &str,
    report: &impl serde::Serialize,
    want: &Value,
) {
    let got = serde_json::to_value(report).unwrap();
    compare_section(
        diffs,
        name,
        "spatiotemporal",
        &got,
        want,
        &["node_parts", "aggregates", "aggregates_canonical"],
    );
}

#[test]
fn spatiotemporal_sections_match_the_original_exactly() {
    let mut diffs = Diffs(Vec::new());
    for (name, file, expected) in vectors() {
        let want = &expected["spatiotemporal"];
        if want.get("omitted").is_some() {
            continue;
        }
        let report = run_model(
            &file,
            &options(AggregationMode::Spatiotemporal, false, &file),
        )
        .unwrap();
        compare_spatiotemporal(&mut diffs, &name, &report, want);
    }
    diffs.assert_none("spatiotemporal");
}

/// The scalable algorithm (chosen above a size, or asked for) against the original and the
/// exact algorithm on every shared vector, p by p: the same p list, partitions and
/// qualities, bit for bit (v06's all-zero producers included: its near-ties are decided by
/// the same sums as the exact algorithm's).
#[test]
fn spatiotemporal_sections_match_with_the_scalable_algorithm() {
    let mut diffs = Diffs(Vec::new());
    let mut compared = 0;
    for (name, file, expected) in vectors() {
        let want = &expected["spatiotemporal"];
        if want.get("omitted").is_some() {
            continue;
        }
        let report = run_model_with(
            &file,
            &options(AggregationMode::Spatiotemporal, false, &file),
            &RunControl {
                algorithm: AlgorithmChoice::Scalable,
                ..RunControl::default()
            },
        )
        .unwrap();
        assert_eq!(report.engine.algorithm, "scalable", "{name}");
        compare_spatiotemporal(&mut diffs, &name, &report, want);
        let m = &file.model;
        let c = compare_algorithms(m, m.hierarchy().unwrap(), file.threshold);
        println!("{name}: {c:?}");
        assert!(c.same_p_list, "{name}: {c:?}");
        assert_eq!(c.differing_partitions, 0, "{name}: {c:?}");
        assert_eq!(
            c.max_relative_partition_quality_difference, 0.0,
            "{name}: {c:?}"
        );
        assert_eq!(c.max_relative_area_quality_difference, 0.0, "{name}: {c:?}");
        compared += 1;
    }
    assert!(compared > 0, "no vector has a spatiotemporal section");
    diffs.assert_none("spatiotemporal, scalable algorithm");
}

/// Recomputing the qualities at every p instead of keeping them (what a budget too small for
/// the tables chooses) must not change a bit of any result.
#[test]
fn spatiotemporal_sections_match_with_recomputed_qualities() {
    let mut diffs = Diffs(Vec::new());
    for (name, file, expected) in vectors() {
        let want = &expected["spatiotemporal"];
        if want.get("omitted").is_some() {
            continue;
        }
        let m = &file.model;
        let h = m.hierarchy().unwrap();
        let plan =
            MemoryPlan::choose(m.slices(), h, m.types(), u64::MAX, AlgorithmChoice::Exact).unwrap();
        assert!(
            plan.recomputed_bytes < plan.stored_bytes,
            "{name}: recomputing should need less memory: {plan:?}"
        );
        let report = run_model_with(
            &file,
            &options(AggregationMode::Spatiotemporal, false, &file),
            &RunControl {
                memory_budget: plan.recomputed_bytes,
                algorithm: AlgorithmChoice::Exact,
                ..RunControl::default()
            },
        )
        .unwrap();
        assert_eq!(report.engine.qualities, "recomputed", "{name}");
        assert_eq!(report.engine.algorithm, "exact", "{name}");
        compare_spatiotemporal(&mut diffs, &name, &report, want);
        // One byte less and it cannot run: refused before anything is computed.
        let refused = run_model_with(
            &file,
            &options(AggregationMode::Spatiotemporal, false, &file),
            &RunControl {
                memory_budget: plan.recomputed_bytes - 1,
                algorithm: AlgorithmChoice::Exact,
                ..RunControl::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            refused.contains("more than the memory budget"),
            "{name}: {refused}"
        );
    }
    diffs.assert_none("spatiotemporal, recomputed qualities");
}

/// `visual_derived` comes from a reading of Ocelotl's Java views, so the README asks for a
/// relative 1e-9 only.
#[test]
fn view_values_match_the_derived_expectations() {
    let mut diffs = Diffs(Vec::new());
    for (name, file, expected) in vectors() {
        let model = &file.model;
        let vd = &expected["visual_derived"];
        let type_name =
            |m: Option<usize>| m.map_or("void".to_owned(), |u| model.type_names()[u].clone());

        let stacked_want = &vd["temporal_stacked"];
        let p = stacked_want["p"].as_f64().unwrap();
        let part = TemporalAggregation::new(model, false).best_partition(p);
        let stacked = stacked_proportions(model, part.ranges());
        diffs.close(
            &format!("{name} max_total"),
            stacked.max_total,
            stacked_want["max_total"].as_f64().unwrap(),
            1e-9,
        );
        let parts_want = stacked_want["parts"].as_array().unwrap();
        assert_eq!(
            stacked.parts.len(),
            parts_want.len(),
            "{name}: stacked parts"
        );
        for (g, w) in stacked.parts.iter().zip(parts_want) {
            let at = format!("{name} stacked {:?}", g.range);
            diffs.exact(&at, &serde_json::json!([g.range.0, g.range.1]), &w["range"]);
            for (u, v) in g.values.iter().enumerate() {
                diffs.close(
                    &format!("{at} values[{u}]"),
                    *v,
                    w["values"][u].as_f64().unwrap(),
                    1e-9,
                );
            }
            diffs.close(
                &format!("{at} total"),
                g.total,
                w["total"].as_f64().unwrap(),
                1e-9,
            );
            diffs.exact(&format!("{at} mode"), &type_name(g.mode).into(), &w["mode"]);
            diffs.close(
                &format!("{at} amp"),
                g.mode_amplitude,
                w["mode_amplitude"].as_f64().unwrap(),
                1e-9,
            );
        }

        let modes_want = &vd["spatiotemporal_mode_states"];
        let Some(hierarchy) = model.hierarchy() else {
            continue;
        };
        let p = modes_want["p"].as_f64().unwrap();
        let partition = SpatiotemporalAggregation::new(model, hierarchy).best_partition(p);
        let want_areas = modes_want["aggregates"].as_array().unwrap();
        let areas: Vec<Area> = want_areas
            .iter()
            .map(|a| Area {
                node: a["node"].as_u64().unwrap() as usize,
                start: a["range"][0].as_u64().unwrap() as usize,
                end: a["range"][1].as_u64().unwrap() as usize,
            })
            .collect();
        assert_eq!(
            partition.aggregates(),
            &areas[..],
            "{name}: areas at the default p"
        );
        for (g, w) in spatiotemporal_modes(model, hierarchy, &areas)
            .iter()
            .zip(want_areas)
        {
            let at = format!("{name} area {:?}", g.area);
            diffs.exact(&format!("{at} mode"), &type_name(g.mode).into(), &w["mode"]);
            diffs.close(
                &format!("{at} amplitude"),
                g.amplitude,
                w["amplitude"].as_f64().unwrap(),
                1e-9,
            );
            diffs.exact(&format!("{at} alpha"), &g.alpha.into(), &w["alpha"]);
        }
    }
    diffs.assert_none("visual_derived");
}
