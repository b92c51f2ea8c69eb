//! Names (commands, paths, words) as every message shows them, one way.

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
