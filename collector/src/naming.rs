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
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-11-20T23:42:50Z
        assert_eq!(utc_stamp(1_795_218_170 * 1_000_000_000), "20261120T234250Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
    }
}
