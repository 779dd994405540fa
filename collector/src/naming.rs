//! Trace file names from board names: safe on every file system, never a path.

/// `<board>-<UTC date>-s<session>`: the board name keeps letters, digits, `-`, `_` and `.`, everything
/// else becomes `_`; no leading dot, no `..`, at most 64 characters, `board` if nothing is left.
pub fn trace_file_name(board: &str, session_id: u64, unix_ns: i64) -> String {
    format!(
        "{}-{}-s{session_id}",
        sanitize_board(board),
        utc_stamp(unix_ns)
    )
}

/// The board part of a trace file name.
pub fn sanitize_board(board: &str) -> String {
    let mut s: String = board
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    while s.contains("..") {
        s = s.replace("..", "_");
    }
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() { "board".to_string() } else { s }
}

/// Longest text [`printable`] shows before cutting it (in characters).
pub const PRINTABLE_MAX_CHARS: usize = 200;

/// A name from a board (or any text from a file) made safe for a terminal: control characters (C0,
/// DEL, C1 — ESC and OSC sequences, CR, LF, NUL), bidirectional overrides and other invisible format
/// characters are shown escaped (`\u{1b}`), a backslash is doubled, and text longer than
/// [`PRINTABLE_MAX_CHARS`] is cut with its full length said.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(4 * PRINTABLE_MAX_CHARS));
    for (n, c) in text.chars().enumerate() {
        if n == PRINTABLE_MAX_CHARS {
            out.push_str(&format!("…({} characters)", text.chars().count()));
            break;
        }
        let invisible = c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}');
        if c == '\\' {
            out.push_str("\\\\");
        } else if invisible {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// `YYYYmmddTHHMMSSZ` for nanoseconds since the Unix epoch.
pub fn utc_stamp(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_board_names_stay_inside_the_directory() {
        for name in [
            "../../etc/passwd",
            "..",
            "/abs/path",
            "a/../b",
            ".hidden",
            "",
            "a\\b",
            "x\0y",
            "é",
        ] {
            let s = sanitize_board(name);
            assert!(
                !s.contains('/') && !s.contains('\\') && !s.contains("..") && !s.starts_with('.'),
                "{name:?} -> {s:?}"
            );
            assert!(!s.is_empty());
        }
        assert_eq!(sanitize_board("stb-7105_A.1"), "stb-7105_A.1");
        assert_eq!(sanitize_board("../../etc/passwd"), "____etc_passwd");
    }

    #[test]
    fn names_reach_the_terminal_escaped() {
        assert_eq!(printable("stb-7105 é"), "stb-7105 é");
        assert_eq!(
            printable("a\u{1b}]0;pwned\u{7}b"),
            "a\\u{1b}]0;pwned\\u{7}b"
        );
        assert_eq!(printable("x\r\n\0y"), "x\\u{d}\\u{a}\\u{0}y");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m", "C1 CSI");
        assert_eq!(printable("a\u{202e}b"), "a\\u{202e}b", "bidi override");
        assert_eq!(
            printable("a\\u{1b}"),
            "a\\\\u{1b}",
            "an escape cannot be faked"
        );
        let long = "n".repeat(100_000);
        let shown = printable(&long);
        assert!(
            shown.chars().count() < PRINTABLE_MAX_CHARS + 30,
            "{}",
            shown.len()
        );
        assert!(shown.ends_with("…(100000 characters)"));
        for s in [
            printable("\u{1b}[2J\u{1b}]52;c;AAAA\u{7}"),
            printable(&long),
        ] {
            assert!(!s.chars().any(|c| c.is_control()), "{s:?}");
        }
    }

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-11-20T23:42:50Z
        assert_eq!(utc_stamp(1_795_218_170 * 1_000_000_000), "20261120T234250Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
    }
}
