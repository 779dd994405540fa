//! Analysis results stored in a trace file: the five kinds of RT-427 §3.1.3.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Result, SqlContext, StoreError};
use crate::model::{ParamDef, ParamType, ParamValue};
use crate::schema::{self, TRACE_APPLICATION_ID};

/// The kind of an analysis result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnalysisKind {
    /// A searching/filtering result: a list of events or producers.
    Search,
    /// Groups of events, event types or parameter types, possibly nested.
    Grouping,
    /// Self-defining annotations.
    Annotation,
    /// Files outside the store.
    ResultFile,
    /// A link to a trace produced from this one.
    ProcessedTrace,
}

impl AnalysisKind {
    /// Stored name.
    pub const fn name(self) -> &'static str {
        match self {
            AnalysisKind::Search => "search",
            AnalysisKind::Grouping => "grouping",
            AnalysisKind::Annotation => "annotation",
            AnalysisKind::ResultFile => "result_file",
            AnalysisKind::ProcessedTrace => "processed_trace",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "search" => AnalysisKind::Search,
            "grouping" => AnalysisKind::Grouping,
            "annotation" => AnalysisKind::Annotation,
            "result_file" => AnalysisKind::ResultFile,
            "processed_trace" => AnalysisKind::ProcessedTrace,
            _ => return None,
        })
    }
}

/// The entity a search result or a group lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetEntity {
    /// Events (ids are [`crate::EventId`]).
    Event,
    /// Producers.
    Producer,
    /// Event types.
    EventType,
    /// Event parameter types (`event_param_type.id`).
    EventParamType,
}

impl TargetEntity {
    /// Stored name.
    pub const fn name(self) -> &'static str {
        match self {
            TargetEntity::Event => "event",
            TargetEntity::Producer => "producer",
            TargetEntity::EventType => "event_type",
            TargetEntity::EventParamType => "event_param_type",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "event" => TargetEntity::Event,
            "producer" => TargetEntity::Producer,
            "event_type" => TargetEntity::EventType,
            "event_param_type" => TargetEntity::EventParamType,
            _ => return None,
        })
    }
}

/// One group of a grouping result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Identifier within the result.
    pub id: i64,
    /// Enclosing group.
    pub parent: Option<i64>,
    /// Name.
    pub name: String,
    /// What the group holds.
    pub target: TargetEntity,
    /// `true` for AND, `false` for OR.
    pub and: bool,
    /// Whether the members are ordered.
    pub ordered: bool,
    /// Position in the parent, if the parent is ordered.
    pub sequence: i64,
    /// Member ids (leaf groups only).
    pub members: Vec<i64>,
}

/// An annotation type: a name and parameter definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationType {
    /// Identifier within the result.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Parameters.
    pub params: Vec<ParamDef>,
}

/// One annotation: values for its type's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Identifier within the result.
    pub id: i64,
    /// Its type.
    pub type_id: i64,
    /// Name.
    pub name: String,
    /// One value per parameter of the type.
    pub values: Vec<ParamValue>,
}

/// The data of an analysis result.
#[derive(Debug, Clone, PartialEq)]
pub enum AnalysisData {
    /// A searching/filtering result.
    Search {
        /// The tool's command or query.
        command: String,
        /// What the ids are.
        target: TargetEntity,
        /// The found ids.
        ids: Vec<i64>,
    },
    /// A grouping.
    Grouping {
        /// Its groups.
        groups: Vec<Group>,
    },
    /// Annotations.
    Annotation {
        /// Types.
        types: Vec<AnnotationType>,
        /// Instances.
        annotations: Vec<Annotation>,
    },
    /// Result files.
    ResultFiles {
        /// Their paths.
        paths: Vec<String>,
    },
    /// A trace derived from this one.
    ProcessedTrace {
        /// Its `db_file` in the catalog.
        trace_db: String,
    },
}

impl AnalysisData {
    /// The kind.
    pub const fn kind(&self) -> AnalysisKind {
        match self {
            AnalysisData::Search { .. } => AnalysisKind::Search,
            AnalysisData::Grouping { .. } => AnalysisKind::Grouping,
            AnalysisData::Annotation { .. } => AnalysisKind::Annotation,
            AnalysisData::ResultFiles { .. } => AnalysisKind::ResultFile,
            AnalysisData::ProcessedTrace { .. } => AnalysisKind::ProcessedTrace,
        }
    }
}

/// The header of an analysis result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnalysisResult {
    /// Identifier (0 before saving).
    pub id: i64,
    /// Catalog id of the tool, if known.
    pub tool_id: Option<i64>,
    /// Tool name.
    pub tool_name: String,
    /// Kind.
    pub kind: AnalysisKind,
    /// When, in Unix nanoseconds.
    pub date_unix_ns: i64,
    /// Free text.
    pub description: String,
}

/// Trace files a [`ResultStore`] of this process opened (see [`settle_written_traces`]).
static WRITTEN: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Folds the WAL of a finished trace into the file and leaves it in rollback-journal mode, unless a
/// writer holds it (a live trace stays in WAL mode). Best effort: another connection holding the
/// file keeps it as it is.
fn settle(conn: &Connection, path: &Path) {
    let finished = conn
        .query_row("SELECT finished FROM trace_info WHERE id = 1", [], |r| {
            r.get::<_, bool>(0)
        })
        .unwrap_or(false);
    if finished && !crate::recovery::is_being_written(path).unwrap_or(true) {
        crate::recovery::make_self_contained(conn);
    }
}

/// Makes every finished trace that this process saved results into one self-contained file again
/// (no `-wal`/`-shm` beside it); returns those that could not be (another process holds them). Call
/// it when the connections reading them are closed, e.g. as a command ends.
pub fn settle_written_traces() -> Vec<PathBuf> {
    let paths = WRITTEN
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default();
    let mut left = Vec::new();
    for path in paths {
        if !crate::recovery::wal_path(&path).exists() {
            continue;
        }
        if let Ok(conn) = Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ) {
            settle(&conn, &path);
        }
        if crate::recovery::wal_path(&path).exists() {
            left.push(path);
        }
    }
    left
}

impl Drop for ResultStore {
    fn drop(&mut self) {
        settle(&self.conn, &self.path);
    }
}

/// Read-write access to the analysis results of one trace file (the analyzer saves results
/// in the trace they are about, also while it is being captured).
pub struct ResultStore {
    conn: Connection,
    path: PathBuf,
}

impl ResultStore {
    /// Opens a trace file for saving results.
    ///
    /// Writing switches the file to WAL mode (a live trace is in it anyway). A finished trace is made
    /// one self-contained file again when the store is dropped, or — when another connection of the
    /// process still holds it then — by [`settle_written_traces`], which a program calls before it
    /// exits: copying the `.db` alone must copy every saved result.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open(&path, "trace", TRACE_APPLICATION_ID, false)?;
        conn.execute_batch(schema::RESULTS_DDL).ctx(&path)?;
        if let Ok(mut written) = WRITTEN.lock()
            && !written.contains(&path)
        {
            written.push(path.clone());
        }
        Ok(Self { conn, path })
    }

    /// Saves a result (header fields `id` and `kind` are taken from the store and the data).
    pub fn save(&self, header: &AnalysisResult, data: &AnalysisData) -> Result<i64> {
        let p = &self.path;
        let tx = self.conn.unchecked_transaction().ctx(p)?;
        let id = insert_result(&self.conn, p, header, data)?;
        tx.commit().ctx(p)?;
        Ok(id)
    }

    /// Results of a tool (by name), optionally of one kind (RT-427 §4.1.4).
    pub fn results(
        &self,
        tool_name: Option<&str>,
        kind: Option<AnalysisKind>,
    ) -> Result<Vec<AnalysisResult>> {
        results(&self.conn, &self.path, tool_name, kind)
    }

    /// The data of a result.
    pub fn data(&self, result_id: i64) -> Result<Option<AnalysisData>> {
        data(&self.conn, &self.path, result_id)
    }

    /// Deletes a result and its data.
    pub fn delete(&self, result_id: i64) -> Result<bool> {
        let p = &self.path;
        let tx = self.conn.unchecked_transaction().ctx(p)?;
        for table in [
            "search_result",
            "search_mapping",
            "result_group",
            "group_mapping",
            "annotation_type",
            "annotation_param_type",
            "annotation",
            "annotation_param",
            "result_file",
            "processed_trace",
        ] {
            self.conn
                .execute(
                    &format!("DELETE FROM {table} WHERE result_id = ?1"),
                    [result_id],
                )
                .ctx(p)?;
        }
        let n = self
            .conn
            .execute("DELETE FROM analysis_result WHERE id = ?1", [result_id])
            .ctx(p)?;
        tx.commit().ctx(p)?;
        Ok(n > 0)
    }
}

/// Inserts a result in the transaction open on `conn` (the result tables must exist); returns its id.
pub(crate) fn insert_result(
    conn: &Connection,
    p: &Path,
    header: &AnalysisResult,
    data: &AnalysisData,
) -> Result<i64> {
    conn.execute(
        "INSERT INTO analysis_result (tool_id, tool_name, kind, date_unix_ns, description)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            header.tool_id,
            header.tool_name,
            data.kind().name(),
            header.date_unix_ns,
            header.description
        ],
    )
    .ctx(p)?;
    let id = conn.last_insert_rowid();
    match data {
        AnalysisData::Search {
            command,
            target,
            ids,
        } => {
            conn.execute(
                "INSERT INTO search_result (result_id, command, target_entity) VALUES (?1, ?2, ?3)",
                params![id, command, target.name()],
            )
            .ctx(p)?;
            let mut st = conn
                .prepare(
                    "INSERT OR IGNORE INTO search_mapping (result_id, target_id) VALUES (?1, ?2)",
                )
                .ctx(p)?;
            for t in ids {
                st.execute(params![id, t]).ctx(p)?;
            }
        }
        AnalysisData::Grouping { groups } => {
            for g in groups {
                conn
                        .execute(
                            "INSERT INTO result_group (result_id, group_id, parent_group_id, name, target_entity,
                                operator, ordered, sequence) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                            params![
                                id,
                                g.id,
                                g.parent,
                                g.name,
                                g.target.name(),
                                if g.and { "AND" } else { "OR" },
                                g.ordered,
                                g.sequence
                            ],
                        )
                        .ctx(p)?;
                for (pos, m) in g.members.iter().enumerate() {
                    conn
                            .execute(
                                "INSERT OR IGNORE INTO group_mapping (result_id, group_id, target_id, position)
                                 VALUES (?1, ?2, ?3, ?4)",
                                params![id, g.id, m, pos as i64],
                            )
                            .ctx(p)?;
                }
            }
        }
        AnalysisData::Annotation { types, annotations } => {
            for t in types {
                conn.execute(
                    "INSERT INTO annotation_type (result_id, id, name) VALUES (?1, ?2, ?3)",
                    params![id, t.id, t.name],
                )
                .ctx(p)?;
                for (pos, d) in t.params.iter().enumerate() {
                    conn
                            .execute(
                                "INSERT INTO annotation_param_type (result_id, annotation_type_id, position, name, type)
                                 VALUES (?1, ?2, ?3, ?4, ?5)",
                                params![id, t.id, pos as i64, d.name, d.ty.name()],
                            )
                            .ctx(p)?;
                }
            }
            for a in annotations {
                conn
                        .execute(
                            "INSERT INTO annotation (result_id, id, annotation_type_id, name) VALUES (?1, ?2, ?3, ?4)",
                            params![id, a.id, a.type_id, a.name],
                        )
                        .ctx(p)?;
                for (pos, v) in a.values.iter().enumerate() {
                    conn.execute(
                        "INSERT INTO annotation_param (result_id, annotation_id, position, value)
                                 VALUES (?1, ?2, ?3, ?4)",
                        params![id, a.id, pos as i64, v.to_string()],
                    )
                    .ctx(p)?;
                }
            }
        }
        AnalysisData::ResultFiles { paths } => {
            for (pos, path) in paths.iter().enumerate() {
                conn.execute(
                    "INSERT INTO result_file (result_id, position, path) VALUES (?1, ?2, ?3)",
                    params![id, pos as i64, path],
                )
                .ctx(p)?;
            }
        }
        AnalysisData::ProcessedTrace { trace_db } => {
            conn.execute(
                "INSERT INTO processed_trace (result_id, trace_db) VALUES (?1, ?2)",
                params![id, trace_db],
            )
            .ctx(p)?;
        }
    }
    Ok(id)
}

/// Whether the file has its result tables (they are created with the first result saved).
fn has_results(conn: &Connection, path: &Path) -> Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'analysis_result'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .ctx(path)
}

fn invalid(path: &Path, detail: String) -> StoreError {
    StoreError::InvalidValue {
        path: path.to_path_buf(),
        detail,
    }
}

pub(crate) fn results(
    conn: &Connection,
    path: &Path,
    tool_name: Option<&str>,
    kind: Option<AnalysisKind>,
) -> Result<Vec<AnalysisResult>> {
    if !has_results(conn, path)? {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(
            "SELECT id, tool_id, tool_name, kind, date_unix_ns, description FROM analysis_result
             WHERE (?1 IS NULL OR tool_name = ?1) AND (?2 IS NULL OR kind = ?2) ORDER BY id",
        )
        .ctx(path)?;
    let rows = st
        .query_map(params![tool_name, kind.map(|k| k.name())], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, String>(5)?,
            ))
        })
        .ctx(path)?;
    let mut out = Vec::new();
    for row in rows {
        let (id, tool_id, tool_name, kind, date_unix_ns, description) = row.ctx(path)?;
        let kind = AnalysisKind::from_name(&kind)
            .ok_or_else(|| invalid(path, format!("analysis result kind {kind:?}")))?;
        out.push(AnalysisResult {
            id,
            tool_id,
            tool_name,
            kind,
            date_unix_ns,
            description,
        });
    }
    Ok(out)
}

fn strings(
    conn: &Connection,
    path: &Path,
    sql: &str,
    id: i64,
) -> Result<Vec<Vec<rusqlite::types::Value>>> {
    let mut st = conn.prepare(sql).ctx(path)?;
    let n = st.column_count();
    let rows = st
        .query_map([id], |r| {
            (0..n)
                .map(|i| r.get::<_, rusqlite::types::Value>(i))
                .collect()
        })
        .ctx(path)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().ctx(path)
}

fn int(v: &rusqlite::types::Value) -> i64 {
    match v {
        rusqlite::types::Value::Integer(i) => *i,
        _ => 0,
    }
}

fn text(v: &rusqlite::types::Value) -> String {
    match v {
        rusqlite::types::Value::Text(s) => s.clone(),
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Real(f) => f.to_string(),
        _ => String::new(),
    }
}

pub(crate) fn data(conn: &Connection, path: &Path, result_id: i64) -> Result<Option<AnalysisData>> {
    if !has_results(conn, path)? {
        return Ok(None);
    }
    let kind: Option<String> = conn
        .query_row(
            "SELECT kind FROM analysis_result WHERE id = ?1",
            [result_id],
            |r| r.get(0),
        )
        .optional()
        .ctx(path)?;
    let Some(kind) = kind else { return Ok(None) };
    let kind = AnalysisKind::from_name(&kind)
        .ok_or_else(|| invalid(path, format!("analysis result kind {kind:?}")))?;
    let target = |s: &str| {
        TargetEntity::from_name(s).ok_or_else(|| invalid(path, format!("target entity {s:?}")))
    };
    Ok(Some(match kind {
        AnalysisKind::Search => {
            let (command, t): (String, String) = conn
                .query_row(
                    "SELECT command, target_entity FROM search_result WHERE result_id = ?1",
                    [result_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .ctx(path)?;
            let ids = strings(
                conn,
                path,
                "SELECT target_id FROM search_mapping WHERE result_id = ?1 ORDER BY target_id",
                result_id,
            )?
            .iter()
            .map(|r| int(&r[0]))
            .collect();
            AnalysisData::Search {
                command,
                target: target(&t)?,
                ids,
            }
        }
        AnalysisKind::Grouping => {
            let mut groups = Vec::new();
            for r in strings(
                conn,
                path,
                "SELECT group_id, parent_group_id, name, target_entity, operator, ordered, sequence
                 FROM result_group WHERE result_id = ?1 ORDER BY group_id",
                result_id,
            )? {
                groups.push(Group {
                    id: int(&r[0]),
                    parent: match r[1] {
                        rusqlite::types::Value::Integer(i) => Some(i),
                        _ => None,
                    },
                    name: text(&r[2]),
                    target: target(&text(&r[3]))?,
                    and: text(&r[4]) == "AND",
                    ordered: int(&r[5]) != 0,
                    sequence: int(&r[6]),
                    members: Vec::new(),
                });
            }
            for r in strings(
                conn,
                path,
                "SELECT group_id, target_id FROM group_mapping WHERE result_id = ?1 ORDER BY group_id, position",
                result_id,
            )? {
                if let Some(g) = groups.iter_mut().find(|g| g.id == int(&r[0])) {
                    g.members.push(int(&r[1]));
                }
            }
            AnalysisData::Grouping { groups }
        }
        AnalysisKind::Annotation => {
            let mut types = Vec::new();
            for r in strings(
                conn,
                path,
                "SELECT id, name FROM annotation_type WHERE result_id = ?1 ORDER BY id",
                result_id,
            )? {
                types.push(AnnotationType {
                    id: int(&r[0]),
                    name: text(&r[1]),
                    params: Vec::new(),
                });
            }
            for r in strings(
                conn,
                path,
                "SELECT annotation_type_id, name, type FROM annotation_param_type WHERE result_id = ?1
                 ORDER BY annotation_type_id, position",
                result_id,
            )? {
                let ty = ParamType::from_name(&text(&r[2]))
                    .ok_or_else(|| invalid(path, format!("annotation parameter type {:?}", text(&r[2]))))?;
                if let Some(t) = types.iter_mut().find(|t| t.id == int(&r[0])) {
                    t.params.push(ParamDef::new(text(&r[1]), ty));
                }
            }
            let mut annotations = Vec::new();
            for r in strings(
                conn,
                path,
                "SELECT id, annotation_type_id, name FROM annotation WHERE result_id = ?1 ORDER BY id",
                result_id,
            )? {
                annotations.push(Annotation {
                    id: int(&r[0]),
                    type_id: int(&r[1]),
                    name: text(&r[2]),
                    values: Vec::new(),
                });
            }
            for r in strings(
                conn,
                path,
                "SELECT annotation_id, position, value FROM annotation_param WHERE result_id = ?1
                 ORDER BY annotation_id, position",
                result_id,
            )? {
                if let Some(a) = annotations.iter_mut().find(|a| a.id == int(&r[0])) {
                    let pos = int(&r[1]) as usize;
                    let ty = types
                        .iter()
                        .find(|t| t.id == a.type_id)
                        .and_then(|t| t.params.get(pos))
                        .map_or(ParamType::String, |d| d.ty);
                    let raw = text(&r[2]);
                    a.values
                        .push(ParamValue::parse(ty, &raw).unwrap_or(ParamValue::String(raw)));
                }
            }
            AnalysisData::Annotation { types, annotations }
        }
        AnalysisKind::ResultFile => AnalysisData::ResultFiles {
            paths: strings(
                conn,
                path,
                "SELECT path FROM result_file WHERE result_id = ?1 ORDER BY position",
                result_id,
            )?
            .iter()
            .map(|r| text(&r[0]))
            .collect(),
        },
        AnalysisKind::ProcessedTrace => AnalysisData::ProcessedTrace {
            trace_db: conn
                .query_row(
                    "SELECT trace_db FROM processed_trace WHERE result_id = ?1",
                    [result_id],
                    |r| r.get(0),
                )
                .ctx(path)?,
        },
    }))
}
