//! The git wrapper: `munmapq shell-init`'s `git` function and a munmapq
//! linked as `git` (`ln -s "$(command -v munmapq)" ~/bin/git`) both end
//! here. It finds the real git (the next `git` in PATH that is not a
//! munmapq), decides whether munmapq pays in this repository (gitdecide),
//! and execs git, preloaded or not: git's exit status, signals and stdio
//! are its own, as no process stands between it and its caller (exec
//! keeps the signals the caller ignored; Rust's exec resets SIGPIPE, which
//! git resets at start anyway, and the signal mask).
//!
//! No recursion: every wrapper on the way adds its own file (device and
//! inode) to `MUNMAPQ_GIT_WRAPPER` and skips every file listed there, so
//! a munmapq never runs itself or another wrapper twice. A git started
//! under git (hooks, aliases, submodules) inherits the variable and its
//! parent's decision: the wrapper then only finds and execs git.

use crate::cli::fail;
use crate::platform::{PRELOAD_LIST, PRELOAD_VAR};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The recursion guard: `DEV:INO` of each wrapper passed, `,`-separated.
pub const GUARD_VAR: &str = "MUNMAPQ_GIT_WRAPPER";

/// Whether this process was started as `git` (a link to munmapq).
pub fn invoked_as_git() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|a| Path::new(&a).file_name() == Some(OsStr::new("git")))
}

/// A file's identity.
type FileId = (u64, u64);

fn file_id(p: &Path) -> Option<FileId> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

fn me() -> Option<FileId> {
    std::env::current_exe().ok().and_then(|p| file_id(&p))
}

fn guarded() -> Vec<FileId> {
    let v = std::env::var(GUARD_VAR).unwrap_or_default();
    v.split(',')
        .filter_map(|e| {
            let (d, i) = e.split_once(':')?;
            Some((d.parse().ok()?, i.parse().ok()?))
        })
        .collect()
}

/// The first executable `git` in PATH that is neither this munmapq nor
/// any file in `skip`.
fn find_git(skip: &[FileId]) -> Option<PathBuf> {
    find_git_in(&std::env::var_os("PATH")?, skip)
}

/// The first executable `git` in the directories of `path` (a PATH value)
/// that is not one of the files in `skip`.
fn find_git_in(path: &OsStr, skip: &[FileId]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join("git"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| {
                m.is_file()
                    && m.permissions().mode() & 0o111 != 0
                    && !skip.contains(&(m.dev(), m.ino()))
            })
        })
}

/// The real git: the first in PATH that is not this munmapq nor a
/// wrapper already passed.
pub fn real_git() -> Option<PathBuf> {
    let mut skip = guarded();
    skip.extend(me());
    find_git(&skip)
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

/// More wrappers in a row than this is a loop nothing else stopped.
const MAX_WRAPPERS: usize = 16;

/// Runs git with `args` (everything after `git`), preloaded when munmapq
/// pays here. Returns only when git cannot be run.
pub fn run(args: &[OsString]) -> ExitCode {
    let passed = guarded();
    if passed.len() >= MAX_WRAPPERS {
        return fail(
            &format!("git: {MAX_WRAPPERS} munmapq git wrappers in a row ({GUARD_VAR}): a loop; check PATH"),
            126,
        );
    }
    let Some(git) = real_git() else {
        return fail(
            "git: no git in PATH besides munmapq itself (a munmapq linked as git runs the next git in PATH)",
            127,
        );
    };
    let mut cmd = Command::new(&git);
    cmd.args(args).env(GUARD_VAR, guard_for_children());
    if passed.is_empty() && crate::gitdecide::decide(args).wrap {
        preload(&mut cmd, &git);
    }
    let err = cmd.exec();
    fail(&format!("git: {}: {err}", git.display()), 126)
}

/// Adds the library to the preload list (never takes one away: a git run
/// under `munmapq git` keeps it).
fn preload(cmd: &mut Command, git: &Path) {
    match crate::library::find_library(None) {
        Ok(lib) => {
            if let Some(why) = crate::doctor::launcher::would_kill(git, &lib) {
                eprintln!("munmapq: warning: git: {why}; running it without munmapq");
                return;
            }
            cmd.env(
                PRELOAD_VAR,
                PRELOAD_LIST.prepend(&lib, std::env::var_os(PRELOAD_VAR)),
            );
        }
        Err(msg) => eprintln!("munmapq: warning: {msg}; running git without munmapq"),
    }
}

/// For `munmapq doctor git ...`: what the wrapper would do here, and how
/// to have it.
pub fn doctor_lines(args: &[OsString]) -> Vec<String> {
    let d = crate::gitdecide::decide(args);
    let how = if d.wrap {
        "with munmapq"
    } else {
        "without munmapq (git as it is)"
    };
    let mut v = vec![format!(
        "the git wrapper would run git here {how}: {}",
        d.reason
    )];
    let exe = std::env::current_exe().unwrap_or_else(|_| "munmapq".into());
    if crate::program::resolve("git").is_some_and(|p| is_me(&p)) {
        v.push("the git wrapper is installed: the first git in PATH is this munmapq".into());
    } else {
        v.push(format!(
            "the git wrapper: eval \"$(munmapq shell-init bash)\" (or zsh, fish) gives interactive \
             shells a git function; ln -s {} ~/bin/git, with ~/bin ahead of git in PATH, reaches \
             editors, cron and scripts too",
            exe.display()
        ));
    }
    v
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
        assert_eq!(find_git_in(&path, &[]), Some(a.join("git")));
        assert_eq!(find_git_in(&path, &[first]), Some(b.join("git")));
        let second = file_id(&b.join("git")).unwrap();
        assert_eq!(find_git_in(&path, &[first, second]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
