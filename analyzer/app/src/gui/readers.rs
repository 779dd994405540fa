//! Everything read from the store runs here, on background threads; the UI thread only reads what they
//! published.

use eframe::egui;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socscope_analysis::hierarchy::ProducerTree;
use socscope_analysis::table::TableNames;
use socscope_tracedb::{
    Catalog, CatalogEntry, EventType, LossRecord, Producer, ProducerId, TraceInfo, TraceReader,
    TypeId,
};

use super::theme::{Colours, rgb};

/// What the views need to know about a trace besides its events: the store's [`TraceInfo`] (which holds
/// the trace's own `TraceHeader`) with the types, producers and losses.
#[derive(Clone, Debug)]
pub struct TraceMetadata {
    pub info: TraceInfo,
    pub types: Vec<EventType>,
    pub producers: Vec<Producer>,
    pub losses: Vec<LossRecord>,
}

/// Derived once per metadata change.
#[derive(Clone, Debug)]
pub struct TraceNames {
    pub tree: ProducerTree,
    pub table: Arc<TableNames>,
    pub colours: HashMap<TypeId, egui::Color32>,
    pub producer_colours: HashMap<ProducerId, egui::Color32>,
    pub type_names: HashMap<TypeId, String>,
    /// The [`Colours::generation`] the colours were taken at.
    pub colour_generation: u64,
    user_colours: socscope_analysis::palette::UserColours,
}

impl TraceNames {
    pub fn new(meta: &TraceMetadata, colours: &Colours) -> Self {
        let tree = ProducerTree::new(&meta.producers);
        let table = Arc::new(TableNames::new(
            &meta.types,
            tree.nodes().iter().map(|n| (n.id, n.label.clone())),
        ));
        // No two types of the trace in one colour (a hashed name may fall on a known type's): the
        // user's and the known types' colours stay, the others move to unused ones — as the PNGs do.
        let wanted: Vec<(socscope_analysis::palette::Rgb, bool)> = meta
            .types
            .iter()
            .map(|t| {
                (
                    colours.user.type_colour(&t.name),
                    colours.user.types.contains_key(&t.name)
                        || socscope_analysis::palette::is_known(&t.name),
                )
            })
            .collect();
        let picked = socscope_analysis::palette::distinct(&wanted);
        let type_colours = meta
            .types
            .iter()
            .zip(picked.iter().copied())
            .map(|(t, c)| (t.id, rgb(c)))
            .collect();
        // Processes (and the other top-level producers) colour their threads on the CPU tracks, next
        // to states in type colours: none takes a type's colour or another's.
        let top: Vec<&socscope_analysis::hierarchy::TreeNode> =
            tree.nodes().iter().filter(|n| n.parent.is_none()).collect();
        let top_colours = colours.user.top_level_colours(
            &picked,
            &top.iter().map(|n| n.label.as_str()).collect::<Vec<_>>(),
        );
        let mut producer_colours: HashMap<ProducerId, egui::Color32> = tree
            .nodes()
            .iter()
            .map(|n| (n.id, rgb(colours.user.producer_colour(&n.label))))
            .collect();
        for (n, c) in top.iter().zip(top_colours) {
            producer_colours.insert(n.id, rgb(c));
        }
        let type_names = meta.types.iter().map(|t| (t.id, t.name.clone())).collect();
        Self {
            tree,
            table,
            colours: type_colours,
            producer_colours,
            type_names,
            colour_generation: colours.generation,
            user_colours: colours.user.clone(),
        }
    }

    /// The colour of type `t`; a CPU track's thread (see `gantt::THREAD_KEY`) takes its process's.
    pub fn colour(&self, t: TypeId) -> egui::Color32 {
        if let Some(thread) = socscope_analysis::gantt::thread_of_key(t) {
            let process = self
                .tree
                .node(thread)
                .and_then(|n| n.parent)
                .unwrap_or(thread);
            return self.producer_colour(process);
        }
        self.colours.get(&t).copied().unwrap_or(egui::Color32::GRAY)
    }

    /// The colour of a name that is not one of the trace's types (a syscall's): the user's, else the
    /// palette's.
    pub fn colour_of_name(&self, name: &str) -> egui::Color32 {
        rgb(self.user_colours.type_colour(name))
    }

    pub fn producer_colour(&self, p: ProducerId) -> egui::Color32 {
        self.producer_colours
            .get(&p)
            .copied()
            .unwrap_or(egui::Color32::GRAY)
    }

    pub fn type_name(&self, t: TypeId) -> String {
        self.type_names
            .get(&t)
            .cloned()
            .unwrap_or_else(|| format!("#{t}"))
    }
}

fn read_meta(reader: &TraceReader) -> Result<TraceMetadata, String> {
    Ok(TraceMetadata {
        info: reader.info().map_err(|e| e.to_string())?,
        types: reader.event_types().map_err(|e| e.to_string())?,
        producers: reader.producers().map_err(|e| e.to_string())?,
        losses: reader.losses().map_err(|e| e.to_string())?,
    })
}

/// The latest metadata a watch thread published, with a number bumped at each publication.
type MetaSlot = Arc<Mutex<(u64, Option<Result<TraceMetadata, String>>)>>;

/// The catalog's traces (or why they could not be listed).
type CatalogList = Result<Vec<(CatalogEntry, PathBuf)>, String>;

/// The latest list the catalog thread published, with a number bumped at each publication.
type CatalogSlot = Arc<Mutex<(u64, CatalogList)>>;

/// Watches a trace on a background thread: reads its metadata at once, then again every half second
/// while the trace is being written.
pub struct TraceWatch {
    latest: MetaSlot,
    stop: Arc<AtomicBool>,
    seen: u64,
}

impl TraceWatch {
    pub fn start(path: &Path) -> Self {
        let latest: MetaSlot = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s, path) = (latest.clone(), stop.clone(), path.to_path_buf());
        let publish = move |m: Result<TraceMetadata, String>| {
            if let Ok(mut g) = l.lock() {
                g.0 += 1;
                g.1 = Some(m);
            }
        };
        let _ = std::thread::Builder::new()
            .name("socscope-trace-watch".into())
            .spawn(move || {
                let reader = match TraceReader::open(&path) {
                    Ok(r) => r,
                    Err(e) => return publish(Err(format!("{}: {e}", path.display()))),
                };
                let mut last: Option<(u64, i64, usize, usize, bool)> = None;
                while !s.load(Ordering::Relaxed) {
                    let m = read_meta(&reader);
                    let done = match &m {
                        Ok(m) => m.info.finished,
                        Err(_) => true,
                    };
                    let key = m.as_ref().ok().map(|m| {
                        (
                            m.info.event_count,
                            m.info.t_max,
                            m.producers.len(),
                            m.losses.len(),
                            // Finishing changes nothing else but must reach the views.
                            m.info.finished,
                        )
                    });
                    if key.is_none() || key != last {
                        last = key;
                        publish(m);
                    }
                    if done {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            });
        Self {
            latest,
            stop,
            seen: 0,
        }
    }

    /// Newly published metadata, if any.
    pub fn poll(&mut self) -> Option<Result<TraceMetadata, String>> {
        let g = self.latest.lock().ok()?;
        if g.0 > self.seen {
            self.seen = g.0;
            g.1.clone()
        } else {
            None
        }
    }
}

impl Drop for TraceWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The trace browser's list, refreshed on a background thread; deletions run there too.
pub struct CatalogWatch {
    pub dir: PathBuf,
    latest: CatalogSlot,
    requests: std::sync::mpsc::Sender<CatalogRequest>,
    seen: u64,
}

enum CatalogRequest {
    Delete(i64),
}

impl CatalogWatch {
    pub fn start(dir: &Path) -> Self {
        let latest: CatalogSlot = Arc::new(Mutex::new((0, Ok(Vec::new()))));
        let (tx, rx) = std::sync::mpsc::channel();
        let (l, d) = (latest.clone(), dir.to_path_buf());
        let _ = std::thread::Builder::new()
            .name("socscope-catalog".into())
            .spawn(move || {
                loop {
                    let list = Catalog::open(&d)
                        .and_then(|c| {
                            let mut v: Vec<(CatalogEntry, PathBuf)> = c
                                .traces()?
                                .into_iter()
                                .map(|r| {
                                    let p = c.resolve(&r);
                                    (r, p)
                                })
                                .collect();
                            v.sort_by_key(|(r, _)| std::cmp::Reverse(r.info.meta.start_unix_ns));
                            Ok(v)
                        })
                        .map_err(|e| e.to_string());
                    match l.lock() {
                        Ok(mut g) => {
                            if g.1.as_ref().ok() != list.as_ref().ok() || list.is_err() {
                                g.0 += 1;
                                g.1 = list;
                            }
                        }
                        Err(_) => return,
                    }
                    match rx.recv_timeout(Duration::from_secs(2)) {
                        Ok(CatalogRequest::Delete(id)) => {
                            if let Ok(c) = Catalog::open(&d) {
                                let _ = c.delete_trace(id, true);
                            }
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(_) => return,
                    }
                }
            });
        Self {
            dir: dir.to_path_buf(),
            latest,
            requests: tx,
            seen: 0,
        }
    }

    pub fn poll(&mut self) -> Option<CatalogList> {
        let g = self.latest.lock().ok()?;
        if g.0 > self.seen {
            self.seen = g.0;
            Some(g.1.clone())
        } else {
            None
        }
    }

    pub fn delete(&self, id: i64) {
        let _ = self.requests.send(CatalogRequest::Delete(id));
    }
}
