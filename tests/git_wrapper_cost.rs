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
//! and page faults, and the whole cost, against `env`'s, is held by
//! `the_wrapper_costs_no_more_than_env`.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::{Path, PathBuf};
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

/// The launcher as `cargo build --release` makes it (link-time optimised,
/// no libgcc_s), built here if need be into the directory the load-cost
/// test builds its library in; or `MUNMAPQ_TEST_LAUNCHER`.
fn release_launcher() -> PathBuf {
    if let Some(p) = std::env::var_os("MUNMAPQ_TEST_LAUNCHER") {
        return p.into();
    }
    release_build("lto", &["-p", "munmapq", "--bin", "munmapq"]).join("munmapq")
}

/// What one form added to git alone, as `scripts/bench-git-wrapper.sh
/// --counts` prints it: system calls, instructions, page faults.
fn added(report: &str, form: &str) -> [i64; 3] {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{form} ")))
        .unwrap_or_else(|| panic!("no line for {form}: {report}"));
    let added = line.split("added:").nth(1).unwrap();
    let added = added.split(';').next().unwrap();
    let count = |unit: &str| -> i64 {
        let word = added
            .split(',')
            .find(|p| p.trim_start().split(' ').nth(1) == Some(unit))
            .unwrap_or_else(|| panic!("no {unit} in {line}"));
        word.trim().split(' ').next().unwrap().parse().unwrap()
    };
    [count("syscalls"), count("instructions"), count("faults")]
}

/// Prompts, editors and scripts run git thousands of times in repositories
/// where munmapq never turns on: there the wrapper must cost no more than
/// `env` in front of git, in user instructions (callgrind, every image of
/// the process tree), system calls and page faults (faults move by one or
/// two between runs). Measured with a UTF-8 locale, which `env` loads as
/// any user's would; with none, `env` does less than munmapq's dynamic
/// loading (BENCHMARKS.md). On 1a00e93 the wrapper added 316k
/// instructions to `git rev-parse HEAD` where `env` added 284k: libgcc_s
/// loaded for an unwinder that never runs, and no link-time optimisation.
#[test]
fn the_wrapper_costs_no_more_than_env() {
    // Each tool by its directory: the script's PATH is theirs and the
    // system's, so that git is found as soon by the wrapper's search as by
    // `env`, given its path, whatever the caller's PATH holds.
    let mut dirs = Vec::new();
    for tool in ["git", "valgrind", "strace", "/usr/bin/time"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        if !found.status.success() {
            println!("SKIPPED: no {tool}");
            return;
        }
        let dir = PathBuf::from(text(&found.stdout).trim())
            .parent()
            .unwrap()
            .to_path_buf();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    let works = |cmd: &mut Command| cmd.output().is_ok_and(|o| o.status.success());
    if !works(Command::new("strace").args(["-f", "-qq", "-o", "/dev/null", "true"])) {
        println!("SKIPPED: strace cannot trace here");
        return;
    }
    if !works(Command::new("valgrind").arg("--version")) {
        println!("SKIPPED: valgrind does not run");
        return;
    }
    // What the comparison stands on: `env` reading a UTF-8 locale's files
    // (Debian and Ubuntu keep C.UTF-8 as files; from an archive it costs
    // `env` less).
    if !Path::new("/usr/lib/locale/C.utf8/LC_CTYPE").exists() {
        println!("SKIPPED: no C.UTF-8 locale files");
        return;
    }
    for d in ["/usr/bin", "/bin"] {
        if !dirs.contains(&PathBuf::from(d)) {
            dirs.push(d.into());
        }
    }
    let launcher = release_launcher();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-git-wrapper.sh");
    let mut c = Command::new(&script);
    c.arg("--counts")
        .env_clear()
        .env("PATH", std::env::join_paths(&dirs).unwrap())
        .env("LANG", "C.UTF-8")
        .env("GIT_ARGS", "rev-parse HEAD")
        .env("MUNMAPQ", &launcher);
    let out = output_within(&mut c, 10 * MINUTE);
    let report = text(&out.stdout);
    println!("{report}");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let [env_calls, env_instructions, env_faults] = added(&report, "env");
    for form in ["function", "symlink"] {
        let [calls, instructions, faults] = added(&report, form);
        assert!(
            instructions <= env_instructions,
            "{form}: {instructions} instructions added, env {env_instructions}"
        );
        assert!(
            calls <= env_calls,
            "{form}: {calls} system calls added, env {env_calls}"
        );
        assert!(
            faults <= env_faults + 2,
            "{form}: {faults} page faults added, env {env_faults}"
        );
    }
}
