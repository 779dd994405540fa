//! Trace formats: streaming nom parsers for KPTrace, Pajé, ftrace/trace-cmd text and GST_DEBUG logs,
//! streaming readers of binary Linux captures (trace-cmd `.dat`, CTF 1.8), readers in, records out; and
//! the exporters (Chrome/Perfetto JSON, Pajé, CSV) over a read-only view
//! of a trace ([`export::TraceView`]).
//!
//! Start here: [`LineReader`] (a `BufRead` as numbered lines, in constant memory), the four record readers
//! [`kptrace::KptraceReader`], [`paje::PajeReader`], [`ftrace::FtraceReader`], [`gst::GstReader`], and
//! [`tracecmd::DatReader`] and [`ctf::CtfReader`] for the binary captures, and
//! [`detect`] (which format a file is, from its magic or its first lines). [`Format::ALL`] is the
//! registry of formats (one line each, the `registry!` list below) from which every list of formats
//! is made. Mapping records to stored events is the importer's business (`socscope-collector`), not this
//! crate's.

pub mod export;

use std::io::BufRead;

/// A line that does not follow its format's grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: expected {expected}, found `{text}`")]
pub struct ParseError {
    /// The file (as the caller named it).
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// 1-based column (in characters) where the line stops making sense.
    pub column: usize,
    /// The offending text, from that column (shortened to 60 characters).
    pub text: String,
    /// What the grammar wanted there.
    pub expected: &'static str,
}

/// What can go wrong while reading a trace file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// A line does not follow the grammar (the caller may skip it and go on).
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Binary data that does not follow its format (the reader may go on with the other streams).
    #[error(transparent)]
    Binary(#[from] BinaryError),
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// Binary data that does not follow its format: where (file, stream, byte offset) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {}byte {offset}: {what}", place.as_ref().map(|p| format!("{p}, ")).unwrap_or_default())]
pub struct BinaryError {
    /// The file (as the caller named it).
    pub file: String,
    /// The part of the file, when it has several (`CPU 2`, `stream channel0_1`).
    pub place: Option<String>,
    /// Byte offset in the file.
    pub offset: u64,
    /// What was expected, and what was found.
    pub what: String,
}

impl BinaryError {
    /// An error at `offset` of `file`.
    pub fn new(file: &str, place: Option<String>, offset: u64, what: impl Into<String>) -> Self {
        Self {
            file: file.to_string(),
            place,
            offset,
            what: what.into(),
        }
    }
}

impl ParseError {
    /// An error at byte offset `at` of `line` (clamped to the line).
    pub fn at(file: &str, line_no: u64, line: &str, at: usize, expected: &'static str) -> Self {
        let mut at = at.min(line.len());
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        let rest = &line[at..];
        let text: String = if rest.is_empty() {
            "end of line".to_string()
        } else {
            // Escaped: a binary file's bytes and control characters never reach a terminal as they are.
            rest.chars()
                .take(60)
                .flat_map(|c| {
                    let escape = c.is_control() || c == char::REPLACEMENT_CHARACTER;
                    let (a, b) = if escape {
                        (Some(c.escape_default()), None)
                    } else {
                        (None, Some(c))
                    };
                    a.into_iter().flatten().chain(b)
                })
                .collect()
        };
        Self {
            file: file.to_string(),
            line: line_no,
            column: line[..at].chars().count() + 1,
            text,
            expected,
        }
    }
}

/// Byte offset of `rest` inside `line` (both slices of the same string).
pub(crate) fn offset_in(line: &str, rest: &str) -> usize {
    (rest.as_ptr() as usize).saturating_sub(line.as_ptr() as usize)
}

/// A `BufRead` as numbered lines: one reused buffer (constant memory), line endings and NUL padding
/// stripped, invalid UTF-8 replaced rather than fatal.
pub struct LineReader<R> {
    inner: R,
    file: String,
    raw: Vec<u8>,
    /// Where the current line starts in `raw` (after NUL padding), when it is UTF-8; otherwise it is
    /// in `text`, repaired.
    start: Option<usize>,
    text: String,
    line_no: u64,
    bytes: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `inner`, which errors call `file`.
    pub fn new(inner: R, file: impl Into<String>) -> Self {
        Self {
            inner,
            file: file.into(),
            raw: Vec::with_capacity(256),
            start: Some(0),
            text: String::new(),
            line_no: 0,
            bytes: 0,
        }
    }

    /// The file name errors carry.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The number of the line last returned (1-based).
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The line last returned by [`LineReader::next_line`].
    pub fn current(&self) -> &str {
        match self.start {
            // Checked to be UTF-8 when it was read.
            Some(start) => std::str::from_utf8(&self.raw[start..]).unwrap_or(""),
            None => &self.text,
        }
    }

    /// The next line with its 1-based number, or `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, FormatError> {
        self.raw.clear();
        let n = self
            .inner
            .read_until(b'\n', &mut self.raw)
            .map_err(|source| FormatError::Io {
                file: self.file.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.bytes += n as u64;
        self.line_no += 1;
        while matches!(self.raw.last(), Some(b'\n' | b'\r' | 0)) {
            self.raw.pop();
        }
        // Relay sub-buffers end in NUL padding: it is not part of any line.
        let start = self
            .raw
            .iter()
            .position(|&b| b != 0)
            .unwrap_or(self.raw.len());
        // Most lines are UTF-8: handed out in place; the others repaired into `text`.
        let line = match std::str::from_utf8(&self.raw[start..]) {
            Ok(s) => {
                self.start = Some(start);
                s
            }
            Err(_) => {
                self.start = None;
                self.text.clear();
                self.text
                    .push_str(&String::from_utf8_lossy(&self.raw[start..]));
                self.text.as_str()
            }
        };
        Ok(Some((self.line_no, line)))
    }
}

/// The registry of the formats socscope reads, one line each: the variant of [`Format`] and the module
/// that reads it. The module declares its [`FormatSpec`] (`SPEC`: name, what it is, how it is
/// detected); everything else that lists formats — [`Format::ALL`], [`detect`], the command line's
/// `--format`, the importers, the fuzz targets, the help texts — is derived from here, or matches on
/// [`Format`] exhaustively, so that a forgotten piece does not compile.
///
/// The order matters for [`detect`]: a line that several text formats accept votes for the last of
/// them, and a tie goes to the later one (the later, the more specific the grammar).
macro_rules! registry {
    ($($(#[$doc:meta])* $variant:ident => $module:ident,)+) => {
        $(pub mod $module;)+

        /// The formats this crate reads.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Format {
            $($(#[$doc])* $variant,)+
        }

        impl Format {
            /// Every format, in registry order.
            pub const ALL: &'static [Format] = &[$(Format::$variant),+];

            /// What the format's module declares about it.
            pub const fn spec(self) -> &'static FormatSpec {
                match self {
                    $(Format::$variant => &$module::SPEC,)+
                }
            }
        }
    };
}

registry! {
    /// STLinux KPTrace relay output (or its post-processed form).
    Kptrace => kptrace,
    /// Pajé.
    Paje => paje,
    /// ftrace / trace-cmd report text.
    Ftrace => ftrace,
    /// GStreamer GST_DEBUG log.
    Gst => gst,
    /// trace-cmd's binary `trace.dat` (file versions 6 and 7).
    TraceCmd => tracecmd,
    /// A CTF 1.8 trace directory (LTTng, perf, barectf), or a session directory of them.
    Ctf => ctf,
}

/// What a format's module declares about it (its `SPEC`), from which the lists of formats are made.
#[derive(Debug)]
pub struct FormatSpec {
    /// The name used on the command line and in a trace's `format` parameter.
    pub name: &'static str,
    /// What it is, as messages list the formats socscope reads (`GST_DEBUG logs`).
    pub title: &'static str,
    /// One line for the command line's help of `--format NAME`.
    pub help: &'static str,
    /// How [`detect`] tells it.
    pub detection: Detection,
}

/// How a format is told from a file's first bytes.
#[derive(Debug)]
pub enum Detection {
    /// A binary capture, told by its magic number (checked before any text format).
    Binary {
        /// Whether a file's first bytes are this format's.
        sniff: fn(&[u8]) -> bool,
    },
    /// Text, told line by line.
    Text {
        /// Whether the whole head (as text) is this format before any line is read (a web page
        /// wrapping a capture).
        page: Option<fn(&str) -> bool>,
        /// What one line (NUL padding stripped) says.
        line: fn(&str) -> LineVote,
    },
}

/// What one line says about a text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineVote {
    /// Only this format has such a line (a header): the file is this format.
    Certain,
    /// The line follows this format's grammar.
    Likely,
    /// It does not.
    No,
}

impl FormatSpec {
    /// Whether the format is binary (its reader checks the magic; no text line is read).
    pub const fn is_binary(&self) -> bool {
        matches!(self.detection, Detection::Binary { .. })
    }
}

impl Format {
    /// The name used on the command line.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// The text formats' titles as a list for messages: `KPTrace, Pajé, ftrace or trace-cmd report
    /// text, GST_DEBUG logs`.
    pub fn text_titles() -> String {
        Format::ALL
            .iter()
            .filter(|f| !f.spec().is_binary())
            .map(|f| f.spec().title)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The binary format `head` (a file's first bytes) is in, by its magic.
pub fn sniff_binary(head: &[u8]) -> Option<Format> {
    Format::ALL
        .iter()
        .copied()
        .find(|f| matches!(f.spec().detection, Detection::Binary { sniff, .. } if sniff(head)))
}

/// Which format `head` (the first few kilobytes of a file) is in, if any line is recognisable:
/// binary magic numbers first, then whole-page checks, then a vote of the first 64 lines (see the
/// registry for the order).
pub fn detect(head: &[u8]) -> Option<Format> {
    if let Some(binary) = sniff_binary(head) {
        return Some(binary);
    }
    let text = String::from_utf8_lossy(head);
    for &f in Format::ALL {
        if let Detection::Text {
            page: Some(page), ..
        } = f.spec().detection
            && page(&text)
        {
            return Some(f);
        }
    }
    let mut votes = [0u32; Format::ALL.len()];
    let mut said = [LineVote::No; Format::ALL.len()];
    for line in text.lines().take(64) {
        let line = line.trim_start_matches('\0');
        for (i, f) in Format::ALL.iter().enumerate() {
            said[i] = match f.spec().detection {
                Detection::Text { line: vote, .. } => vote(line),
                Detection::Binary { .. } => LineVote::No,
            };
        }
        if let Some(i) = said.iter().position(|v| *v == LineVote::Certain) {
            return Some(Format::ALL[i]);
        }
        if let Some(i) = said.iter().rposition(|v| *v == LineVote::Likely) {
            votes[i] += 1;
        }
    }
    let (i, &best) = votes.iter().enumerate().max_by_key(|(_, v)| **v)?;
    if best == 0 {
        return None;
    }
    Some(Format::ALL[i])
}

/// Parses `SEC.FRACTION` (any number of fraction digits) as nanoseconds.
pub(crate) fn seconds_to_ns(int: &str, frac: &str) -> Option<i64> {
    let s: i64 = int.parse().ok()?;
    let mut ns: i64 = 0;
    let mut scale = 100_000_000i64;
    for c in frac.bytes() {
        if !c.is_ascii_digit() {
            return None;
        }
        ns += i64::from(c - b'0') * scale;
        scale /= 10;
    }
    s.checked_mul(1_000_000_000)?.checked_add(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systrace_html_is_ftrace() {
        let page = b"<!DOCTYPE html>\n<html>\n<head><title>Android System Trace</title>\n<script>var x = 1;</script>\n";
        assert_eq!(detect(page), Some(Format::Ftrace));
        let trace2html = b"<!DOCTYPE html>\n<html><head></head><body>\n<script class=\"trace-data\" type=\"application/text\">\n";
        assert_eq!(detect(trace2html), Some(Format::Ftrace));
        assert_eq!(detect(b"<html><body>hello</body></html>\n"), None);
    }

    #[test]
    fn parse_errors_escape_control_characters_and_undecodable_bytes() {
        let e = ParseError::at("f", 1, "ab\u{1b}[31m\u{0}\u{fffd}z", 2, "x");
        assert_eq!(e.text, "\\u{1b}[31m\\u{0}\\u{fffd}z");
    }

    #[test]
    fn lines_lose_their_endings_and_padding_and_bad_utf8_is_repaired() {
        let input: &[u8] = b"\0\0ab\r\nc\xffd\n\nlast";
        let mut r = LineReader::new(input, "f");
        let mut seen = Vec::new();
        while let Some((n, line)) = r.next_line().unwrap() {
            let line = line.to_string();
            assert_eq!(r.current(), line);
            assert_eq!(r.line_no(), n);
            seen.push((n, line));
        }
        assert_eq!(
            seen,
            [
                (1, "ab".to_string()),
                (2, "c\u{fffd}d".to_string()),
                (3, String::new()),
                (4, "last".to_string()),
            ]
        );
        assert_eq!(r.bytes(), input.len() as u64);
    }
}
