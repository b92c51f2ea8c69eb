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
use crate::quote::{quote, quote_path};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

/// More wrappers in a row than this is a loop nothing else stopped.
pub const MAX_WRAPPERS: usize = 16;

/// Runs git with `args` (everything after `git`), preloaded when munmapq
/// pays here, with `arg0` as its argv[0] (`git` from the shell function;
/// None: the wrapper's own, as the caller typed it). Returns only when git
/// cannot be run.
pub fn run(args: &[OsString], arg0: Option<&OsStr>) -> ExitCode {
    let passed = guarded();
    if passed.len() >= MAX_WRAPPERS {
        return fail(
            &format!("git: {MAX_WRAPPERS} munmapq git wrappers in a row ({GUARD_VAR}): a loop; check PATH"),
            126,
        );
    }
    let Some(git) = real_git() else {
        let path = crate::program::search_path();
        return fail(
            &format!(
                "git: command not found (a munmapq linked as git runs the next git in {}, which has none besides munmapq)",
                match std::env::var_os("PATH") {
                    Some(_) => "PATH".to_string(),
                    None => format!("the default path {} (PATH is unset)", quote(&path)),
                }
            ),
            127,
        );
    };
    let mut cmd = Command::new(&git);
    let own = std::env::args_os().next();
    if let Some(a) = arg0.map(OsStr::to_os_string).or(own) {
        cmd.arg0(a);
    }
    cmd.args(args);
    // Set in this process rather than on `cmd`: a Command with no
    // variable of its own passes the environment through as it is, where
    // one with a variable copies and sorts all of them first (a sixth of
    // the wrapper's instructions). Single-threaded here, and exec follows.
    std::env::set_var(GUARD_VAR, guard_for_children());
    if passed.is_empty() {
        let d = crate::git::decide::decide(args);
        if let Some(w) = &d.warning {
            eprintln!("munmapq: warning: {w}");
        }
        if d.wrap {
            // As the launcher: a stats or trace file that cannot be
            // written is refused, a relative one made absolute.
            if let Err(msg) = crate::run::outputs::inherited_files() {
                return fail(&format!("{msg}; nothing was run"), crate::cli::OWN_FAILURE);
            }
            preload(&git);
        }
    }
    // Rust's exec empties the signal mask and resets SIGPIPE, and its
    // runtime put /dev/null where the caller had closed stdio: put back
    // what the caller gave.
    let err = crate::inherited::exec(&mut cmd);
    // As the launcher answers: 127 where git's interpreter or dynamic
    // linker is missing, as a shell does, 126 where it cannot be run.
    crate::program::cannot_run::cannot_run(OsStr::new("git"), Some(&git), &err)
}

/// Adds the library to the preload list (never takes one away: a git run
/// under `munmapq git` keeps it).
fn preload(git: &Path) {
    match crate::library::find_library(None) {
        Ok(lib) => {
            if let Some(why) = crate::doctor::launcher::would_kill(git, &lib) {
                eprintln!("munmapq: warning: git: {why}; running it without munmapq");
                return;
            }
            // In this process, as GUARD_VAR (see run).
            let list = PRELOAD_LIST.prepend(
                &lib,
                crate::platform::preloaded_now(),
                crate::library::is_a_munmapq,
            );
            crate::platform::put_in_environment(&[(PRELOAD_VAR.into(), list)]);
        }
        Err(e) if e.no_cache => {
            if super::cache::first_warning() {
                eprintln!(
                    "munmapq: warning: {}; running git without munmapq (said once a day)",
                    e.msg
                );
            }
        }
        Err(e) => eprintln!("munmapq: warning: {}; running git without munmapq", e.msg),
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
    v.extend(d.warning);
    let exe = std::env::current_exe().unwrap_or_else(|_| "munmapq".into());
    if crate::program::resolve("git").is_some_and(|p| is_me(&p)) {
        v.push(
            "the git wrapper is installed for every program: the first git in PATH is this munmapq"
                .into(),
        );
    } else {
        v.push(format!(
            "no munmapq is linked as git in PATH, so editors, cron and scripts run git as it is \
             (ln -s {} ~/bin/git, with ~/bin ahead of git in PATH, puts the wrapper in front of \
             them)",
            quote_path(&exe)
        ));
    }
    // A shell's functions live in that shell: no program it starts can
    // see them. Said rather than guessed.
    v.push(
        "whether your shell has shell-init's git function, munmapq cannot see from here (a \
         shell's functions are its own): type git in it shows one that runs munmapq __git; \
         eval \"$(munmapq shell-init bash)\" (or zsh; fish: munmapq shell-init fish | source) \
         defines it"
            .into(),
    );
    v
}
