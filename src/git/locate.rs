//! Finding the real git past every munmapq linked as `git`: the next
//! `git` in PATH that is neither this munmapq nor a wrapper already
//! passed. Every wrapper on the way adds its own file (device and inode)
//! to `MUNMAPQ_GIT_WRAPPER`, so a munmapq never runs itself or another
//! wrapper twice.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The recursion guard: `DEV:INO` of each wrapper passed, `,`-separated.
pub const GUARD_VAR: &str = "MUNMAPQ_GIT_WRAPPER";

/// A file's identity.
pub type FileId = (u64, u64);

fn file_id(p: &Path) -> Option<FileId> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// This munmapq's own file, read once (the wrapper asks twice per git).
fn me() -> Option<FileId> {
    static ME: std::sync::OnceLock<Option<FileId>> = std::sync::OnceLock::new();
    *ME.get_or_init(|| std::env::current_exe().ok().and_then(|p| file_id(&p)))
}

/// The wrappers passed so far, from the guard variable.
pub fn guarded() -> Vec<FileId> {
    let v = std::env::var(GUARD_VAR).unwrap_or_default();
    v.split(',')
        .filter_map(|e| {
            let (d, i) = e.split_once(':')?;
            Some((d.parse().ok()?, i.parse().ok()?))
        })
        .collect()
}

/// The first executable `name` in the directories of `path` (a PATH
/// value) that is not one of the files in `skip`.
fn find_in(path: &OsStr, name: &OsStr, skip: &[FileId]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    // One buffer for every candidate (the wrapper looks before each git).
    let mut candidate = Vec::with_capacity(256);
    for dir in path.as_bytes().split(|&b| b == b':') {
        if dir.is_empty() {
            continue;
        }
        candidate.clear();
        candidate.extend_from_slice(dir);
        if !dir.ends_with(b"/") {
            candidate.push(b'/');
        }
        candidate.extend_from_slice(name.as_bytes());
        let p = Path::new(OsStr::from_bytes(&candidate));
        let found = std::fs::metadata(p).is_ok_and(|m| {
            m.is_file()
                && m.permissions().mode() & 0o111 != 0
                && !skip.contains(&(m.dev(), m.ino()))
        });
        if found {
            return Some(p.to_path_buf());
        }
    }
    None
}

/// The real git: the first in PATH that is not this munmapq nor a
/// wrapper already passed.
pub fn real_git() -> Option<PathBuf> {
    past_wrappers(OsStr::new("git"))
}

/// The real `name`: the first in the search path (PATH, or the default
/// path where PATH is unset) that is not this munmapq nor a wrapper
/// already passed.
pub fn past_wrappers(name: &OsStr) -> Option<PathBuf> {
    let mut skip = guarded();
    skip.extend(me());
    find_in(&crate::program::search_path(), name, &skip)
}

/// Whether `path` is this very munmapq (a link to it, or it).
pub fn is_me(path: &Path) -> bool {
    me().is_some_and(|m| file_id(path) == Some(m))
}

/// The guard's value for a git this process starts: the wrappers passed
/// so far and this munmapq. A munmapq started with it (another one linked
/// as git further along PATH) only execs the real git: no decision, no
/// loop, also for the git runs the decision itself makes.
pub fn guard_for_children() -> String {
    let mut ids = guarded();
    ids.extend(me());
    let ids: Vec<String> = ids.iter().map(|(d, i)| format!("{d}:{i}")).collect();
    ids.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_git_past_skipped_files() {
        let dir = std::env::temp_dir().join(format!("munmapq-gitwrap-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("git"), "#!/bin/sh\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(d.join("git"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        let path = std::env::join_paths([&a, &a, &b]).unwrap();
        let first = file_id(&a.join("git")).unwrap();
        let git = OsStr::new("git");
        assert_eq!(find_in(&path, git, &[]), Some(a.join("git")));
        assert_eq!(find_in(&path, git, &[first]), Some(b.join("git")));
        let second = file_id(&b.join("git")).unwrap();
        assert_eq!(find_in(&path, git, &[first, second]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
