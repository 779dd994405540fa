//! Trace file names from board names: safe on every file system, never a path.

/// `<board>-<UTC date>-s<session>`: the board name keeps letters, digits, `-`, `_` and `.`, everything
/// else becomes `_`; no leading dot, no `..`, at most 64 characters, `board` if nothing is left.
pub fn trace_file_name(board: &str, session_id: u64, unix_ns: i64) -> String {
    format!(
        "{}-{}-s{session_id}",
        sanitize_board(board),
        socscope_tracedb::units::utc_stamp(unix_ns)
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

/// Longest message [`printable_message`] shows before cutting it (in characters): longer than any
/// message the collector writes itself with a board name cut to the default `--max-name-chars` in it,
/// so that the reason and the advice at its end are always shown, yet bounded.
pub const MESSAGE_MAX_CHARS: usize = 2000;

/// A name from a board (or any text from a file) made safe for a terminal: control characters (C0,
/// DEL, C1 — ESC and OSC sequences, CR, LF, NUL), bidirectional overrides and other invisible format
/// characters are shown escaped (`\u{1b}`), a backslash is doubled, and text longer than
/// [`PRINTABLE_MAX_CHARS`] is cut with its full length said.
pub fn printable(text: &str) -> String {
    escaped_and_cut(text, PRINTABLE_MAX_CHARS)
}

/// A message (a notice of the collector, the reason a trace was interrupted) made safe for a terminal
/// as [`printable`] does, but cut only beyond [`MESSAGE_MAX_CHARS`]: such messages quote names and
/// paths, and end with what happened to the data and what to do, which a 200-character cut lost.
pub fn printable_message(text: &str) -> String {
    escaped_and_cut(text, MESSAGE_MAX_CHARS)
}

fn escaped_and_cut(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(4 * max_chars));
    for (n, c) in text.chars().enumerate() {
        if n == max_chars {
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
            printable_message(&long),
        ] {
            assert!(!s.chars().any(|c| c.is_control()), "{s:?}");
        }
    }

    #[test]
    fn a_message_is_shown_whole_up_to_its_own_bound() {
        // The refusal of a board on a nearly full disk (several hundred characters), its advice last.
        let message = format!(
            "no trace could be started: no room to set aside the 16777216-byte disk reserve that lets \
             traces be closed on a full disk ({}/.socscope-reserve-7001-1: the disk is nearly full: \
             16777216 bytes left, under the reserve and the 65536 bytes kept for the next commits); free \
             room on the disk or lower --disk-reserve; the session's frames are dropped",
            "/srv/rig/traces/".repeat(4)
        );
        assert!(message.chars().count() > PRINTABLE_MAX_CHARS);
        assert_eq!(printable_message(&message), message);
        assert_eq!(printable_message("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        let long = "m".repeat(100_000);
        let shown = printable_message(&long);
        assert!(shown.chars().count() < MESSAGE_MAX_CHARS + 30);
        assert!(shown.ends_with("…(100000 characters)"));
    }
}
