//! GStreamer `GST_DEBUG` logs:
//! `H:MM:SS.NNNNNNNNN PID THREAD LEVEL CATEGORY FILE:LINE:FUNCTION:[<OBJECT>] MESSAGE`.
//!
//! Times are since the pipeline started; coloured logs carry ANSI escapes (stripped first); real logs
//! mix in foreign lines, which the reader reports as errors for the caller to skip and count.
//!
//! Tracer records (`GST_TRACERS=...` with `GST_DEBUG=GST_TRACER:7`) are lines of category `GST_TRACER`
//! with an empty location (`:0::`) whose message is a serialized `GstStructure`
//! (`latency, src-element=(string)videotestsrc0, time=(guint64)233839, ...;`): [`Record::tracer`]
//! reads it as a [`Structure`].

use nom::bytes::complete::{take_till, take_till1, take_while};
use nom::character::complete::{char, digit1, space0, space1};
use nom::{IResult, Parser};

use crate::{FormatError, LineReader, ParseError, offset_in};

/// The registry's entry: a GST_DEBUG log is told by its lines (colours stripped).
pub const SPEC: crate::FormatSpec = crate::FormatSpec {
    name: "gst",
    title: "GST_DEBUG logs",
    help: "GStreamer GST_DEBUG logs (with or without colours)",
    detection: crate::Detection::Text {
        page: None,
        line: |line| {
            if parse_line(&strip_ansi(line)).is_ok() {
                crate::LineVote::Likely
            } else {
                crate::LineVote::No
            }
        },
    },
};

/// The debug levels, in GStreamer's order.
pub const LEVELS: [&str; 8] = [
    "ERROR", "WARN", "FIXME", "INFO", "DEBUG", "LOG", "TRACE", "MEMDUMP",
];

/// One log line, borrowing from the (ANSI-stripped) line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Nanoseconds since the pipeline started.
    pub ts: i64,
    /// Process id.
    pub pid: u64,
    /// Thread (its address, as printed, e.g. `0x558951015c00`).
    pub thread: &'a str,
    /// Level, one of [`LEVELS`].
    pub level: &'a str,
    /// Debug category.
    pub category: &'a str,
    /// Source file.
    pub file: &'a str,
    /// Source line.
    pub line: u32,
    /// Function.
    pub function: &'a str,
    /// The object between `<` and `>`, if any.
    pub object: Option<&'a str>,
    /// The message.
    pub message: &'a str,
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
pub fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.clone().next() == Some('[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

fn time(i: &str) -> IResult<&str, i64> {
    let (i, (h, _, m, _, s, _, f)) = (
        digit1,
        char(':'),
        digit1,
        char(':'),
        digit1,
        char('.'),
        digit1,
    )
        .parse(i)?;
    let err = || nom::Err::Error(nom::error::Error::new(i, nom::error::ErrorKind::Digit));
    let h: i64 = h.parse().map_err(|_| err())?;
    let m: i64 = m.parse().map_err(|_| err())?;
    let s: i64 = s.parse().map_err(|_| err())?;
    let frac = crate::seconds_to_ns("0", f).ok_or_else(err)?;
    let total = h
        .checked_mul(3600)
        .and_then(|x| x.checked_add(m * 60 + s))
        .and_then(|x| x.checked_mul(1_000_000_000))
        .and_then(|x| x.checked_add(frac))
        .ok_or_else(err)?;
    Ok((i, total))
}

fn word(i: &str) -> IResult<&str, &str> {
    take_till1(|c: char| c.is_whitespace()).parse(i)
}

/// Parses an ANSI-free line; `Err` carries the byte offset where it broke and what was expected there.
pub fn parse_line(line: &str) -> Result<Record<'_>, (usize, &'static str)> {
    let at = |rest: &str| offset_in(line, rest);
    let (i, ts) = time(line).map_err(|_| (0, "a time `H:MM:SS.NNNNNNNNN`"))?;
    let (i, _) = space1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    let (i, pid) = digit1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a pid"))?;
    let pid = pid
        .parse()
        .map_err(|_| (at(i), "a pid that fits in 64 bits"))?;
    let (i, _) = space1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    let (i, thread) = word(i).map_err(|_| (at(i), "a thread address"))?;
    if !thread.starts_with("0x") {
        return Err((at(i) - thread.len(), "a thread address `0x...`"));
    }
    let (i, _) = space1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    let (i, level) = word(i).map_err(|_| (at(i), "a level"))?;
    if !LEVELS.contains(&level) {
        return Err((
            at(i) - level.len(),
            "a level (ERROR, WARN, FIXME, INFO, DEBUG, LOG, TRACE, MEMDUMP)",
        ));
    }
    let (i, _) = space1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    let (i, category) = word(i).map_err(|_| (at(i), "a category"))?;
    let (i, _) = space1::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    let location = |i| -> IResult<&str, (&str, &str, &str)> {
        // Tracer records have neither file nor function: `:0::`.
        let (i, (file, _, line, _, function, _)) = (
            take_till(|c| c == ':' || c == ' '),
            char(':'),
            digit1,
            char(':'),
            take_while(|c: char| c != ':' && c != ' '),
            char(':'),
        )
            .parse(i)?;
        Ok((i, (file, line, function)))
    };
    let (i, (file, src_line, function)) =
        location(i).map_err(|_| (at(i), "`FILE:LINE:FUNCTION:`"))?;
    let src_line = src_line
        .parse()
        .map_err(|_| (at(i), "a source line number"))?;
    let (i, object) = match i.strip_prefix('<') {
        Some(rest) => {
            let end = rest
                .find("> ")
                .or_else(|| rest.strip_suffix('>').map(str::len));
            match end {
                Some(e) => (&rest[e + 1..], Some(&rest[..e])),
                None => return Err((at(i), "an object `<...>`")),
            }
        }
        None => (i, None),
    };
    let (message, _) =
        space0::<&str, nom::error::Error<&str>>(i).map_err(|_| (at(i), "a space"))?;
    Ok(Record {
        ts,
        pid,
        thread,
        level,
        category,
        file,
        line: src_line,
        function,
        object,
        message,
    })
}

impl<'a> Record<'a> {
    /// The tracer record this line carries, if it is one (category `GST_TRACER`, no source location,
    /// a message that reads as a structure); `Err` with the byte offset in the message and what was
    /// expected there when the message of such a line does not read.
    pub fn tracer(&self) -> Option<Result<Structure<'a>, (usize, &'static str)>> {
        if self.category != "GST_TRACER" || !self.file.is_empty() || !self.function.is_empty() {
            return None;
        }
        Some(Structure::parse(self.message))
    }
}

/// A serialized `GstStructure`: `name, key=(type)value, key="quoted", ...;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure<'a> {
    /// The structure's name (the tracer record kind, e.g. `latency`, `thread-rusage`).
    pub name: &'a str,
    /// Its fields, in order.
    pub fields: Vec<Field<'a>>,
}

/// One `key=(type)value` field of a [`Structure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// The key.
    pub key: &'a str,
    /// The type in parentheses (`string`, `guint64`, ...), empty when none was given.
    pub ty: &'a str,
    /// The value as written (quotes and escapes included).
    pub raw: &'a str,
}

impl<'a> Field<'a> {
    /// The value, unquoted and unescaped.
    pub fn value(&self) -> std::borrow::Cow<'a, str> {
        let Some(inner) = self.raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else {
            return std::borrow::Cow::Borrowed(self.raw);
        };
        if !inner.contains('\\') {
            return std::borrow::Cow::Borrowed(inner);
        }
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                if let Some(d) = chars.next() {
                    out.push(d);
                }
            } else {
                out.push(c);
            }
        }
        std::borrow::Cow::Owned(out)
    }

    /// The value as an unsigned integer, if it is one.
    pub fn unsigned(&self) -> Option<u64> {
        self.value().trim().parse().ok()
    }
}

impl<'a> Structure<'a> {
    /// Reads `text`; `Err` with the byte offset where it broke and what was expected there.
    pub fn parse(text: &'a str) -> Result<Self, (usize, &'static str)> {
        let at = |rest: &str| offset_in(text, rest);
        let t = text.trim_end();
        let body = t.strip_suffix(';').unwrap_or(t);
        let name_end = body.find([',', ' ']).unwrap_or(body.len());
        let name = &body[..name_end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | ':'))
        {
            return Err((0, "a structure name"));
        }
        let mut fields = Vec::new();
        let mut rest = body[name_end..].trim_start();
        while let Some(r) = rest.strip_prefix(',') {
            let r = r.trim_start();
            let Some(eq) = r.find('=') else {
                return Err((at(r), "`key=value`"));
            };
            let key = r[..eq].trim();
            if key.is_empty() || key.contains([' ', ',']) {
                return Err((at(r), "a field name"));
            }
            let mut v = r[eq + 1..].trim_start();
            let mut ty = "";
            if let Some(inner) = v.strip_prefix('(') {
                let Some(close) = inner.find(')') else {
                    return Err((at(v), "a type `(type)`"));
                };
                ty = &inner[..close];
                v = &inner[close + 1..];
            }
            let len = value_len(v).ok_or((at(v), "a closing quote or bracket"))?;
            fields.push(Field {
                key,
                ty,
                raw: v[..len].trim_end(),
            });
            rest = v[len..].trim_start();
        }
        if !rest.is_empty() {
            return Err((
                at(rest),
                "`,` and another field, or the end of the structure",
            ));
        }
        Ok(Self { name, fields })
    }

    /// The field `key`.
    pub fn get(&self, key: &str) -> Option<&Field<'a>> {
        self.fields.iter().find(|f| f.key == key)
    }
}

/// The length of the value at the start of `v`: a quoted string (with `\` escapes), or text up to the
/// next `,` outside brackets; `None` when a quote or bracket is left open.
fn value_len(v: &str) -> Option<usize> {
    let b = v.as_bytes();
    if b.first() == Some(&b'"') {
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        return None;
    }
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1 + value_len(&v[i..])?;
                continue;
            }
            b'{' | b'<' | b'[' => depth += 1,
            b'}' | b'>' | b']' => depth -= 1,
            b',' if depth <= 0 => return Some(i),
            _ => {}
        }
        i += 1;
    }
    (depth <= 0).then_some(b.len())
}

/// Reads a GST_DEBUG log line by line.
pub struct GstReader<R> {
    lines: LineReader<R>,
    file: String,
    clean: String,
}

impl<R: std::io::BufRead> GstReader<R> {
    /// Reads `inner`, which errors call `file`.
    pub fn new(inner: R, file: impl Into<String>) -> Self {
        let file = file.into();
        Self {
            lines: LineReader::new(inner, file.clone()),
            file,
            clean: String::new(),
        }
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.lines.bytes()
    }

    /// The next record; `Ok(None)` at the end; a [`FormatError::Parse`] for a foreign line (blank lines
    /// are skipped silently).
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, FormatError> {
        loop {
            let file = &self.file;
            let Some((line_no, line)) = self.lines.next_line()? else {
                return Ok(None);
            };
            if line.trim().is_empty() {
                continue;
            }
            self.clean.clear();
            self.clean.push_str(&strip_ansi(line));
            return match parse_line(&self.clean) {
                Ok(r) => Ok(Some(r)),
                Err((at, expected)) => {
                    Err(ParseError::at(file, line_no, &self.clean, at, expected).into())
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_line_with_object() {
        let r = parse_line("0:11:20.008067915  8874 0x558951015c00 TRACE        GST_REFCOUNTING gstobject.c:249:gst_object_ref:<allocatorsysmem0> 0x55895101d040 ref 1->2").unwrap();
        assert_eq!(r.ts, (11 * 60 + 20) * 1_000_000_000 + 8_067_915);
        assert_eq!(
            (r.pid, r.thread, r.level, r.category),
            (8874, "0x558951015c00", "TRACE", "GST_REFCOUNTING")
        );
        assert_eq!(
            (r.file, r.line, r.function),
            ("gstobject.c", 249, "gst_object_ref")
        );
        assert_eq!(r.object, Some("allocatorsysmem0"));
        assert_eq!(r.message, "0x55895101d040 ref 1->2");
    }

    #[test]
    fn coloured_line() {
        let raw = "0:00:00.223498220 \u{1b}[333m 4394\u{1b}[00m   0x7f8c00bd90 \u{1b}[33;01mWARN   \u{1b}[00m \u{1b}[00m         omxvideodec gstomxvideodec.c:1790:gst_omx_video_dec_loop:<omxh264dec-omxh264dec0>\u{1b}[00m error: Unable";
        let clean = strip_ansi(raw);
        let r = parse_line(&clean).unwrap();
        assert_eq!((r.pid, r.level, r.category), (4394, "WARN", "omxvideodec"));
        assert_eq!(r.object, Some("omxh264dec-omxh264dec0"));
        assert_eq!(r.message, "error: Unable");
    }

    #[test]
    fn tracer_line_reads_as_a_structure() {
        let line = "0:00:00.615951258 19327 0x55c917b92800 TRACE             GST_TRACER :0:: latency, src-element-id=(string)0x55c917b6a8e0, src-element=(string)videotestsrc0, src=(string)src, sink-element-id=(string)0x55c917b4b490, sink-element=(string)fakesink0, sink=(string)sink, time=(guint64)233839, ts=(guint64)615871088;";
        let r = parse_line(line).unwrap();
        assert_eq!((r.file, r.line, r.function), ("", 0, ""));
        let s = r.tracer().unwrap().unwrap();
        assert_eq!(s.name, "latency");
        assert_eq!(s.fields.len(), 8);
        assert_eq!(s.get("src-element").unwrap().value(), "videotestsrc0");
        assert_eq!(s.get("time").unwrap().ty, "guint64");
        assert_eq!(s.get("ts").unwrap().unsigned(), Some(615_871_088));
    }

    #[test]
    fn structures_with_quotes_nested_structures_and_lists() {
        let s = Structure::parse(r#"message, thread-id=(guint64)94088613121888, ts=(guint64)21137511, element-ix=(uint)0, name=(string)structure-change, structure=(structure)"GstMessageStructureChange\,\ type\=\(GstStructureChangeType\)link\,\ owner\=\(GstElement\)\"\\\(GstAudioTestSrc\\\)\\\ audiotestsrc0\"\,\ busy\=\(boolean\)true\;", caps={ a, b }, last=1;"#).unwrap();
        assert_eq!(s.name, "message");
        let keys: Vec<&str> = s.fields.iter().map(|f| f.key).collect();
        assert_eq!(
            keys,
            [
                "thread-id",
                "ts",
                "element-ix",
                "name",
                "structure",
                "caps",
                "last"
            ]
        );
        assert!(
            s.get("structure")
                .unwrap()
                .value()
                .starts_with("GstMessageStructureChange, type=(GstStructureChangeType)link")
        );
        assert_eq!(s.get("caps").unwrap().raw, "{ a, b }");
        assert_eq!(s.get("last").unwrap().ty, "");
        assert!(Structure::parse("x, a=\"open").is_err());
        assert!(Structure::parse("x, novalue").is_err());
        assert!(Structure::parse("not a structure at all").is_err());
        // A GStreamer debug line of the tracer category with a location is not a tracer record.
        let r = parse_line("0:00:00.599625022 19327 0x55c917aa0260 DEBUG GST_TRACER gsttracerrecord.c:123:gst_tracer_record_build_format: new format string: latency").unwrap();
        assert!(r.tracer().is_none());
    }

    #[test]
    fn foreign_line_is_an_error_at_column_one() {
        assert_eq!(
            parse_line("Hello world, I am here to fuzz").unwrap_err().0,
            0
        );
    }
}
