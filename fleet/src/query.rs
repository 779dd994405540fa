//! SQL over the dataset in process with Apache DataFusion: the five tables registered as Hive-partitioned
//! listing tables (partitions pruned on `board`/`date`, row groups on their statistics), results streamed
//! batch by batch under a bounded memory pool.

use std::sync::Arc;

use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::physical_optimizer::optimizer::PhysicalOptimizer;
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;

use crate::error::{FleetError, Result};
use crate::implied::DropImpliedFilters;
use crate::layout::Dataset;
use crate::schema::{PARTITION_COLUMNS, Table};

/// Memory the engine may hold for operators (sorts and aggregations spill to disk beyond it): with the
/// batches in flight and the process's own, `fleet sql` stays under 256 MB.
pub const MEMORY_LIMIT: usize = 160 << 20;

/// The columns of `table` as the engine reads them: the files' dictionary-encoded strings as string
/// views. DataFusion groups dictionary columns through its generic row format, and string views with its
/// own hash tables: `GROUP BY board, type` over a simulated night runs 1.3–1.8× faster so, and the files
/// are unchanged (the Parquet reader builds the views from the dictionary pages).
fn query_schema(table: Table) -> SchemaRef {
    let fields: Vec<Field> = table
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, value) if **value == DataType::Utf8 => {
                f.as_ref().clone().with_data_type(DataType::Utf8View)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The embedded engine over one dataset.
pub struct Engine {
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
}

fn query_error(e: impl std::fmt::Display) -> FleetError {
    FleetError::Query(clean_message(&e.to_string()))
}

/// DataFusion's messages carry a backtrace hint and nested prefixes; one line is what a user reads.
fn clean_message(text: &str) -> String {
    let first = text.lines().next().unwrap_or(text).trim();
    first
        .trim_end_matches('.')
        .replace("Error during planning: ", "")
        .replace("Schema error: ", "")
        .replace("SQL error: ", "SQL: ")
}

impl Engine {
    /// Registers the tables of `dataset` (empty tables for those without files yet).
    pub fn open(dataset: &Dataset) -> Result<Self> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .map_err(FleetError::io(dataset.root()))?;
        let env = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(MEMORY_LIMIT)))
            .build_arc()
            .map_err(query_error)?;
        let mut config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_batch_size(8192)
            .with_information_schema(true);
        // Row groups and pages are skipped by their statistics and index (events are in time order, so
        // a time range reads only its pages). Filters are not pushed into the decoder: on this dataset
        // they keep most rows (`category = 'state'` keeps 88 %, a board's hour all of it), and building
        // the row selections cost 10–20 % more CPU than filtering decoded batches (measured on
        // `bench fleet`'s queries).
        let opts = config.options_mut();
        opts.execution.parquet.pushdown_filters = false;
        opts.execution.parquet.enable_page_index = true;
        // Ours first: projection pushdown, later in DataFusion's list, then stops decoding the columns
        // that only a dropped filter term read.
        let mut rules = PhysicalOptimizer::new().rules;
        rules.insert(0, Arc::new(DropImpliedFilters));
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(env)
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .build();
        let ctx = SessionContext::new_with_state(state);
        for table in Table::ALL {
            let dir = dataset.table_dir(table);
            std::fs::create_dir_all(&dir).map_err(FleetError::io(&dir))?;
            let url = ListingTableUrl::parse(format!("{}/", dir.display())).map_err(query_error)?;
            let options = ListingOptions::new(Arc::new(ParquetFormat::default()))
                .with_file_extension(".parquet")
                .with_table_partition_cols(
                    PARTITION_COLUMNS
                        .iter()
                        // As string views: a batch's partition value is then one short view per
                        // row, which GROUP BY board compares inline.
                        .map(|c| ((*c).to_owned(), DataType::Utf8View))
                        .collect(),
                );
            let config = ListingTableConfig::new(url)
                .with_listing_options(options)
                .with_schema(query_schema(table));
            let provider = ListingTable::try_new(config).map_err(query_error)?;
            ctx.register_table(table.name(), Arc::new(provider))
                .map_err(query_error)?;
        }
        Ok(Self { ctx, runtime })
    }

    /// Runs `sql` and hands each result batch to `each` as it comes; returns the result's schema.
    pub fn query(
        &self,
        sql: &str,
        mut each: impl FnMut(&RecordBatch) -> Result<()>,
    ) -> Result<SchemaRef> {
        self.runtime.block_on(async {
            let df = self.ctx.sql(sql).await.map_err(query_error)?;
            let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
            let mut stream = df.execute_stream().await.map_err(query_error)?;
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(query_error)?;
                each(&batch)?;
            }
            Ok(schema)
        })
    }

    /// Runs `sql` and returns every row, each cell as JSON (for results of a few thousand rows).
    pub fn rows(&self, sql: &str) -> Result<Rows> {
        let mut rows = Vec::new();
        let schema = self.query(sql, |b| {
            for r in 0..b.num_rows() {
                rows.push(
                    (0..b.num_columns())
                        .map(|c| cell_json(b.column(c).as_ref(), r))
                        .collect(),
                );
            }
            Ok(())
        })?;
        Ok(Rows {
            columns: schema.fields().iter().map(|f| f.name().clone()).collect(),
            rows,
        })
    }
}

/// A small result: column names and rows of JSON values.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, one value per column.
    pub rows: Vec<Vec<serde_json::Value>>,
}

impl Rows {
    /// The index of column `name`.
    pub fn col(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| FleetError::Query(format!("the query returned no column {name}")))
    }
}

/// One cell as JSON: numbers as numbers, strings as strings, null as null, nested values as text.
pub fn cell_json(a: &dyn Array, row: usize) -> serde_json::Value {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::*;
    use serde_json::Value;
    if a.is_null(row) {
        return Value::Null;
    }
    match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(row).into(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(row).into(),
        DataType::Float32 => f64::from(a.as_primitive::<Float32Type>().value(row)).into(),
        DataType::Float64 => {
            let v = a.as_primitive::<Float64Type>().value(row);
            serde_json::Number::from_f64(v)
                .map_or_else(|| Value::String(v.to_string()), Value::Number)
        }
        DataType::Boolean => a.as_boolean().value(row).into(),
        DataType::Utf8 => a.as_string::<i32>().value(row).into(),
        DataType::LargeUtf8 => a.as_string::<i64>().value(row).into(),
        DataType::Utf8View => a.as_string_view().value(row).into(),
        DataType::Dictionary(_, _) => Value::String(cell_text(a, row)),
        _ => Value::String(cell_text(a, row)),
    }
}

/// One cell as text, as Arrow's display formats it (empty for null).
pub fn cell_text(a: &dyn Array, row: usize) -> String {
    let options = FormatOptions::default().with_null("");
    match ArrayFormatter::try_new(a, &options) {
        Ok(f) => f.value(row).to_string(),
        Err(e) => format!("<{e}>"),
    }
}
