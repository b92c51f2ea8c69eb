//! The files a preload entry can name, found as glibc's dynamic linker
//! finds them: a bare name searched in `LD_LIBRARY_PATH`, then
//! `/etc/ld.so.cache`, then the default directories (`elf/dl-load.c`,
//! `_dl_map_object`; `elf/dl-cache.c`); `$LIB` and `$PLATFORM` expanded to
//! each value they take on this machine. The executable's own RPATH and
//! `$ORIGIN` are not followed: such an entry names nothing here.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// The files `entry` may load: itself when it has a directory, the first
/// one found for a bare name, each expansion of `$LIB` and `$PLATFORM`.
pub fn files(entry: &OsStr) -> Vec<PathBuf> {
    let raw = entry.as_bytes();
    if raw.contains(&b'$') {
        return expansions(raw);
    }
    if raw.contains(&b'/') {
        return vec![PathBuf::from(entry)];
    }
    found(entry).into_iter().collect()
}

/// The machine's names in library paths: Debian's multiarch directory,
/// then the others distributions use.
fn lib_dirs() -> [String; 3] {
    [
        format!("lib/{}-linux-gnu", std::env::consts::ARCH),
        "lib64".into(),
        "lib".into(),
    ]
}

/// `$LIB`, `${LIB}`, `$PLATFORM` and `${PLATFORM}` replaced by each value
/// they may take; an entry with any other `$` (`$ORIGIN`) gives none.
fn expansions(raw: &[u8]) -> Vec<PathBuf> {
    let mut out = vec![raw.to_vec()];
    let platform = [std::env::consts::ARCH.to_string()];
    for (names, values) in [
        (["${LIB}", "$LIB"], &lib_dirs()[..]),
        (["${PLATFORM}", "$PLATFORM"], &platform[..]),
    ] {
        out = out
            .into_iter()
            .flat_map(|s| {
                values
                    .iter()
                    .map(|v| names.iter().fold(s.clone(), |s, n| replace(&s, n, v)))
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    out.into_iter()
        .filter(|s| !s.contains(&b'$') && s.contains(&b'/'))
        .map(|s| PathBuf::from(OsString::from_vec(s)))
        .collect()
}

fn replace(s: &[u8], from: &str, to: &str) -> Vec<u8> {
    let (from, mut out, mut rest) = (from.as_bytes(), Vec::new(), s);
    while let Some(i) = rest.windows(from.len()).position(|w| w == from) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(to.as_bytes());
        rest = &rest[i + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The file the dynamic linker loads for a bare `name`, if any.
fn found(name: &OsStr) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    let listed = path_dirs
        .as_bytes()
        .split(|&b| b == b':' || b == b';')
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(OsStr::from_bytes(d)).join(name));
    let cached = cache_entries(name);
    let default = lib_dirs()
        .into_iter()
        .flat_map(|d| [format!("/{d}"), format!("/usr/{d}")])
        .map(|d| PathBuf::from(d).join(name));
    listed.chain(cached).chain(default).find(|p| p.is_file())
}

/// The paths `/etc/ld.so.cache` gives for `name` (glibc's format
/// "glibc-ld.so.cache1.1": a 48-byte header, then entries of 24 bytes
/// whose name and path are offsets from the header).
fn cache_entries(name: &OsStr) -> Vec<PathBuf> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    let Ok(data) = std::fs::read("/etc/ld.so.cache") else {
        return Vec::new();
    };
    let Some(base) = data.windows(MAGIC.len()).position(|w| w == MAGIC) else {
        return Vec::new();
    };
    let word = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let text = |off: usize| {
        let s = data.get(base + off..)?;
        Some(&s[..s.iter().position(|&b| b == 0)?])
    };
    let count = word(base + 20).unwrap_or(0);
    (0..count)
        .filter_map(|i| {
            let entry = base + 48 + 24 * i;
            let (key, value) = (word(entry + 4)?, word(entry + 8)?);
            if text(key)? != name.as_bytes() {
                return None;
            }
            Some(PathBuf::from(OsStr::from_bytes(text(value)?)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_is_found_by_its_bare_name() {
        let found = files(OsStr::new("libc.so.6"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].is_file());
    }

    #[test]
    fn lib_and_platform_expand_to_each_value() {
        let got = files(OsStr::new("/usr/$LIB/${PLATFORM}/x.so"));
        assert_eq!(got.len(), 3);
        assert!(got.contains(&PathBuf::from(format!(
            "/usr/lib64/{}/x.so",
            std::env::consts::ARCH
        ))));
        assert!(files(OsStr::new("$ORIGIN/x.so")).is_empty());
        assert_eq!(files(OsStr::new("/a/b.so")), [PathBuf::from("/a/b.so")]);
    }
}
