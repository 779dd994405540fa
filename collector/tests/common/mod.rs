//! What several import tests need: the shared real captures, and an import that keeps quiet about
//! skipped lines.

// Each test binary compiles this module and uses only some of its helpers.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use socscope_collector::import::{ImportOptions, ImportReport, import};
use socscope_formats::Format;
use socscope_tracedb::{EventKind, Filter, TimeRange, TraceReader};

/// A capture of the shared collection (`shared/data/traces/REL`, described by its PROVENANCE.md).
pub fn real(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/traces")
        .join(rel)
}

/// Imports `file` (a CTF trace: its directory) as `format` into a new trace at `out`; skipped lines
/// are counted in the report, not collected.
pub fn import_file(
    file: &Path,
    format: Format,
    out: &Path,
    strict: bool,
) -> socscope_collector::Result<ImportReport> {
    let mut on_skip = |_: &socscope_formats::ParseError, _n: u64| {};
    let mut on_progress = |_b: u64| {};
    let mut opts = ImportOptions {
        strict,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    import(&[file.to_path_buf()], format, out, &mut opts)
}

/// A trace as comparable text: its types, its producers (by kind and board id) and its events (time,
/// end, type, producer, CPU, parameters), sorted.
pub fn dump(path: &Path) -> (Vec<String>, Vec<String>, Vec<String>) {
    let r = TraceReader::open(path).unwrap();
    let types = r.event_types().unwrap();
    let type_name: HashMap<_, _> = types.iter().map(|t| (t.id, t.name.clone())).collect();
    let mut t: Vec<String> = types
        .iter()
        .map(|t| {
            let p: Vec<&str> = t.params.iter().map(|p| p.name.as_str()).collect();
            format!("{} {:?} {p:?}", t.name, t.category)
        })
        .collect();
    t.sort();
    let producers = r.producers().unwrap();
    let key: HashMap<_, _> = producers
        .iter()
        .map(|p| (p.id, format!("{}:{}", p.kind.name(), p.local_id)))
        .collect();
    let mut p: Vec<String> = producers
        .iter()
        .map(|p| {
            let parent = p
                .parent
                .and_then(|q| key.get(&q))
                .cloned()
                .unwrap_or_default();
            format!("{} {} <{parent}>", key[&p.id], p.name)
        })
        .collect();
    p.sort();
    let mut e: Vec<String> = Vec::new();
    for ev in r.events(TimeRange::all(), &Filter::all()).unwrap() {
        let ev = ev.unwrap().event;
        let end = match ev.kind {
            EventKind::State { end, depth } => format!("state {end} {depth}"),
            EventKind::Link { end, target } => format!("link {end} {}", key[&target]),
            k => format!("{k:?}"),
        };
        e.push(format!(
            "{} {} {} {} {:?} {:?}",
            ev.ts, end, type_name[&ev.type_id], key[&ev.producer], ev.cpu, ev.params
        ));
    }
    e.sort();
    (t, p, e)
}
