//! The event table's view model (RT-460 §3.2): rows loaded chunk by chunk and kept in shared segments, a
//! rank-based index so that a virtual table asks only for the rows on screen, and per-column regular
//! expression filters run on a background thread whose matches show up as they are found.
//!
//! Start here: [`TableConsumer`] (loader side), [`TableModel`] (rows, filter, cells), [`Column`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;
use socscope_tracedb::{
    Cpu, EventCategory, EventId, EventKind, EventType, ProducerId, StoredEvent, Timestamp, TypeId,
};

use crate::loader::Consumer;
use socscope_tracedb::units;

/// The table's columns, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Seconds since the trace start, with nanoseconds.
    Timestamp,
    /// The CPU.
    Cpu,
    /// The producer's name.
    Producer,
    /// Punctual, state, link or variable.
    Category,
    /// The event type's name.
    Type,
    /// A state's or link's length (from its start to its end); empty for other events.
    Duration,
    /// `name=value` pairs, plus a state's or link's end.
    Parameters,
}

impl Column {
    /// Every column, in order.
    pub const ALL: [Column; 7] = [
        Column::Timestamp,
        Column::Cpu,
        Column::Producer,
        Column::Category,
        Column::Type,
        Column::Duration,
        Column::Parameters,
    ];

    /// The header.
    pub const fn title(self) -> &'static str {
        match self {
            Column::Timestamp => "Timestamp",
            Column::Cpu => "CPU",
            Column::Producer => "Event Producer",
            Column::Category => "Category",
            Column::Type => "Event Type",
            Column::Duration => "Duration",
            Column::Parameters => "Parameters",
        }
    }
}

/// One row, as kept in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    /// Stable id in the store.
    pub id: EventId,
    /// Start.
    pub ts: Timestamp,
    /// CPU, if known.
    pub cpu: Option<Cpu>,
    /// Producer.
    pub producer: ProducerId,
    /// Category.
    pub category: EventCategory,
    /// Type.
    pub type_id: TypeId,
    /// A state's or link's end minus its start; `None` for punctual events and variables.
    pub duration: Option<i64>,
    /// The parameters column, formatted once on the loader thread.
    pub params: Box<str>,
}

/// Names the table shows for ids, shared by the loader and the filter thread.
#[derive(Clone, Debug, Default)]
pub struct TableNames {
    /// Producer labels.
    pub producers: HashMap<ProducerId, String>,
    /// Event types.
    pub types: HashMap<TypeId, EventType>,
}

impl TableNames {
    /// From the trace's types and producer labels.
    pub fn new(
        types: &[EventType],
        producers: impl IntoIterator<Item = (ProducerId, String)>,
    ) -> Self {
        Self {
            producers: producers.into_iter().collect(),
            types: types.iter().map(|t| (t.id, t.clone())).collect(),
        }
    }

    /// The text of one cell.
    pub fn cell(&self, row: &TableRow, column: Column) -> String {
        match column {
            Column::Timestamp => units::timestamp(row.ts),
            Column::Cpu => row.cpu.map_or_else(String::new, |c| c.to_string()),
            Column::Producer => self
                .producers
                .get(&row.producer)
                .cloned()
                .unwrap_or_else(|| format!("#{}", row.producer)),
            Column::Category => row.category.name().to_string(),
            Column::Type => self
                .types
                .get(&row.type_id)
                .map_or_else(|| format!("#{}", row.type_id), |t| t.name.clone()),
            Column::Duration => row.duration.map_or_else(String::new, units::duration),
            Column::Parameters => row.params.to_string(),
        }
    }

    fn row_of(&self, e: &StoredEvent) -> TableRow {
        use std::fmt::Write;
        let mut params = String::new();
        let defs = self
            .types
            .get(&e.type_id)
            .map(|t| t.params.as_slice())
            .unwrap_or(&[]);
        // A parameter called `name` (a syscall's, a user function's) comes first: the column is cut at
        // its width, and the name is what a reader looks for (`name=futex, ..., nr=240`).
        let named = defs
            .iter()
            .position(|d| d.name == "name")
            .filter(|&i| e.params.get(i).is_some_and(|v| !v.to_string().is_empty()));
        if let Some(i) = named {
            let _ = write!(params, "name={}, ", e.params[i]);
        }
        match e.kind {
            EventKind::State { end, depth } => {
                let _ = write!(params, "end={}, depth={depth}", units::timestamp(end));
            }
            EventKind::Link { end, target } => {
                let to = self
                    .producers
                    .get(&target)
                    .cloned()
                    .unwrap_or_else(|| format!("#{target}"));
                let _ = write!(params, "end={}, to={to}", units::timestamp(end));
            }
            EventKind::Variable { value } => {
                let _ = write!(params, "value={value}");
            }
            EventKind::Punctual => {}
        }
        for (i, v) in e.params.iter().enumerate() {
            if Some(i) == named {
                continue;
            }
            if !params.is_empty() && !params.ends_with(", ") {
                params.push_str(", ");
            }
            match defs.get(i) {
                Some(d) => {
                    let _ = write!(params, "{}={v}", d.name);
                }
                None => {
                    let _ = write!(params, "p{i}={v}");
                }
            }
        }
        let params = params.strip_suffix(", ").unwrap_or(&params);
        TableRow {
            id: e.id,
            ts: e.ts,
            cpu: e.cpu,
            producer: e.producer,
            category: e.category(),
            type_id: e.type_id,
            duration: match e.kind {
                EventKind::State { end, .. } | EventKind::Link { end, .. } => Some(end - e.ts),
                EventKind::Variable { .. } | EventKind::Punctual => None,
            },
            params: params.into(),
        }
    }
}

/// What the table loader publishes: sealed row segments so far, oldest first.
#[derive(Clone, Debug, Default)]
pub struct TableSnapshot {
    /// Segments in time order.
    pub segments: Vec<Arc<Vec<TableRow>>>,
}

/// Turns events into table rows on a loader thread.
#[derive(Debug)]
pub struct TableConsumer {
    names: Arc<TableNames>,
    skip_before: Option<Timestamp>,
    pending: RefCell<Vec<TableRow>>,
    sealed: RefCell<TableSnapshot>,
}

impl TableConsumer {
    /// A consumer for a fresh load.
    pub fn new(names: Arc<TableNames>) -> Self {
        Self {
            names,
            skip_before: None,
            pending: RefCell::default(),
            sealed: RefCell::default(),
        }
    }

    /// A consumer that appends after rows already loaded up to `t` (live traces).
    pub fn appending_from(names: Arc<TableNames>, t: Timestamp) -> Self {
        Self {
            skip_before: Some(t),
            ..Self::new(names)
        }
    }
}

impl Consumer for TableConsumer {
    type Snapshot = TableSnapshot;

    fn consume(&mut self, events: &[StoredEvent]) {
        let skip = self.skip_before.unwrap_or(i64::MIN);
        let names = &self.names;
        self.pending.get_mut().extend(
            events
                .iter()
                .filter(|e| e.ts >= skip)
                .map(|e| names.row_of(e)),
        );
    }

    fn snapshot(&self) -> TableSnapshot {
        let batch = std::mem::take(&mut *self.pending.borrow_mut());
        let mut sealed = self.sealed.borrow_mut();
        if !batch.is_empty() {
            sealed.segments.push(Arc::new(batch));
        }
        sealed.clone()
    }
}

/// One regular expression per column (empty: no condition); a row is kept when every non-empty
/// expression finds a match in its cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnFilters {
    /// In [`Column::ALL`] order.
    pub patterns: [String; 7],
}

impl ColumnFilters {
    /// Whether no column has a condition.
    pub fn is_empty(&self) -> bool {
        self.patterns.iter().all(|p| p.trim().is_empty())
    }

    /// Compiles the expressions; the error names the column.
    pub fn compile(&self) -> Result<CompiledFilters, String> {
        let mut out: Vec<(Column, Regex)> = Vec::new();
        for (c, p) in Column::ALL.into_iter().zip(&self.patterns) {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            let r = Regex::new(p).map_err(|e| format!("{}: {e}", c.title()))?;
            out.push((c, r));
        }
        Ok(CompiledFilters(out))
    }
}

/// Compiled column filters.
#[derive(Clone, Debug)]
pub struct CompiledFilters(Vec<(Column, Regex)>);

impl CompiledFilters {
    /// Whether `row` passes.
    pub fn matches(&self, names: &TableNames, row: &TableRow) -> bool {
        self.0.iter().all(|(c, r)| match c {
            Column::Parameters => r.is_match(&row.params),
            Column::Producer => r.is_match(
                names
                    .producers
                    .get(&row.producer)
                    .map_or("", String::as_str),
            ),
            Column::Type => r.is_match(
                names
                    .types
                    .get(&row.type_id)
                    .map_or("", |t| t.name.as_str()),
            ),
            Column::Category => r.is_match(row.category.name()),
            _ => r.is_match(&names.cell(row, *c)),
        })
    }
}

#[derive(Debug, Default)]
struct FilterShared {
    /// Global row numbers that match, ascending.
    matches: Vec<u64>,
    /// Rows looked at so far.
    scanned: u64,
}

/// A running background filter.
#[derive(Debug)]
struct FilterJob {
    shared: Arc<Mutex<FilterShared>>,
    input: Arc<Mutex<Vec<Arc<Vec<TableRow>>>>>,
    input_complete: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
}

impl Drop for FilterJob {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// The table on the UI side: rows absorbed from loader snapshots, a filter, and rows by rank.
#[derive(Debug, Default)]
pub struct TableModel {
    names: Arc<TableNames>,
    segments: Vec<Arc<Vec<TableRow>>>,
    /// `starts[i]`: global row number of the first row of `segments[i]`.
    starts: Vec<u64>,
    total: u64,
    seen_segments: usize,
    filters: ColumnFilters,
    job: Option<FilterJob>,
    loading_done: bool,
}

impl TableModel {
    /// An empty table naming ids with `names`.
    pub fn new(names: Arc<TableNames>) -> Self {
        Self {
            names,
            ..Self::default()
        }
    }

    /// The names used for cells.
    pub fn names(&self) -> &TableNames {
        &self.names
    }

    /// Takes the segments of `snapshot` not seen yet; returns whether rows were added.
    pub fn absorb(&mut self, snapshot: &TableSnapshot) -> bool {
        if snapshot.segments.len() <= self.seen_segments {
            return false;
        }
        let new = &snapshot.segments[self.seen_segments..];
        for s in new {
            self.starts.push(self.total);
            self.total += s.len() as u64;
            self.segments.push(s.clone());
        }
        if let Some(job) = &self.job
            && let Ok(mut input) = job.input.lock()
        {
            input.extend(new.iter().cloned());
        }
        self.seen_segments = snapshot.segments.len();
        true
    }

    /// The next snapshots come from a new (appending) loader.
    pub fn start_appending(&mut self) {
        self.seen_segments = 0;
        self.set_loading_done(false);
    }

    /// Tells the filter that no more rows will come (so it can finish).
    pub fn set_loading_done(&mut self, done: bool) {
        self.loading_done = done;
        if let Some(job) = &self.job {
            job.input_complete.store(done, Ordering::Relaxed);
        }
    }

    /// Rows loaded (before filtering).
    pub fn loaded_rows(&self) -> u64 {
        self.total
    }

    /// The filters in effect.
    pub fn filters(&self) -> &ColumnFilters {
        &self.filters
    }

    /// Applies new column filters: starts a background pass over every row loaded (and those to come).
    pub fn set_filters(&mut self, filters: ColumnFilters) -> Result<(), String> {
        if filters == self.filters {
            return Ok(());
        }
        let compiled = filters.compile()?;
        self.filters = filters;
        self.job = None;
        if self.filters.is_empty() {
            return Ok(());
        }
        let job = FilterJob {
            shared: Arc::default(),
            input: Arc::new(Mutex::new(self.segments.clone())),
            input_complete: Arc::new(AtomicBool::new(self.loading_done)),
            cancel: Arc::default(),
        };
        let (shared, input, complete, cancel) = (
            job.shared.clone(),
            job.input.clone(),
            job.input_complete.clone(),
            job.cancel.clone(),
        );
        let names = self.names.clone();
        std::thread::Builder::new()
            .name("socscope-table-filter".into())
            .spawn(move || run_filter(&compiled, &names, &shared, &input, &complete, &cancel))
            .map_err(|e| format!("cannot start the filter thread: {e}"))?;
        self.job = Some(job);
        Ok(())
    }

    /// Whether a filter is still scanning.
    pub fn filtering(&self) -> bool {
        self.job.as_ref().is_some_and(|j| {
            j.shared.lock().map(|s| s.scanned).unwrap_or(0) < self.total
                || !j.input_complete.load(Ordering::Relaxed)
        })
    }

    /// Rows scanned by the filter so far (all rows when there is no filter).
    pub fn filter_scanned(&self) -> u64 {
        match &self.job {
            Some(j) => j.shared.lock().map(|s| s.scanned).unwrap_or(0),
            None => self.total,
        }
    }

    /// How many rows the table has now (matches so far when filtering).
    pub fn row_count(&self) -> u64 {
        match &self.job {
            Some(j) => j.shared.lock().map(|s| s.matches.len() as u64).unwrap_or(0),
            None => self.total,
        }
    }

    /// The row at rank `rank` of the table (after filtering).
    pub fn row(&self, rank: u64) -> Option<&TableRow> {
        let global = match &self.job {
            Some(j) => *j.shared.lock().ok()?.matches.get(rank as usize)?,
            None => rank,
        };
        self.global_row(global)
    }

    /// Rows `range` of the table, for the visible part of a virtual table.
    pub fn rows(&self, range: std::ops::Range<u64>) -> Vec<&TableRow> {
        match &self.job {
            Some(j) => {
                let ids: Vec<u64> = match j.shared.lock() {
                    Ok(s) => {
                        let a = (range.start as usize).min(s.matches.len());
                        let b = (range.end as usize).min(s.matches.len());
                        s.matches[a..b].to_vec()
                    }
                    Err(_) => Vec::new(),
                };
                ids.into_iter().filter_map(|g| self.global_row(g)).collect()
            }
            None => range.filter_map(|g| self.global_row(g)).collect(),
        }
    }

    fn global_row(&self, global: u64) -> Option<&TableRow> {
        let seg = self
            .starts
            .partition_point(|&s| s <= global)
            .checked_sub(1)?;
        self.segments[seg].get((global - self.starts[seg]) as usize)
    }

    /// The rank of the first row at or after `t` (to scroll to a time).
    pub fn rank_at_time(&self, t: Timestamp) -> u64 {
        let (mut lo, mut hi) = (0u64, self.row_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.row(mid) {
                Some(r) if r.ts < t => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }
}

fn run_filter(
    filters: &CompiledFilters,
    names: &TableNames,
    shared: &Mutex<FilterShared>,
    input: &Mutex<Vec<Arc<Vec<TableRow>>>>,
    complete: &AtomicBool,
    cancel: &AtomicBool,
) {
    let mut next_segment = 0usize;
    let mut global = 0u64;
    loop {
        if cancel.load(Ordering::Relaxed) {
            return;
        }
        let seg = input.lock().ok().and_then(|v| v.get(next_segment).cloned());
        let Some(seg) = seg else {
            if complete.load(Ordering::Relaxed) {
                // One more look: rows may have come with the completion.
                if input
                    .lock()
                    .map(|v| v.len() <= next_segment)
                    .unwrap_or(true)
                {
                    return;
                }
                continue;
            }
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        next_segment += 1;
        // Publish every few thousand rows so matches show up as they are found.
        for block in seg.chunks(4096) {
            if cancel.load(Ordering::Relaxed) {
                return;
            }
            let found: Vec<u64> = block
                .iter()
                .enumerate()
                .filter(|(_, r)| filters.matches(names, r))
                .map(|(i, _)| global + i as u64)
                .collect();
            global += block.len() as u64;
            if let Ok(mut s) = shared.lock() {
                s.matches.extend(found);
                s.scanned = global;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socscope_tracedb::{Event, ParamDef, ParamType, ParamValue};
    use std::time::Instant;

    fn names() -> Arc<TableNames> {
        let types = vec![
            EventType {
                id: 1,
                name: "sched_switch".into(),
                category: EventCategory::Punctual,
                params: vec![ParamDef::new("prev", ParamType::String)],
            },
            EventType {
                id: 2,
                name: "running".into(),
                category: EventCategory::State,
                params: vec![],
            },
        ];
        Arc::new(TableNames::new(
            &types,
            [
                (7, "vsync (12)".to_string()),
                (8, "kworker (3)".to_string()),
            ],
        ))
    }

    fn events(n: i64) -> Vec<StoredEvent> {
        (0..n)
            .map(|i| StoredEvent {
                id: i,
                event: if i % 2 == 0 {
                    Event::punctual(i * 1000, 1, 7, Some((i % 4) as u16))
                        .with_params(vec![ParamValue::String(format!("task{}", i % 5))])
                } else {
                    Event::state(i * 1000, i * 1000 + 500, 0, 2, 8, Some(1))
                },
            })
            .collect()
    }

    fn loaded(n: i64, chunk: usize) -> TableModel {
        let mut c = TableConsumer::new(names());
        let mut m = TableModel::new(names());
        for part in events(n).chunks(chunk) {
            c.consume(part);
            m.absorb(&c.snapshot());
        }
        m.set_loading_done(true);
        m
    }

    fn wait(m: &TableModel) {
        let t = Instant::now();
        while m.filtering() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the filter never finished"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn cells_show_names_and_formatted_parameters() {
        let m = loaded(4, 3);
        assert_eq!(m.row_count(), 4);
        let n = m.names();
        let r0 = m.row(0).unwrap();
        let cells: Vec<String> = Column::ALL.iter().map(|c| n.cell(r0, *c)).collect();
        assert_eq!(
            cells,
            [
                "0.000000000",
                "0",
                "vsync (12)",
                "punctual",
                "sched_switch",
                "",
                "prev=task0"
            ]
        );
        let r1 = m.row(1).unwrap();
        assert_eq!(n.cell(r1, Column::Parameters), "end=0.000001500, depth=0");
        // A state says how long it lasted, in its own column.
        assert_eq!(r1.duration, Some(1_500 - r1.ts));
        assert_eq!(n.cell(r1, Column::Duration), units::duration(1_500 - r1.ts));
        assert_eq!(m.rows(2..10).len(), 2);
    }

    #[test]
    fn a_name_parameter_comes_first() {
        let types = vec![EventType {
            id: 3,
            name: "syscall".into(),
            category: EventCategory::State,
            params: vec![
                ParamDef::new("nr", ParamType::Unsigned),
                ParamDef::new("name", ParamType::String),
                ParamDef::new("ret", ParamType::Signed),
            ],
        }];
        let n = TableNames::new(&types, [(7, "vdec (319)".to_string())]);
        let syscall = |name: &str| StoredEvent {
            id: 0,
            event: Event::state(1_000, 3_000, 1, 3, 7, Some(0)).with_params(vec![
                ParamValue::Unsigned(240),
                ParamValue::String(name.into()),
                ParamValue::Signed(0),
            ]),
        };
        let row = n.row_of(&syscall("futex"));
        assert_eq!(
            n.cell(&row, Column::Parameters),
            "name=futex, end=0.000003000, depth=1, nr=240, ret=0"
        );
        // An empty name stays in its place.
        let row = n.row_of(&syscall(""));
        assert_eq!(
            n.cell(&row, Column::Parameters),
            "end=0.000003000, depth=1, nr=240, name=, ret=0"
        );
    }

    #[test]
    fn rows_by_rank_cross_segments() {
        let m = loaded(10_000, 333);
        assert_eq!(m.loaded_rows(), 10_000);
        for rank in [0u64, 332, 333, 334, 9_999] {
            assert_eq!(m.row(rank).unwrap().id, rank as i64);
        }
        assert!(m.row(10_000).is_none());
        assert_eq!(m.rank_at_time(5_000_500), 5_001);
    }

    #[test]
    fn regex_filters_per_column_reindex_the_rows() {
        let mut m = loaded(10_000, 1000);
        let mut f = ColumnFilters::default();
        f.patterns[2] = "^vsync".into();
        f.patterns[6] = "task[34]".into();
        m.set_filters(f).unwrap();
        wait(&m);
        // Even rows are vsync's punctual events; task3 or task4 when i % 5 is 3 or 4.
        let expected: Vec<i64> = (0..10_000)
            .filter(|i| i % 2 == 0 && matches!(i % 5, 3 | 4))
            .collect();
        assert_eq!(m.row_count(), expected.len() as u64);
        let got: Vec<i64> = m.rows(0..m.row_count()).iter().map(|r| r.id).collect();
        assert_eq!(got, expected);
        // Clearing the filters brings every row back.
        m.set_filters(ColumnFilters::default()).unwrap();
        assert_eq!(m.row_count(), 10_000);
    }

    #[test]
    fn a_bad_expression_names_its_column() {
        let mut m = loaded(10, 10);
        let mut f = ColumnFilters::default();
        f.patterns[4] = "(".into();
        let e = m.set_filters(f).unwrap_err();
        assert!(e.starts_with("Event Type:"), "{e}");
        assert_eq!(m.row_count(), 10);
    }

    #[test]
    fn a_filter_keeps_up_with_rows_that_arrive_after_it() {
        let names = names();
        let mut c = TableConsumer::new(names.clone());
        let mut m = TableModel::new(names);
        let all = events(2_000);
        c.consume(&all[..500]);
        m.absorb(&c.snapshot());
        let mut f = ColumnFilters::default();
        f.patterns[3] = "state".into();
        m.set_filters(f).unwrap();
        c.consume(&all[500..]);
        m.absorb(&c.snapshot());
        m.set_loading_done(true);
        wait(&m);
        assert_eq!(m.row_count(), 1_000);
        assert_eq!(m.row(999).unwrap().id, 1_999);
    }
}
