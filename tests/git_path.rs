//! The git wrapper finds and runs the real git as the caller's shell would
//! have: whatever argv[0] it was given (`exec -a`), through an empty PATH
//! entry (the current directory), past a git this user may not execute,
//! under aliases that run git again and again, and without `/proc`. Each
//! case runs the same command with the wrapper first in PATH and without
//! it, and must end the same.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};

use common::GitWorld as World;

impl World {
    /// `sh -c SCRIPT` in `cwd` with PATH as `path` says (`{bin}` standing
    /// for the wrapper's directory, or for nothing without it).
    fn sh(&self, cwd: &Path, path: &str, script: &str, wrapped: bool) -> Output {
        let bin = if wrapped {
            self.bin.to_str().unwrap().to_string()
        } else {
            self.dir.join("nobin").to_str().unwrap().to_string()
        };
        let mut c = Command::new("sh");
        c.args(["-c", script])
            .current_dir(cwd)
            .env("PATH", path.replace("{bin}", &bin))
            .env("HOME", &*self.dir)
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("BIN", &bin)
            .env_remove("MUNMAPQ_GIT_WRAPPER")
            .env_remove("LD_PRELOAD");
        output_within(&mut c, MINUTE)
    }

    /// The script ends the same with the wrapper as without it; answers
    /// what it printed.
    fn same(&self, cwd: &Path, path: &str, script: &str) -> String {
        let plain = self.sh(cwd, path, script, false);
        let wrapped = self.sh(cwd, path, script, true);
        let show = |o: &Output| format!("{:?}: {}{}", o.status, text(&o.stdout), text(&o.stderr));
        assert_eq!(
            (plain.status.code(), &plain.stdout, &plain.stderr),
            (wrapped.status.code(), &wrapped.stdout, &wrapped.stderr),
            "{script}\nwithout: {}\nwith: {}",
            show(&plain),
            show(&wrapped)
        );
        text(&wrapped.stdout)
    }
}

fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const PATH: &str = "{bin}:/usr/local/bin:/usr/bin:/bin";

/// The wrapper is the file the caller ran, not what argv[0] says: git
/// takes a `git-NAME` argv[0] for the command NAME, and any other for git.
#[test]
fn any_argv0_runs_git_as_without_the_wrapper() {
    let w = World::new("git-argv0");
    let repo = repo::small_repo(&w.dir, "r");
    for (arg0, args, said) in [
        ("git-rev-parse", "--is-inside-work-tree", "true"),
        ("foo", "--version", "git version"),
        ("", "--version", "git version"),
        ("", "rev-parse --is-inside-work-tree", "true"),
    ] {
        let s = format!("exec -a '{arg0}' git {args}");
        let out = w.same(&repo, PATH, &format!("bash -c \"{s}\""));
        assert!(out.contains(said), "{s}: {out}");
    }
    println!("git run as git-rev-parse, foo and an empty argv[0]: as without the wrapper");
}

/// An alias that runs git, whose alias runs git, ...: the same wrapper
/// passed again each time is no loop.
#[test]
fn git_under_git_twenty_deep_is_no_loop() {
    let w = World::new("git-nest");
    let repo = repo::small_repo(&w.dir, "r");
    let nest = w.dir.join("nest");
    script(
        &nest,
        "#!/bin/sh\nn=$((${1:-0} + 1))\nif [ $n -ge 20 ]; then echo level $n; exit 0; fi\nPATH=$BIN:$PATH exec git nest $n\n",
    );
    let alias = format!("alias.nest=!{}", nest.display());
    let out = w.same(&repo, PATH, &format!("git -c '{alias}' nest"));
    assert_eq!(out, "level 20\n");
    println!("git under git, 20 deep through an alias: as without the wrapper");
}

/// An empty PATH entry is the current directory, as for execvp.
#[test]
fn an_empty_path_entry_is_the_current_directory() {
    let w = World::new("git-emptypath");
    let here = w.dir.join("here");
    std::fs::create_dir_all(&here).unwrap();
    script(&here.join("git"), "#!/bin/sh\necho local git \"$@\"\n");
    let out = w.same(&here, "{bin}::/usr/bin:/bin", "git --version");
    assert_eq!(out, "local git --version\n");
    println!("PATH with an empty entry: the current directory's git, as without the wrapper");
}

/// Without `/proc` (a mount namespace that hides it) the wrapper still
/// tells its own file from git's, and runs git once. Needs root (or a
/// user namespace) to hide `/proc`; says SKIPPED otherwise.
#[test]
fn without_proc_the_wrapper_runs_git_once() {
    let w = World::new("git-noproc");
    let empty = w.dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let hide = format!("mount --bind {} /proc && ", empty.display());
    let probe = w.sh(
        &w.dir,
        PATH,
        &format!("unshare -m sh -c '{hide} true'"),
        false,
    );
    if !probe.status.success() {
        println!("SKIPPED: cannot hide /proc here: {}", text(&probe.stderr));
        return;
    }
    let run = format!("unshare -m sh -c '{hide} exec timeout 20 git --version'");
    let out = w.same(&w.dir, PATH, &run);
    assert!(out.starts_with("git version"), "{out}");
    println!("without /proc: git runs once, as without the wrapper");
}

/// A git this user may not execute (another user's, mode 0700) is passed
/// over, as the user's shell passes over it. Needs root and `setpriv` to run as
/// another user; says SKIPPED otherwise.
#[test]
fn a_git_this_user_may_not_execute_is_passed_over() {
    let w = World::new("git-noexec");
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        println!("SKIPPED: needs root and setpriv");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let private = w.dir.join("private");
    std::fs::create_dir_all(&private).unwrap();
    script(&private.join("git"), "#!/bin/sh\necho private git\n");
    std::fs::set_permissions(private.join("git"), std::fs::Permissions::from_mode(0o700)).unwrap();
    // The launcher and the scratch directory must be reachable by nobody.
    let open = |p: &Path| {
        let mode = std::fs::metadata(p).unwrap().permissions().mode();
        mode & 0o005 == 0o005
    };
    let mut reachable = launcher().canonicalize().unwrap();
    while reachable.pop() {
        if !open(&reachable) {
            println!(
                "SKIPPED: {} is not open to other users",
                reachable.display()
            );
            return;
        }
    }
    let path = format!("{{bin}}:{}:/usr/bin:/bin", private.display());
    let run = "exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'git --version'";
    let out = w.same(&w.dir, &path, run);
    assert!(out.starts_with("git version"), "{out}");
    println!("another user's git (mode 0700) passed over, as without the wrapper");
}

/// The next git whose `#!` interpreter is missing: 127 naming the
/// interpreter, as bash answers (execvp and dash go on to the git after
/// it; the wrapper runs the one git it found).
#[test]
fn a_git_whose_interpreter_is_missing_is_127() {
    let w = World::new("git-nointerp");
    let broken = w.dir.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    script(&broken.join("git"), "#!/nonexistent/sh\n");
    let path = format!("{{bin}}:{}:/usr/bin:/bin", broken.display());
    let out = w.sh(&w.dir, &path, "git --version", true);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    assert_contains(
        &out.stderr,
        "its #! interpreter /nonexistent/sh was not found",
    );
    let bash = w.sh(&w.dir, &path, "bash -c 'git --version'", false);
    assert_eq!(bash.status.code(), Some(127), "{}", text(&bash.stderr));
    println!("a git whose #! interpreter is missing: 127, as bash answers");
}
