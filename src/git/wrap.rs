//! The git wrapper: `munmapq shell-init`'s `git` function and a munmapq
//! linked as `git` (`ln -s "$(command -v munmapq)" ~/bin/git`) both end
//! here. It finds the real git (the next `git` in PATH that is not a
//! munmapq), decides whether munmapq pays in this repository (git/decide.rs),
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

use super::locate::{guard_for_children, guarded, is_me, real_git, GUARD_VAR};
use crate::cli::fail;
use crate::platform::{PRELOAD_LIST, PRELOAD_VAR};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

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
    if passed.is_empty() && crate::git::decide::decide(args).wrap {
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
    let d = crate::git::decide::decide(args);
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
