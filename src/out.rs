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

/// A name (a command, a path, a word) as every message shows it: as it is
/// when each byte is plain (letters, digits and `/._-+,:@%=~^`), else
/// quoted as a POSIX shell would read it back: in single quotes, with a
/// `'` as `'\''`, and each byte that is not printable UTF-8 (control
/// characters, an invalid byte) as `$'\xNN'`. An empty name shows as `''`,
/// never as nothing.
pub fn quote(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"/._-+,:@%=~^".contains(b);
    if !bytes.is_empty() && bytes.iter().all(plain) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut out = String::new();
    let mut open = false;
    let mut rest = bytes;
    while !rest.is_empty() {
        let (printable, len) = match std::str::from_utf8(rest) {
            Ok(s) => first_char(s),
            Err(e) if e.valid_up_to() > 0 => {
                first_char(std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default())
            }
            Err(_) => (None, 1),
        };
        match printable {
            Some(c) => {
                if !open {
                    out.push('\'');
                    open = true;
                }
                if c == '\'' {
                    out.push_str("'\\''");
                } else {
                    out.push(c);
                }
            }
            None => {
                if open {
                    out.push('\'');
                    open = false;
                }
                out.push_str("$'");
                for b in &rest[..len] {
                    out.push_str(&format!("\\x{b:02x}"));
                }
                out.push('\'');
            }
        }
        rest = &rest[len..];
    }
    if open {
        out.push('\'');
    }
    if out.is_empty() {
        out.push_str("''");
    }
    out
}

/// The first character of `s` (not empty) if printable, and its length
/// in bytes.
fn first_char(s: &str) -> (Option<char>, usize) {
    let c = s.chars().next().unwrap_or('\0');
    ((!c.is_control()).then_some(c), c.len_utf8().max(1))
}

/// [`quote`] of a path.
pub fn quote_path(path: &std::path::Path) -> String {
    quote(path.as_os_str())
}

#[cfg(test)]
mod tests {
    use super::quote;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn names_are_quoted_as_a_shell_reads_them() {
        let q = |b: &[u8]| quote(OsStr::from_bytes(b));
        assert_eq!(q(b"git"), "git");
        assert_eq!(q(b"/usr/bin/git"), "/usr/bin/git");
        assert_eq!(q(b""), "''");
        assert_eq!(q(b"a b"), "'a b'");
        assert_eq!(q(b"it's"), r"'it'\''s'");
        assert_eq!(q(b"a\xffb"), r"'a'$'\xff''b'");
        assert_eq!(q(b"\xff"), r"$'\xff'");
        assert_eq!(q(b"tab\there"), r"'tab'$'\x09''here'");
        assert_eq!(q("café".as_bytes()), "'café'");
    }
}
