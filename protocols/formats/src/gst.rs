//! GStreamer `GST_DEBUG` logs:
//! `H:MM:SS.NNNNNNNNN PID THREAD LEVEL CATEGORY FILE:LINE:FUNCTION:[<OBJECT>] MESSAGE`.
//!
//! Times are since the pipeline started; coloured logs carry ANSI escapes (stripped first); real logs
//! mix in foreign lines, which the reader reports as errors for the caller to skip and count.

use nom::bytes::complete::{take_till1, take_while1};
use nom::character::complete::{char, digit1, space0, space1};
use nom::{IResult, Parser};

use crate::{FormatError, LineReader, ParseError, offset_in};

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
        let (i, (file, _, line, _, function, _)) = (
            take_till1(|c| c == ':' || c == ' '),
            char(':'),
            digit1,
            char(':'),
            take_while1(|c: char| c != ':' && c != ' '),
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
    fn foreign_line_is_an_error_at_column_one() {
        assert_eq!(
            parse_line("Hello world, I am here to fuzz").unwrap_err().0,
            0
        );
    }
}
