//! What several import tests need: the shared real captures, and an import that keeps quiet about
//! skipped lines.

// Each test binary compiles this module and uses only some of its helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use socscope_collector::import::{ImportOptions, ImportReport, import};
use socscope_formats::Format;

/// A capture of the shared collection (`shared/data/traces/REL`, described by its PROVENANCE.md).
pub fn real(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/traces")
        .join(rel)
}

/// Imports `file` (a CTF trace: its directory) as `format` into a new trace at `out`; skipped lines
/// are counted in the report, not collected.
pub fn import_file(
    file: &Path,
    format: Format,
    out: &Path,
    strict: bool,
) -> socscope_collector::Result<ImportReport> {
    let mut on_skip = |_: &socscope_formats::ParseError, _n: u64| {};
    let mut on_progress = |_b: u64| {};
    let mut opts = ImportOptions {
        strict,
        on_skip: &mut on_skip,
        on_progress: &mut on_progress,
    };
    import(&[file.to_path_buf()], format, out, &mut opts)
}
