//! The dataset directory: `DATASET/<table>/board=<board>/date=<YYYY-MM-DD>/<trace id>.parquet`, the
//! `socscope-fleet.json` marker, the sync lock, and the checks that refuse a directory holding anything
//! else.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{FleetError, Result};
use crate::schema::{DATASET_VERSION, Table};

/// The file that marks a directory as a fleet dataset (and records its version).
pub const MARKER_FILE: &str = "socscope-fleet.json";
/// The file a sync locks so that two syncs never write one dataset at once.
pub const LOCK_FILE: &str = ".socscope-fleet.lock";
/// Extension of the data files.
pub const PARQUET_EXT: &str = "parquet";
/// Suffix of a file being written: every engine ignores it (hidden, and not `.parquet`).
pub const TEMP_SUFFIX: &str = ".parquet.tmp";

/// A Hive partition value: characters outside `[A-Za-z0-9._+-]` are percent-escaped as Hive and Spark
/// escape them (a `/` or `=` in a board name would otherwise break the path).
pub fn escape_partition_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        // An empty board name (a text import without one) still needs a directory of its own.
        out = format!("%{}", hex_of(&out));
    }
    out
}

fn hex_of(s: &str) -> String {
    if s.is_empty() {
        "00".into()
    } else {
        s.bytes().map(|b| format!("{b:02X}")).collect()
    }
}

/// The inverse of [`escape_partition_value`] (a malformed escape is kept as it is).
pub fn unescape_partition_value(value: &str) -> String {
    if value == "%00" {
        return String::new();
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (hex_digit(bytes.get(i + 1)), hex_digit(bytes.get(i + 2)))
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: Option<&u8>) -> Option<u8> {
    (*b? as char).to_digit(16).map(|d| d as u8)
}

/// The UTC date (`YYYY-MM-DD`) of a Unix time in nanoseconds: a trace's `date` partition.
pub fn utc_date(unix_ns: i64) -> String {
    let days = unix_ns.div_euclid(86_400_000_000_000);
    let (y, m, d) = socscope_tracedb::units::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Where a trace's files are: its id, board and date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The trace id (the source file's name without `.db`).
    pub trace_id: String,
    /// The board name, unescaped.
    pub board: String,
    /// `YYYY-MM-DD`.
    pub date: String,
}

impl Placement {
    /// The file of `table` for this trace under `root`.
    pub fn file(&self, root: &Path, table: Table) -> PathBuf {
        self.dir(root, table)
            .join(format!("{}.{PARQUET_EXT}", self.trace_id))
    }

    /// Its partition directory of `table`.
    pub fn dir(&self, root: &Path, table: Table) -> PathBuf {
        root.join(table.name())
            .join(format!("board={}", escape_partition_value(&self.board)))
            .join(format!("date={}", self.date))
    }

    /// The temporary name `file` is written under before it is renamed into place.
    pub fn temp_file(&self, root: &Path, table: Table) -> PathBuf {
        self.dir(root, table)
            .join(format!(".{}{TEMP_SUFFIX}", self.trace_id))
    }
}

/// What a dataset directory holds, by trace.
#[derive(Debug, Default)]
pub struct Contents {
    /// Every data file of each trace id (all tables, all partitions).
    pub files: BTreeMap<String, Vec<(Table, PathBuf)>>,
    /// Files a killed sync left half-written.
    pub temporaries: Vec<PathBuf>,
}

impl Contents {
    /// The `traces` file of a trace, if it has one (its file set is then complete).
    pub fn traces_file(&self, trace_id: &str) -> Option<&Path> {
        self.files.get(trace_id).and_then(|v| {
            v.iter()
                .find(|(t, _)| *t == Table::Traces)
                .map(|(_, p)| p.as_path())
        })
    }
}

/// A dataset directory.
#[derive(Debug, Clone)]
pub struct Dataset {
    root: PathBuf,
}

/// Holds the dataset's sync lock until dropped.
#[derive(Debug)]
pub struct SyncLock {
    _file: File,
}

impl Dataset {
    /// Opens an existing dataset for reading: the directory must hold `socscope-fleet.json` of this
    /// version.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        if !root.is_dir() {
            return Err(FleetError::NotADataset {
                path: root,
                detail: "no such directory".into(),
            });
        }
        let ds = Self { root };
        ds.check_marker(false)?;
        ds.contents()?;
        Ok(ds)
    }

    /// Opens (creating it if needed) a dataset to write into, and takes its sync lock. The directory
    /// must be new, empty, or a dataset; it is checked through before anything is written.
    pub fn open_for_writing(root: impl Into<PathBuf>) -> Result<(Self, SyncLock)> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(FleetError::io(&root))?;
        let ds = Self { root };
        let fresh = ds.check_marker(true)?;
        if fresh {
            // Only an empty directory becomes a dataset: a directory of other files is refused, so
            // nothing of its contents is mixed with, or replaced by, the dataset's.
            let mut entries = std::fs::read_dir(&ds.root).map_err(FleetError::io(&ds.root))?;
            if let Some(e) = entries.next() {
                let e = e.map_err(FleetError::io(&ds.root))?;
                return Err(FleetError::NotADataset {
                    path: ds.root.clone(),
                    detail: format!(
                        "it holds {} and no {MARKER_FILE}",
                        e.file_name().to_string_lossy()
                    ),
                });
            }
        }
        let lock_path = ds.root.join(LOCK_FILE);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(FleetError::io(&lock_path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(FleetError::Busy {
                    path: ds.root.clone(),
                    lock: lock_path,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(FleetError::io(&lock_path)(e)),
        }
        if fresh {
            let marker = ds.root.join(MARKER_FILE);
            let doc = serde_json::json!({
                "format": "socscope-fleet",
                "version": DATASET_VERSION,
                "layout": "TABLE/board=BOARD/date=YYYY-MM-DD/TRACE_ID.parquet",
                "tables": Table::ALL.iter().map(|t| t.name()).collect::<Vec<_>>(),
                "schema": "docs/FLEET.md",
            });
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
            write_atomically(&marker, text.as_bytes())?;
        }
        ds.contents()?;
        Ok((ds, SyncLock { _file: file }))
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of a table.
    pub fn table_dir(&self, table: Table) -> PathBuf {
        self.root.join(table.name())
    }

    /// Checks the marker file: true when there is none (a new dataset, `allow_missing`).
    fn check_marker(&self, allow_missing: bool) -> Result<bool> {
        let marker = self.root.join(MARKER_FILE);
        let text = match std::fs::read_to_string(&marker) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && allow_missing => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(FleetError::NotADataset {
                    path: self.root.clone(),
                    detail: format!(
                        "it has no {MARKER_FILE} (write one with `socscope fleet sync`)"
                    ),
                });
            }
            Err(e) => return Err(FleetError::io(&marker)(e)),
        };
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| FleetError::NotADataset {
                path: self.root.clone(),
                detail: format!("{MARKER_FILE} is not JSON ({e})"),
            })?;
        if doc["format"] != "socscope-fleet" {
            return Err(FleetError::NotADataset {
                path: self.root.clone(),
                detail: format!("{MARKER_FILE} does not say \"format\": \"socscope-fleet\""),
            });
        }
        let version = doc["version"].as_u64().unwrap_or(0);
        if version != u64::from(DATASET_VERSION) {
            return Err(FleetError::DatasetVersion {
                path: self.root.clone(),
                found: version,
                expected: DATASET_VERSION,
            });
        }
        Ok(false)
    }

    /// Walks the dataset: every data file by trace id, and the temporaries of killed syncs. Anything
    /// else is an error naming it (a stray file would be read by every engine as part of a table).
    pub fn contents(&self) -> Result<Contents> {
        let mut out = Contents::default();
        let not = |path: &Path, what: &str| FleetError::NotADataset {
            path: self.root.clone(),
            detail: format!("{} {what}", path.display()),
        };
        for e in read_dir_sorted(&self.root)? {
            let name = file_name(&e);
            if name == MARKER_FILE || name == LOCK_FILE {
                continue;
            }
            let Some(table) = Table::from_name(&name).filter(|_| e.is_dir()) else {
                return Err(not(
                    &e,
                    "is not part of a dataset (tables are directories named traces, events, producers, types, losses)",
                ));
            };
            for board_dir in read_dir_sorted(&e)? {
                let bname = file_name(&board_dir);
                if !board_dir.is_dir() || !bname.starts_with("board=") {
                    return Err(not(&board_dir, "is not a board=NAME partition directory"));
                }
                for date_dir in read_dir_sorted(&board_dir)? {
                    let dname = file_name(&date_dir);
                    if !date_dir.is_dir() || !dname.starts_with("date=") {
                        return Err(not(
                            &date_dir,
                            "is not a date=YYYY-MM-DD partition directory",
                        ));
                    }
                    for f in read_dir_sorted(&date_dir)? {
                        let fname = file_name(&f);
                        if fname.starts_with('.') && fname.ends_with(TEMP_SUFFIX) {
                            out.temporaries.push(f);
                            continue;
                        }
                        match fname.strip_suffix(&format!(".{PARQUET_EXT}")) {
                            Some(id) if f.is_file() && !id.is_empty() => {
                                out.files.entry(id.to_owned()).or_default().push((table, f))
                            }
                            _ => return Err(not(&f, "is not a .parquet file of the dataset")),
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(FleetError::io(dir))? {
        v.push(e.map_err(FleetError::io(dir))?.path());
    }
    v.sort();
    Ok(v)
}

/// Writes `bytes` to `path` through a temporary file and a rename: readers see the old file or the new
/// one, never half of one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", file_name(path)));
    std::fs::write(&tmp, bytes).map_err(FleetError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(FleetError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_escape_and_come_back() {
        for board in ["sim-stb", "a/b=c", "salle 3", "", "é", ".", "x%y"] {
            let e = escape_partition_value(board);
            assert!(
                e.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._+-%".contains(&b)),
                "{e}"
            );
            assert_ne!(e, ".");
            assert_eq!(unescape_partition_value(&e), board, "{e}");
        }
        assert_eq!(escape_partition_value("sim-stb-3"), "sim-stb-3");
        assert_eq!(escape_partition_value("a/b"), "a%2Fb");
    }

    #[test]
    fn dates_are_utc_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(1_780_000_000_000_000_000), "2026-05-28");
        assert_eq!(utc_date(-1), "1969-12-31");
    }
}
