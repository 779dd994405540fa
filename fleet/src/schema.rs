//! The dataset's five tables as Arrow schemas: the contract `docs/FLEET.md` writes down (a test reads
//! that document and checks it against these).

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

/// Version of the dataset layout and schema, written in `socscope-fleet.json` and in every file's
/// footer (`socscope.dataset_version`). Raised when a column changes meaning or type.
pub const DATASET_VERSION: u32 = 2;

/// One of the dataset's tables: a directory `DATASET/<name>/board=…/date=…/<trace id>.parquet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per trace.
    Traces,
    /// One row per event.
    Events,
    /// One row per producer of each trace.
    Producers,
    /// One row per event type of each trace.
    Types,
    /// One row per loss record of each trace.
    Losses,
}

impl Table {
    /// Every table, in the order a trace's file set is written: `traces` last, so that a trace whose
    /// `traces` file is present has all its files.
    pub const ALL: [Table; 5] = [
        Table::Events,
        Table::Producers,
        Table::Types,
        Table::Losses,
        Table::Traces,
    ];

    /// The table's name (its directory, and its name in SQL).
    pub const fn name(self) -> &'static str {
        match self {
            Table::Traces => "traces",
            Table::Events => "events",
            Table::Producers => "producers",
            Table::Types => "types",
            Table::Losses => "losses",
        }
    }

    /// The table named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The columns stored in its files (the partition columns `board` and `date` come from the path).
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Traces => traces_schema(),
            Table::Events => events_schema(),
            Table::Producers => producers_schema(),
            Table::Types => types_schema(),
            Table::Losses => losses_schema(),
        }
    }
}

/// The Hive partition columns, in path order; both are strings.
pub const PARTITION_COLUMNS: [&str; 2] = ["board", "date"];

/// A dictionary-encoded string column: a trace repeats a few names millions of times.
pub fn dict_utf8() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A `MAP<STRING, value>` column as Parquet's MAP logical type expects it.
pub fn map_of(name: &str, value: DataType) -> Field {
    Field::new_map(
        name,
        "entries",
        Field::new("keys", DataType::Utf8, false),
        Field::new("values", value, true),
        false,
        false,
    )
}

/// The list of `(name, type)` parameters of an event type.
pub fn param_list_type() -> DataType {
    DataType::List(Arc::new(Field::new(
        "item",
        DataType::Struct(param_fields()),
        false,
    )))
}

/// The fields of one parameter definition.
pub fn param_fields() -> Fields {
    Fields::from(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("type", DataType::Utf8, false),
    ])
}

fn traces_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("source_file", DataType::Utf8, false),
        Field::new("source_catalog", DataType::Utf8, false),
        Field::new("source_bytes", DataType::Int64, false),
        Field::new("trace_type", DataType::Utf8, false),
        Field::new("soc", DataType::Utf8, false),
        Field::new("os", DataType::Utf8, false),
        Field::new("application", DataType::Utf8, false),
        Field::new("cpus", DataType::Int32, false),
        Field::new(
            "start",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("start_unix_ns", DataType::Int64, false),
        Field::new("t_min_ns", DataType::Int64, false),
        Field::new("t_max_ns", DataType::Int64, false),
        Field::new("duration_ns", DataType::Int64, false),
        Field::new("events", DataType::Int64, false),
        Field::new("lost_records", DataType::Int64, false),
        Field::new("loss_records", DataType::Int64, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("processed", DataType::Boolean, false),
        Field::new("description", DataType::Utf8, false),
        map_of("tags", DataType::Utf8),
        Field::new("schema_version", DataType::Int32, false),
        Field::new("fingerprint", DataType::Utf8, false),
    ]))
}

fn events_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", dict_utf8(), false),
        Field::new("event_id", DataType::Int64, false),
        Field::new("ts_ns", DataType::Int64, false),
        Field::new("time_unix_ns", DataType::Int64, false),
        Field::new("duration_ns", DataType::Int64, true),
        Field::new("category", dict_utf8(), false),
        Field::new("type_id", DataType::Int64, false),
        Field::new("type", dict_utf8(), false),
        Field::new("producer_id", DataType::Int64, false),
        Field::new("producer", dict_utf8(), false),
        Field::new("producer_kind", dict_utf8(), false),
        Field::new("producer_path", dict_utf8(), false),
        Field::new("cpu", DataType::Int32, true),
        Field::new("depth", DataType::Int32, true),
        Field::new("target_id", DataType::Int64, true),
        Field::new("target", dict_utf8(), true),
        Field::new("value", DataType::Float64, true),
        map_of("params_int", DataType::Int64),
        map_of("params_uint", DataType::UInt64),
        map_of("params_float", DataType::Float64),
        map_of("params_text", DataType::Utf8),
    ]))
}

fn producers_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("producer_id", DataType::Int64, false),
        Field::new("parent_id", DataType::Int64, true),
        Field::new("kind", DataType::Utf8, false),
        Field::new("local_id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
    ]))
}

fn types_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("type_id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("category", DataType::Utf8, false),
        Field::new("params", param_list_type(), false),
    ]))
}

fn losses_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("trace_id", DataType::Utf8, false),
        Field::new("cpu", DataType::Int32, true),
        Field::new("ts_ns", DataType::Int64, false),
        Field::new("time_unix_ns", DataType::Int64, false),
        Field::new("count", DataType::Int64, false),
        Field::new("seq_from", DataType::Int64, true),
        Field::new("seq_to", DataType::Int64, true),
        Field::new("reason", DataType::Utf8, false),
    ]))
}

/// How `docs/FLEET.md` names a column's type: `string`, `int64`, `map<string, int64>`, ...
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 => "string".into(),
        DataType::Dictionary(_, v) if **v == DataType::Utf8 => "string (dictionary)".into(),
        DataType::Int32 => "int32".into(),
        DataType::Int64 => "int64".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Boolean => "bool".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) => format!("timestamp(us, {tz})"),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(f) if f.len() == 2 => format!(
                "map<{}, {}>",
                type_name(f[0].data_type()),
                type_name(f[1].data_type())
            ),
            other => format!("{other:?}"),
        },
        DataType::List(item) => match item.data_type() {
            DataType::Struct(f) => {
                let inner: Vec<String> = f
                    .iter()
                    .map(|c| format!("{}: {}", c.name(), type_name(c.data_type())))
                    .collect();
                format!("list<struct<{}>>", inner.join(", "))
            }
            other => format!("list<{}>", type_name(other)),
        },
        other => format!("{other:?}"),
    }
}
