//! The Results panel (issue 12): saved results listed, opened into the views (annotations as bands on the
//! Gantt and the density, groups into the pie, a search into the table), deleted; the pie's groups and the
//! table's filter saved from the GUI into the trace file.
#![cfg(feature = "gui")]

mod common;

use std::path::Path;

use common::gui::{harness_of as harness, settle_idle_and_draw as settle};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use socscope_analysis::results::{self as saved, Band};
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::GuiApp;
use socscope_analyzer::gui::egui;
use socscope_tracedb::{AnalysisData, AnalysisKind, AnalysisResult, ResultStore, TraceReader};

fn open(trace: &Path, view: ViewKind) -> Harness<'static, GuiApp> {
    let mut h = harness(GuiApp::new(None, &[trace.to_path_buf()], view, false));
    settle(&mut h);
    h
}

fn save(trace: &Path, description: &str, data: &AnalysisData) -> i64 {
    ResultStore::open(trace)
        .unwrap()
        .save(
            &AnalysisResult {
                id: 0,
                tool_id: None,
                tool_name: "test".into(),
                kind: data.kind(),
                date_unix_ns: 1_795_218_170_000_000_000,
                description: description.into(),
            },
            data,
        )
        .unwrap()
}

fn click(h: &mut Harness<'_, GuiApp>, label: &str) {
    h.get_by_label(label).click();
    h.run();
}

/// With `GUI_RESULTS_PNG=DIR`, keeps the frame as DIR/`name`.png, to look at.
fn keep(h: &mut Harness<'_, GuiApp>, name: &str) {
    if let Some(dir) = std::env::var_os("GUI_RESULTS_PNG") {
        let img = h.render().expect("rendered");
        img.save(Path::new(&dir).join(format!("{name}.png")))
            .unwrap();
    }
}

/// Columns (x) of the image where at least `min` pixels are the band colour (its 1-point edges);
/// the frame is kept as `name` (see [`keep`]).
fn band_columns(h: &mut Harness<'_, GuiApp>, min: u32, name: &str) -> Vec<u32> {
    keep(h, name);
    let img = h.render().expect("rendered");
    let amber = |p: [u8; 4]| {
        (p[0] as i32 - 255).abs() <= 12
            && (p[1] as i32 - 170).abs() <= 12
            && (p[2] as i32).abs() <= 12
    };
    (0..img.width())
        .filter(|&x| {
            (0..img.height())
                .filter(|&y| amber(img.get_pixel(x, y).0))
                .count() as u32
                >= min
        })
        .collect()
}

/// Groups of adjacent columns, as (first, last).
fn runs(cols: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &c in cols {
        match out.last_mut() {
            Some(r) if r.1 + 1 >= c => r.1 = c,
            _ => out.push((c, c)),
        }
    }
    out
}

#[test]
fn annotations_open_as_bands_on_the_gantt_and_the_density_and_can_be_deleted() {
    let (_dir, trace) = common::demo_trace(5, 2);
    let reader = TraceReader::open(&trace).unwrap();
    let info = reader.info().unwrap();
    let vdec: Vec<u32> = reader
        .producers()
        .unwrap()
        .iter()
        .filter(|p| p.name == "vdec")
        .map(|p| p.id)
        .collect();
    drop(reader);
    let t0 = info.t_min;
    // Two bands, the second twice as long as the first: their widths on screen keep that ratio.
    let band = |a: i64, b: i64| Band {
        start: t0 + a,
        end: t0 + b,
        label: format!("band at {a}"),
        producers: vdec.clone(),
        who: "vdec".into(),
        value: 1.0,
    };
    let bands = vec![
        band(300_000_000, 500_000_000),
        band(900_000_000, 1_300_000_000),
    ];
    let id = save(
        &trace,
        "two marked intervals",
        &saved::interval_annotations("mark", &bands),
    );
    let mut h = open(&trace, ViewKind::Gantt);
    assert!(
        band_columns(&mut h, 100, "before").is_empty(),
        "no band before one is opened"
    );
    click(&mut h, "Results…");
    h.get_by_label("two marked intervals");
    h.get_by_label("annotation");
    click(&mut h, "Open");
    settle(&mut h);
    keep(&mut h, "results_window");
    let s = &h.state().open_traces[0];
    assert_eq!(s.views[0].gantt.bands, bands);
    assert_eq!(s.views[0].density.bands, bands);
    assert_eq!(s.results.applied, Some(id));
    click(&mut h, "Results…");

    let check = |h: &mut Harness<'_, GuiApp>, what: &str| {
        let r = runs(&band_columns(h, 100, what));
        assert_eq!(r.len(), 4, "{what}: two edges per band: {r:?}");
        let w1 = (r[1].0 - r[0].0) as f64;
        let w2 = (r[3].0 - r[2].0) as f64;
        assert!(
            (w2 / w1 - 2.0).abs() < 0.1,
            "{what}: widths {w1} and {w2} keep the 1:2 of the intervals"
        );
    };
    check(&mut h, "gantt");
    h.state_mut().open_traces[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Density);
    settle(&mut h);
    check(&mut h, "density");
    // Delete (asks once more), and the bands go with it.
    click(&mut h, "Results…");
    click(&mut h, "Delete");
    click(&mut h, "Really delete");
    assert!(h.state().open_traces[0].results.list.is_empty());
    assert!(h.state().open_traces[0].views[0].density.bands.is_empty());
    assert!(
        TraceReader::open(&trace)
            .unwrap()
            .analysis_results(None, None)
            .unwrap()
            .is_empty(),
        "deleted from the file"
    );
}

#[test]
fn the_pie_groups_are_saved_and_applied_again() {
    let (_dir, trace) = common::demo_trace(5, 2);
    let mut h = open(&trace, ViewKind::Statistics);
    let reader = TraceReader::open(&trace).unwrap();
    let types = reader.event_types().unwrap();
    let id_of = |n: &str| types.iter().find(|t| t.name == n).unwrap().id;
    let members = [id_of("irq"), id_of("softirq")];
    drop(reader);
    assert!(
        h.get_by_label("Save groups").accesskit_node().is_disabled(),
        "nothing to save without a group"
    );
    h.state_mut().open_traces[0].views[0].stats.settings.group(
        "interrupts",
        [10, 200, 30],
        members.into(),
    );
    h.run();
    click(&mut h, "Save groups");
    let stored = TraceReader::open(&trace)
        .unwrap()
        .analysis_results(None, Some(AnalysisKind::Grouping))
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].tool_name, "socscope view");
    let data = TraceReader::open(&trace)
        .unwrap()
        .analysis_data(stored[0].id)
        .unwrap()
        .unwrap();
    let (_, groups) = saved::pie_groups(&data).unwrap();
    assert_eq!(groups[0].name, "interrupts");
    assert_eq!(groups[0].colour, [10, 200, 30]);
    assert_eq!(groups[0].members, members.into());
    // Gone from the pie, back from the result.
    h.state_mut().open_traces[0].views[0]
        .stats
        .settings
        .groups
        .clear();
    h.run();
    assert!(h.query_by_label("interrupts").is_none());
    click(&mut h, "Results…");
    click(&mut h, "Open");
    click(&mut h, "Results…");
    settle(&mut h);
    assert_eq!(
        h.state().open_traces[0].views[0].stats.settings.groups,
        groups
    );
    h.get_by_label("interrupts");
}

#[test]
fn the_table_filter_is_saved_as_a_search_and_applied_again() {
    let (_dir, trace) = common::demo_trace(5, 2);
    let mut h = open(&trace, ViewKind::Table);
    let mut filters = socscope_analysis::table::ColumnFilters::default();
    filters.patterns[4] = "^irq$".into();
    {
        let t = &mut h.state_mut().open_traces[0].views[0].table;
        t.edit = filters.clone();
        t.model.set_filters(filters.clone()).unwrap();
    }
    settle(&mut h);
    let rows = h.state().open_traces[0].views[0].table.model.row_count();
    assert!(rows > 0);
    click(&mut h, "Save filter");
    let reader = TraceReader::open(&trace).unwrap();
    let stored = reader
        .analysis_results(None, Some(AnalysisKind::Search))
        .unwrap();
    assert_eq!(
        stored.len(),
        1,
        "{:?}",
        h.state().open_traces[0].results.status
    );
    let data = reader.analysis_data(stored[0].id).unwrap().unwrap();
    let AnalysisData::Search { ids, .. } = &data else {
        panic!("a search")
    };
    assert_eq!(ids.len() as u64, rows, "every row the filter kept");
    let search = saved::parse_table_search(&data).unwrap();
    assert_eq!(search.filters, filters);
    // Cleared, then applied from the result.
    {
        let t = &mut h.state_mut().open_traces[0].views[0].table;
        t.edit = Default::default();
        t.model.set_filters(Default::default()).unwrap();
    }
    settle(&mut h);
    assert!(h.state().open_traces[0].views[0].table.model.row_count() > rows);
    click(&mut h, "Results…");
    click(&mut h, "Open");
    settle(&mut h);
    let t = &h.state().open_traces[0].views[0].table;
    assert_eq!(t.model.filters(), &filters);
    assert_eq!(t.model.row_count(), rows);
}

/// The text field holding `value`.
fn field<'a>(h: &'a Harness<'_, GuiApp>, value: &'a str) -> egui_kittest::Node<'a> {
    h.get_all_by_value(value)
        .find(|n| n.accesskit_node().role() == egui::accesskit::Role::TextInput)
        .unwrap_or_else(|| panic!("no text field holds {value:?}"))
}

#[test]
fn a_mistyped_time_in_the_time_bar_says_why() {
    let (_dir, trace) = common::demo_trace(5, 1);
    let mut h = open(&trace, ViewKind::Density);
    let start = socscope_tracedb::units::timestamp(h.state().open_traces[0].whole().start);
    field(&h, &start).click();
    h.run();
    field(&h, &start).type_text("x");
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    // The click put the cursor mid-field: whatever the text, it is not a time, and the bar says so.
    h.get_by_label_contains("start: `0.0");
    h.get_by_label_contains("` is not a time (e.g. 1.5s, 200ms, 30us, 42ns)");
    // A good time is taken and the message goes.
    field(&h, &start).click();
    h.run();
    for _ in 0..start.len() {
        h.key_press(egui::Key::Delete);
        h.key_press(egui::Key::Backspace);
    }
    h.run();
    field(&h, "").type_text("250ms");
    h.run();
    h.key_press(egui::Key::Enter);
    h.run();
    assert!(h.query_by_label_contains("is not a time").is_none());
    let bar = &h.state().open_traces[0].views[0].bars[&ViewKind::Density].0;
    assert_eq!(bar.selection.start, 250_000_000);
}

/// A 3-second capture with a CPU stress from 1 s to 2 s: phases for Ocelotl to find.
fn stressed_trace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_socscope"))
        .args([
            "demo",
            "--headless",
            "--json",
            "--duration",
            "3",
            "--seed",
            "3",
        ])
        .args(["--cpu-stress", "1:1", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // A fixed name: the tab shows it (in the snapshot).
    let fixed = dir.path().join("stressed.db");
    std::fs::copy(doc["file"].as_str().unwrap(), &fixed).unwrap();
    (dir, fixed)
}

/// The partition the Ocelotl view of the first group shows, as bands.
fn partition_on_screen(h: &mut Harness<'_, GuiApp>) -> Vec<Band> {
    let st = &mut h.state_mut().open_traces[0].views[0].ocelotl.state;
    let part = st.partition().expect("a partition");
    let micro = st.overview.as_ref().unwrap().micro.clone();
    let mut b = saved::partition_bands(&micro, &part);
    b.sort_by(|x, y| (x.start, x.end, &x.label).cmp(&(y.start, y.end, &y.label)));
    b
}

#[test]
fn an_ocelotl_partition_is_saved_from_its_view_and_drawn_on_traceviz() {
    let (_dir, trace) = stressed_trace();
    let mut h = open(&trace, ViewKind::Ocelotl);
    // A listed p with a few parts (any p has its partition; a listed one is Ocelotl's).
    {
        let st = &mut h.state_mut().open_traces[0].views[0].ocelotl.state;
        let ps = st.aggregated().unwrap().ps();
        let lens: Vec<(f64, usize)> = ps
            .iter()
            .map(|&p| {
                st.set_p(p);
                (p, st.partition().unwrap().len())
            })
            .collect();
        // The coarsest of them: the stress phase and what is around it.
        let p = lens
            .iter()
            .rev()
            .find(|(_, n)| (3..=60).contains(n))
            .unwrap_or_else(|| panic!("a p with 3 to 60 parts: {lens:?}"))
            .0;
        st.set_p(p);
    }
    h.run();
    let want = partition_on_screen(&mut h);
    assert!(want.len() >= 3, "{want:?}");
    h.state_mut().open_traces[0].views[0]
        .ocelotl
        .save_description = "phases of the demo".into();
    h.run();
    click(&mut h, "Save partition");
    let stored = TraceReader::open(&trace)
        .unwrap()
        .analysis_results(None, None)
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].kind, AnalysisKind::Annotation);
    assert_eq!(stored[0].tool_name, "socscope view");
    assert_eq!(stored[0].description, "phases of the demo");
    let data = TraceReader::open(&trace)
        .unwrap()
        .analysis_data(stored[0].id)
        .unwrap()
        .unwrap();
    assert_eq!(saved::bands(&data), want, "the parts at the p on screen");
    // The description field is emptied for the next save, which then describes itself.
    assert!(
        h.state().open_traces[0].views[0]
            .ocelotl
            .save_description
            .is_empty()
    );
    // Listed in the Results window, and opened: bands on the Gantt, the density and TraceViz.
    click(&mut h, "Results…");
    h.get_by_label("phases of the demo");
    click(&mut h, "Open");
    click(&mut h, "Results…");
    settle(&mut h);
    let s = &h.state().open_traces[0];
    assert_eq!(s.groups.get(0).unwrap().active, ViewKind::Gantt);
    assert_eq!(s.views[0].gantt.bands, want);
    assert_eq!(s.views[0].traceviz.bands, want);
    h.state_mut().open_traces[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::TraceViz);
    settle(&mut h);
    // The picture without the pointer left over the last button clicked.
    h.remove_cursor();
    h.run();
    h.snapshot("traceviz_bands_light");
    // The parts tile the interval: their edges are columns of band colour down the outline and
    // the rows, from the first part's start to the last one's end.
    let r = runs(&band_columns(&mut h, 150, "traceviz_bands"));
    assert!(r.len() >= 3, "band edges on TraceViz: {r:?}");
    // Cleared from every view.
    click(&mut h, "Results…");
    click(&mut h, "Clear bands");
    click(&mut h, "Results…");
    assert!(band_columns(&mut h, 150, "traceviz_cleared").is_empty());
}

#[test]
fn traceviz_groups_are_saved_as_a_grouping_and_applied_again() {
    use socscope_analysis::traceviz::GroupOp;
    let (_dir, trace) = common::demo_trace(5, 2);
    let mut h = open(&trace, ViewKind::TraceViz);
    assert!(
        h.get_by_label("Save groups").accesskit_node().is_disabled(),
        "nothing to save without a group"
    );
    let reader = TraceReader::open(&trace).unwrap();
    // Four producers without children (rows of their own in the tree).
    let producers = reader.producers().unwrap();
    let ids: Vec<u32> = producers
        .iter()
        .filter(|p| !producers.iter().any(|c| c.parent == Some(p.id)))
        .map(|p| p.id)
        .take(4)
        .collect();
    drop(reader);
    assert_eq!(ids.len(), 4, "{ids:?}");
    {
        let tree = &mut h.state_mut().open_traces[0].views[0].traceviz.tree;
        tree.make_group("codecs", ids[..2].to_vec(), GroupOp::Average)
            .unwrap();
        tree.make_group("rest", ids[2..].to_vec(), GroupOp::Median)
            .unwrap();
    }
    h.run();
    let groups = h.state().open_traces[0].views[0].traceviz.tree.group_list();
    assert!(!groups.is_empty());
    click(&mut h, "Save groups");
    let reader = TraceReader::open(&trace).unwrap();
    let stored = reader
        .analysis_results(None, Some(AnalysisKind::Grouping))
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert!(
        stored[0].description.starts_with("TraceViz groups: "),
        "{}",
        stored[0].description
    );
    let data = reader.analysis_data(stored[0].id).unwrap().unwrap();
    assert_eq!(saved::actor_groups(&data).unwrap(), groups);
    drop(reader);
    // Gone from the tree, back from the result, and TraceViz comes on screen.
    h.state_mut().open_traces[0].views[0]
        .traceviz
        .tree
        .replace_groups(&[]);
    h.state_mut().open_traces[0]
        .groups
        .get_mut(0)
        .unwrap()
        .switch_to(ViewKind::Gantt);
    settle(&mut h);
    assert!(
        h.state().open_traces[0].views[0]
            .traceviz
            .tree
            .groups
            .is_empty()
    );
    click(&mut h, "Results…");
    h.get_by_label(stored[0].description.as_str());
    click(&mut h, "Open");
    click(&mut h, "Results…");
    settle(&mut h);
    let s = &h.state().open_traces[0];
    assert_eq!(s.groups.get(0).unwrap().active, ViewKind::TraceViz);
    assert_eq!(s.views[0].traceviz.tree.group_list(), groups);
}

#[test]
fn an_ocelotl_partition_is_saved_as_a_processed_trace_and_opened_as_bands() {
    use socscope_analysis::overview::Aggregation;
    let (_dir, trace) = common::demo_trace(5, 2);
    let mut h = open(&trace, ViewKind::Ocelotl);
    // Fewer slices: the spatiotemporal aggregation of a debug build stays short.
    h.state_mut().open_traces[0].views[0]
        .ocelotl
        .state
        .settings
        .aggregation = Aggregation::Spatiotemporal;
    h.state_mut().open_traces[0].views[0]
        .ocelotl
        .state
        .settings
        .slices = 50;
    h.state_mut().open_traces[0].views[0].ocelotl.state.rerun();
    settle(&mut h);
    let want = partition_on_screen(&mut h);
    click(&mut h, "Save as processed trace");
    let stored = TraceReader::open(&trace)
        .unwrap()
        .analysis_results(None, None)
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].kind, AnalysisKind::ProcessedTrace);
    assert!(
        stored[0]
            .description
            .starts_with("Ocelotl spatiotemporal partition at p="),
        "{}",
        stored[0].description
    );
    let data = TraceReader::open(&trace)
        .unwrap()
        .analysis_data(stored[0].id)
        .unwrap()
        .unwrap();
    let AnalysisData::ProcessedTrace { trace_db } = data else {
        panic!("{data:?}")
    };
    let file = socscope_analysis::processed::resolve(&trace, &trace_db);
    let processed = TraceReader::open(&file).unwrap();
    let info = processed.info().unwrap();
    assert!(info.meta.processed && info.complete, "{info:?}");
    let from_file = socscope_analysis::processed::partition_bands(&processed).unwrap();
    drop(processed);
    assert_eq!(from_file.len(), want.len());
    for (a, b) in from_file.iter().zip(&want) {
        assert_eq!(
            (a.start, a.end, &a.label, &a.producers),
            (b.start, b.end, &b.label, &b.producers)
        );
        assert!((a.value - b.value).abs() <= 1e-9 * b.value.abs().max(1.0));
    }
    // Opened: the parts read from the processed trace are drawn as bands.
    click(&mut h, "Results…");
    h.get_by_label("processed_trace");
    click(&mut h, "Open");
    click(&mut h, "Results…");
    settle(&mut h);
    let s = &h.state().open_traces[0];
    assert_eq!(s.views[0].gantt.bands, from_file);
    assert_eq!(s.views[0].traceviz.bands, from_file);
    assert_eq!(s.results.applied, Some(stored[0].id));
    assert!(!band_columns(&mut h, 100, "processed_gantt").is_empty());
}

/// A trace the collector's triggers annotated opens with its firings drawn as bands, said in the
/// toolbar.
#[test]
fn a_trace_with_trigger_firings_opens_with_them_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let wire = dir.path().join("stress.wire");
    let config = socscope_sim::SimConfig {
        duration_s: 3.0,
        io_stress: vec![socscope_sim::Scenario {
            at: 1.0,
            duration: 1.0,
        }],
        ..socscope_sim::SimConfig::default()
    };
    let mut file = socscope_sim::transport::file(&wire).unwrap();
    socscope_sim::run(&config, &mut file).unwrap();
    file.finish().unwrap();
    let mut ingest = socscope_collector::IngestConfig::new(dir.path().join("traces"));
    ingest.triggers = Some(
        socscope_collector::trigger::TriggerSet::new(
            vec!["gap:running@vsync-cb>25ms".parse().unwrap()],
            Vec::new(),
        )
        .unwrap(),
    );
    let (reports, _) = socscope_collector::replay::replay_file(&wire, ingest).unwrap();
    let mut h = open(&reports[0].path, ViewKind::Gantt);
    let s = &h.state().open_traces[0];
    let bands = &s.views[0].gantt.bands;
    assert!(!bands.is_empty());
    assert!(
        bands
            .iter()
            .all(|b| b.label.contains("vsync-cb") && b.end - b.start > 25_000_000),
        "{bands:?}"
    );
    assert!(s.results.applied.is_some());
    h.run();
    assert!(h.query_by_label_contains("bands: triggers:").is_some());
}
