//! Standard output and standard error for the commands: a reader that goes away (`socscope sql TRACE … |
//! head -1`) ends the command quietly, with exit status 0, instead of a panic from `println!`; a warning to a
//! closed standard error is dropped instead of a panic from `eprintln!`.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `c` must not reach a terminal as it is: control characters (C0 but line feed and tab,
/// DEL, C1 — ESC and OSC sequences, CR, BEL, NUL), bidirectional overrides and isolates, and the
/// invisible format characters.
pub fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every [`is_unsafe`] character written `\uXXXX`: the last guard of everything the
/// commands print (names and texts from a trace are printed through it whatever the command). The
/// form is JSON's own escape, and those characters only ever occur inside JSON strings, so a JSON
/// document stays valid and reads back the same text.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A table cell or a one-line field: [`terminal_safe`], and line breaks and tabs escaped too, so that
/// a name cannot break the layout.
pub fn one_line(text: &str) -> String {
    terminal_safe(text)
        .replace('\n', "\\u000a")
        .replace('\t', "\\u0009")
}

/// Set once a write to standard output found it closed; later writes do nothing and fail the same way.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a newline to standard output. A closed standard output is an `io::Error` of kind
/// `BrokenPipe` (the command stops there, and `main` exits quietly); any other failure is returned too.
pub fn line(args: std::fmt::Arguments<'_>) -> io::Result<()> {
    if closed() {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    let text = match args.as_str() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(args.to_string()),
    };
    let mut stdout = io::stdout().lock();
    let result = stdout
        .write_all(terminal_safe(&text).as_bytes())
        .and_then(|()| stdout.write_all(b"\n"));
    if let Err(e) = &result
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        CLOSED.store(true, Ordering::Relaxed);
    }
    result
}

/// Whether standard output was found closed: whatever the command did next, nobody reads its output.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Writes `args` and a newline to standard error, ignoring any failure: a warning or an error message has
/// nowhere else to go, and a standard error nobody reads (`2>&1 | head -1`) must not turn it into a panic.
pub fn err_line(args: std::fmt::Arguments<'_>) {
    let text = args.to_string();
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_all(terminal_safe(&text).as_bytes())
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `println!` for the commands: `outln!(...)` returns from the enclosing function (an `anyhow::Result`)
/// when standard output is closed.
#[macro_export]
#[doc(hidden)]
macro_rules! outln {
    () => {
        $crate::out::line(format_args!(""))?
    };
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))?
    };
}
pub use outln;

/// `eprintln!` for the commands and the GUI: warnings and errors to standard error, dropped when it is
/// closed (see [`err_line`]).
#[macro_export]
#[doc(hidden)]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::err_line(format_args!($($arg)*))
    };
}
pub use errln;

/// Whether a command shows progress on standard error: only to a person watching a terminal. Not
/// under `--json` (a program reads the output), and not when standard output or standard error is
/// a pipe or a file (a script, a log, a test): the bar's redraws would be noise there.
pub fn progress_wanted(json: bool, stdout_is_terminal: bool, stderr_is_terminal: bool) -> bool {
    !json && stdout_is_terminal && stderr_is_terminal
}

/// A progress bar on standard error of `len` steps drawn with `template` (indicatif's), or `None`
/// where [`progress_wanted`] says no. A bar with a spinner ticks by itself, so a step that takes
/// long still shows the command is alive.
pub fn progress_bar(
    json: bool,
    len: Option<u64>,
    template: &str,
) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !progress_wanted(json, io::stdout().is_terminal(), io::stderr().is_terminal()) {
        return None;
    }
    let b = match len {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    b.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::progress_wanted;

    #[test]
    fn progress_only_for_a_person_at_a_terminal() {
        assert!(progress_wanted(false, true, true));
        assert!(!progress_wanted(true, true, true), "--json");
        assert!(!progress_wanted(false, false, true), "stdout piped");
        assert!(!progress_wanted(false, true, false), "stderr piped");
    }
}
