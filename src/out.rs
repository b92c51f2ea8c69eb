//! Output that never panics. std's `print!` family panics when a write
//! fails, and since Rust ignores SIGPIPE a closed pipe is such a failure
//! (`munmapq --help | true`, `munmapq doctor git | head -1`, a closed
//! stderr at the end of a run): a panic there would abort the launcher
//! after the command ran and lose its exit status.
//!
//! These macros have std's names on purpose: declared (`#[macro_use]`)
//! before every other module of the launcher, they shadow std's in the whole
//! crate, so no `println!` anywhere in it, now or later, can panic. A failed
//! write is dropped: there is nobody left to tell.

macro_rules! print {
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!($($arg)*))
    };
}

macro_rules! println {
    () => {
        $crate::out::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::out::write_err(format_args!($($arg)*))
    };
}

macro_rules! eprintln {
    () => {
        $crate::out::write_err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

use std::io::Write;

/// Writes to stdout; an error (EPIPE, ENOSPC, a closed descriptor) is
/// dropped.
pub fn write_out(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(args);
    let _ = out.flush();
}

/// Writes to stderr; an error is dropped.
pub fn write_err(args: std::fmt::Arguments) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// An I/O error as one lower-case phrase, without Rust's "(os error N)".
pub fn why(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_lowercase(),
        None => s,
    }
}
