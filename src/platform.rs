//! Everything the launcher does differently per platform, in one place:
//! the library's file name, the variable that preloads it, how that
//! variable's list is split and joined, the library's architectures and
//! which a shell-wide preload must serve. What would make the dynamic
//! linker kill a program rather than skip the library is the doctor's
//! (`doctor::launcher`). (The file name and the variable are
//! `munmapq-check`'s, which the tests share.)

use crate::macho;
use std::ffi::OsString;
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

    /// The entries of a list, as the dynamic linker reads them.
    pub fn split(self, list: &str) -> Vec<&str> {
        let parts: Vec<&str> = match self {
            PreloadList::Colons => list.split(':').collect(),
            PreloadList::SpacesAndColons => list.split([':', ' ']).collect(),
        };
        parts.into_iter().filter(|p| !p.is_empty()).collect()
    }

    /// `lib` first, then what was already preloaded (without a second copy).
    pub fn prepend(self, lib: &Path, existing: Option<OsString>) -> OsString {
        let mut v = lib.as_os_str().to_owned();
        if let Some(old) = existing.filter(|o| !o.is_empty()) {
            let old = old.to_string_lossy().into_owned();
            for part in self.split(&old).into_iter().filter(|p| Path::new(p) != lib) {
                v.push(self.separator().to_string());
                v.push(part);
            }
        }
        v
    }
}

/// The library's Mach-O architectures; empty when unreadable or not Mach-O.
pub fn library_archs(lib: &Path) -> Vec<macho::Arch> {
    macho::head(lib)
        .ok()
        .and_then(|h| macho::archs(&h))
        .unwrap_or_default()
}

/// macOS: `munmapq preload-env` preloads the library into everything the shell
/// starts, so it must serve every architecture a process of this Mac can
/// be. Linux: always fine.
pub fn shell_wide_ok(lib: &Path) -> Result<(), String> {
    #[cfg(target_os = "macos")]
    {
        let archs = library_archs(lib);
        let missing = macho::unserved(&archs, macho::Host::this());
        if !missing.is_empty() {
            return Err(shell_wide_refusal(lib, &archs, &missing));
        }
    }
    let _ = lib;
    Ok(())
}

#[cfg_attr(not(target_os = "macos"), allow(dead_code))] // macOS and tests
pub fn shell_wide_refusal(lib: &Path, archs: &[macho::Arch], missing: &[macho::Arch]) -> String {
    format!(
        "preload-env: {} has {}, and dyld kills every {} process it is inserted into; use `munmapq shell-init` (it checks each program) or `munmapq COMMAND`",
        lib.display(),
        macho::names(archs),
        macho::names(missing)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dyld_splits_on_colons_only_ld_so_on_spaces_too() {
        let lib = Path::new("/c/libmunmapq.dylib");
        let existing = "/Users/me/Library/Application Support/x.dylib:/opt/y.dylib";
        let mac = PreloadList::Colons.prepend(lib, Some(existing.into()));
        assert_eq!(
            mac,
            "/c/libmunmapq.dylib:/Users/me/Library/Application Support/x.dylib:/opt/y.dylib"
        );
        assert_eq!(PreloadList::Colons.split(&mac.to_string_lossy()).len(), 3);
        // No second copy, empty entries dropped.
        let again =
            PreloadList::Colons.prepend(lib, Some("/c/libmunmapq.dylib::/opt/y.dylib".into()));
        assert_eq!(again, "/c/libmunmapq.dylib:/opt/y.dylib");
        // Linux keeps splitting on both, and joins with spaces.
        let lib = Path::new("/c/libmunmapq.so");
        let linux =
            PreloadList::SpacesAndColons.prepend(lib, Some("/a.so /b.so:/c/libmunmapq.so".into()));
        assert_eq!(linux, "/c/libmunmapq.so /a.so /b.so");
        assert_eq!(
            PreloadList::SpacesAndColons.prepend(lib, Some("".into())),
            "/c/libmunmapq.so"
        );
    }

    #[test]
    fn env_refusal_names_what_is_missing() {
        use macho::Arch::*;
        let msg = shell_wide_refusal(Path::new("/l.dylib"), &[Arm64, X86_64], &[Arm64e]);
        assert!(
            msg.contains("arm64 + x86_64") && msg.contains("every arm64e process"),
            "{msg}"
        );
    }
}
