//! Output that never panics. std's `print!` family panics when a write
//! fails, and since the launcher ignores SIGPIPE (inherited::start, as
//! Rust's runtime does) a closed pipe is such a failure
//! (`munmapq --help | true`, `munmapq doctor git | head -1`, a closed
//! stderr at the end of a run): a panic there would abort the launcher
//! after the command ran and lose its exit status.
//!
//! These macros have std's names on purpose: declared (`#[macro_use]`)
//! before every other module of the launcher, they shadow std's in the whole
//! crate, so no `println!` anywhere in it, now or later, can panic. A failed
//! write is dropped: there is nobody left to tell.

macro_rules! println {
    () => {
        $crate::out::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

// Kept, unused or not, so that no std eprint! can come back.
#[allow(unused_macros)]
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

/// The first error a `println!` met, but a closed pipe (`| head -1`,
/// where nobody is left to read): for [`checked`].
static OUT_FAILED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Writes to stdout; an error (EPIPE, ENOSPC, a closed descriptor) is
/// kept for [`checked`], not a panic.
pub fn write_out(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let r = out.write_fmt(args).and_then(|()| out.flush());
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            if let Ok(mut failed) = OUT_FAILED.lock() {
                failed.get_or_insert_with(|| why(&e));
            }
        }
    }
}

/// The status of a word that printed its output with `println!` (doctor,
/// selftest): 125 with one line saying so when that output was lost (stdout
/// closed, `>/dev/full`), as [`emit`] does; else `code`.
pub fn checked(code: std::process::ExitCode) -> std::process::ExitCode {
    let failed = if crate::inherited::was_closed(1) {
        Some("bad file descriptor".to_string())
    } else {
        OUT_FAILED.lock().ok().and_then(|f| f.clone())
    };
    match failed {
        Some(why) => {
            write_err(format_args!("munmapq: write error: {why}\n"));
            std::process::ExitCode::from(crate::cli::OWN_FAILURE)
        }
        None => code,
    }
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

/// Prints `text` on stdout as a command's whole output: a write error is
/// munmapq's own failure (125, "write error", as with
/// `env --version >/dev/full`), except a closed pipe (`munmapq --help | head -1`), where
/// nobody is left to read it.
pub fn emit(text: &str) -> std::process::ExitCode {
    emit_bytes(text.as_bytes())
}

/// [`emit`], for bytes (a path need not be UTF-8).
pub fn emit_bytes(text: &[u8]) -> std::process::ExitCode {
    if crate::inherited::was_closed(1) {
        // inherited::start put /dev/null there; the caller closed it.
        write_err(format_args!("munmapq: write error: bad file descriptor\n"));
        return std::process::ExitCode::from(crate::cli::OWN_FAILURE);
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text).and_then(|()| out.flush()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::ExitCode::SUCCESS,
        Err(e) => {
            write_err(format_args!("munmapq: write error: {}\n", why(&e)));
            std::process::ExitCode::from(crate::cli::OWN_FAILURE)
        }
    }
}
