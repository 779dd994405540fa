//! Text captures into the trace store: KPTrace and ftrace records go through the same [`Reconstructor`]
//! as live capture (context switches → running states, entry/exit → nested states, wake-ups → links);
//! Pajé and GST_DEBUG logs map directly (their states and links are explicit).
//!
//! Files are read line by line (constant memory); a bad line is skipped and counted (`lines_skipped` in
//! `ingest_stat`) unless the import is strict.
//!
//! One module per format, each with an importer of the same shape: `new` (types and producers it
//! declares up front), one method per kind of record it reads, and `finish` (what is still open closed,
//! its ingest statistics returned). A module's `run` drives its reader into its importer;
//! [`dictionary`] holds the types and the record buffer the importers share.

mod ctf;
mod dictionary;
mod ftrace;
mod gst;
mod kptrace;
mod paje;
mod tracecmd;

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use socscope_formats::{Format, FormatError, ParseError, kptrace as kp};
use socscope_tracedb::{Catalog, IngestStat, ParamValue, TraceHeader, TraceInfo, TraceWriter};

pub use dictionary::{ImportRecord, ImportTypes};

use crate::reconstruct::{Reconstructor, TypeTable};
use crate::{CollectorError, Result};

/// How to import.
pub struct ImportOptions<'a> {
    /// Stop at the first bad line instead of skipping it.
    pub strict: bool,
    /// Called with each skipped line's error and the number skipped so far.
    pub on_skip: &'a mut dyn FnMut(&ParseError, u64),
    /// Called from time to time with the bytes read so far.
    pub on_progress: &'a mut dyn FnMut(u64),
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// The trace file written.
    pub path: PathBuf,
    /// The format read.
    pub format: Format,
    /// Bytes read.
    pub bytes: u64,
    /// Records (event lines) read.
    pub records: u64,
    /// Bad lines skipped.
    pub lines_skipped: u64,
    /// Damage met and read past (a binary capture's stream cut short: its events before the damage
    /// kept), one message each.
    pub warnings: Vec<String>,
    /// The trace as finished.
    pub info: TraceInfo,
}

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> CollectorError {
    CollectorError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn format_err(e: FormatError) -> CollectorError {
    match e {
        FormatError::Parse(p) => CollectorError::Parse(p),
        FormatError::Io { file, source } => CollectorError::Io {
            path: file.into(),
            source,
        },
        other => CollectorError::Invalid(other.to_string()),
    }
}

/// `s` with control characters and the replacement character of undecodable bytes escaped, for
/// messages (a file's bytes never reach the terminal as they are).
pub fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || c == char::REPLACEMENT_CHARACTER {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The binary format `head` (a file's first bytes) is in, if it is one socscope knows, with what to
/// do about it.
fn known_binary(head: &[u8]) -> Option<(&'static str, &'static str)> {
    const KNOWN: &[(&[u8], &str, &str)] = &[
        (
            b"\x17\x08\x44tracing",
            "a trace-cmd .dat file",
            "import it with --format trace-cmd (or auto)",
        ),
        (
            &[0xc1, 0x1f, 0xfc, 0xc1],
            "a CTF stream (LTTng, barectf)",
            "import its trace directory with --format ctf (or auto)",
        ),
        (
            &[0xc1, 0xfc, 0x1f, 0xc1],
            "a CTF stream (LTTng, barectf)",
            "import its trace directory with --format ctf (or auto)",
        ),
        (
            b"PERFILE2",
            "a perf.data file",
            "convert it with `perf script` to text; socscope does not read perf.data",
        ),
        (
            b"SQLite format 3\0",
            "an SQLite database (a socscope trace?)",
            "open it with `socscope info` or `socscope view` instead of importing it",
        ),
        (
            &[0x1f, 0x8b],
            "gzip-compressed data",
            "decompress it first (gunzip)",
        ),
        (
            &[0x28, 0xb5, 0x2f, 0xfd],
            "zstd-compressed data",
            "decompress it first (unzstd)",
        ),
        (
            b"\x7fELF",
            "an ELF executable",
            "import the trace the program writes, not the program",
        ),
    ];
    KNOWN
        .iter()
        .find(|(magic, _, _)| head.starts_with(magic))
        .map(|(_, what, hint)| (*what, *hint))
}

/// Whether `head` looks like binary data rather than text: NUL bytes, or many control bytes.
fn looks_binary(head: &[u8]) -> bool {
    let control = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x1b | 0x0c))
        .count();
    head.contains(&0) || control * 20 > head.len()
}

/// Refuses a binary file (a text format was expected), naming it and what to do when it is a known one.
/// KPTrace relay files are binary-padded, so only known formats are refused for them.
fn refuse_binary(f: &Path, format: Format) -> Result<()> {
    if format.spec().is_binary() {
        // A binary format: its reader checks the magic.
        return Ok(());
    }
    let head = head_of(f, 4096)?;
    if let Some((what, hint)) = known_binary(&head) {
        return Err(CollectorError::Invalid(format!(
            "{}: binary input, {what}, not {} text: {hint}",
            escaped(&display(f)),
            format.name()
        )));
    }
    if format != Format::Kptrace && looks_binary(&head) {
        return Err(CollectorError::Invalid(format!(
            "{}: binary input, not {} text (socscope imports text captures: {})",
            escaped(&display(f)),
            format.name(),
            Format::text_titles()
        )));
    }
    Ok(())
}

/// What a capture's header says about where it was taken.
/// A binary capture's reader, opened once: its header describes the trace, then its events are read
/// (opening parses the event formats, the symbols, the TSDL metadata: not a cost to pay twice).
enum Opened {
    TraceCmd(Box<socscope_formats::tracecmd::DatReader<BufReader<File>>>),
    Ctf(Box<socscope_formats::ctf::CtfReader>),
    /// A text format: its importer opens the file itself.
    Text,
}

impl Opened {
    fn open(files: &[PathBuf], format: Format) -> Result<Self> {
        Ok(match format {
            Format::TraceCmd => Self::TraceCmd(Box::new(
                socscope_formats::tracecmd::DatReader::open(&files[0]).map_err(format_err)?,
            )),
            Format::Ctf => Self::Ctf(Box::new(
                socscope_formats::ctf::CtfReader::open(&files[0]).map_err(format_err)?,
            )),
            _ => Self::Text,
        })
    }
}

struct Header {
    board: String,
    os: String,
    cpus: u32,
    params: Vec<(String, ParamValue)>,
}

impl Header {
    /// Reads the header of `files`: ftrace's `# tracer:` and `#P:N` (or trace-cmd's `cpus=N`); KPTrace's
    /// per-CPU files. What the file does not say (ftrace text names neither host nor kernel; Pajé and
    /// GST_DEBUG logs say nothing of the board) is left empty, and `info` omits it.
    fn read(files: &[PathBuf], format: Format, opened: &Opened) -> Result<Self> {
        let mut h = Self {
            board: String::new(),
            os: String::new(),
            cpus: 1,
            params: Vec::new(),
        };
        match (format, opened) {
            (Format::Kptrace, _) => {
                h.os = "STLinux".into();
                let cpus = files
                    .iter()
                    .filter_map(|f| kp::cpu_of_file(&display(f)))
                    .map(|c| u32::from(c) + 1)
                    .max();
                h.cpus = cpus.unwrap_or(1);
            }
            (Format::Ftrace, _) => {
                let head = head_of(&files[0], 16 * 1024)?;
                let text = String::from_utf8_lossy(&head);
                for line in text.lines().take(64) {
                    let line = line.trim();
                    if let Some(t) = line.strip_prefix("# tracer:") {
                        h.params
                            .push(("tracer".into(), ParamValue::String(escaped(t.trim()))));
                    }
                    let cpus = line
                        .split_once("#P:")
                        .or_else(|| line.split_once("cpus="))
                        .and_then(|(_, n)| n.trim().parse::<u32>().ok());
                    if let Some(n) = cpus.filter(|n| (1..=65_536).contains(n)) {
                        h.cpus = n;
                    }
                }
            }
            (_, Opened::TraceCmd(reader)) => {
                let d = tracecmd::header(reader);
                h.board = d.board;
                h.os = d.os;
                h.cpus = d.cpus;
                h.params = d
                    .params
                    .into_iter()
                    .map(|(k, v)| (k, ParamValue::String(escaped(&v))))
                    .collect();
            }
            (_, Opened::Ctf(reader)) => {
                let d = ctf::header(reader);
                h.board = d.board;
                h.os = d.os;
                h.cpus = d.cpus;
                h.params = d
                    .params
                    .into_iter()
                    .map(|(k, v)| (k, ParamValue::String(escaped(&v))))
                    .collect();
            }
            (Format::Paje | Format::Gst | Format::TraceCmd | Format::Ctf, _) => {}
        }
        Ok(h)
    }
}

/// A trace being imported: removed (with its WAL files) when dropped before it is kept.
struct Partial {
    path: PathBuf,
    keep: bool,
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = self.path.as_os_str().to_owned();
            p.push(suffix);
            // Best effort: a file that is not there is what is wanted.
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
    }
}

/// Reads the first bytes of `path`.
pub fn head_of(path: &Path, n: usize) -> Result<Vec<u8>> {
    let mut f = File::open(path).map_err(|e| io_err(path, e))?;
    let mut buf = vec![0u8; n];
    let mut len = 0;
    while len < n {
        let k = f.read(&mut buf[len..]).map_err(|e| io_err(path, e))?;
        if k == 0 {
            break;
        }
        len += k;
    }
    buf.truncate(len);
    Ok(buf)
}

/// Which format `files` are in, from their content (a raw KPTrace file may start with a binary padding
/// word, so its first sub-buffer's text is what is sniffed).
pub fn detect_format(files: &[PathBuf]) -> Result<Format> {
    for f in files {
        // A CTF trace is a directory (of traces, for an LTTng session).
        if f.is_dir() {
            if socscope_formats::ctf::trace_dirs(f).is_ok_and(|d| !d.is_empty()) {
                return Ok(Format::Ctf);
            }
            return Err(CollectorError::Invalid(format!(
                "{}: a directory, and not a CTF trace (no `metadata` file in it or below it)",
                escaped(&display(f))
            )));
        }
        let head = head_of(f, 16 * 1024)?;
        if let Some(binary) = socscope_formats::sniff_binary(&head) {
            return Ok(binary);
        }
        if let Some((what, hint)) = known_binary(&head) {
            return Err(CollectorError::Invalid(format!(
                "{}: binary input, {what}: {hint}",
                escaped(&display(f))
            )));
        }
        let mut text = Vec::new();
        kp::RelayReader::new(&head[..])
            .read_to_end(&mut text)
            .map_err(|e| io_err(f, e))?;
        let s = String::from_utf8_lossy(&text);
        if kp::sniff_system_map(&s) || kp::FormatDescription::sniff(&s) {
            continue;
        }
        if let Some(fmt) = socscope_formats::detect(&text) {
            return Ok(fmt);
        }
    }
    let first = files
        .first()
        .map_or_else(String::new, |p| escaped(&display(p)));
    if let Some(f) = files.first()
        && looks_binary(&head_of(f, 4096)?)
    {
        return Err(CollectorError::Invalid(format!(
            "{first}: binary input, not a text capture (socscope imports {})",
            Format::text_titles()
        )));
    }
    Err(CollectorError::Invalid(format!(
        "cannot tell the format of {first} from its first lines; give --format"
    )))
}

/// Skip-or-fail bookkeeping shared by the importers.
pub(crate) struct Lines<'o, 'a> {
    opts: &'o mut ImportOptions<'a>,
    skipped: u64,
    records: u64,
    warnings: Vec<String>,
    /// Bytes read so far (set by the importer's `run` at the end).
    pub(crate) bytes: u64,
}

impl Lines<'_, '_> {
    /// A bad line: skipped and counted, or the import's error when it is strict or not a line's fault.
    pub(crate) fn bad(&mut self, e: FormatError) -> Result<()> {
        match e {
            FormatError::Parse(p) if !self.opts.strict => {
                self.skipped += 1;
                (self.opts.on_skip)(&p, self.skipped);
                Ok(())
            }
            other => Err(format_err(other)),
        }
    }
    /// Damage in a binary capture (a stream cut short) that the reader read past: a warning, or the
    /// import's error when it is strict.
    pub(crate) fn damaged(&mut self, e: FormatError) -> Result<()> {
        if self.opts.strict {
            return Err(format_err(e));
        }
        self.warnings.push(escaped(&e.to_string()));
        Ok(())
    }
    /// One more record read, `bytes` into the input.
    pub(crate) fn progress(&mut self, bytes: u64) {
        self.records += 1;
        if self.records.is_multiple_of(65_536) {
            self.bytes = bytes;
            (self.opts.on_progress)(bytes);
        }
    }
}

pub(crate) fn open(path: &Path) -> Result<BufReader<File>> {
    Ok(BufReader::with_capacity(
        256 * 1024,
        File::open(path).map_err(|e| io_err(path, e))?,
    ))
}

pub(crate) fn display(path: &Path) -> String {
    path.display().to_string()
}

/// How often an import commits what it wrote. A capture commits often (readers follow it live); an
/// import's file is followed only by a viewer opened on it meanwhile, and each commit rewrites the open
/// tail chunk of every stream and merges the summary rows it touches into those stored (a loaded
/// machine, which stretches the import, would commit all the more per event: at 2 s, the commits of a
/// 600 k-event kernel CTF import took a sixth of its CPU time), so it commits seldom.
pub const IMPORT_COMMIT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Events a stream of an import must have stored before its zstd dictionary is trained (see
/// `WriterConfig::dict_min_events`), eight full chunks: a capture of a few tens of thousands of
/// events spread over its CPUs' streams trains none, whose 10–30 ms each were up to a fifth of such
/// an import's CPU time and whose 16 KiB each outweighed what they saved; a long stream still gets
/// one.
pub const IMPORT_DICT_MIN_EVENTS: i64 = 8 * 4096;

/// Tells the C allocator to keep freed memory for reuse, for a process whose one job is an import
/// (the `socscope import` command; not the collector or the viewer, which live for hours).
///
/// An import frees and allocates the same large buffers over and over (packets and pages of up to
/// tens of MB, chunk buffers, hash tables that double, the dictionary trainer's tables of several
/// MB). glibc maps each buffer above its dynamic threshold on its own and trims the heap's top back
/// to the kernel as soon as 128 KiB are free there: every reuse then faults its pages in again,
/// cleared by the kernel. A 631 k-event kernel CTF import took 20 900 page faults that way; with
/// freed memory kept (up to 64 MiB more, so the peak stays bounded: 42 → 56 MB there) 11 800
/// (BENCHMARKS.md, "Import — binary Linux captures"). Elsewhere than glibc this does nothing.
pub fn keep_freed_memory_for_reuse() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const KEEP: libc::c_int = 64 << 20;
        for param in [libc::M_MMAP_THRESHOLD, libc::M_TRIM_THRESHOLD] {
            // SAFETY: mallopt only sets allocator parameters; it is called before the import
            // allocates its buffers, and a refused value (0 returned) leaves glibc's default.
            unsafe {
                libc::mallopt(param, KEEP);
            }
        }
    }
}

/// The hidden name an import builds `out` under: `.NAME.importing-PID` beside it.
fn building_name(out: &Path) -> PathBuf {
    out.with_file_name(format!(
        ".{}{IMPORTING}{}",
        out.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        std::process::id()
    ))
}

/// What an import's hidden name holds between the trace's name and the importing process's id.
const IMPORTING: &str = ".importing-";

/// Removes from `dir` the hidden files of imports killed before they finished (kill -9, power loss:
/// their writer's lock is gone) and returns their paths. An import under way holds its file locked and
/// keeps it.
pub fn remove_abandoned_imports(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let abandoned_name = name.starts_with('.')
            && name
                .rsplit_once(IMPORTING)
                .is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        let path = entry.path();
        if abandoned_name
            && matches!(socscope_tracedb::is_being_written(&path), Ok(false))
            && std::fs::remove_file(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed.sort();
    removed
}

/// Imports `files` (one trace: per-CPU KPTrace files with their `System.map` and format description, or
/// one file of the other formats) into a new trace at `out`, registered in the catalog of its directory.
pub fn import(
    files: &[PathBuf],
    format: Format,
    out: &Path,
    opts: &mut ImportOptions<'_>,
) -> Result<ImportReport> {
    import_into(files, format, out, opts, true)
}

/// [`import`] without the catalog: writes the trace file alone, and no `catalog.db` beside it (a
/// user's `import -o stb.db` in a directory that is no catalog directory).
pub fn import_unregistered(
    files: &[PathBuf],
    format: Format,
    out: &Path,
    opts: &mut ImportOptions<'_>,
) -> Result<ImportReport> {
    import_into(files, format, out, opts, false)
}

fn import_into(
    files: &[PathBuf],
    format: Format,
    out: &Path,
    opts: &mut ImportOptions<'_>,
    register: bool,
) -> Result<ImportReport> {
    if files.is_empty() {
        return Err(CollectorError::Invalid("no file to import".into()));
    }
    // A CTF trace directory given to another format: say what it is (any other directory fails to
    // read, naming itself).
    if format != Format::Ctf
        && let Some(d) = files.iter().find(|f| {
            f.is_dir() && socscope_formats::ctf::trace_dirs(f).is_ok_and(|t| !t.is_empty())
        })
    {
        return Err(CollectorError::Invalid(format!(
            "{}: a CTF trace directory, not a {} file: import it with --format ctf (or auto)",
            escaped(&display(d)),
            format.name()
        )));
    }
    // A CTF trace is its directory: a file of it (its metadata, a stream) names it.
    let dirs;
    let files = if format == Format::Ctf && files[0].is_file() {
        let dir = files[0].parent().unwrap_or(Path::new(".")).to_path_buf();
        if !dir.join("metadata").is_file() {
            let f = &files[0];
            let head = head_of(f, 16 * 1024)?;
            let what = if socscope_formats::ctf::sniff(&head) {
                "a CTF stream file, and its directory holds no CTF `metadata`: import the trace's \
                 directory"
                    .to_string()
            } else {
                // Not CTF at all: say what it looks like.
                let hint = match detect_format(std::slice::from_ref(f)) {
                    Ok(other) => format!(
                        "; it reads as {}: import it with --format {} (or auto)",
                        other.name(),
                        other.name()
                    ),
                    Err(_) => String::new(),
                };
                format!(
                    "byte 0: expected a CTF trace directory (holding a `metadata` file) or one of its \
                     stream files (CTF packet magic 0xc1fc1fc1), found neither{hint}"
                )
            };
            return Err(CollectorError::Invalid(format!(
                "{}: {what}",
                escaped(&display(f))
            )));
        }
        dirs = vec![dir];
        &dirs[..]
    } else {
        files
    };
    if out.exists() {
        return Err(CollectorError::Invalid(format!(
            "{} exists already; choose another -o",
            out.display()
        )));
    }
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
    let mtime = std::fs::metadata(&files[0])
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64);
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .map_or_else(|| display(f), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    for f in files {
        refuse_binary(f, format)?;
    }
    let opened = Opened::open(files, format)?;
    let header = Header::read(files, format, &opened)?;
    let mut params = vec![("format".into(), ParamValue::String(format.name().into()))];
    params.extend(header.params);
    let meta = TraceHeader {
        trace_type: format.name().into(),
        board: header.board,
        soc: String::new(),
        os: header.os,
        application: names.join(" "),
        cpus: header.cpus,
        tick_rate_hz: 1_000_000_000,
        start_unix_ns: mtime,
        description: format!("imported from {}", names.join(", ")),
        processed: false,
        params,
    };
    // Written under a hidden name beside `out`, and linked to `out` only once whole and synced
    // (`UnsyncedTrace::sync_as`): an import killed at any moment (kill -9, power loss) leaves no
    // file named `out`, or a whole one, never a half-written trace that `info` would open.
    let building = building_name(out);
    // Declared before the writer, so dropped after it: an import that fails or keeps nothing leaves no
    // trace behind to be mistaken for a capture.
    let mut partial = Partial {
        path: building.clone(),
        keep: false,
    };
    let mut writer = TraceWriter::create_with(
        &building,
        &meta,
        socscope_tracedb::WriterConfig {
            commit_interval: IMPORT_COMMIT_INTERVAL,
            dict_min_events: IMPORT_DICT_MIN_EVENTS,
            // The file is worth nothing before it is finished (removed when the import fails): its
            // commits are not synced, `finish` syncs it once.
            sync_commits: false,
            ..socscope_tracedb::WriterConfig::default()
        },
    )?;
    for f in files {
        writer.add_file(&display(f), &format!("{} source", format.name()))?;
    }
    let mut lines = Lines {
        opts,
        skipped: 0,
        records: 0,
        warnings: Vec::new(),
        bytes: 0,
    };
    let stats = match (format, opened) {
        (_, Opened::TraceCmd(reader)) => tracecmd::run(*reader, &mut writer, &mut lines)?,
        (_, Opened::Ctf(reader)) => ctf::run(*reader, &mut writer, &mut lines)?,
        (Format::Ftrace, _) => ftrace::run(&files[0], &mut writer, &mut lines)?,
        (Format::Kptrace, _) => kptrace::run(files, &mut writer, &mut lines)?,
        (Format::Paje, _) => paje::run(&files[0], &mut writer, &mut lines)?,
        (Format::Gst, _) => gst::run(&files[0], &mut writer, &mut lines)?,
        (Format::TraceCmd | Format::Ctf, Opened::Text) => {
            return Err(CollectorError::Invalid(format!(
                "{}: internal error: a {} capture without its reader",
                escaped(&display(&files[0])),
                format.name()
            )));
        }
    };
    let common = [
        stat("bytes", lines.bytes, "bytes read from the imported files"),
        stat("records", lines.records, "records (event lines) parsed"),
        stat(
            "lines_skipped",
            lines.skipped,
            "lines that did not follow the format, skipped",
        ),
    ];
    for s in common.iter().chain(&stats) {
        writer.set_ingest_stat(s)?;
    }
    // Synced below: while the trace file syncs, its catalog is built.
    let (info, unsynced) = writer.finish_unsynced(true)?;
    if info.event_count == 0 {
        let what = if format.spec().is_binary() {
            // A binary capture's header was read: what it lacks is events.
            match lines.warnings.first() {
                Some(w) => format!("no event could be read: {w}"),
                None => "the capture holds no events".to_string(),
            }
        } else if lines.bytes == 0 && lines.records == 0 && lines.skipped == 0 {
            "the file is empty".to_string()
        } else {
            format!(
                "{} records read, {} lines skipped: is it {} text?",
                lines.records,
                lines.skipped,
                format.name()
            )
        };
        return Err(CollectorError::Invalid(format!(
            "{}: nothing to import ({what}); no trace written",
            escaped(&names.join(", "))
        )));
    }
    let db_file = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if register {
        // The trace's syncs wait on the disk. A thread syncs the file, links it under its name,
        // says so, and syncs the directory; meanwhile this thread builds the catalog's row (a new
        // catalog aside, synced, or the existing one opened). Once the trace is whole under its
        // name, the row is committed (or the new catalog linked in and its directory synced)
        // while the thread's directory sync runs, not after it: the two syncs overlap, and the
        // import reports done only when both are durable. A crash in between can leave the row
        // durable before the trace's name: `ls` then shows the trace `missing` (as it does for
        // a trace deleted by hand), never a half-written trace under its name.
        let on_thread = unsynced.clone();
        let name = out.to_path_buf();
        let (linked_tx, linked_rx) = std::sync::mpsc::sync_channel::<bool>(1);
        let syncing = std::thread::Builder::new()
            .name("import-sync".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let linked = on_thread.sync_and_link(&name);
                // The receiver is gone only when registration ended without waiting for the
                // name: the directory is synced all the same.
                let _ = linked_tx.send(linked.is_ok());
                linked?.sync()
            });
        match syncing {
            Ok(thread) => {
                let published = std::cell::Cell::new(false);
                let trace_named = || {
                    if linked_rx.recv() == Ok(true) {
                        published.set(true);
                        Ok(())
                    } else {
                        // The thread's own error, more precise, is returned below.
                        Err(socscope_tracedb::StoreError::Io {
                            path: out.to_path_buf(),
                            source: std::io::Error::other(
                                "the trace could not be synced and named",
                            ),
                        })
                    }
                };
                let registered = Catalog::register_written_in(&dir, &db_file, &info, trace_named);
                let synced = thread.join().unwrap_or_else(|_| {
                    Err(socscope_tracedb::StoreError::Io {
                        path: out.to_path_buf(),
                        source: std::io::Error::other("the thread syncing the trace panicked"),
                    })
                });
                if published.get() || linked_rx.try_recv() == Ok(true) {
                    // Now named `out`: a failed import removes it under that name.
                    partial.path = out.to_path_buf();
                }
                synced?;
                registered?;
            }
            // No thread to be had: everything in turn, here.
            Err(_) => {
                unsynced.sync_as(out)?;
                partial.path = out.to_path_buf();
                Catalog::register_written_in(&dir, &db_file, &info, || Ok(()))?;
            }
        }
    } else {
        unsynced.sync_as(out)?;
    }
    partial.keep = true;
    Ok(ImportReport {
        path: out.to_path_buf(),
        format,
        bytes: lines.bytes,
        records: lines.records,
        lines_skipped: lines.skipped,
        warnings: lines.warnings,
        info,
    })
}

/// An ingest statistic.
pub(crate) fn stat(
    name: impl Into<String>,
    value: u64,
    description: impl Into<String>,
) -> IngestStat {
    IngestStat {
        name: name.into(),
        value: i64::try_from(value).unwrap_or(i64::MAX),
        description: description.into(),
    }
}

/// The statistics of a reconstructing import (KPTrace, ftrace).
pub(crate) fn recon_stats(recon: &Reconstructor, types: &ImportTypes) -> Vec<IngestStat> {
    let mut stats = Vec::new();
    let st = recon.stats();
    let rows = [
        (
            "events",
            st.events,
            "events stored after state reconstruction",
        ),
        (
            "clipped_open_states",
            st.clipped_open_states,
            "states still open at the end or missing their exit, closed at the capture edge",
        ),
        (
            "clipped_exits",
            st.clipped_exits,
            "exits or switch-outs whose entry preceded the capture, started at the capture edge",
        ),
        (
            "clipped_wakeups",
            st.clipped_wakeups,
            "wake-ups whose target never ran, ended at the capture edge",
        ),
        (
            "switch_mismatches",
            st.switch_mismatches,
            "context switches whose previous thread was not the running one",
        ),
        (
            "unknown_frees",
            st.unknown_frees,
            "kfree of pointers no kmalloc announced",
        ),
        (
            "closed_at_exit",
            st.closed_at_exit,
            crate::reconstruct::CLOSED_AT_EXIT,
        ),
    ];
    stats.extend(rows.into_iter().map(|(n, v, d)| stat(n, v, d)));
    let mut by_type: Vec<(u16, u64)> = st.records_by_type.iter().map(|(k, v)| (*k, *v)).collect();
    by_type.sort_unstable();
    for (id, count) in by_type {
        let name = types
            .get(id)
            .map_or_else(|| format!("type{id}"), |t| t.name.clone());
        stats.push(stat(
            format!("records.{name}"),
            count,
            format!("records of type {id}"),
        ));
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only hidden `.NAME.importing-PID` files nobody holds are removed: an import under way (its
    /// file locked) and other names are left alone.
    #[test]
    fn only_abandoned_import_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            path
        };
        let abandoned = write(".a.db.importing-41");
        let under_way = write(".b.db.importing-42");
        let others = [
            write("c.db"),
            write(".c.db.importing-"),
            write(".c.db.importing-4x"),
            write("d.db.importing-43"),
        ];
        let lock = File::open(&under_way).unwrap();
        lock.try_lock().unwrap();
        assert_eq!(
            remove_abandoned_imports(dir.path()),
            std::slice::from_ref(&abandoned)
        );
        assert!(!abandoned.exists());
        assert!(under_way.exists() && others.iter().all(|p| p.exists()));
        drop(lock);
        assert_eq!(
            remove_abandoned_imports(dir.path()),
            std::slice::from_ref(&under_way)
        );
        assert!(others.iter().all(|p| p.exists()));
    }
}
