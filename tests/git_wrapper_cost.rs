//! What the git wrapper costs where it does not wrap, counted: the system
//! calls its own process makes before it execs git (strace), for the git
//! function's form (`munmapq __git`) and a munmapq linked as git. Prompts,
//! editors and scripts make thousands of such calls, so it is held to what
//! an exec wrapper costs: `env git ...` makes 105 before git's exec with a
//! UTF-8 locale (its locale files), d02eb11's wrapper made 89 here (95
//! with a longer PATH). What it must make: the dynamic loader's ~30, the
//! stdio check and SIGPIPE, its own file, PATH up to git, the repository's
//! discovery, the cached decision and the files it came from, the loose
//! object estimate, and the signal state put back before the exec.
//! `scripts/bench-git-wrapper.sh --counts` prints them with instructions
//! and page faults.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// At most this many system calls before git's exec (the first execve,
/// its own start, not counted).
const BOUND: usize = 80;

/// The system calls of `program ARGS` before its second execve, and the
/// trace: the wrapper's own, up to git's exec.
fn before_exec(program: &Path, arg0_args: &[&str], cwd: &Path, env: &[(&str, &Path)]) -> usize {
    let dir = scratch("git-wrapper-cost-trace");
    let trace = dir.join("trace");
    // By its path: the command's PATH, which the lookup would use, is
    // the test's own.
    let strace = Command::new("sh")
        .args(["-c", "command -v strace"])
        .output()
        .unwrap();
    let mut c = Command::new(text(&strace.stdout).trim());
    c.args(["-f", "-qq", "-o"])
        .arg(&trace)
        .arg(program)
        .args(arg0_args)
        .current_dir(cwd)
        .env_clear();
    for (k, v) in env {
        c.env(k, v);
    }
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = std::fs::read_to_string(&trace).unwrap();
    let mut execs = 0;
    let mut calls = Vec::new();
    for line in t.lines() {
        if line.contains("execve(") {
            execs += 1;
            if execs == 2 {
                break;
            }
            continue;
        }
        calls.push(line.to_string());
    }
    assert_eq!(execs, 2, "git was not exec'd: {t}");
    if calls.len() > BOUND {
        println!("{}", calls.join("\n"));
    }
    calls.len()
}

#[test]
fn the_wrapper_makes_few_system_calls_before_gits_exec() {
    let dir = scratch("git-wrapper-cost");
    let repo = repo::small_repo(&dir, "repo");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("git");
    std::os::unix::fs::symlink(launcher(), &link).unwrap();
    let git = Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let git = text(&git.stdout).trim().to_string();
    let git_dir = Path::new(&git).parent().unwrap().to_path_buf();
    let path = std::env::join_paths([&bin, &git_dir]).unwrap();
    let path = Path::new(&path);
    let cache = dir.join("cache");
    let env = [("PATH", path), ("HOME", &*dir), ("XDG_CACHE_HOME", &cache)];
    // The decision is cached for files older than a second: wait, then
    // fill the cache.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let launcher = launcher();
    for _ in 0..2 {
        let out = output_within(
            Command::new(&launcher)
                .args(["__git", "rev-parse", "HEAD"])
                .current_dir(&repo)
                .env_clear()
                .envs(env),
            MINUTE,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let function = before_exec(&launcher, &["__git", "rev-parse", "HEAD"], &repo, &env);
    let symlink = before_exec(&link, &["rev-parse", "HEAD"], &repo, &env);
    println!(
        "before git's exec: {function} system calls (munmapq __git), {symlink} (linked as git); bound {BOUND}"
    );
    assert!(function <= BOUND, "munmapq __git: {function} system calls");
    assert!(symlink <= BOUND, "linked as git: {symlink} system calls");
}
