//! Text captures into the trace store: KPTrace and ftrace records go through the same [`Reconstructor`]
//! as live capture (context switches → running states, entry/exit → nested states, wake-ups → links);
//! Pajé and GST_DEBUG logs map directly (their states and links are explicit).
//!
//! Files are read line by line (constant memory); a bad line is skipped and counted (`lines_skipped` in
//! `ingest_stat`) unless the import is strict.

use crate::syscalls::SyscallAbi;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use rustc_hash::{FxHashMap, FxHashSet};

use socscope_formats::{Format, FormatError, ParseError, ftrace, gst, kptrace, paje};
use socscope_tracedb::{
    Catalog, Event, EventCategory, EventKind, EventType, IngestStat, ParamDef, ParamType,
    ParamValue, Producer, ProducerId, ProducerKind, TraceInfo, TraceMeta, TraceWriter, TypeId,
};
use socscope_wire::decode::{OwnedEventTypeDef, OwnedParamDef};
use socscope_wire::dict::{self as wdict, BUILTINS, Builtin, Category, FIRST_CUSTOM_TYPE};

use crate::reconstruct::{RawRecord, Reconstructor, TypeTable, assign_params};
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
    /// The trace as finished.
    pub info: TraceInfo,
}

fn io_err(path: &Path, source: std::io::Error) -> CollectorError {
    CollectorError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn format_err(e: FormatError) -> CollectorError {
    match e {
        FormatError::Parse(p) => CollectorError::Parse(p),
        FormatError::Io { file, source } => CollectorError::Io {
            path: file.into(),
            source,
        },
        other => CollectorError::Invalid(other.to_string()),
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
        let head = head_of(f, 16 * 1024)?;
        let mut text = Vec::new();
        kptrace::RelayReader::new(&head[..])
            .read_to_end(&mut text)
            .map_err(|e| io_err(f, e))?;
        let s = String::from_utf8_lossy(&text);
        if kptrace::sniff_system_map(&s) || kptrace::FormatDescription::sniff(&s) {
            continue;
        }
        if let Some(fmt) = socscope_formats::detect(&text) {
            return Ok(fmt);
        }
    }
    Err(CollectorError::Invalid(format!(
        "cannot tell the format of {} from its first lines; give --format",
        files
            .first()
            .map_or_else(String::new, |p| p.display().to_string())
    )))
}

/// The types of an import: the built-in dictionary, adjusted to what text captures carry, plus one
/// custom type per unknown event name.
pub struct ImportTypes {
    types: Vec<Option<OwnedEventTypeDef>>,
    exits: FxHashMap<u16, u16>,
    by_name: FxHashMap<String, u16>,
    next: u16,
}

fn pinfo(name: &str, ty: wdict::ParamType) -> OwnedParamDef {
    OwnedParamDef {
        name: name.into(),
        ty,
    }
}

impl ImportTypes {
    /// The built-in types, with syscalls and user functions carrying their text captures' extra fields.
    pub fn new() -> Self {
        let mut t = Self {
            types: Vec::new(),
            exits: FxHashMap::default(),
            by_name: FxHashMap::default(),
            next: FIRST_CUSTOM_TYPE,
        };
        use wdict::ParamType::{Address as A, Signed as I, String as S, Unsigned as U};
        for b in BUILTINS {
            let d = b.def();
            let mut params: Vec<OwnedParamDef> =
                d.params.iter().map(|p| pinfo(p.name, p.ty)).collect();
            match b {
                Builtin::SyscallEntry => {
                    params.push(pinfo("name", S));
                    params.push(pinfo("text", S));
                }
                Builtin::UserEntry => {
                    for a in ["a0", "a1", "a2", "a3"] {
                        params.push(pinfo(a, U));
                    }
                }
                Builtin::UserExit => {
                    params = vec![pinfo("ret", I), pinfo("exit_address", A)];
                }
                _ => {}
            }
            t.insert(OwnedEventTypeDef {
                id: d.id,
                name: d.name.into(),
                category: d.category,
                params,
            });
        }
        t
    }

    fn insert(&mut self, info: OwnedEventTypeDef) {
        let i = usize::from(info.id);
        if self.types.len() <= i {
            self.types.resize(i + 1, None);
        }
        if let Category::StateExit { enter } = info.category {
            self.exits.insert(enter, info.id);
        }
        self.by_name.insert(info.name.clone(), info.id);
        self.types[i] = Some(info);
    }

    /// The id of the custom type `name`, declaring it (and its store type) on first use; `None` when the
    /// id space is exhausted.
    pub fn custom(
        &mut self,
        name: &str,
        category: Category,
        params: impl FnOnce() -> Vec<OwnedParamDef>,
        recon: &mut Reconstructor,
        sink: &mut TraceWriter,
    ) -> Result<Option<u16>> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(Some(id));
        }
        if self.next == u16::MAX {
            return Ok(None);
        }
        let id = self.next;
        self.next += 1;
        self.insert(OwnedEventTypeDef {
            id,
            name: name.into(),
            category,
            params: params(),
        });
        recon.declare_type(id, self, sink)?;
        if let Category::StateExit { enter } = category {
            recon.declare_type(enter, self, sink)?;
        }
        Ok(Some(id))
    }

    /// How many custom types were declared.
    pub fn custom_count(&self) -> usize {
        usize::from(self.next - FIRST_CUSTOM_TYPE)
    }
}

impl Default for ImportTypes {
    fn default() -> Self {
        Self::new()
    }
}

impl TypeTable for ImportTypes {
    fn get(&self, id: u16) -> Option<&OwnedEventTypeDef> {
        self.types.get(usize::from(id))?.as_ref()
    }
    fn exit_of(&self, enter: u16) -> Option<&OwnedEventTypeDef> {
        self.get(*self.exits.get(&enter)?)
    }
}

/// One record of an importer, reused from line to line.
#[derive(Debug, Default, Clone)]
pub struct ImportRecord {
    /// Type id in the [`ImportTypes`].
    pub type_id: u16,
    /// Values in the type's parameter order.
    pub params: Vec<ParamValue>,
    /// String buffers of earlier records, reused (no allocation per string parameter).
    spare: Vec<String>,
}

impl ImportRecord {
    fn set(&mut self, b: Builtin) -> &mut Self {
        self.set_id(b.id())
    }
    /// Starts a record of type `id` (the previous record's strings kept for reuse).
    fn set_id(&mut self, id: u16) -> &mut Self {
        self.type_id = id;
        for p in self.params.drain(..) {
            if let ParamValue::String(s) = p
                && self.spare.len() < 16
            {
                self.spare.push(s);
            }
        }
        self
    }
    fn u(&mut self, v: u64) -> &mut Self {
        self.params.push(ParamValue::Unsigned(v));
        self
    }
    fn i(&mut self, v: i64) -> &mut Self {
        self.params.push(ParamValue::Signed(v));
        self
    }
    fn a(&mut self, v: u64) -> &mut Self {
        self.params.push(ParamValue::Address(v));
        self
    }
    fn s(&mut self, v: &str) -> &mut Self {
        let mut s = self.spare.pop().unwrap_or_default();
        s.clear();
        s.push_str(v);
        self.params.push(ParamValue::String(s));
        self
    }
}

impl RawRecord for ImportRecord {
    fn type_id(&self) -> u16 {
        self.type_id
    }
    fn param_count(&self) -> usize {
        self.params.len()
    }
    fn param(&self, i: usize) -> Option<ParamValue> {
        self.params.get(i).cloned()
    }
    fn unsigned(&self, i: usize) -> Option<u64> {
        match *self.params.get(i)? {
            ParamValue::Unsigned(v) | ParamValue::Address(v) => Some(v),
            ParamValue::Signed(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
    fn text(&self, i: usize) -> Option<&str> {
        match self.params.get(i)? {
            ParamValue::String(s) => Some(s),
            _ => None,
        }
    }
    fn write_params(&self, out: &mut Vec<ParamValue>, at: usize) {
        assign_params(out, at, &self.params);
    }
}

/// Skip-or-fail bookkeeping shared by the importers.
struct Lines<'o, 'a> {
    opts: &'o mut ImportOptions<'a>,
    skipped: u64,
    records: u64,
    bytes: u64,
}

impl Lines<'_, '_> {
    fn bad(&mut self, e: FormatError) -> Result<()> {
        match e {
            FormatError::Parse(p) if !self.opts.strict => {
                self.skipped += 1;
                (self.opts.on_skip)(&p, self.skipped);
                Ok(())
            }
            other => Err(format_err(other)),
        }
    }
    fn progress(&mut self, bytes: u64) {
        self.records += 1;
        if self.records.is_multiple_of(65_536) {
            self.bytes = bytes;
            (self.opts.on_progress)(bytes);
        }
    }
}

fn open(path: &Path) -> Result<BufReader<File>> {
    Ok(BufReader::with_capacity(
        256 * 1024,
        File::open(path).map_err(|e| io_err(path, e))?,
    ))
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Imports `files` (one trace: per-CPU KPTrace files with their `System.map` and format description, or
/// one file of the other formats) into a new trace at `out`, registered in the catalog of its directory.
pub fn import(
    files: &[PathBuf],
    format: Format,
    out: &Path,
    opts: &mut ImportOptions<'_>,
) -> Result<ImportReport> {
    if files.is_empty() {
        return Err(CollectorError::Invalid("no file to import".into()));
    }
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
    let meta = TraceMeta {
        trace_type: format.name().into(),
        board: String::new(),
        soc: String::new(),
        os: if matches!(format, Format::Kptrace) {
            "STLinux".into()
        } else {
            String::new()
        },
        application: names.join(" "),
        cpus: 1,
        tick_rate_hz: 1_000_000_000,
        start_unix_ns: mtime,
        description: format!("imported from {}", names.join(", ")),
        processed: false,
        params: vec![("format".into(), ParamValue::String(format.name().into()))],
    };
    let mut writer = TraceWriter::create(out, &meta)?;
    for f in files {
        writer.add_file(&display(f), &format!("{} source", format.name()))?;
    }
    let mut lines = Lines {
        opts,
        skipped: 0,
        records: 0,
        bytes: 0,
    };
    let mut stats: Vec<(String, i64, String)> = Vec::new();
    match format {
        Format::Ftrace => ftrace_import(&files[0], &mut writer, &mut lines, &mut stats)?,
        Format::Kptrace => kptrace_import(files, &mut writer, &mut lines, &mut stats)?,
        Format::Paje => paje_import(&files[0], &mut writer, &mut lines, &mut stats)?,
        Format::Gst => gst_import(&files[0], &mut writer, &mut lines, &mut stats)?,
    }
    let common = [
        (
            "bytes",
            lines.bytes as i64,
            "bytes read from the imported files",
        ),
        (
            "records",
            lines.records as i64,
            "records (event lines) parsed",
        ),
        (
            "lines_skipped",
            lines.skipped as i64,
            "lines that did not follow the format, skipped",
        ),
    ];
    for (name, value, description) in common {
        writer.set_ingest_stat(&IngestStat {
            name: name.into(),
            value,
            description: description.into(),
        })?;
    }
    for (name, value, description) in stats {
        writer.set_ingest_stat(&IngestStat {
            name,
            value,
            description,
        })?;
    }
    let info = writer.finish(true)?;
    let db_file = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Catalog::open(&dir)?.register_file(&db_file)?;
    Ok(ImportReport {
        path: out.to_path_buf(),
        format,
        bytes: lines.bytes,
        records: lines.records,
        lines_skipped: lines.skipped,
        info,
    })
}

fn recon_stats(recon: &Reconstructor, types: &ImportTypes, stats: &mut Vec<(String, i64, String)>) {
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
    ];
    for (n, v, d) in rows {
        stats.push((n.into(), v as i64, d.into()));
    }
    let mut by_type: Vec<(u16, u64)> = st.records_by_type.iter().map(|(k, v)| (*k, *v)).collect();
    by_type.sort_unstable();
    for (id, count) in by_type {
        let name = types
            .get(id)
            .map_or_else(|| format!("type{id}"), |t| t.name.clone());
        stats.push((
            format!("records.{name}"),
            count as i64,
            format!("records of type {id}"),
        ));
    }
}

// ---------------------------------------------------------------------------------------------------
// ftrace

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s
            .parse()
            .ok()
            .or_else(|| s.parse::<i64>().ok().map(|v| v as u64)),
    }
}

/// Records per batch handed from the reading thread to the importing one, and the most line text a
/// batch holds (whatever the lines' length, memory stays bounded).
const BATCH_RECORDS: usize = 4096;
const BATCH_BYTES: usize = 1 << 20;
/// Batches in existence: one being filled, one being imported, the others waiting either way.
const BATCHES: usize = 4;

/// A batch of the reading thread: the lines, and what the rules need of them that takes no state.
#[derive(Default)]
struct ReadBatch {
    lines: ftrace::RecordBatch,
    prepared: Prepared,
}

/// The parts of the ftrace rules that need no state, worked out on the reading thread (the importing
/// thread, which reconstructs and stores, is the busier one): per record of a batch, the first four
/// values of a syscall's arguments and the `key=value` pairs of an event.
#[derive(Default)]
struct Prepared {
    /// Per record, in batch order: its syscall values, and the range of its pairs in `pairs`.
    records: Vec<([u64; 4], usize, usize)>,
    /// Each pair's key and value, as byte ranges of its record's arguments.
    pairs: Vec<[usize; 4]>,
}

impl Prepared {
    fn prepare(&mut self, lines: &ftrace::RecordBatch) {
        self.records.clear();
        self.pairs.clear();
        for r in lines.records() {
            let start = self.pairs.len();
            let mut values = [0; 4];
            match r.body {
                ftrace::Body::SyscallEnter { args, .. } => values = syscall_values(args),
                ftrace::Body::Event { name, args } if name.starts_with("sys_enter_") => {
                    values = syscall_values(args);
                }
                ftrace::Body::Event { args, .. } => {
                    let at = |s: &str| (s.as_ptr() as usize).saturating_sub(args.as_ptr() as usize);
                    self.pairs.extend(
                        ftrace::Record::pairs(args)
                            .map(|(k, v)| [at(k), at(k) + k.len(), at(v), at(v) + v.len()]),
                    );
                }
                ftrace::Body::SyscallExit { .. } => {}
            }
            self.records.push((values, start, self.pairs.len()));
        }
    }

    /// Record `i` of the batch, whose arguments are `args`.
    fn get<'a>(&'a self, i: usize, args: &'a str) -> PreparedRecord<'a> {
        let (values, from, to) = self.records.get(i).copied().unwrap_or_default();
        PreparedRecord {
            values,
            args,
            pairs: self.pairs.get(from..to).unwrap_or_default(),
        }
    }
}

/// What the reading thread prepared for one record.
#[derive(Clone, Copy)]
struct PreparedRecord<'a> {
    /// A syscall entry's first four argument values.
    values: [u64; 4],
    args: &'a str,
    pairs: &'a [[usize; 4]],
}

impl<'a> PreparedRecord<'a> {
    /// The event's `key=value` pairs, as [`ftrace::Record::pairs`] gives them.
    fn pairs(&self) -> impl Iterator<Item = (&'a str, &'a str)> + use<'a> {
        let args = self.args;
        self.pairs.iter().map(move |p| {
            (
                args.get(p[0]..p[1]).unwrap_or(""),
                args.get(p[2]..p[3]).unwrap_or(""),
            )
        })
    }

    /// The value of `key` (its first pair).
    fn arg(&self, key: &str) -> Option<&'a str> {
        self.pairs().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The values of `keys` (the first pair of each key), in one pass.
    fn args_of<const N: usize>(&self, keys: [&str; N]) -> [Option<&'a str>; N] {
        let mut out = [None; N];
        let mut missing = N;
        for (k, v) in self.pairs() {
            for (slot, key) in out.iter_mut().zip(keys) {
                if slot.is_none() && k == key {
                    *slot = Some(v);
                    missing -= 1;
                }
            }
            if missing == 0 {
                break;
            }
        }
        out
    }
}

/// A record, or an error, of an ftrace file read ahead.
enum ReadItem<'a> {
    Record {
        /// Bytes of the file before the record's line.
        bytes: u64,
        record: ftrace::Record<'a>,
        prepared: PreparedRecord<'a>,
    },
    /// A bad line, or the read error that ends the file.
    Error(FormatError),
}

/// Reads and parses `reader` on a thread of its own while `each` is called here, in file order, with
/// every record and every error (a bad line, or the read error that ends the file); returns the bytes
/// read. An error of `each` stops both threads and is returned.
fn ftrace_read_ahead<R: BufRead + Send>(
    mut reader: ftrace::FtraceReader<R>,
    mut each: impl FnMut(ReadItem<'_>) -> Result<()>,
) -> Result<u64> {
    use std::sync::mpsc;
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = mpsc::sync_channel::<ReadBatch>(BATCHES);
        let (free_tx, free_rx) = mpsc::channel::<ReadBatch>();
        for _ in 0..BATCHES {
            // Cannot fail: the receiver is right here.
            let _ = free_tx.send(ReadBatch::default());
        }
        let reading = std::thread::Builder::new()
            .name("ftrace-reader".into())
            .spawn_scoped(scope, move || {
                // Ends at the end of the file, or when the importing side stopped (its ends of the
                // channels are gone).
                while let Ok(mut batch) = free_rx.recv() {
                    let more = reader.fill_batch(&mut batch.lines, BATCH_RECORDS, BATCH_BYTES);
                    batch.prepared.prepare(&batch.lines);
                    if full_tx.send(batch).is_err() || !more {
                        break;
                    }
                }
            })
            .map_err(|e| {
                CollectorError::Invalid(format!("cannot start the ftrace reading thread: {e}"))
            })?;
        let mut bytes = 0;
        for mut batch in full_rx.iter() {
            let ReadBatch { lines, prepared } = &mut batch;
            let mut i = 0;
            for item in lines.drain() {
                match item {
                    ftrace::BatchLine::Record { bytes, record } => {
                        let args = match record.body {
                            ftrace::Body::Event { args, .. }
                            | ftrace::Body::SyscallEnter { args, .. } => args,
                            ftrace::Body::SyscallExit { ret, .. } => ret,
                        };
                        let prepared = prepared.get(i, args);
                        i += 1;
                        each(ReadItem::Record {
                            bytes,
                            record,
                            prepared,
                        })?;
                    }
                    ftrace::BatchLine::Error(e) => each(ReadItem::Error(e))?,
                }
            }
            bytes = lines.bytes_read();
            // The reading thread may have finished already: nothing to hand back then.
            let _ = free_tx.send(batch);
        }
        reading
            .join()
            .map_err(|_| CollectorError::Invalid("the ftrace reading thread panicked".into()))?;
        Ok(bytes)
    })
}

fn ftrace_import(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
    stats: &mut Vec<(String, i64, String)>,
) -> Result<()> {
    let reader = ftrace::FtraceReader::new(open(path)?, display(path));
    let mut importer = FtraceImporter::new(writer)?;
    lines.bytes = ftrace_read_ahead(reader, |item| match item {
        ReadItem::Record {
            bytes,
            record,
            prepared,
        } => {
            lines.progress(bytes);
            importer.record(&record, &prepared, writer)
        }
        ReadItem::Error(e) => lines.bad(e),
    })?;
    importer.finish(writer, stats)
}

/// What an ftrace import keeps from line to line.
struct FtraceImporter {
    types: ImportTypes,
    recon: Reconstructor,
    names: FxHashMap<u64, (String, Option<u64>)>,
    /// Names each thread had before its current one.
    earlier: FxHashMap<u64, Vec<String>>,
    waking: FxHashSet<u64>,
    rec: ImportRecord,
    unknown_events: u64,
    /// Per custom punctual type: its parameter names, to place `key=value` pairs.
    keys: FxHashMap<u16, Vec<String>>,
    /// `key=value` pairs of the current line, reused from line to line.
    pairs_buf: Vec<(&'static str, &'static str)>,
    user_enter: u16,
    user_exit: u16,
}

impl FtraceImporter {
    fn new(writer: &mut TraceWriter) -> Result<Self> {
        let mut types = ImportTypes::new();
        let mut recon = Reconstructor::new(1_000_000_000, 0, 1);
        recon.start(&types, writer)?;
        let user_enter = types
            .custom(
                "user_state",
                Category::StateEnter,
                || vec![pinfo("name", wdict::ParamType::String)],
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        let user_exit = types
            .custom(
                "user_state_exit",
                Category::StateExit { enter: user_enter },
                Vec::new,
                &mut recon,
                writer,
            )?
            .unwrap_or(0);
        Ok(Self {
            types,
            recon,
            names: FxHashMap::default(),
            earlier: FxHashMap::default(),
            waking: FxHashSet::default(),
            rec: ImportRecord::default(),
            unknown_events: 0,
            keys: FxHashMap::default(),
            pairs_buf: Vec::new(),
            user_enter,
            user_exit,
        })
    }

    fn name_thread(
        &mut self,
        pid: u64,
        comm: &str,
        tgid: Option<u64>,
        w: &mut TraceWriter,
    ) -> Result<()> {
        if comm.is_empty() || comm == "<...>" {
            return Ok(());
        }
        let known = self.names.get(&pid);
        if known.is_none_or(|(n, g)| n != comm || (tgid.is_some() && *g != tgid)) {
            // A name the thread had before (pid 0 is `<idle>` on event lines and `swapper/N` in
            // sched_switch fields): keep the current one instead of rewriting the producer at
            // every line that flips between the two.
            let same_group = known.is_some_and(|(_, g)| tgid.is_none() || *g == tgid);
            if same_group
                && self
                    .earlier
                    .get(&pid)
                    .is_some_and(|v| v.iter().any(|x| x == comm))
            {
                return Ok(());
            }
            let tgid = tgid.or(known.and_then(|k| k.1));
            if let Some((old, _)) = self.names.insert(pid, (comm.to_string(), tgid)) {
                let e = self.earlier.entry(pid).or_default();
                if e.len() < 8 && !e.contains(&old) {
                    e.push(old);
                }
            }
            self.recon.name_thread(pid, comm, tgid, w)?;
        }
        Ok(())
    }

    /// A `name: key=value ...` event of no rule (see [`punctual_kv`]).
    fn punctual(
        &mut self,
        name: &str,
        args: &str,
        prepared: &PreparedRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.pairs_buf = punctual_kv(
            name,
            args,
            prepared.pairs(),
            std::mem::take(&mut self.pairs_buf),
            &mut self.types,
            &mut self.keys,
            &mut self.rec,
            &mut self.recon,
            writer,
        )?;
        Ok(())
    }

    fn record(
        &mut self,
        line: &ftrace::Record<'_>,
        prepared: &PreparedRecord<'_>,
        writer: &mut TraceWriter,
    ) -> Result<()> {
        self.name_thread(line.pid, line.comm, line.tgid, writer)?;
        let ts = line.ts.max(0) as u64;
        let rec = &mut self.rec;
        match line.body {
            ftrace::Body::Event { name, args } => {
                let arg = |k: &str| prepared.arg(k);
                match name {
                    "sched_switch" => {
                        let [prev_pid, next_pid, prev_comm, next_comm] =
                            prepared.args_of(["prev_pid", "next_pid", "prev_comm", "next_comm"]);
                        let prev = prev_pid.and_then(parse_num).unwrap_or(line.pid);
                        let next = next_pid.and_then(parse_num).unwrap_or(0);
                        if let Some(c) = prev_comm {
                            self.name_thread(prev, c, None, writer)?;
                        }
                        if let Some(c) = next_comm {
                            self.name_thread(next, c, None, writer)?;
                        }
                        self.rec.set(Builtin::ContextSwitch).u(prev).u(next);
                    }
                    "sched_wakeup" | "sched_waking" | "sched_wakeup_new"
                        if arg("pid").and_then(parse_num).is_some() =>
                    {
                        let pid = arg("pid").and_then(parse_num).unwrap_or(0);
                        if let Some(c) = arg("comm") {
                            self.name_thread(pid, c, None, writer)?;
                        }
                        // A kernel with both tracepoints reports one wake-up twice: waking, then wakeup.
                        let duplicate = name == "sched_wakeup" && self.waking.remove(&pid);
                        if name == "sched_waking" {
                            self.waking.insert(pid);
                        }
                        if duplicate {
                            self.punctual(name, args, prepared, writer)?;
                        } else {
                            self.rec.set(Builtin::Wakeup).u(pid);
                        }
                    }
                    "irq_handler_entry" => {
                        let irq = arg("irq").and_then(parse_num).unwrap_or(0);
                        if let Some(n) = arg("name") {
                            self.recon.name_hint(false, irq, format!("irq {irq} {n}"));
                        }
                        rec.set(Builtin::IrqEntry).u(irq);
                    }
                    "irq_handler_exit" => {
                        rec.set(Builtin::IrqExit);
                    }
                    "softirq_entry" => {
                        let vec = arg("vec").and_then(parse_num).unwrap_or(0);
                        if let Some(n) = arg("action") {
                            self.recon.name_hint(true, vec, format!("softirq {n}"));
                        }
                        rec.set(Builtin::SoftIrqEntry).a(vec);
                    }
                    "softirq_exit" => {
                        rec.set(Builtin::SoftIrqExit);
                    }
                    "sys_enter" => {
                        // `NR 0 (3, 7ffe..., 10, 0, 0, 0)`
                        let mut w = args
                            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
                            .filter(|s| !s.is_empty());
                        let nr = w.nth(1).and_then(parse_num).unwrap_or(0);
                        rec.set(Builtin::SyscallEntry).u(nr);
                        for _ in 0..4 {
                            let v = w
                                .next()
                                .and_then(|x| u64::from_str_radix(x, 16).ok())
                                .unwrap_or(0);
                            rec.u(v);
                        }
                        // Raw events carry only the number: named from the x86-64 table (ftrace
                        // captures come from desktops and servers far more than from ARM boards).
                        rec.s(SyscallAbi::X86_64.name(nr).unwrap_or("")).s("");
                    }
                    "sys_exit" => {
                        // `NR 0 = 12`
                        let mut w = args.split_whitespace();
                        let nr = w.nth(1).and_then(parse_num).unwrap_or(0);
                        let ret = w.nth(1).and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
                        rec.set(Builtin::SyscallExit).u(nr).i(ret);
                    }
                    n if n.starts_with("sys_enter_") => {
                        syscall_enter(rec, &n["sys_enter_".len()..], args, prepared.values);
                    }
                    n if n.starts_with("sys_exit_") => {
                        let ret = parse_num(args).map_or(0, |v| v as i64);
                        rec.set(Builtin::SyscallExit).u(0).i(ret);
                    }
                    "tracing_mark_write" | "print" => {
                        let text = args.trim();
                        let text = text.strip_prefix("tracing_mark_write: ").unwrap_or(text);
                        if let Some(rest) = text.strip_prefix("B|") {
                            let label = rest.split_once('|').map_or("", |(_, n)| n);
                            rec.set_id(self.user_enter).s(label);
                        } else if text == "E" || text.starts_with("E|") {
                            rec.set_id(self.user_exit);
                        } else {
                            rec.set(Builtin::Marker).s(text);
                        }
                    }
                    _ => {
                        self.unknown_events += 1;
                        self.punctual(name, args, prepared, writer)?;
                    }
                }
            }
            ftrace::Body::SyscallEnter { name, args } => {
                let name = name.strip_prefix("sys_").unwrap_or(name);
                syscall_enter(rec, name, args, prepared.values);
            }
            ftrace::Body::SyscallExit { ret, .. } => {
                let ret = parse_num(ret).map_or(0, |v| v as i64);
                rec.set(Builtin::SyscallExit).u(0).i(ret);
            }
        }
        self.recon
            .record_at(line.cpu, ts, &self.rec, &self.types, writer)?;
        Ok(())
    }

    fn finish(
        mut self,
        writer: &mut TraceWriter,
        stats: &mut Vec<(String, i64, String)>,
    ) -> Result<()> {
        self.recon.finish(writer)?;
        recon_stats(&self.recon, &self.types, stats);
        stats.push((
            "events_without_rule".into(),
            self.unknown_events as i64,
            "ftrace events stored as punctual events of their own type".into(),
        ));
        stats.push((
            "custom_types".into(),
            self.types.custom_count() as i64,
            "event types declared for event names without a rule".into(),
        ));
        Ok(())
    }
}

/// A syscall entry, `sys_x(a: 1, b: 2)` or `sys_enter_x: a: 0x1, b: 0x2`, whose first four argument
/// values are `values` ([`syscall_values`]).
fn syscall_enter(rec: &mut ImportRecord, name: &str, args: &str, values: [u64; 4]) {
    // The syscall tracer names the call; its x86-64 number is kept beside the name (0 when unknown).
    let nr = SyscallAbi::X86_64.number(name).unwrap_or(0);
    rec.set(Builtin::SyscallEntry).u(nr);
    for v in values {
        rec.u(v);
    }
    rec.s(name).s(args);
}

/// The first four values of a syscall's `a: 1, b: 2` arguments, in hex (0 for those missing).
fn syscall_values(args: &str) -> [u64; 4] {
    let mut values = args.split(',').map(hex_value);
    std::array::from_fn(|_| values.next().unwrap_or(0))
}

/// The value of an `arg: value` pair read in hex (`0x` prefixes dropped), 0 when it is none.
fn hex_value(kv: &str) -> u64 {
    let mut v = kv.rsplit_once(':').map_or(kv, |(_, v)| v).trim();
    // A loop of `strip_prefix` rather than `trim_start_matches("0x")`, which sets up a substring
    // searcher at every call: four times a syscall.
    while let Some(rest) = v.strip_prefix("0x") {
        v = rest;
    }
    u64::from_str_radix(v, 16).unwrap_or(0)
}

/// An empty vector of pairs of any lifetime, keeping `v`'s allocation (collecting an emptied vector's
/// iterator into one of the same layout reuses its buffer).
fn recycle_pairs<'b>(mut v: Vec<(&str, &str)>) -> Vec<(&'b str, &'b str)> {
    v.clear();
    v.into_iter().map(|_| ("", "")).collect()
}

/// A `name: key=value ...` event of no rule as a punctual event of its own type; `pairs` is a buffer
/// (returned, emptied) so that no line allocates once the type is known.
#[allow(clippy::too_many_arguments)]
fn punctual_kv<'a>(
    name: &str,
    args: &'a str,
    arg_pairs: impl Iterator<Item = (&'a str, &'a str)>,
    pairs: Vec<(&'static str, &'static str)>,
    types: &mut ImportTypes,
    keys: &mut FxHashMap<u16, Vec<String>>,
    rec: &mut ImportRecord,
    recon: &mut Reconstructor,
    writer: &mut TraceWriter,
) -> Result<Vec<(&'static str, &'static str)>> {
    let mut pairs = recycle_pairs(pairs);
    pairs.extend(arg_pairs);
    let declared = |pairs: &[(&str, &str)]| -> Vec<String> {
        if pairs.is_empty() {
            vec!["text".to_string()]
        } else {
            pairs.iter().map(|(k, _)| k.to_string()).collect()
        }
    };
    let id = types.custom(
        name,
        Category::Punctual,
        || {
            declared(&pairs)
                .iter()
                .map(|k| pinfo(k, wdict::ParamType::String))
                .collect()
        },
        recon,
        writer,
    )?;
    let id = match id {
        Some(id) => id,
        None => {
            rec.set(Builtin::Marker).s(&format!("{name}: {args}"));
            return Ok(recycle_pairs(pairs));
        }
    };
    let names = keys.entry(id).or_insert_with(|| declared(&pairs));
    rec.set_id(id);
    for k in names.iter() {
        if k == "text" && pairs.is_empty() {
            rec.s(args);
        } else {
            let v = pairs.iter().find(|(pk, _)| pk == k).map_or("", |(_, v)| *v);
            rec.s(v);
        }
    }
    Ok(recycle_pairs(pairs))
}

// ---------------------------------------------------------------------------------------------------
// KPTrace

fn kptrace_import(
    files: &[PathBuf],
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
    stats: &mut Vec<(String, i64, String)>,
) -> Result<()> {
    let mut symbols: HashMap<u64, String> = HashMap::new();
    let mut description = None;
    let mut traces = Vec::new();
    let mut next_cpu = 0u16;
    for f in files {
        let head = head_of(f, 4096)?;
        let head_text = String::from_utf8_lossy(&head);
        let is_map = f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("System.map"))
            || kptrace::sniff_system_map(&head_text);
        if is_map {
            symbols.extend(kptrace::read_system_map(open(f)?, &display(f)).map_err(format_err)?);
        } else if kptrace::FormatDescription::sniff(&head_text) {
            description =
                Some(kptrace::FormatDescription::read(open(f)?, &display(f)).map_err(format_err)?);
        } else {
            let cpu = kptrace::cpu_of_file(&display(f)).unwrap_or(next_cpu);
            next_cpu = next_cpu.max(cpu.saturating_add(1));
            let file = File::open(f).map_err(|e| io_err(f, e))?;
            let reader: Box<dyn BufRead> = Box::new(BufReader::with_capacity(
                256 * 1024,
                kptrace::RelayReader::new(file),
            ));
            traces.push((cpu, reader, display(f)));
        }
    }
    if traces.is_empty() {
        return Err(CollectorError::Invalid("no KPTrace trace file among the files given (only a System.map or a format description)".into()));
    }
    let cpus = traces.iter().map(|t| t.0).max().unwrap_or(0) + 1;
    let mut merge = kptrace::KptraceMerge::new(traces, description);
    let mut types = ImportTypes::new();
    let mut recon = Reconstructor::new(1_000_000_000, 0, cpus);
    recon.start(&types, writer)?;
    for (addr, name) in &symbols {
        recon.name_hint(true, *addr, name.clone());
    }
    let mut rec = ImportRecord::default();
    let mut unknown: u64 = 0;
    loop {
        let r = match merge.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        lines.progress(merge.bytes());
        let post_type = merge
            .description()
            .and_then(|d| d.types.get(&r.mnemonic))
            .cloned();
        let mnemonic = if r.mnemonic == "CS" {
            "C"
        } else {
            r.mnemonic.as_str()
        };
        let mut cpu = r.cpu;
        match (kptrace::lookup(mnemonic), post_type) {
            (_, Some(td))
                if kptrace::lookup(mnemonic).is_none()
                    || td.params.iter().any(|p| p.0.eq_ignore_ascii_case("cpu"))
                        && kptrace::lookup(mnemonic).is_none() =>
            {
                // A type of the post-processed form with no KPTrace meaning: typed by its description.
                let id = types.custom(
                    &td.name,
                    Category::Punctual,
                    || {
                        td.params
                            .iter()
                            .map(|(n, k)| {
                                pinfo(
                                    n,
                                    match k {
                                        kptrace::ParamKind::Integer => wdict::ParamType::Signed,
                                        kptrace::ParamKind::Hex => wdict::ParamType::Address,
                                        kptrace::ParamKind::Float => wdict::ParamType::Float,
                                        kptrace::ParamKind::String => wdict::ParamType::String,
                                    },
                                )
                            })
                            .collect()
                    },
                    &mut recon,
                    writer,
                )?;
                let Some(id) = id else { continue };
                rec.type_id = id;
                rec.params.clear();
                let mut words = r.args.split_whitespace();
                let n = td.params.len();
                for (i, (pname, kind)) in td.params.iter().enumerate() {
                    let v = match kind {
                        kptrace::ParamKind::String if i + 1 == n => {
                            let rest: Vec<&str> = words.by_ref().collect();
                            ParamValue::String(rest.join(" "))
                        }
                        kptrace::ParamKind::String => {
                            ParamValue::String(words.next().unwrap_or("").into())
                        }
                        kptrace::ParamKind::Integer => ParamValue::Signed(
                            words.next().and_then(|w| w.parse().ok()).unwrap_or(0),
                        ),
                        kptrace::ParamKind::Hex => {
                            ParamValue::Address(words.next().and_then(kptrace::hex).unwrap_or(0))
                        }
                        kptrace::ParamKind::Float => ParamValue::Float(
                            words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0),
                        ),
                    };
                    if pname.eq_ignore_ascii_case("cpu")
                        && let Some(c) = v.as_f64()
                    {
                        cpu = c as u16;
                    }
                    rec.params.push(v);
                }
            }
            (Some(m), _) => kp_builtin(m, &r, &symbols, &mut types, &mut rec, &mut recon, writer)?,
            (None, _) if r.mnemonic.is_empty() => {
                rec.set(Builtin::Marker).s(&r.args);
            }
            (None, _) => {
                unknown += 1;
                let id = types.custom(
                    &r.mnemonic,
                    Category::Punctual,
                    || vec![pinfo("args", wdict::ParamType::String)],
                    &mut recon,
                    writer,
                )?;
                match id {
                    Some(id) => {
                        rec.type_id = id;
                        rec.params.clear();
                        rec.s(&r.args);
                    }
                    None => {
                        rec.set(Builtin::Marker)
                            .s(&format!("{} {}", r.mnemonic, r.args));
                    }
                }
            }
        }
        recon.record_at(cpu, r.ts.max(0) as u64, &rec, &types, writer)?;
        merge.recycle(r);
    }
    lines.bytes = merge.bytes();
    recon.finish(writer)?;
    recon_stats(&recon, &types, stats);
    let ms = merge.stats();
    stats.push(("unknown_mnemonics".into(), unknown as i64, "records whose mnemonic socscope does not know, stored as punctual events of their own type".into()));
    stats.push((
        "callstack_lines".into(),
        ms.callstack_lines as i64,
        "callstack lines (skipped)".into(),
    ));
    stats.push((
        "blank_lines".into(),
        ms.blank_lines as i64,
        "blank lines".into(),
    ));
    stats.push((
        "neighbour_times".into(),
        ms.neighbour_times as i64,
        "wake-ups with time 0.000000 and user-space markers, timed by their neighbour".into(),
    ));
    stats.push((
        "symbols".into(),
        symbols.len() as i64,
        "System.map symbols".into(),
    ));
    Ok(())
}

fn kp_builtin(
    m: kptrace::Mnemonic,
    r: &kptrace::Record,
    symbols: &HashMap<u64, String>,
    types: &mut ImportTypes,
    rec: &mut ImportRecord,
    recon: &mut Reconstructor,
    writer: &mut TraceWriter,
) -> Result<()> {
    use kptrace::Semantics as S;
    let mut w = r.args.split_whitespace();
    let dec = |w: &mut std::str::SplitWhitespace<'_>| {
        w.next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
    };
    match m.semantics {
        S::ContextSwitch => {
            let prev = dec(&mut w);
            let next = dec(&mut w);
            rec.set(Builtin::ContextSwitch).u(prev).u(next);
        }
        S::IrqEntry => {
            let irq = dec(&mut w);
            rec.set(Builtin::IrqEntry).u(irq);
        }
        S::IrqExit => {
            rec.set(Builtin::IrqExit);
        }
        S::SoftIrqEntry => {
            let a = w.next().and_then(kptrace::hex).unwrap_or(0);
            rec.set(Builtin::SoftIrqEntry).a(a);
        }
        S::SoftIrqExit => {
            rec.set(Builtin::SoftIrqExit);
        }
        S::SyscallEntry => {
            let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
            rec.set(Builtin::SyscallEntry).u(addr);
            for _ in 0..4 {
                let v = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.u(v);
            }
            let name = symbols.get(&addr).map_or("", String::as_str);
            let text: Vec<&str> = w.collect();
            let text = text.join(" ");
            rec.s(name).s(&text);
        }
        S::SyscallExit => {
            let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
            let ret = w.next().and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
            rec.set(Builtin::SyscallExit).u(addr).i(ret);
        }
        S::Wakeup => {
            let pid = dec(&mut w);
            rec.set(Builtin::Wakeup).u(pid);
        }
        S::ThreadCreate => {
            let pid = dec(&mut w);
            let name: Vec<&str> = w.collect();
            rec.set(Builtin::ThreadCreate).u(pid).s(&name.join(" "));
        }
        S::ThreadExit => {
            let pid = w.next().and_then(|x| x.parse().ok()).unwrap_or(r.pid);
            rec.set(Builtin::ThreadExit).u(pid);
        }
        S::Marker => {
            rec.set(Builtin::Marker).s(&r.args);
        }
        S::Mark => {
            let id = dec(&mut w);
            rec.set(Builtin::Mark).u(id);
        }
        S::UserEntry => {
            let pc = w.next().and_then(kptrace::hex).unwrap_or(0);
            rec.set(Builtin::UserEntry).a(pc);
            for _ in 0..4 {
                let v = w.next().and_then(kptrace::hex).unwrap_or(0);
                rec.u(v);
            }
        }
        S::UserExit => {
            let ret = w.next().and_then(|x| x.parse::<i64>().ok()).unwrap_or(0);
            let addr = w.next().and_then(kptrace::hex).unwrap_or(0);
            rec.set(Builtin::UserExit).i(ret).a(addr);
        }
        S::Kmalloc => {
            let ptr = w.next().and_then(kptrace::hex).unwrap_or(0);
            let size = dec(&mut w);
            rec.set(Builtin::Kmalloc).u(size).a(ptr);
        }
        S::Kfree => {
            let ptr = w.next().and_then(kptrace::hex).unwrap_or(0);
            rec.set(Builtin::Kfree).a(ptr);
        }
        S::Punctual => {
            let id = types.custom(
                m.name,
                Category::Punctual,
                || vec![pinfo("args", wdict::ParamType::String)],
                recon,
                writer,
            )?;
            match id {
                Some(id) => {
                    rec.type_id = id;
                    rec.params.clear();
                    rec.s(&r.args);
                }
                None => {
                    rec.set(Builtin::Marker).s(&r.args);
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Pajé

struct StoreTypes {
    ids: HashMap<(EventCategory, String), TypeId>,
    next: TypeId,
}

impl StoreTypes {
    fn new() -> Self {
        Self {
            ids: HashMap::new(),
            next: 1,
        }
    }
    fn id(
        &mut self,
        category: EventCategory,
        name: &str,
        params: &[ParamDef],
        writer: &mut TraceWriter,
    ) -> Result<TypeId> {
        if let Some(&id) = self.ids.get(&(category, name.to_string())) {
            return Ok(id);
        }
        let id = self.next;
        self.next += 1;
        self.ids.insert((category, name.to_string()), id);
        writer.add_event_type(&EventType {
            id,
            name: name.into(),
            category,
            params: params.to_vec(),
        })?;
        Ok(id)
    }
}

fn paje_import(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
    stats: &mut Vec<(String, i64, String)>,
) -> Result<()> {
    let mut reader = paje::PajeReader::new(open(path)?, display(path));
    // Pajé type alias or name → (category, name).
    let mut ptypes: HashMap<String, (paje::Kind, String)> = HashMap::new();
    // (type, value alias or name) → value name.
    let mut values: HashMap<(String, String), String> = HashMap::new();
    let mut containers: HashMap<String, ProducerId> = HashMap::new();
    let mut next_producer: ProducerId = 1;
    let mut store = StoreTypes::new();
    let mut stacks: HashMap<(ProducerId, String), Vec<(i64, TypeId)>> = HashMap::new();
    let mut vars: HashMap<(ProducerId, TypeId), f64> = HashMap::new();
    // (link type, key) → (time, container, type) of whichever end came first.
    let mut start_links: HashMap<(String, String), (i64, ProducerId, TypeId)> = HashMap::new();
    let mut end_links: HashMap<(String, String), (i64, ProducerId)> = HashMap::new();
    let mut last_ts = i64::MIN;
    let mut colours: Vec<(String, String)> = Vec::new();
    let (mut unmatched_links, mut unknown_containers, mut unknown_kinds, mut bad_times) =
        (0u64, 0u64, 0u64, 0u64);
    let mut ev;
    loop {
        let bytes = reader.bytes();
        let r = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        lines.progress(bytes);
        let get = |k: &str| r.get(k).unwrap_or("");
        let type_key = get("Type").to_string();
        let value_name = |values: &HashMap<(String, String), String>, v: &str| -> String {
            values
                .get(&(type_key.clone(), v.to_string()))
                .cloned()
                .unwrap_or_else(|| v.to_string())
        };
        use paje::Kind as K;
        let time = r.time_ns();
        if matches!(
            r.def.kind,
            K::CreateContainer
                | K::DestroyContainer
                | K::SetState
                | K::PushState
                | K::PopState
                | K::ResetState
                | K::NewEvent
                | K::SetVariable
                | K::AddVariable
                | K::SubVariable
                | K::StartLink
                | K::EndLink
        ) {
            match time {
                Some(t) => last_ts = last_ts.max(t),
                None => {
                    bad_times += 1;
                    continue;
                }
            }
        }
        let t = time.unwrap_or(0);
        let container =
            |containers: &HashMap<String, ProducerId>, key: &str| containers.get(key).copied();
        match r.def.kind {
            K::DefineContainerType
            | K::DefineStateType
            | K::DefineEventType
            | K::DefineVariableType
            | K::DefineLinkType => {
                let name = r.get("Name").or(r.get("Alias")).unwrap_or("").to_string();
                if let Some(a) = r.get("Alias") {
                    ptypes.insert(a.to_string(), (r.def.kind, name.clone()));
                }
                ptypes.insert(name.clone(), (r.def.kind, name));
            }
            K::DefineEntityValue => {
                let name = get("Name").to_string();
                if let Some(a) = r.get("Alias") {
                    values.insert((type_key.clone(), a.to_string()), name.clone());
                }
                values.insert((type_key.clone(), name.clone()), name.clone());
                if let Some(c) = r.get("Color") {
                    colours.push((name, c.to_string()));
                }
            }
            K::CreateContainer => {
                let parent = match get("Container") {
                    "0" | "" => None,
                    p => container(&containers, p),
                };
                let id = next_producer;
                next_producer += 1;
                let name = r.get("Name").or(r.get("Alias")).unwrap_or("").to_string();
                let kind_name = ptypes
                    .get(&type_key)
                    .map_or(type_key.as_str(), |(_, n)| n.as_str())
                    .to_ascii_lowercase();
                let kind = if kind_name.contains("thread") {
                    ProducerKind::Thread
                } else if kind_name.contains("process") {
                    ProducerKind::Process
                } else if kind_name.contains("cpu") || kind_name.contains("core") {
                    ProducerKind::Cpu
                } else {
                    ProducerKind::Other
                };
                writer.add_producer(&Producer {
                    id,
                    parent,
                    kind,
                    local_id: id as i64,
                    name: name.clone(),
                })?;
                if let Some(a) = r.get("Alias") {
                    containers.insert(a.to_string(), id);
                }
                containers.insert(name, id);
            }
            K::DestroyContainer => {
                let Some(c) = container(&containers, get("Name"))
                    .or(container(&containers, get("Container")))
                else {
                    unknown_containers += 1;
                    continue;
                };
                // The container's states end with it.
                let keys: Vec<(ProducerId, String)> =
                    stacks.keys().filter(|k| k.0 == c).cloned().collect();
                for k in keys {
                    if let Some(stack) = stacks.remove(&k) {
                        for (depth, (start, ty)) in stack.into_iter().enumerate().rev() {
                            ev = Event::state(start, t.max(start), depth as u16, ty, c, None);
                            writer.push(&ev)?;
                        }
                    }
                }
            }
            K::SetState | K::PushState | K::PopState | K::ResetState => {
                let Some(c) = container(&containers, get("Container")) else {
                    unknown_containers += 1;
                    continue;
                };
                let stack = stacks.entry((c, type_key.clone())).or_default();
                let close = |stack: &mut Vec<(i64, TypeId)>,
                             all: bool,
                             writer: &mut TraceWriter|
                 -> Result<()> {
                    while let Some((start, ty)) = stack.pop() {
                        let e = Event::state(start, t.max(start), stack.len() as u16, ty, c, None);
                        writer.push(&e)?;
                        if !all {
                            break;
                        }
                    }
                    Ok(())
                };
                match r.def.kind {
                    K::PopState => close(stack, false, writer)?,
                    K::ResetState => close(stack, true, writer)?,
                    kind => {
                        if kind == K::SetState {
                            close(stack, true, writer)?;
                        }
                        let v = value_name(&values, get("Value"));
                        let ty = store.id(EventCategory::State, &v, &[], writer)?;
                        stacks
                            .entry((c, type_key.clone()))
                            .or_default()
                            .push((t, ty));
                    }
                }
            }
            K::NewEvent => {
                let Some(c) = container(&containers, get("Container")) else {
                    unknown_containers += 1;
                    continue;
                };
                let v = value_name(&values, get("Value"));
                let ty = store.id(EventCategory::Punctual, &v, &[], writer)?;
                ev = Event::punctual(t, ty, c, None);
                writer.push(&ev)?;
            }
            K::SetVariable | K::AddVariable | K::SubVariable => {
                let Some(c) = container(&containers, get("Container")) else {
                    unknown_containers += 1;
                    continue;
                };
                let name = ptypes
                    .get(&type_key)
                    .map_or(type_key.clone(), |(_, n)| n.clone());
                let ty = store.id(EventCategory::Variable, &name, &[], writer)?;
                let x: f64 = get("Value").parse().unwrap_or(0.0);
                let slot = vars.entry((c, ty)).or_insert(0.0);
                *slot = match r.def.kind {
                    K::AddVariable => *slot + x,
                    K::SubVariable => *slot - x,
                    _ => x,
                };
                ev = Event {
                    ts: t,
                    type_id: ty,
                    producer: c,
                    cpu: None,
                    kind: EventKind::Variable { value: *slot },
                    params: Vec::new(),
                };
                writer.push(&ev)?;
            }
            K::StartLink | K::EndLink => {
                let end_key = if r.def.kind == K::StartLink {
                    "StartContainer"
                } else {
                    "EndContainer"
                };
                let Some(c) = container(&containers, get(end_key)) else {
                    unknown_containers += 1;
                    continue;
                };
                let key = (type_key.clone(), get("Key").to_string());
                let v = value_name(&values, get("Value"));
                let v = if v.is_empty() {
                    ptypes
                        .get(&type_key)
                        .map_or(type_key.clone(), |(_, n)| n.clone())
                } else {
                    v
                };
                if r.def.kind == K::StartLink {
                    let ty = store.id(EventCategory::Link, &v, &[], writer)?;
                    match end_links.remove(&key) {
                        Some((end, target)) => {
                            ev = Event {
                                ts: t,
                                type_id: ty,
                                producer: c,
                                cpu: None,
                                kind: EventKind::Link {
                                    end: end.max(t),
                                    target,
                                },
                                params: Vec::new(),
                            };
                            writer.push(&ev)?;
                        }
                        None => {
                            if start_links.insert(key, (t, c, ty)).is_some() {
                                unmatched_links += 1;
                            }
                        }
                    }
                } else {
                    match start_links.remove(&key) {
                        Some((start, source, ty)) => {
                            ev = Event {
                                ts: start,
                                type_id: ty,
                                producer: source,
                                cpu: None,
                                kind: EventKind::Link {
                                    end: t.max(start),
                                    target: c,
                                },
                                params: Vec::new(),
                            };
                            writer.push(&ev)?;
                        }
                        None => {
                            if end_links.insert(key, (t, c)).is_some() {
                                unmatched_links += 1;
                            }
                        }
                    }
                }
            }
            K::Other => unknown_kinds += 1,
        }
    }
    lines.bytes = reader.bytes();
    let end = last_ts.max(0);
    let mut open_states = 0u64;
    let mut keys: Vec<(ProducerId, String)> = stacks.keys().cloned().collect();
    keys.sort();
    for k in keys {
        if let Some(stack) = stacks.remove(&k) {
            for (depth, (start, ty)) in stack.into_iter().enumerate().rev() {
                open_states += 1;
                writer.push(&Event::state(
                    start,
                    end.max(start),
                    depth as u16,
                    ty,
                    k.0,
                    None,
                ))?;
            }
        }
    }
    unmatched_links += (start_links.len() + end_links.len()) as u64;
    stats.push((
        "clipped_open_states".into(),
        open_states as i64,
        "states still open at the end, closed at the last time".into(),
    ));
    stats.push((
        "unmatched_links".into(),
        unmatched_links as i64,
        "StartLink or EndLink without its other end (dropped)".into(),
    ));
    stats.push((
        "unknown_containers".into(),
        unknown_containers as i64,
        "events on containers never created (dropped)".into(),
    ));
    stats.push((
        "unknown_definitions".into(),
        unknown_kinds as i64,
        "events of definitions socscope does not interpret".into(),
    ));
    stats.push((
        "bad_times".into(),
        bad_times as i64,
        "events whose Time is not a number (dropped)".into(),
    ));
    for (name, colour) in colours {
        let rgb: Vec<f64> = colour
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let packed = if rgb.len() == 3 {
            rgb.iter().fold(0i64, |acc, c| {
                (acc << 8) | ((c.clamp(0.0, 1.0) * 255.0).round() as i64)
            })
        } else {
            0
        };
        stats.push((
            format!("paje_color.{name}"),
            packed,
            format!("colour of `{name}` (0xRRGGBB); Pajé gave `{colour}`"),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// GST_DEBUG

fn gst_import(
    path: &Path,
    writer: &mut TraceWriter,
    lines: &mut Lines<'_, '_>,
    stats: &mut Vec<(String, i64, String)>,
) -> Result<()> {
    let mut reader = gst::GstReader::new(open(path)?, display(path));
    let params: Vec<ParamDef> = ["category", "file", "line", "function", "object", "message"]
        .iter()
        .map(|n| {
            ParamDef::new(
                *n,
                if *n == "line" {
                    ParamType::Unsigned
                } else {
                    ParamType::String
                },
            )
        })
        .collect();
    for (i, level) in gst::LEVELS.iter().enumerate() {
        writer.add_event_type(&EventType {
            id: i as TypeId + 1,
            name: (*level).into(),
            category: EventCategory::Punctual,
            params: params.clone(),
        })?;
        writer.add_event_type(&EventType {
            id: i as TypeId + 101,
            name: format!("{level} level"),
            category: EventCategory::State,
            params: Vec::new(),
        })?;
    }
    let mut processes: HashMap<u64, ProducerId> = HashMap::new();
    let mut threads: HashMap<(u64, String), (ProducerId, i64, TypeId)> = HashMap::new();
    let mut next: ProducerId = 1;
    let mut last_ts = 0i64;
    let mut ev = Event::punctual(0, 0, 0, None);
    loop {
        let r = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                lines.bad(e)?;
                continue;
            }
        };
        let level = gst::LEVELS.iter().position(|l| *l == r.level).unwrap_or(0) as TypeId;
        let process = match processes.get(&r.pid) {
            Some(&p) => p,
            None => {
                let id = next;
                next += 1;
                writer.add_producer(&Producer {
                    id,
                    parent: None,
                    kind: ProducerKind::Process,
                    local_id: r.pid as i64,
                    name: format!("process {}", r.pid),
                })?;
                processes.insert(r.pid, id);
                id
            }
        };
        let key = (r.pid, r.thread.to_string());
        let producer = match threads.get_mut(&key) {
            Some(t) => {
                // The thread was in its previous line's level until now.
                ev = Event::state(t.1, r.ts.max(t.1), 0, t.2 + 101, t.0, None);
                writer.push(&ev)?;
                t.1 = r.ts;
                t.2 = level;
                t.0
            }
            None => {
                let id = next;
                next += 1;
                let local = u64::from_str_radix(r.thread.trim_start_matches("0x"), 16).unwrap_or(0);
                writer.add_producer(&Producer {
                    id,
                    parent: Some(process),
                    kind: ProducerKind::Thread,
                    local_id: local as i64,
                    name: r.thread.to_string(),
                })?;
                threads.insert(key, (id, r.ts, level));
                id
            }
        };
        last_ts = last_ts.max(r.ts);
        ev.ts = r.ts;
        ev.type_id = level + 1;
        ev.producer = producer;
        ev.cpu = None;
        ev.kind = EventKind::Punctual;
        ev.params.clear();
        ev.params.extend([
            ParamValue::String(r.category.into()),
            ParamValue::String(r.file.into()),
            ParamValue::Unsigned(u64::from(r.line)),
            ParamValue::String(r.function.into()),
            ParamValue::String(r.object.unwrap_or("").into()),
            ParamValue::String(r.message.into()),
        ]);
        writer.push(&ev)?;
        let bytes = reader.bytes();
        lines.progress(bytes);
    }
    lines.bytes = reader.bytes();
    let mut open: Vec<&(ProducerId, i64, TypeId)> = threads.values().collect();
    open.sort_by_key(|t| t.0);
    for t in open {
        writer.push(&Event::state(
            t.1,
            last_ts.max(t.1),
            0,
            t.2 + 101,
            t.0,
            None,
        ))?;
    }
    stats.push((
        "threads".into(),
        threads.len() as i64,
        "GStreamer threads".into(),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_pairs_and_values_are_those_of_the_records() {
        let text = "a-1 [000] 1.0: sched_switch: prev_comm=a b prev_pid=1 ==> next_comm=c next_pid=2\n\
                    bad line\n\
                    a-1 [000] 1.5: sys_read(fd: 3, buf: 0x7ff, count: 10, x: 1, y: 2)\n\
                    a-1 [000] 2.0: sys_enter_openat: dfd: 0xffffff9c, filename: 0x7ffe2000\n\
                    a-1 [000] 2.5: sys_read -> 0x24\n\
                    a-1 [000] 3.0: softirq_raise: vec=1 [action=TIMER]\n";
        let mut reader = ftrace::FtraceReader::new(text.as_bytes(), "t");
        let mut lines = ftrace::RecordBatch::new();
        reader.fill_batch(&mut lines, 100, 1 << 20);
        let mut prepared = Prepared::default();
        prepared.prepare(&lines);
        let mut seen = 0;
        for (i, r) in lines.records().enumerate() {
            let (args, values) = match r.body {
                ftrace::Body::Event { name, args } if name.starts_with("sys_enter_") => {
                    (args, syscall_values(args))
                }
                ftrace::Body::SyscallEnter { args, .. } => (args, syscall_values(args)),
                ftrace::Body::Event { args, .. } => (args, [0; 4]),
                ftrace::Body::SyscallExit { ret, .. } => (ret, [0; 4]),
            };
            let p = prepared.get(i, args);
            assert_eq!(p.values, values);
            if let ftrace::Body::Event { name, .. } = r.body
                && !name.starts_with("sys_enter_")
            {
                assert!(p.pairs().eq(ftrace::Record::pairs(args)), "{args}");
                assert_eq!(
                    p.args_of(["next_pid", "prev_comm", "vec"]),
                    ["next_pid", "prev_comm", "vec"].map(|k| ftrace::Record::arg(args, k))
                );
            }
            seen += 1;
        }
        assert_eq!(seen, 5);
        assert_eq!(prepared.get(1, "").values, [3, 0x7ff, 0x10, 1]);
        assert_eq!(prepared.get(2, "").values, [0xffff_ff9c, 0x7ffe_2000, 0, 0]);
        assert_eq!(prepared.get(0, "").pairs.len(), 4);
    }

    #[test]
    fn syscall_values_read_in_hex() {
        for (kv, v) in [
            ("fd: ff", 0xff),
            (" buf: 0x7ffe0babe8fc", 0x7ffe_0bab_e8fc),
            ("0x0x1f", 0x1f),
            ("a: b: 10 ", 0x10),
            ("count", 0),
            ("x: ", 0),
            ("x: +a", 0xa),
            ("x: -1", 0),
            ("x: 1ffffffffffffffff", 0),
            ("x:\u{a0}c\u{2003}", 0xc),
        ] {
            let old = {
                let v = kv.rsplit(':').next().unwrap_or("").trim();
                u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or(0)
            };
            assert_eq!((hex_value(kv), old), (v, v), "{kv:?}");
        }
    }
}
