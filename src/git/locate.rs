//! Finding the real git past every munmapq linked as `git`: the next
//! `git` in PATH that is neither this munmapq nor a wrapper already
//! passed. Every wrapper on the way adds its own file (device and inode)
//! to `MUNMAPQ_GIT_WRAPPER`, so a munmapq never runs itself or another
//! wrapper twice.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The recursion guard: `DEV:INO` of each wrapper passed, `,`-separated.
pub const GUARD_VAR: &str = "MUNMAPQ_GIT_WRAPPER";

/// A file's identity.
pub type FileId = (u64, u64);

fn file_id(p: &Path) -> Option<FileId> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// This munmapq's own file, read once (the wrapper asks twice per git):
/// where `/proc` is not mounted (a sandbox's mount namespace), the file
/// the kernel executed.
fn me() -> Option<FileId> {
    static ME: std::sync::OnceLock<Option<FileId>> = std::sync::OnceLock::new();
    *ME.get_or_init(|| {
        let exe = std::env::current_exe().ok().and_then(|p| file_id(&p));
        exe.or_else(|| executed_path().and_then(|p| file_id(&p)))
    })
}

/// The path this process was executed by: the name the caller gave
/// `execve`, whatever argv[0] says (Linux's `AT_EXECFN`, which needs no
/// `/proc`); None elsewhere.
pub fn executed_path() -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: getauxval only reads the auxiliary vector.
        let p = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
        if p.is_null() {
            return None;
        }
        // SAFETY: AT_EXECFN points to the NUL-terminated name the kernel
        // copied onto the initial stack, alive as long as the process.
        let name = unsafe { std::ffi::CStr::from_ptr(p) };
        Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// The name this munmapq was executed under, as the caller's shell or
/// `execvp` found it (`git` for a link named git), whatever argv[0] says
/// (`exec -a`); argv[0] where the executed file is not this munmapq's
/// (run through the dynamic linker, `fexecve`) or cannot be told.
pub fn executed_name() -> Option<OsString> {
    let name = |p: &OsStr| Path::new(p).file_name().map(OsStr::to_os_string);
    let arg0 = std::env::args_os().next().and_then(|a| name(&a));
    match executed_path() {
        // The common case, told without a system call.
        Some(p) if name(p.as_os_str()) == arg0 => arg0,
        Some(p) if is_me(&p) => name(p.as_os_str()),
        _ => arg0,
    }
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
        // An empty entry is the current directory, as execvp takes it.
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
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
                && crate::program::may_execute(p)
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
    match me() {
        // Once each: git run again under git (an alias, a hook) passes the
        // same wrapper again, which is no loop.
        Some(m) if ids.contains(&m) => {}
        Some(m) => ids.push(m),
        // Where this munmapq cannot tell its own file, each pass adds a
        // mark of its own, so that a wrapper running itself stops after
        // `MAX_WRAPPERS` passes.
        None => ids.push((0, ids.iter().filter(|(d, _)| *d == 0).count() as u64 + 1)),
    }
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
