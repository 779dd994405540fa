//! Reading the dataset back without a query engine (the default build): a trace's files row group by row
//! group, and the digest the round-trip checks compare with the store's (counts per type, producer and
//! CPU, first and last timestamps, and sampled events with every parameter).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, UInt64Type};
use arrow_array::{Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use socscope_tracedb::{EventKind, Filter, ParamValue, StoredEvent, TimeRange, TraceReader};

use crate::error::{FleetError, Result};
use crate::layout::{Contents, Dataset};
use crate::schema::Table;

/// Calls `f` on each batch of a Parquet file, reading one row group at a time.
pub fn for_each_batch(path: &Path, mut f: impl FnMut(&RecordBatch) -> Result<()>) -> Result<()> {
    let file = File::open(path).map_err(FleetError::io(path))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(FleetError::parquet(path))?
        .with_batch_size(64 * 1024)
        .build()
        .map_err(FleetError::parquet(path))?;
    for batch in reader {
        let batch = batch.map_err(FleetError::arrow(path))?;
        f(&batch)?;
    }
    Ok(())
}

/// One event as the round trip compares it: everything the store holds, names resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The store's event id.
    pub event_id: i64,
    /// Start, ns.
    pub ts: i64,
    /// End of a state or link.
    pub end: Option<i64>,
    /// Category name.
    pub category: String,
    /// Type name.
    pub type_name: String,
    /// Producer name.
    pub producer: String,
    /// CPU.
    pub cpu: Option<i32>,
    /// State depth.
    pub depth: Option<i32>,
    /// Link target producer id.
    pub target_id: Option<i64>,
    /// Variable value.
    pub value: Option<f64>,
    /// Every parameter, by name.
    pub params: BTreeMap<String, ParamValue>,
}

/// What the round trip compares for one trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceDigest {
    /// Events.
    pub events: u64,
    /// Events per type name.
    pub per_type: BTreeMap<String, u64>,
    /// Events per producer name.
    pub per_producer: BTreeMap<String, u64>,
    /// Events per CPU (`None`: no CPU).
    pub per_cpu: BTreeMap<Option<i32>, u64>,
    /// First and last timestamps.
    pub first_ts: Option<i64>,
    /// Last timestamp.
    pub last_ts: Option<i64>,
    /// Every `sample_every`-th event, in order.
    pub sample: Vec<EventRecord>,
}

impl TraceDigest {
    fn add(&mut self, e: EventRecord, index: u64, sample_every: u64) {
        self.events += 1;
        *self.per_type.entry(e.type_name.clone()).or_default() += 1;
        *self.per_producer.entry(e.producer.clone()).or_default() += 1;
        *self.per_cpu.entry(e.cpu).or_default() += 1;
        self.first_ts = Some(self.first_ts.map_or(e.ts, |f| f.min(e.ts)));
        self.last_ts = Some(self.last_ts.map_or(e.ts, |l| l.max(e.ts)));
        if index.is_multiple_of(sample_every.max(1)) {
            self.sample.push(e);
        }
    }
}

/// The digest of a trace as the store holds it.
pub fn store_digest(reader: &TraceReader, sample_every: u64) -> Result<TraceDigest> {
    let types: BTreeMap<u32, socscope_tracedb::EventType> = reader
        .event_types()?
        .into_iter()
        .map(|t| (t.id, t))
        .collect();
    let producers: BTreeMap<u32, String> = reader
        .producers()?
        .into_iter()
        .map(|p| (p.id, p.name))
        .collect();
    let mut d = TraceDigest::default();
    let mut iter = reader.events(TimeRange::all(), &Filter::all())?;
    let mut e = StoredEvent::default();
    let mut i = 0;
    while iter.next_into(&mut e)? {
        let ty = types.get(&e.type_id);
        let (end, depth, target_id, value) = match e.kind {
            EventKind::Punctual => (None, None, None, None),
            EventKind::State { end, depth } => (Some(end), Some(i32::from(depth)), None, None),
            EventKind::Link { end, target } => (Some(end), None, Some(i64::from(target)), None),
            EventKind::Variable { value } => (None, None, None, Some(value)),
        };
        let params = e
            .params
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let name = ty
                    .and_then(|t| t.params.get(k))
                    .map_or_else(|| format!("param{k}"), |p| p.name.clone());
                (name, v.clone())
            })
            .collect();
        let rec = EventRecord {
            event_id: e.id,
            ts: e.ts,
            end,
            category: e.category().name().to_owned(),
            type_name: ty.map_or_else(|| format!("type {}", e.type_id), |t| t.name.clone()),
            producer: producers
                .get(&e.producer)
                .cloned()
                .unwrap_or_else(|| format!("producer {}", e.producer)),
            cpu: e.cpu.map(i32::from),
            depth,
            target_id,
            value,
            params,
        };
        d.add(rec, i, sample_every);
        i += 1;
    }
    Ok(d)
}

fn strings_of(a: &dyn Array) -> Result<Vec<Option<String>>> {
    let cast = arrow_cast_to_strings(a)?;
    Ok((0..cast.len())
        .map(|i| (!cast.is_null(i)).then(|| cast.value(i).to_owned()))
        .collect())
}

/// A string or dictionary-of-strings column as plain strings.
fn arrow_cast_to_strings(a: &dyn Array) -> Result<StringArray> {
    match a.data_type() {
        DataType::Utf8 => Ok(a.as_string::<i32>().clone()),
        DataType::Dictionary(_, _) => {
            let d = a.as_dictionary::<Int32Type>();
            let values = d.values().as_string::<i32>();
            Ok(d.keys()
                .iter()
                .map(|k| k.map(|k| values.value(k as usize)))
                .collect())
        }
        other => Err(FleetError::Invalid {
            path: "dataset".into(),
            detail: format!("expected a string column, found {other}"),
        }),
    }
}

fn column<'a>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a dyn Array> {
    b.column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| FleetError::Invalid {
            path: path.to_path_buf(),
            detail: format!("no column {name}"),
        })
}

fn opt_i64(a: &dyn Array, i: usize) -> Option<i64> {
    let a = a.as_primitive::<Int64Type>();
    (!a.is_null(i)).then(|| a.value(i))
}

fn opt_i32(a: &dyn Array, i: usize) -> Option<i32> {
    let a = a.as_primitive::<Int32Type>();
    (!a.is_null(i)).then(|| a.value(i))
}

/// The parameters of row `i` from the four typed maps.
fn params_of(b: &RecordBatch, i: usize, path: &Path) -> Result<BTreeMap<String, ParamValue>> {
    let mut out = BTreeMap::new();
    for (col, kind) in [
        ("params_int", 0),
        ("params_uint", 1),
        ("params_float", 2),
        ("params_text", 3),
    ] {
        let m = column(b, col, path)?.as_map();
        let entries = m.value(i);
        let keys = entries.column(0).as_string::<i32>();
        let values = entries.column(1);
        for k in 0..entries.len() {
            let v = match kind {
                0 => ParamValue::Signed(values.as_primitive::<Int64Type>().value(k)),
                1 => ParamValue::Unsigned(values.as_primitive::<UInt64Type>().value(k)),
                2 => ParamValue::Float(values.as_primitive::<Float64Type>().value(k)),
                _ => ParamValue::String(values.as_string::<i32>().value(k).to_owned()),
            };
            out.insert(keys.value(k).to_owned(), v);
        }
    }
    Ok(out)
}

/// The digest of a trace as the dataset holds it. Unsigned parameters and addresses share the
/// `params_uint` map, so both read back as [`ParamValue::Unsigned`]; [`normalise`] maps the store's side
/// the same way before comparing.
pub fn dataset_digest(
    contents: &Contents,
    trace_id: &str,
    sample_every: u64,
) -> Result<TraceDigest> {
    let files = contents
        .files
        .get(trace_id)
        .ok_or_else(|| FleetError::Invalid {
            path: trace_id.into(),
            detail: "no such trace in the dataset".into(),
        })?;
    let mut d = TraceDigest::default();
    let mut index = 0u64;
    for (table, path) in files {
        if *table != Table::Events {
            continue;
        }
        for_each_batch(path, |b| {
            let ids = column(b, "event_id", path)?.as_primitive::<Int64Type>();
            let ts = column(b, "ts_ns", path)?.as_primitive::<Int64Type>();
            let duration = column(b, "duration_ns", path)?;
            let category = strings_of(column(b, "category", path)?)?;
            let ty = strings_of(column(b, "type", path)?)?;
            let producer = strings_of(column(b, "producer", path)?)?;
            let cpu = column(b, "cpu", path)?;
            let depth = column(b, "depth", path)?;
            let target = column(b, "target_id", path)?;
            let value = column(b, "value", path)?.as_primitive::<Float64Type>();
            for i in 0..b.num_rows() {
                let rec = EventRecord {
                    event_id: ids.value(i),
                    ts: ts.value(i),
                    end: opt_i64(duration, i).map(|d| ts.value(i) + d),
                    category: category[i].clone().unwrap_or_default(),
                    type_name: ty[i].clone().unwrap_or_default(),
                    producer: producer[i].clone().unwrap_or_default(),
                    cpu: opt_i32(cpu, i),
                    depth: opt_i32(depth, i),
                    target_id: opt_i64(target, i),
                    value: (!value.is_null(i)).then(|| value.value(i)),
                    params: params_of(b, i, path)?,
                };
                d.add(rec, index, sample_every);
                index += 1;
            }
            Ok(())
        })?;
    }
    Ok(d)
}

/// The store's digest with addresses as unsigned values (as the dataset keeps them; the `types` table
/// says which parameters are addresses).
pub fn normalise(mut d: TraceDigest) -> TraceDigest {
    for e in &mut d.sample {
        for v in e.params.values_mut() {
            if let ParamValue::Address(x) = v {
                *v = ParamValue::Unsigned(*x);
            }
        }
    }
    d
}

/// Every trace id of a dataset with a complete file set.
pub fn trace_ids(ds: &Dataset) -> Result<Vec<String>> {
    let c = ds.contents()?;
    Ok(c.files
        .keys()
        .filter(|id| c.traces_file(id).is_some())
        .cloned()
        .collect())
}
