//! One trace's file set: its events streamed chunk by chunk from the store into Parquet row groups in
//! time order (memory bounded whatever the trace's length), and its `traces`, `producers`, `types` and
//! `losses` rows. Files are written under temporary names and renamed into place, `traces` last.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    Float64Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
    UInt64Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use socscope_tracedb::{
    EventCategory, EventKind, EventType, Filter, INTERRUPTED_PARAM, ParamValue, Producer,
    SCHEMA_VERSION, StoredEvent, TimeRange, TraceInfo, TraceReader,
};

use crate::error::{FleetError, Result};
use crate::layout::Placement;
use crate::schema::{DATASET_VERSION, Table, param_fields};

/// Rows per Arrow batch handed to the Parquet writer.
const BATCH_ROWS: usize = 64 * 1024;
/// Rows per Parquet row group (about 13 s of a board at 20 k events/s). Engines split a scan among their
/// threads by row group: a board's 5-minute capture in 1 048 576-row groups made 5 of them, shared 3 to 2
/// on two cores; in groups of 262 144 it makes 19, and a time window skips a finer share of a night by
/// the groups' statistics. Compression is per page, so the size barely moves, and the writer buffers less.
pub const ROW_GROUP_ROWS: usize = 1 << 18;
/// zstd level of the data pages (3: zstd's default, fast to write, as small as level 9 within a few %;
/// level 1 writes 10 % faster and 7 % bigger on a simulated night).
const ZSTD_LEVEL: i32 = 3;
/// Columns that grow along the file (events in time order): stored as differences (DELTA_BINARY_PACKED)
/// instead of a dictionary that overflows into plain values. On a simulated fleet this takes the events
/// table from 10.3 to 7.3 bytes per event and writes it 1.5× faster; `duration_ns` does not grow and
/// stays smaller plain (1.1 bytes per event against 2.6 delta-coded).
const DELTA_COLUMNS: [&str; 3] = ["event_id", "ts_ns", "time_unix_ns"];

/// Footer key naming the trace of a file.
pub const META_TRACE_ID: &str = "socscope.trace_id";
/// Footer key holding the trace's fingerprint (see [`fingerprint`]).
pub const META_FINGERPRINT: &str = "socscope.fingerprint";
/// Footer key holding the dataset version.
pub const META_VERSION: &str = "socscope.dataset_version";
/// Footer key holding the trace's source catalog directory.
pub const META_CATALOG: &str = "socscope.source_catalog";

/// Where a trace comes from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The trace file.
    pub path: PathBuf,
    /// Its catalog directory (canonical).
    pub catalog: PathBuf,
    /// Its id in the dataset: the file's name without `.db`.
    pub trace_id: String,
}

/// What writing one trace's file set produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Events written.
    pub events: u64,
    /// Bytes of the five files.
    pub bytes: u64,
}

/// A trace's state as the `traces` table names it.
pub fn trace_state(info: &TraceInfo) -> &'static str {
    if !info.finished {
        "live"
    } else if info.meta.params.iter().any(|(n, _)| n == INTERRUPTED_PARAM) {
        "interrupted"
    } else if info.complete {
        "complete"
    } else {
        "incomplete"
    }
}

/// What identifies a trace's content: a second sync writes a trace again only when this changed (its
/// events, time range, losses, state, schema, or the chunks that hold its events).
pub fn fingerprint(reader: &TraceReader, info: &TraceInfo) -> Result<String> {
    let streams = reader.streams()?;
    let chunks: i64 = streams.iter().map(|s| s.chunk_count).sum();
    let losses = reader.losses()?;
    let lost: u64 = losses.iter().map(|l| l.count).sum();
    Ok(format!(
        "v{DATASET_VERSION}.s{}.e{}.t{}..{}.c{chunks}.l{}x{lost}.{}.p{}",
        schema_version(reader),
        info.event_count,
        info.t_min,
        info.t_max,
        losses.len(),
        trace_state(info),
        info.meta.params.len(),
    ))
}

fn props(source: &Source, fp: &str, rows: usize) -> WriterProperties {
    let kv = vec![
        KeyValue::new(META_TRACE_ID.into(), source.trace_id.clone()),
        KeyValue::new(META_FINGERPRINT.into(), fp.to_owned()),
        KeyValue::new(META_VERSION.into(), DATASET_VERSION.to_string()),
        KeyValue::new(
            META_CATALOG.into(),
            source.catalog.to_string_lossy().into_owned(),
        ),
    ];
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default(),
        ))
        .set_max_row_group_row_count(Some(rows))
        .set_key_value_metadata(Some(kv));
    for column in DELTA_COLUMNS {
        let path = ColumnPath::from(column);
        b = b
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    b.build()
}

/// Writes `batches` of `table` to `tmp` (a new file) and returns its size.
struct TableFile {
    writer: ArrowWriter<BufWriter<File>>,
    tmp: PathBuf,
}

impl TableFile {
    fn create(tmp: PathBuf, table: Table, props: WriterProperties) -> Result<Self> {
        if let Some(dir) = tmp.parent() {
            std::fs::create_dir_all(dir).map_err(FleetError::io(dir))?;
        }
        let file = File::create(&tmp).map_err(FleetError::io(&tmp))?;
        // Without the embedded Arrow schema, a reader takes each column's type from its Parquet
        // logical type: strings stay strings, and DataFusion decodes the dictionary pages straight
        // into string views instead of building dictionary arrays it then casts row by row (a quarter
        // of `GROUP BY board, type`'s time). Spark, DuckDB and Trino never read that schema.
        let options = ArrowWriterOptions::new()
            .with_properties(props)
            .with_skip_arrow_metadata(true);
        let writer = ArrowWriter::try_new_with_options(
            BufWriter::with_capacity(1 << 20, file),
            table.schema(),
            options,
        )
        .map_err(FleetError::parquet(&tmp))?;
        Ok(Self { writer, tmp })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer
            .write(batch)
            .map_err(FleetError::parquet(&self.tmp))
    }

    /// Closes the file (flushed and synced) and returns its path and size.
    fn finish(self) -> Result<(PathBuf, u64)> {
        let tmp = self.tmp;
        let buf = self
            .writer
            .into_inner()
            .map_err(FleetError::parquet(&tmp))?;
        let file = buf
            .into_inner()
            .map_err(|e| FleetError::io(&tmp)(e.into_error()))?;
        file.sync_all().map_err(FleetError::io(&tmp))?;
        let len = file.metadata().map_err(FleetError::io(&tmp))?.len();
        Ok((tmp, len))
    }
}

/// Writes the file set of one trace into its partition of `root` and returns what it wrote. `placement`
/// names the files; a previous file set of the trace at the same place is replaced (by rename), one
/// elsewhere is the caller's to remove.
pub fn write_trace(
    reader: &TraceReader,
    info: &TraceInfo,
    fp: &str,
    source: &Source,
    placement: &Placement,
    root: &Path,
    on_events: &mut dyn FnMut(u64),
) -> Result<Written> {
    let types = reader.event_types()?;
    let producers = reader.producers()?;
    let mut written = Written::default();
    let mut done: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = (|| -> Result<()> {
        for table in Table::ALL {
            let tmp = placement.temp_file(root, table);
            let rows = if table == Table::Events {
                ROW_GROUP_ROWS
            } else {
                1 << 16
            };
            let mut f = TableFile::create(tmp, table, props(source, fp, rows))?;
            match table {
                Table::Events => {
                    written.events =
                        write_events(reader, info, source, &types, &producers, &mut f, on_events)?;
                }
                Table::Producers => f.write(&producers_batch(source, &producers, &f.tmp)?)?,
                Table::Types => f.write(&types_batch(source, &types, &f.tmp)?)?,
                Table::Losses => f.write(&losses_batch(reader, info, source, &f.tmp)?)?,
                Table::Traces => f.write(&traces_batch(reader, info, fp, source, &f.tmp)?)?,
            }
            let (tmp, len) = f.finish()?;
            written.bytes += len;
            done.push((tmp, placement.file(root, table)));
        }
        // All five are complete on disk: move them in, `traces` last (a trace whose `traces` file is
        // present has its whole file set).
        for (tmp, dest) in &done {
            std::fs::rename(tmp, dest).map_err(FleetError::io(dest))?;
        }
        Ok(())
    })();
    if result.is_err() {
        for (tmp, _) in &done {
            let _ = std::fs::remove_file(tmp);
        }
        for table in Table::ALL {
            let _ = std::fs::remove_file(placement.temp_file(root, table));
        }
    }
    result.map(|()| written)
}

/// The path of each producer from the root of the hierarchy, names joined by `/`.
fn producer_paths(producers: &[Producer]) -> HashMap<u32, String> {
    let by_id: HashMap<u32, &Producer> = producers.iter().map(|p| (p.id, p)).collect();
    let mut out = HashMap::with_capacity(producers.len());
    for p in producers {
        let mut names = vec![p.name.as_str()];
        let mut cur = p.parent;
        // A cycle in a damaged file must not loop forever: a path is at most as deep as the tree.
        while let Some(id) = cur {
            if names.len() > producers.len() {
                break;
            }
            match by_id.get(&id) {
                Some(parent) => {
                    names.push(parent.name.as_str());
                    cur = parent.parent;
                }
                None => break,
            }
        }
        names.reverse();
        out.insert(p.id, names.join("/"));
    }
    out
}

/// Dictionary values plus the index of each id in them, grown when an event names an id the trace's
/// tables do not list (kept, named by its id, rather than dropped).
struct Names {
    index: HashMap<u32, i32>,
    names: Vec<String>,
    kinds: Vec<String>,
    paths: Vec<String>,
}

impl Names {
    fn producers(producers: &[Producer]) -> Self {
        let paths = producer_paths(producers);
        let mut n = Names {
            index: HashMap::new(),
            names: Vec::new(),
            kinds: Vec::new(),
            paths: Vec::new(),
        };
        for p in producers {
            n.index.insert(p.id, n.names.len() as i32);
            n.names.push(p.name.clone());
            n.kinds.push(p.kind.name().to_owned());
            n.paths
                .push(paths.get(&p.id).cloned().unwrap_or_else(|| p.name.clone()));
        }
        n
    }

    fn types(types: &[EventType]) -> Self {
        let mut n = Names {
            index: HashMap::new(),
            names: Vec::new(),
            kinds: Vec::new(),
            paths: Vec::new(),
        };
        for t in types {
            n.index.insert(t.id, n.names.len() as i32);
            n.names.push(t.name.clone());
        }
        n
    }

    fn key(&mut self, id: u32, what: &str) -> i32 {
        if let Some(&k) = self.index.get(&id) {
            return k;
        }
        let k = self.names.len() as i32;
        self.index.insert(id, k);
        let name = format!("{what} {id}");
        self.names.push(name.clone());
        self.kinds.push("other".into());
        self.paths.push(name);
        k
    }
}

fn dict(keys: Vec<i32>, values: &[String]) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(values));
    Arc::new(DictionaryArray::<Int32Type>::new(
        Int32Array::from(keys),
        values,
    ))
}

fn dict_opt(keys: Vec<Option<i32>>, values: &[String]) -> ArrayRef {
    let values: ArrayRef = Arc::new(StringArray::from_iter_values(values));
    Arc::new(DictionaryArray::<Int32Type>::new(
        Int32Array::from(keys),
        values,
    ))
}

/// The columns of one batch of events, filled event by event.
#[derive(Default)]
struct EventRows {
    event_id: Vec<i64>,
    ts: Vec<i64>,
    time_unix: Vec<i64>,
    duration: Vec<Option<i64>>,
    category: Vec<i32>,
    type_id: Vec<i64>,
    type_key: Vec<i32>,
    producer_id: Vec<i64>,
    producer_key: Vec<i32>,
    cpu: Vec<Option<i32>>,
    depth: Vec<Option<i32>>,
    target_id: Vec<Option<i64>>,
    target_key: Vec<Option<i32>>,
    value: Vec<Option<f64>>,
    params_int: Option<MapBuilder<StringBuilder, Int64Builder>>,
    params_uint: Option<MapBuilder<StringBuilder, UInt64Builder>>,
    params_float: Option<MapBuilder<StringBuilder, Float64Builder>>,
    params_text: Option<MapBuilder<StringBuilder, StringBuilder>>,
}

fn map_builder<V: arrow_array::builder::ArrayBuilder>(values: V) -> MapBuilder<StringBuilder, V> {
    MapBuilder::new(None, StringBuilder::new(), values)
}

impl EventRows {
    fn new() -> Self {
        Self {
            params_int: Some(map_builder(Int64Builder::new())),
            params_uint: Some(map_builder(UInt64Builder::new())),
            params_float: Some(map_builder(Float64Builder::new())),
            params_text: Some(map_builder(StringBuilder::new())),
            ..Self::default()
        }
    }

    fn len(&self) -> usize {
        self.ts.len()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        e: &StoredEvent,
        start_unix_ns: i64,
        type_key: i32,
        producer_key: i32,
        target_key: Option<i32>,
        param_names: &[String],
    ) -> std::result::Result<(), arrow_schema::ArrowError> {
        self.event_id.push(e.id);
        self.ts.push(e.ts);
        self.time_unix.push(start_unix_ns.saturating_add(e.ts));
        let (end, depth, target, value) = match e.kind {
            EventKind::Punctual => (None, None, None, None),
            EventKind::State { end, depth } => (Some(end), Some(i32::from(depth)), None, None),
            EventKind::Link { end, target } => (Some(end), None, Some(i64::from(target)), None),
            EventKind::Variable { value } => (None, None, None, Some(value)),
        };
        self.duration.push(end.map(|x| x.saturating_sub(e.ts)));
        self.depth.push(depth);
        self.target_id.push(target);
        self.target_key.push(target_key);
        self.value.push(value);
        self.category.push(i32::from(e.category().code()));
        self.type_id.push(i64::from(e.type_id));
        self.type_key.push(type_key);
        self.producer_id.push(i64::from(e.producer));
        self.producer_key.push(producer_key);
        self.cpu.push(e.cpu.map(i32::from));
        let (pi, pu, pf, pt) = match (
            self.params_int.as_mut(),
            self.params_uint.as_mut(),
            self.params_float.as_mut(),
            self.params_text.as_mut(),
        ) {
            (Some(a), Some(b), Some(c), Some(d)) => (a, b, c, d),
            _ => {
                return Err(arrow_schema::ArrowError::InvalidArgumentError(
                    "parameter builders already taken".into(),
                ));
            }
        };
        for (i, v) in e.params.iter().enumerate() {
            // A value beyond the type's parameter list (a damaged file) keeps a name of its own.
            let fallback;
            let name = match param_names.get(i) {
                Some(n) => n.as_str(),
                None => {
                    fallback = format!("param{i}");
                    fallback.as_str()
                }
            };
            match v {
                ParamValue::Signed(x) => {
                    pi.keys().append_value(name);
                    pi.values().append_value(*x);
                }
                ParamValue::Unsigned(x) | ParamValue::Address(x) => {
                    pu.keys().append_value(name);
                    pu.values().append_value(*x);
                }
                ParamValue::Float(x) => {
                    pf.keys().append_value(name);
                    pf.values().append_value(*x);
                }
                ParamValue::String(x) => {
                    pt.keys().append_value(name);
                    pt.values().append_value(x);
                }
            }
        }
        pi.append(true)?;
        pu.append(true)?;
        pf.append(true)?;
        pt.append(true)?;
        Ok(())
    }

    fn take_batch(
        &mut self,
        trace_id: &[String],
        types: &Names,
        producers: &Names,
    ) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
        let n = self.len();
        let r = std::mem::replace(self, EventRows::new());
        let categories: Vec<String> = EventCategory::ALL
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        let (Some(mut pi), Some(mut pu), Some(mut pf), Some(mut pt)) =
            (r.params_int, r.params_uint, r.params_float, r.params_text)
        else {
            return Err(arrow_schema::ArrowError::InvalidArgumentError(
                "parameter builders already taken".into(),
            ));
        };
        let columns: Vec<ArrayRef> = vec![
            dict(vec![0; n], trace_id),
            Arc::new(Int64Array::from(r.event_id)),
            Arc::new(Int64Array::from(r.ts)),
            Arc::new(Int64Array::from(r.time_unix)),
            Arc::new(Int64Array::from(r.duration)),
            dict(r.category, &categories),
            Arc::new(Int64Array::from(r.type_id)),
            dict(r.type_key, &types.names),
            Arc::new(Int64Array::from(r.producer_id)),
            dict(r.producer_key.clone(), &producers.names),
            dict(r.producer_key.clone(), &producers.kinds),
            dict(r.producer_key, &producers.paths),
            Arc::new(Int32Array::from(r.cpu)),
            Arc::new(Int32Array::from(r.depth)),
            Arc::new(Int64Array::from(r.target_id)),
            dict_opt(r.target_key, &producers.names),
            Arc::new(Float64Array::from(r.value)),
            Arc::new(pi.finish()),
            Arc::new(pu.finish()),
            Arc::new(pf.finish()),
            Arc::new(pt.finish()),
        ];
        RecordBatch::try_new(Table::Events.schema(), columns)
    }
}

/// Streams every event of the trace, in time order, into `f`; returns how many.
fn write_events(
    reader: &TraceReader,
    info: &TraceInfo,
    source: &Source,
    types: &[EventType],
    producers: &[Producer],
    f: &mut TableFile,
    on_events: &mut dyn FnMut(u64),
) -> Result<u64> {
    let path = reader.path().to_path_buf();
    let mut type_names = Names::types(types);
    let mut producer_names = Names::producers(producers);
    let params: HashMap<u32, Vec<String>> = types
        .iter()
        .map(|t| (t.id, t.params.iter().map(|p| p.name.clone()).collect()))
        .collect();
    let no_params: Vec<String> = Vec::new();
    let trace_id = [source.trace_id.clone()];
    let mut rows = EventRows::new();
    let mut iter = reader.events(TimeRange::all(), &Filter::all())?;
    let mut e = StoredEvent::default();
    let mut count = 0u64;
    while iter.next_into(&mut e)? {
        let tk = type_names.key(e.type_id, "type");
        let pk = producer_names.key(e.producer, "producer");
        let target = match e.kind {
            EventKind::Link { target, .. } => Some(producer_names.key(target, "producer")),
            _ => None,
        };
        let names = params.get(&e.type_id).unwrap_or(&no_params);
        rows.push(&e, info.meta.start_unix_ns, tk, pk, target, names)
            .map_err(FleetError::arrow(&path))?;
        count += 1;
        if rows.len() >= BATCH_ROWS {
            let batch = rows
                .take_batch(&trace_id, &type_names, &producer_names)
                .map_err(FleetError::arrow(&f.tmp))?;
            f.write(&batch)?;
            on_events(count);
        }
    }
    if rows.len() > 0 || count == 0 {
        let batch = rows
            .take_batch(&trace_id, &type_names, &producer_names)
            .map_err(FleetError::arrow(&f.tmp))?;
        f.write(&batch)?;
    }
    Ok(count)
}

fn strings(v: impl IntoIterator<Item = String>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

fn repeat(s: &str, n: usize) -> ArrayRef {
    strings(std::iter::repeat_n(s.to_owned(), n))
}

fn producers_batch(source: &Source, producers: &[Producer], path: &Path) -> Result<RecordBatch> {
    let paths = producer_paths(producers);
    let n = producers.len();
    let columns: Vec<ArrayRef> = vec![
        repeat(&source.trace_id, n),
        Arc::new(Int64Array::from_iter_values(
            producers.iter().map(|p| i64::from(p.id)),
        )),
        Arc::new(Int64Array::from_iter(
            producers.iter().map(|p| p.parent.map(i64::from)),
        )),
        strings(producers.iter().map(|p| p.kind.name().to_owned())),
        Arc::new(Int64Array::from_iter_values(
            producers.iter().map(|p| p.local_id),
        )),
        strings(producers.iter().map(|p| p.name.clone())),
        strings(
            producers
                .iter()
                .map(|p| paths.get(&p.id).cloned().unwrap_or_default()),
        ),
    ];
    RecordBatch::try_new(Table::Producers.schema(), columns).map_err(FleetError::arrow(path))
}

fn types_batch(source: &Source, types: &[EventType], path: &Path) -> Result<RecordBatch> {
    let n = types.len();
    let mut params = ListBuilder::new(StructBuilder::from_fields(param_fields(), 0)).with_field(
        Arc::new(arrow_schema::Field::new(
            "item",
            arrow_schema::DataType::Struct(param_fields()),
            false,
        )),
    );
    for t in types {
        let s = params.values();
        for p in &t.params {
            if let Some(b) = s.field_builder::<StringBuilder>(0) {
                b.append_value(&p.name);
            }
            if let Some(b) = s.field_builder::<StringBuilder>(1) {
                b.append_value(p.ty.name());
            }
            s.append(true);
        }
        params.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        repeat(&source.trace_id, n),
        Arc::new(Int64Array::from_iter_values(
            types.iter().map(|t| i64::from(t.id)),
        )),
        strings(types.iter().map(|t| t.name.clone())),
        strings(types.iter().map(|t| t.category.name().to_owned())),
        Arc::new(params.finish()),
    ];
    RecordBatch::try_new(Table::Types.schema(), columns).map_err(FleetError::arrow(path))
}

fn losses_batch(
    reader: &TraceReader,
    info: &TraceInfo,
    source: &Source,
    path: &Path,
) -> Result<RecordBatch> {
    let losses = reader.losses()?;
    let n = losses.len();
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let columns: Vec<ArrayRef> = vec![
        repeat(&source.trace_id, n),
        Arc::new(Int32Array::from_iter(
            losses.iter().map(|l| l.cpu.map(i32::from)),
        )),
        Arc::new(Int64Array::from_iter_values(losses.iter().map(|l| l.ts))),
        Arc::new(Int64Array::from_iter_values(
            losses
                .iter()
                .map(|l| info.meta.start_unix_ns.saturating_add(l.ts)),
        )),
        Arc::new(Int64Array::from_iter_values(
            losses.iter().map(|l| as_i64(l.count)),
        )),
        Arc::new(Int64Array::from_iter(
            losses.iter().map(|l| l.seq_from.map(as_i64)),
        )),
        Arc::new(Int64Array::from_iter(
            losses.iter().map(|l| l.seq_to.map(as_i64)),
        )),
        strings(losses.iter().map(|l| l.reason.clone())),
    ];
    RecordBatch::try_new(Table::Losses.schema(), columns).map_err(FleetError::arrow(path))
}

/// The store schema version of the file (`PRAGMA user_version`): a file of an older version that this
/// build still reads keeps its own number.
fn schema_version(reader: &TraceReader) -> i32 {
    reader
        .connection()
        .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
        .map_or(SCHEMA_VERSION as i32, |v| v as i32)
}

fn traces_batch(
    reader: &TraceReader,
    info: &TraceInfo,
    fp: &str,
    source: &Source,
    path: &Path,
) -> Result<RecordBatch> {
    let m = &info.meta;
    let losses = reader.losses()?;
    let lost: u64 = losses.iter().map(|l| l.count).sum();
    let source_bytes = std::fs::metadata(&source.path)
        .map(|md| md.len())
        .unwrap_or(0);
    let file_name = source
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for (k, v) in &m.params {
        tags.keys().append_value(k);
        tags.values().append_value(v.to_string());
    }
    tags.append(true).map_err(FleetError::arrow(path))?;
    let i = |v: i64| -> ArrayRef { Arc::new(Int64Array::from(vec![v])) };
    let s = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v])) };
    let cpus = i32::try_from(m.cpus).unwrap_or(i32::MAX);
    let columns: Vec<ArrayRef> = vec![
        s(&source.trace_id),
        s(&file_name),
        s(&source.catalog.to_string_lossy()),
        i(i64::try_from(source_bytes).unwrap_or(i64::MAX)),
        s(&m.trace_type),
        s(&m.soc),
        s(&m.os),
        s(&m.application),
        Arc::new(Int32Array::from(vec![cpus])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![m.start_unix_ns.div_euclid(1000)])
                .with_timezone("UTC"),
        ),
        i(m.start_unix_ns),
        i(info.t_min),
        i(info.t_max),
        i(info.duration()),
        i(i64::try_from(info.event_count).unwrap_or(i64::MAX)),
        i(i64::try_from(lost).unwrap_or(i64::MAX)),
        i(losses.len() as i64),
        s(trace_state(info)),
        Arc::new(BooleanArray::from(vec![m.processed])),
        s(&m.description),
        Arc::new(tags.finish()),
        Arc::new(Int32Array::from(vec![schema_version(reader)])),
        s(fp),
    ];
    RecordBatch::try_new(Table::Traces.schema(), columns).map_err(FleetError::arrow(path))
}

#[cfg(test)]
mod tests {
    use arrow_schema::DataType;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    #[test]
    fn files_type_their_columns_by_parquet_logical_types_alone() {
        let dir = tempfile::tempdir().unwrap();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![KeyValue::new(
                META_TRACE_ID.into(),
                "t".to_owned(),
            )]))
            .build();
        let mut file =
            TableFile::create(dir.path().join("e.parquet"), Table::Events, props).unwrap();
        file.write(&RecordBatch::new_empty(Table::Events.schema()))
            .unwrap();
        let (path, _) = file.finish().unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let keys: Vec<&str> = reader
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .map(|kv| kv.iter().map(|e| e.key.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(keys, [META_TRACE_ID], "only our own keys, no ARROW:schema");
        // A dictionary column of the writer's schema reads back as a plain string column.
        assert!(matches!(
            Table::Events
                .schema()
                .field_with_name("type")
                .unwrap()
                .data_type(),
            DataType::Dictionary(..)
        ));
        assert_eq!(
            reader.schema().field_with_name("type").unwrap().data_type(),
            &DataType::Utf8
        );
    }
}
