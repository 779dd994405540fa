//! Standard output and standard error for the commands: a reader that goes away (`socscope sql TRACE … |
//! head -1`) ends the command quietly, with exit status 0, instead of a panic from `println!`; a warning to a
//! closed standard error is dropped instead of a panic from `eprintln!`.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to standard output found it closed; later writes do nothing and fail the same way.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` and a newline to standard output. A closed standard output is an `io::Error` of kind
/// `BrokenPipe` (the command stops there, and `main` exits quietly); any other failure is returned too.
pub fn line(args: std::fmt::Arguments<'_>) -> io::Result<()> {
    if closed() {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    let mut stdout = io::stdout().lock();
    let result = stdout
        .write_fmt(args)
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
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
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
