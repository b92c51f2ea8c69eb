//! Everything the launcher does differently per platform, in one place:
//! the library's file name, the variable that preloads it, how that
//! variable's list is split and joined, the library's architectures and
//! which a shell-wide preload must serve. What would make the dynamic
//! linker kill a program rather than skip the library is the doctor's
//! (`doctor::launcher`). (The file name and the variable are
//! `munmapq-check`'s, which the tests share.)

use crate::macho;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

pub use munmapq_check::platform::{LIB_NAME, PRELOAD_VAR};

/// How a preload list is written and read.
#[allow(dead_code)] // a platform uses one variant; the tests both
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreloadList {
    /// dyld: `:` only (dyld-1378 dyld/DyldProcessConfig.cpp,
    /// `PathOverrides::forEachInColonList`, used by `forEachInsertedDylib`);
    /// a path may hold spaces ("Application Support").
    Colons,
    /// glibc's ld.so: spaces and colons both separate (elf/rtld.c,
    /// `handle_preload_list`, which cuts at " :").
    SpacesAndColons,
}

#[cfg(target_os = "macos")]
pub const PRELOAD_LIST: PreloadList = PreloadList::Colons;
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_LIST: PreloadList = PreloadList::SpacesAndColons;

impl PreloadList {
    /// The separator written between entries.
    pub fn separator(self) -> char {
        match self {
            PreloadList::Colons => ':',
            PreloadList::SpacesAndColons => ' ',
        }
    }

    /// Whether the dynamic linker cuts lists at this byte.
    fn separates(self, b: u8) -> bool {
        b == b':' || (self == PreloadList::SpacesAndColons && b == b' ')
    }

    /// What cuts a list, as messages say it.
    pub fn separators(self) -> &'static str {
        match self {
            PreloadList::Colons => "colons",
            PreloadList::SpacesAndColons => "spaces or colons",
        }
    }

    /// Whether the dynamic linker would read `path` as more than one entry:
    /// the list has no quoting, so such a library never loads.
    pub fn would_split(self, path: &Path) -> bool {
        path.as_os_str()
            .as_bytes()
            .iter()
            .any(|&b| self.separates(b))
    }

    /// The entries of a list, as the dynamic linker reads them: bytes, as
    /// it does (an entry need not be UTF-8).
    pub fn split(self, list: &OsStr) -> Vec<&OsStr> {
        list.as_bytes()
            .split(|&b| self.separates(b))
            .filter(|p| !p.is_empty())
            .map(OsStr::from_bytes)
            .collect()
    }

    /// Entries joined as the list is written.
    pub fn join<'a>(self, parts: impl IntoIterator<Item = &'a OsStr>) -> OsString {
        let mut v = Vec::new();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                v.push(self.separator() as u8);
            }
            v.extend_from_slice(part.as_bytes());
        }
        OsString::from_vec(v)
    }

    /// `lib` first, then what was already preloaded, without a second copy
    /// of it or another libmunmapq (`other_copy`).
    pub fn prepend(
        self,
        lib: &Path,
        existing: Option<OsString>,
        other_copy: impl Fn(&Path) -> bool,
    ) -> OsString {
        let old = existing.unwrap_or_default();
        let rest = self
            .split(&old)
            .into_iter()
            .filter(|p| Path::new(p) != lib && !other_copy(Path::new(p)));
        self.join(std::iter::once(lib.as_os_str()).chain(rest))
    }
}

/// Sets `vars` in this process's own environment, for the command it
/// execs or spawns next: a Command with variables of its own copies the
/// environment into a map first, which drops entries without `=`, keeps
/// one of each name (the last, where getenv reads the first) and sorts
/// them. Each is set once (the dynamic linker reads the last of a name,
/// getenv the first). The launcher is single-threaded here. Answers what
/// they were, for [`restore_environment`] once that command has started
/// (what the launcher runs itself after, git for its advice, must not
/// get them).
pub fn put_in_environment(vars: &[(OsString, OsString)]) -> Vec<(OsString, Option<OsString>)> {
    let mut before = Vec::new();
    for (k, v) in vars {
        if !before.iter().any(|(b, _)| b == k) {
            before.push((k.clone(), std::env::var_os(k)));
        }
        std::env::remove_var(k);
        std::env::set_var(k, v);
    }
    before
}

/// Puts back what [`put_in_environment`] replaced (a name given twice
/// comes back once).
pub fn restore_environment(before: Vec<(OsString, Option<OsString>)>) {
    for (k, v) in before {
        std::env::remove_var(&k);
        if let Some(v) = v {
            std::env::set_var(&k, v);
        }
    }
}

/// What the dynamic linker reads of the preload variable: its last entry
/// (glibc's rtld takes each in turn; getenv the first).
pub fn preloaded_now() -> Option<OsString> {
    std::env::vars_os()
        .filter(|(k, _)| k == PRELOAD_VAR)
        .map(|(_, v)| v)
        .last()
}

/// The library's Mach-O architectures; empty when unreadable or not Mach-O.
pub fn library_archs(lib: &Path) -> Vec<macho::Arch> {
    macho::head(lib)
        .ok()
        .and_then(|h| macho::archs(&h))
        .unwrap_or_default()
}

/// The dynamic linker a shell-wide preload would go through.
#[allow(dead_code)] // a platform uses one variant; the tests both
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    /// glibc's ld.so: an `LD_PRELOAD` entry it cannot load gets one line
    /// and the program runs without it (elf/rtld.c, `do_preload`).
    LdSo,
    /// dyld: a `DYLD_INSERT_LIBRARIES` entry it cannot load, or that fails
    /// library validation, halts the process unless AMFI allows insert
    /// failures (dyld-1378 dyld/DyldRuntimeState.cpp,
    /// `RuntimeState::loadInsertedLibraries`, "terminating because inserted
    /// dylib ... could not be loaded", `halt` in dyld/dyldMain.cpp; library
    /// validation is the `F_CHECK_LV` fcntl of dyld/Loader.cpp).
    Dyld,
}

#[cfg(target_os = "macos")]
pub const LOADER: Loader = Loader::Dyld;
#[cfg(not(target_os = "macos"))]
pub const LOADER: Loader = Loader::LdSo;

/// Whether `munmapq preload-env` may export `lib` to everything a shell
/// starts. Not with dyld: no path can be trusted for every program the
/// shell will start for as long as it lives. The launcher's cached copy
/// goes when the cache is pruned or cleaned, and any copy fails library
/// validation in a hardened program that allows `DYLD_*` variables but
/// keeps validation: either way dyld kills the program at launch, where
/// ld.so would run it without the library. `shell-init` checks each
/// program (`doctor::launcher`) and finds the library anew.
pub fn shell_wide_ok(loader: Loader) -> Result<(), String> {
    match loader {
        Loader::LdSo => Ok(()),
        Loader::Dyld => Err(format!(
            "preload-env: refused on macOS: dyld kills every program started with {PRELOAD_VAR} naming a library that is gone (the cache is pruned) or fails library validation (hardened programs); use `munmapq shell-init` (it checks each program) or `munmapq COMMAND`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dyld_splits_on_colons_only_ld_so_on_spaces_too() {
        let lib = Path::new("/c/libmunmapq.dylib");
        let existing = "/Users/me/Library/Application Support/x.dylib:/opt/y.dylib";
        let mac = PreloadList::Colons.prepend(lib, Some(existing.into()), |_| false);
        assert_eq!(
            mac,
            "/c/libmunmapq.dylib:/Users/me/Library/Application Support/x.dylib:/opt/y.dylib"
        );
        assert_eq!(PreloadList::Colons.split(&mac).len(), 3);
        // No second copy, empty entries dropped.
        let again = PreloadList::Colons.prepend(
            lib,
            Some("/c/libmunmapq.dylib::/opt/y.dylib".into()),
            |_| false,
        );
        assert_eq!(again, "/c/libmunmapq.dylib:/opt/y.dylib");
        // Linux keeps splitting on both, and joins with spaces.
        let lib = Path::new("/c/libmunmapq.so");
        let linux = PreloadList::SpacesAndColons.prepend(
            lib,
            Some("/a.so /b.so:/c/libmunmapq.so".into()),
            |_| false,
        );
        assert_eq!(linux, "/c/libmunmapq.so /a.so /b.so");
        // Another libmunmapq (another build, another name) gives way.
        let other = Some("/a.so /old/lib-test.so".into());
        let one = PreloadList::SpacesAndColons.prepend(lib, other, |p| p.ends_with("lib-test.so"));
        assert_eq!(one, "/c/libmunmapq.so /a.so");
        assert_eq!(
            PreloadList::SpacesAndColons.prepend(lib, Some("".into()), |_| false),
            "/c/libmunmapq.so"
        );
    }

    /// An entry that is not UTF-8 is kept byte for byte: the dynamic
    /// linker opens it as it is, so a lossy copy would lose the library.
    #[test]
    fn entries_that_are_not_utf8_are_kept_byte_for_byte() {
        let old = OsString::from_vec(b"/tmp/caf\xe9/a.so:/b\xff.so".to_vec());
        for list in [PreloadList::Colons, PreloadList::SpacesAndColons] {
            let sep = list.separator() as u8;
            let mut want = b"/c/libmunmapq.so".to_vec();
            for part in [&b"/tmp/caf\xe9/a.so"[..], b"/b\xff.so"] {
                want.push(sep);
                want.extend_from_slice(part);
            }
            let got = list.prepend(Path::new("/c/libmunmapq.so"), Some(old.clone()), |_| false);
            assert_eq!(got.as_bytes(), want, "{list:?}");
        }
    }

    /// A path is split where the dynamic linker cuts the list: ld.so at
    /// spaces and colons, dyld at colons only.
    #[test]
    fn a_path_is_split_at_the_platforms_own_separators() {
        let (ld_so, dyld) = (PreloadList::SpacesAndColons, PreloadList::Colons);
        for p in ["/home/my home/x.so", "/c:d/x.so"] {
            assert!(ld_so.would_split(Path::new(p)), "{p}");
        }
        assert!(dyld.would_split(Path::new("/c:d/x.dylib")));
        assert!(!dyld.would_split(Path::new("/Library/Application Support/x.dylib")));
        assert!(!ld_so.would_split(Path::new("/home/me/.cache/munmapq/libmunmapq.so")));
    }

    #[test]
    fn preload_env_is_refused_under_dyld_only() {
        let msg = shell_wide_ok(Loader::Dyld).unwrap_err();
        assert!(
            msg.starts_with("preload-env: ")
                && msg.contains(PRELOAD_VAR)
                && msg.contains("munmapq shell-init")
                && !msg.contains('\n'),
            "{msg}"
        );
        assert_eq!(shell_wide_ok(Loader::LdSo), Ok(()));
    }
}
