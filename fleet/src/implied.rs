//! A physical optimizer rule: filter terms that every file of a scan satisfies, by its footer's
//! statistics, are not evaluated row by row.
//!
//! A rig's question is usually a time window over whole captures ("one board, last night"): the window
//! holds every row of the files the partitions left, yet DataFusion 55 decodes the time column and
//! compares each row, even when it marks every row group "fully matched" for pruning. Here a term
//! `column <op> literal` (`=`, `<`, `<=`, `>`, `>=`, either side) is dropped from a `FilterExec` that
//! reads a file scan directly when, for every file of the scan, the column's minimum and maximum are
//! exact, it holds no null, and both bounds satisfy the term (the terms are monotone, so every value
//! between them does). The scan no longer decodes a column only such a term read. Any file without
//! exact statistics keeps the term; the results are the same rows either way.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::projection::ProjectionExpr;
use datafusion::physical_expr::utils::{conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::projection::ProjectionExec;

/// The rule; run it before DataFusion's own (projection pushdown then drops the columns it freed).
#[derive(Debug, Default)]
pub struct DropImpliedFilters;

impl PhysicalOptimizerRule for DropImpliedFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            match without_implied_terms(filter)? {
                Some(plan) => Ok(Transformed::yes(plan)),
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "socscope_drop_implied_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The filter without the terms its scan's statistics prove, or `None` when it keeps them all.
fn without_implied_terms(filter: &FilterExec) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    let input = filter.input();
    let Some(scan) = input
        .downcast_ref::<DataSourceExec>()
        .and_then(|s| s.data_source().downcast_ref::<FileScanConfig>())
    else {
        return Ok(None);
    };
    let terms = split_conjunction(filter.predicate());
    let kept: Vec<Arc<dyn PhysicalExpr>> = terms
        .iter()
        .filter(|t| !implied(t.as_ref(), scan, &input.schema()))
        .map(|t| Arc::clone(t))
        .collect();
    // A filter that carries a limit keeps its node (the limit would go with it).
    if kept.len() == terms.len() || filter.fetch().is_some() {
        return Ok(None);
    }
    let projection: Option<Vec<usize>> = filter.projection().as_ref().map(|p| p.to_vec());
    if !kept.is_empty() {
        let plan = FilterExecBuilder::new(conjunction(kept), Arc::clone(input))
            .apply_projection(projection)?
            .with_default_selectivity(filter.default_selectivity())
            .build()?;
        return Ok(Some(Arc::new(plan)));
    }
    let Some(projection) = projection else {
        return Ok(Some(Arc::clone(input)));
    };
    let schema = input.schema();
    let exprs = projection.iter().map(|&i| {
        let name = schema.field(i).name();
        ProjectionExpr::new(Arc::new(Column::new(name, i)), name.clone())
    });
    Ok(Some(Arc::new(ProjectionExec::try_new(
        exprs,
        Arc::clone(input),
    )?)))
}

/// Whether every row of every file of `scan` satisfies `term` (a column of the scan's output compared
/// with a literal), by the files' exact statistics.
fn implied(
    term: &dyn PhysicalExpr,
    scan: &FileScanConfig,
    output: &datafusion::arrow::datatypes::SchemaRef,
) -> bool {
    let Some(bin) = term.downcast_ref::<BinaryExpr>() else {
        return false;
    };
    // `column op literal`, or `literal op column` read as its mirror.
    let (column, op, value) = match (
        bin.left().downcast_ref::<Column>(),
        bin.right().downcast_ref::<Literal>(),
        bin.left().downcast_ref::<Literal>(),
        bin.right().downcast_ref::<Column>(),
    ) {
        (Some(c), Some(l), _, _) => (c, *bin.op(), l.value()),
        (_, _, Some(l), Some(c)) => match bin.op().swap() {
            Some(op) => (c, op, l.value()),
            None => return false,
        },
        _ => return false,
    };
    if !matches!(
        op,
        Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    ) || value.is_null()
    {
        return false;
    }
    let Some(field) = output.fields().get(column.index()) else {
        return false;
    };
    let Ok(index) = scan
        .file_source
        .table_schema()
        .table_schema()
        .index_of(field.name())
    else {
        return false;
    };
    let mut files = scan.file_groups.iter().flat_map(|g| g.iter()).peekable();
    if files.peek().is_none() {
        return false;
    }
    files.all(|file| {
        let Some(stats) = file
            .statistics
            .as_ref()
            .and_then(|s| s.column_statistics.get(index))
        else {
            return false;
        };
        let (Precision::Exact(min), Precision::Exact(max), Precision::Exact(0)) =
            (&stats.min_value, &stats.max_value, &stats.null_count)
        else {
            return false;
        };
        holds(min, op, value) && holds(max, op, value)
    })
}

/// `bound op value`, false when the two do not compare (other types, nulls).
fn holds(bound: &ScalarValue, op: Operator, value: &ScalarValue) -> bool {
    if bound.is_null() {
        return false;
    }
    let Some(order) = bound.partial_cmp(value) else {
        return false;
    };
    match op {
        Operator::Eq => order == Ordering::Equal,
        Operator::Lt => order == Ordering::Less,
        Operator::LtEq => order != Ordering::Greater,
        Operator::Gt => order == Ordering::Greater,
        Operator::GtEq => order != Ordering::Less,
        _ => false,
    }
}
