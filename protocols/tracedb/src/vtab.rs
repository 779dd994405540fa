//! The `events` virtual table: event-level SQL over the chunks, with time-range and type
//! push-down.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{CStr, c_int};
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::vtab::{
    Context, Filters, IndexConstraintOp, IndexInfo, Module, VTab, VTabConnection, VTabCursor,
};
use rusqlite::{Connection, ffi};

use crate::filter::Filter;
use crate::model::{EventKind, EventType, StoredEvent, TimeRange};
use crate::reader::{EventIter, TraceReader};

const COL_ID: c_int = 0;
const COL_TS: c_int = 1;
const COL_END: c_int = 2;
const COL_DURATION: c_int = 3;
const COL_CATEGORY: c_int = 4;
const COL_TYPE_ID: c_int = 5;
const COL_TYPE: c_int = 6;
const COL_PRODUCER: c_int = 7;
const COL_CPU: c_int = 8;
const COL_DEPTH: c_int = 9;
const COL_TARGET: c_int = 10;
const COL_VALUE: c_int = 11;
const COL_PARAMS: c_int = 12;

/// Registers the eponymous virtual table `events` on `conn`, reading the trace at
/// `trace_path`, so that `SELECT ... FROM events WHERE ts BETWEEN a AND b` works. Constraints
/// on `ts` (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`) and `type_id = x` are pushed down to the
/// chunk index; rows come in timestamp order. Columns: `id, ts, end_ts, duration, category,
/// type_id, type, producer_id, cpu, depth, target, value, params` (see `SCHEMA.md`).
pub fn register_events_table(
    conn: &Connection,
    trace_path: impl AsRef<Path>,
) -> rusqlite::Result<()> {
    const MODULE: Module<'static, EventsTab> = Module::eponymous_only_module();
    conn.create_module(c"events", &MODULE, Some(trace_path.as_ref().to_path_buf()))
}

#[repr(C)]
struct EventsTab {
    base: ffi::sqlite3_vtab,
    reader: TraceReader,
}

fn module_error(e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::ModuleError(e.to_string())
}

unsafe impl<'vtab> VTab<'vtab> for EventsTab {
    type Aux = PathBuf;
    type Cursor = EventsCursor<'vtab>;

    fn connect(
        _db: &mut VTabConnection,
        aux: Option<&PathBuf>,
        _module_name: &[u8],
        _database_name: &[u8],
        _table_name: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, Self)> {
        let path = aux.ok_or_else(|| module_error("events: no trace file given"))?;
        let reader = TraceReader::open(path).map_err(module_error)?;
        Ok((
            Cow::Borrowed(
                c"CREATE TABLE x(id INTEGER, ts INTEGER, end_ts INTEGER, duration INTEGER, category TEXT,
                  type_id INTEGER, type TEXT, producer_id INTEGER, cpu INTEGER, depth INTEGER,
                  target INTEGER, value REAL, params TEXT)",
            ),
            EventsTab {
                base: ffi::sqlite3_vtab::default(),
                reader,
            },
        ))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        // idx_str lists the pushed-down constraints in argv order: one letter each.
        let mut plan = String::new();
        let mut used = Vec::new();
        for (i, c) in info.constraints().enumerate() {
            if !c.is_usable() {
                continue;
            }
            let code = match (c.column(), c.operator()) {
                (COL_TS, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ) => 'e',
                (COL_TS, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GT) => 'g',
                (COL_TS, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GE) => 'G',
                (COL_TS, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LT) => 'l',
                (COL_TS, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LE) => 'L',
                (COL_TYPE_ID, IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ) => 't',
                _ => continue,
            };
            plan.push(code);
            used.push(i);
        }
        for (n, &i) in used.iter().enumerate() {
            let mut u = info.constraint_usage(i);
            u.set_argv_index(n as c_int + 1);
            // SQLite re-checks the constraint; cheap, and exact whatever the value's type.
            u.set_omit(false);
        }
        let bounded = plan.contains(['e', 'g', 'G']) && plan.contains(['e', 'l', 'L']);
        let cost = if bounded {
            10.0
        } else if plan.is_empty() {
            1e9
        } else {
            1e6
        };
        info.set_estimated_cost(cost);
        info.set_estimated_rows(if bounded { 10_000 } else { 100_000_000 });
        let order_by_ts = {
            let mut it = info.order_bys();
            match (it.next(), it.next()) {
                (Some(o), None) => o.column() == COL_TS && !o.is_order_by_desc(),
                _ => false,
            }
        };
        if order_by_ts {
            info.set_order_by_consumed(true);
        }
        info.set_idx_str(&plan);
        Ok(true)
    }

    fn open(&'vtab mut self) -> rusqlite::Result<EventsCursor<'vtab>> {
        Ok(EventsCursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            reader: &self.reader,
            iter: None,
            current: None,
            types: HashMap::new(),
        })
    }
}

#[repr(C)]
struct EventsCursor<'vtab> {
    base: ffi::sqlite3_vtab_cursor,
    reader: &'vtab TraceReader,
    iter: Option<EventIter<'vtab>>,
    current: Option<StoredEvent>,
    types: HashMap<u32, EventType>,
}

impl EventsCursor<'_> {
    fn advance(&mut self) -> rusqlite::Result<()> {
        self.current = match self.iter.as_mut().and_then(Iterator::next) {
            Some(Ok(e)) => Some(e),
            Some(Err(e)) => return Err(module_error(e)),
            None => None,
        };
        Ok(())
    }
}

/// Lower and upper bounds implied by a value compared with `ts` (None: matches nothing).
fn as_bound(v: &Value) -> Option<(i64, i64)> {
    match *v {
        Value::Integer(i) => Some((i, i)),
        Value::Real(f) if f.is_finite() => Some((f.floor() as i64, f.ceil() as i64)),
        Value::Real(f) if f == f64::INFINITY => Some((i64::MAX, i64::MAX)),
        Value::Real(f) if f == f64::NEG_INFINITY => Some((i64::MIN, i64::MIN)),
        _ => None,
    }
}

unsafe impl VTabCursor for EventsCursor<'_> {
    fn filter(
        &mut self,
        _idx_num: c_int,
        idx_str: Option<&str>,
        args: &Filters<'_>,
    ) -> rusqlite::Result<()> {
        let mut range = TimeRange::all();
        let mut filter = Filter::all();
        let mut nothing = false;
        for (k, code) in idx_str.unwrap_or("").chars().enumerate() {
            let v: Value = args.get(k)?;
            if code == 't' {
                match v {
                    Value::Integer(t) if (0..=i64::from(u32::MAX)).contains(&t) => {
                        let mut ts = filter.types.take().unwrap_or_else(|| vec![t as u32]);
                        ts.retain(|&x| i64::from(x) == t);
                        filter.types = Some(ts);
                    }
                    _ => nothing = true,
                }
                continue;
            }
            let Some((lo, hi)) = as_bound(&v) else {
                nothing = true;
                continue;
            };
            match code {
                'e' => {
                    range.start = range.start.max(hi);
                    range.end = range.end.min(lo.saturating_add(1));
                }
                'g' => range.start = range.start.max(lo.saturating_add(1)),
                'G' => range.start = range.start.max(hi),
                'l' => range.end = range.end.min(hi),
                'L' => range.end = range.end.min(lo.saturating_add(1)),
                _ => {}
            }
        }
        if nothing {
            range = TimeRange::new(0, 0);
        }
        self.types = self
            .reader
            .event_types()
            .map_err(module_error)?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();
        self.iter = Some(self.reader.events(range, &filter).map_err(module_error)?);
        self.advance()
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.advance()
    }

    fn eof(&self) -> bool {
        self.current.is_none()
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let Some(e) = &self.current else {
            return ctx.set_result(&Value::Null);
        };
        match i {
            COL_ID => ctx.set_result(e.id),
            COL_TS => ctx.set_result(e.ts),
            COL_END => ctx.set_result(e.end()),
            COL_DURATION => ctx.set_result(e.end() - e.ts),
            COL_CATEGORY => ctx.set_result(e.category().name()),
            COL_TYPE_ID => ctx.set_result(e.type_id),
            COL_TYPE => ctx.set_result(self.types.get(&e.type_id).map(|t| t.name.as_str())),
            COL_PRODUCER => ctx.set_result(e.producer),
            COL_CPU => ctx.set_result(e.cpu),
            COL_DEPTH => ctx.set_result(match e.kind {
                EventKind::State { depth, .. } => Some(depth),
                _ => None,
            }),
            COL_TARGET => ctx.set_result(match e.kind {
                EventKind::Link { target, .. } => Some(target),
                _ => None,
            }),
            COL_VALUE => ctx.set_result(match e.kind {
                EventKind::Variable { value } => Some(value),
                _ => None,
            }),
            COL_PARAMS => {
                let names = self.types.get(&e.type_id).map(|t| &t.params);
                let mut s = String::new();
                for (k, v) in e.params.iter().enumerate() {
                    if k > 0 {
                        s.push(';');
                    }
                    match names.and_then(|n| n.get(k)) {
                        Some(d) => s.push_str(&d.name),
                        None => s.push_str(&format!("p{k}")),
                    }
                    s.push('=');
                    s.push_str(&v.to_string());
                }
                ctx.set_result(&s)
            }
            _ => ctx.set_result(&Value::Null),
        }
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.current.as_ref().map_or(0, |e| e.id))
    }
}
