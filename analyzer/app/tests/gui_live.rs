//! A trace being written grows in the open views without user action (issue 6, "Live"): the time
//! bar, the density chart and the statistics pie follow each commit of a real writer, the Gantt's
//! follow toggle keeps the newest data on screen, and the open trace stops being live once the
//! writer finishes.
#![cfg(feature = "gui")]

use std::path::Path;
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use socscope_analysis::sync::ViewKind;
use socscope_analyzer::gui::egui;
use socscope_analyzer::gui::{GuiApp, OpenTrace};
use socscope_tracedb::{
    Event, EventCategory, EventType, Producer, ProducerKind, TimeRange, TraceHeader, TraceWriter,
};

const EVENTS_PER_PART: i64 = 3_000;
/// One part of the trace per second of trace time.
const PART_NS: i64 = 1_000_000_000;

fn writer(path: &Path) -> TraceWriter {
    let mut w = TraceWriter::create(path, &TraceHeader::default()).unwrap();
    w.add_event_type(&EventType {
        id: 1,
        name: "tick".into(),
        category: EventCategory::Punctual,
        params: vec![],
    })
    .unwrap();
    for id in 1..=3 {
        w.add_producer(&Producer {
            id,
            parent: None,
            kind: ProducerKind::Thread,
            local_id: i64::from(id),
            name: format!("thread{id}"),
        })
        .unwrap();
    }
    w
}

/// Part `k` of the trace: events evenly spread over second `k`, committed.
fn write_part(w: &mut TraceWriter, k: i64) {
    for i in 0..EVENTS_PER_PART {
        let ts = k * PART_NS + i * (PART_NS / EVENTS_PER_PART);
        w.push(&Event::punctual(ts, 1, 1 + (i % 3) as u32, Some(0)))
            .unwrap();
    }
    w.commit().unwrap();
}

fn harness(path: &Path, view: ViewKind) -> Harness<'static, GuiApp> {
    let app = GuiApp::new(None, &[path.to_path_buf()], view, true);
    Harness::builder()
        .with_size(egui::Vec2::new(1100.0, 640.0))
        .build_ui_state(|ui, app: &mut GuiApp| app.ui(ui), app)
}

fn open_trace<'h>(h: &'h Harness<'_, GuiApp>) -> &'h OpenTrace {
    &h.state().open_traces[0]
}

/// Steps frames (no input) until `done` holds, for at most 30 s.
fn step_until(h: &mut Harness<'_, GuiApp>, what: &str, done: impl Fn(&OpenTrace) -> bool) {
    let t = Instant::now();
    loop {
        h.step();
        if !h.state().open_traces.is_empty() && done(open_trace(h)) {
            return;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let s = h.state().open_traces.first();
            panic!(
                "without user action, {what} never happened: events {:?}, live {:?}, density {:?}, pie {:?}, error {:?}",
                s.and_then(|s| s.meta.as_ref().map(|m| m.info.event_count)),
                s.map(OpenTrace::live),
                s.map(density_total),
                s.map(pie_total),
                s.and_then(|s| s.error.clone()),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn density_total(s: &OpenTrace) -> u64 {
    s.views
        .first()
        .and_then(|v| v.density.hist.as_ref())
        .map_or(0, |h| h.total())
}

fn pie_total(s: &OpenTrace) -> u64 {
    s.views
        .first()
        .and_then(|v| v.stats.stats.as_ref())
        .map_or(0, |st| st.type_count.values().sum())
}

fn bar_end(s: &OpenTrace, view: ViewKind) -> Option<i64> {
    s.views
        .first()
        .and_then(|v| v.bars.get(&view))
        .map(|(bar, _)| bar.displayed.end)
}

#[test]
fn density_and_time_bar_follow_a_growing_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let mut w = writer(&path);
    write_part(&mut w, 0);
    let mut h = harness(&path, ViewKind::Density);
    step_until(&mut h, "the first part loaded", |s| {
        s.live() && density_total(s) == EVENTS_PER_PART as u64
    });
    let first_end = bar_end(open_trace(&h), ViewKind::Density).expect("a time bar");
    for k in 1..3 {
        write_part(&mut w, k);
        let want = (k + 1) as u64 * EVENTS_PER_PART as u64;
        step_until(&mut h, "the density chart grew", |s| {
            s.meta.as_ref().is_some_and(|m| m.info.event_count == want) && density_total(s) == want
        });
        let s = open_trace(&h);
        let end = bar_end(s, ViewKind::Density).expect("a time bar");
        assert!(
            end > first_end + (k - 1) * PART_NS,
            "time bar shows up to {end}, part {k} ends after {}",
            k * PART_NS
        );
        assert_eq!(s.groups.get(0).unwrap().interval.end, s.whole().end);
    }
    w.finish(true).unwrap();
    step_until(&mut h, "the trace stopped being live", |s| !s.live());
}

#[test]
fn statistics_pie_follows_a_growing_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let mut w = writer(&path);
    write_part(&mut w, 0);
    let mut h = harness(&path, ViewKind::Statistics);
    step_until(&mut h, "the first part counted", |s| {
        pie_total(s) == EVENTS_PER_PART as u64
    });
    write_part(&mut w, 1);
    step_until(&mut h, "the pie grew", |s| {
        pie_total(s) == 2 * EVENTS_PER_PART as u64
    });
    w.finish(true).unwrap();
    step_until(&mut h, "the trace stopped being live", |s| !s.live());
}

#[test]
fn gantt_follow_keeps_the_newest_data_on_screen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let mut w = writer(&path);
    write_part(&mut w, 0);
    let mut h = harness(&path, ViewKind::Gantt);
    step_until(&mut h, "the Gantt loaded", |s| {
        s.views
            .first()
            .is_some_and(|v| !v.gantt.busy() && v.gantt.loaded().end == s.whole().end)
    });
    // Zoomed on the first fifth of a second, following.
    let window = PART_NS / 5;
    {
        let g = &mut h.state_mut().open_traces[0].views[0].gantt;
        g.view = TimeRange::new(g.loaded().start, g.loaded().start + window);
        g.follow = true;
    }
    write_part(&mut w, 1);
    step_until(&mut h, "the Gantt followed the new data", |s| {
        let g = &s.views[0].gantt;
        s.whole().end > PART_NS
            && g.loaded().end == s.whole().end
            && g.view.end == g.loaded().end
            && g.view.len() == window
    });
    // The toolbar's count, once the new part is in, is of both parts (not of the last one loaded).
    step_until(&mut h, "the Gantt's count took in both parts", |s| {
        let g = &s.views[0].gantt;
        !g.busy() && g.progress().is_some_and(|p| p.finished)
    });
    let g = &open_trace(&h).views[0].gantt;
    assert_eq!(
        g.progress().map(|p| p.events),
        Some(2 * EVENTS_PER_PART as u64)
    );
    w.finish(true).unwrap();
}

/// Frames come only while the app asks for them (`busy`), as in eframe: a trace that grows and
/// finishes right after a refresh (refreshes are at most one a second) still ends with every
/// event in the chart, without user action.
#[test]
fn the_last_growth_of_a_finished_trace_reaches_the_chart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let mut w = writer(&path);
    write_part(&mut w, 0);
    let mut h = harness(&path, ViewKind::Density);
    step_until(&mut h, "the first part loaded", |s| {
        density_total(s) == EVENTS_PER_PART as u64
    });
    write_part(&mut w, 1);
    step_until(&mut h, "the density chart grew", |s| {
        density_total(s) == 2 * EVENTS_PER_PART as u64
    });
    write_part(&mut w, 2);
    w.finish(true).unwrap();
    let t = Instant::now();
    while h.state().busy() {
        h.step();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the app never settled"
        );
    }
    let s = open_trace(&h);
    assert!(!s.live());
    assert_eq!(density_total(s), 3 * EVENTS_PER_PART as u64);
}

fn ocelotl_slices(s: &OpenTrace) -> Option<(usize, f64, socscope_analysis::overview::Reuse)> {
    let o = s.views.first()?.ocelotl.state.overview.as_ref()?;
    o.complete()
        .then(|| (o.micro.grid.slices, o.micro.values().iter().sum(), o.reuse))
}

#[test]
fn ocelotl_overview_grows_by_new_slices_keeping_the_past() {
    use socscope_analysis::overview::Reuse;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.db");
    let mut w = writer(&path);
    write_part(&mut w, 0);
    let mut h = harness(&path, ViewKind::Ocelotl);
    step_until(&mut h, "the first overview", |s| {
        ocelotl_slices(s).is_some_and(|(n, _, _)| n == 200)
    });
    let (_, first_total, _) = ocelotl_slices(open_trace(&h)).unwrap();
    let first: Vec<f64> = open_trace(&h).views[0]
        .ocelotl
        .state
        .overview
        .as_ref()
        .unwrap()
        .micro
        .values()
        .to_vec();
    write_part(&mut w, 1);
    step_until(&mut h, "the overview grew", |s| {
        ocelotl_slices(s).is_some_and(|(n, _, _)| n > 300)
    });
    let s = open_trace(&h);
    let (n, total, reuse) = ocelotl_slices(s).unwrap();
    // The slices of the first overview were kept, not read again; the new ones were added. (A busy
    // machine can see the growth in two reloads, the second continuing the first's partial model:
    // at least the first overview's 200 slices are kept either way.)
    assert!(
        matches!(reuse, Reuse::Continued { slices } if slices >= 200),
        "{reuse:?}"
    );
    assert!(
        total > first_total,
        "{total} events after growth, {first_total} before"
    );
    let o = s.views[0].ocelotl.state.overview.as_ref().unwrap();
    let per_slice = o.micro.producers.len() * o.micro.types.len();
    assert_eq!(
        &o.micro.values()[..first.len()],
        &first[..],
        "the past changed"
    );
    assert!(n * per_slice == o.micro.values().len());
    assert!(s.views[0].ocelotl.state.aggregated().is_some());
    w.finish(true).unwrap();
    step_until(&mut h, "the trace stopped being live", |s| !s.live());
}
