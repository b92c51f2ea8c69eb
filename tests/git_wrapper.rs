//! The git wrapper, both forms: `munmapq shell-init`'s git function and a
//! munmapq linked as `git` first in PATH. git runs with the library only in
//! a repository where git thrashes its pack windows or says
//! `munmapq.enable=true` (on Linux many loose objects alone do not: munmapq
//! measured slower there); elsewhere it runs as it is. The
//! wrapper is an exec (git's pid, status and signals), never runs itself
//! or another munmapq, and its cached decision follows the configuration.
//! The library says it was loaded with `MUNMAPQ_STATS=1` (a line at exit).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::GitWorld as World;

impl World {
    /// `program` in `cwd` with this world's HOME, cache and no user
    /// configuration, PATH with `path_head` first.
    fn cmd(&self, program: &str, cwd: &Path, path_head: &[&Path]) -> Command {
        let mut path: Vec<PathBuf> = path_head.iter().map(|p| p.to_path_buf()).collect();
        path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap()));
        let mut c = Command::new(program);
        c.current_dir(cwd)
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("HOME", &*self.dir)
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("MUNMAPQ_STATS", "1")
            .env_remove("MUNMAPQ_GIT_WRAPPER")
            .env_remove("LD_PRELOAD");
        c
    }

    /// `git ARGS` in `cwd`, as PATH (`path_head` first) finds it.
    fn git_cmd(&self, cwd: &Path, path_head: &[&Path], args: &[&str]) -> Command {
        let mut c = self.cmd("git", cwd, path_head);
        c.args(args);
        c
    }

    fn git(&self, cwd: &Path, args: &[&str]) -> Output {
        output_within(&mut self.git_cmd(cwd, &[&self.bin], args), MINUTE)
    }

    /// Whether the wrapped git ran with the library.
    fn wrapped(&self, cwd: &Path, args: &[&str]) -> bool {
        let out = self.git(cwd, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        loaded(&out)
    }

    fn real_git(&self, cwd: &Path, args: &[&str]) {
        repo::git(cwd, &self.dir, args);
    }
}

fn loaded(out: &Output) -> bool {
    String::from_utf8_lossy(&out.stderr).contains("munmapq pid=")
}

fn thrashing_repo(w: &World) -> PathBuf {
    let repo = repo::packed_repo(&w.dir, "thrash");
    w.real_git(&repo, &["config", "core.packedGitWindowSize", "16k"]);
    w.real_git(&repo, &["config", "core.packedGitLimit", "32k"]);
    repo
}

/// A world with a small repository, where munmapq does not pay, and a
/// thrashing one, where it does: (the world, small, thrashing).
fn two_repos(name: &str) -> (World, PathBuf, PathBuf) {
    let w = World::new(name);
    let small = repo::small_repo(&w.dir, "small");
    let thrash = thrashing_repo(&w);
    (w, small, thrash)
}

#[test]
fn shell_function_wraps_git_only_where_it_pays() {
    let (w, small, thrash) = two_repos("wrapper-function");
    let init = Command::new(launcher())
        .args(["shell-init", "bash"])
        .output()
        .unwrap();
    let init = String::from_utf8(init.stdout).unwrap();
    assert!(init.contains(" __git \"$@\""), "{init}");
    let in_bash = |repo: &Path| {
        let mut bash = w.cmd("bash", repo, &[]);
        bash.args(["-c", &format!("{init}\ngit log --oneline")]);
        let out = output_within(&mut bash, MINUTE);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        loaded(&out)
    };
    assert!(!in_bash(&small), "wrapped in a small default repository");
    assert!(in_bash(&thrash), "not wrapped where git thrashes");
    println!("shell-init bash: git function: small repository without munmapq, thrashing one with");
}

#[test]
fn git_symlink_wraps_where_it_pays_and_follows_the_configuration() {
    let (w, small, thrash) = two_repos("wrapper-symlink");
    let outside = w.dir.join("bin");
    assert!(!w.wrapped(&outside, &["--version"]), "outside a repository");
    assert!(!w.wrapped(&small, &["status"]), "small default repository");
    assert!(
        w.wrapped(&thrash, &["log", "--raw"]),
        "thrashing repository"
    );
    // munmapq.enable overrides, both ways (set through the wrapper itself).
    assert!(w
        .git(&thrash, &["config", "munmapq.enable", "false"])
        .status
        .success());
    assert!(!w.wrapped(&thrash, &["log"]), "munmapq.enable=false");
    assert!(w
        .git(&small, &["config", "munmapq.enable", "true"])
        .status
        .success());
    assert!(w.wrapped(&small, &["status"]), "munmapq.enable=true");

    // The cached answer: stored once the files are older than a second,
    // then used, and dropped when a file changes (even in place).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(w.wrapped(&small, &["status"]));
    let cache = w.dir.join("cache/munmapq/git");
    let cached = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    assert!(cached > 0, "nothing cached in {}", cache.display());
    assert!(w.wrapped(&small, &["status"]));
    let config = small.join(".git/config");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("enable = true", "enable = false")).unwrap();
    assert!(!w.wrapped(&small, &["status"]), "in-place edit not seen");
    w.real_git(&small, &["config", "--unset", "munmapq.enable"]);
    std::fs::write(w.dir.join(".gitconfig"), "[munmapq]\n\tenable = true\n").unwrap();
    assert!(w.wrapped(&small, &["status"]), "~/.gitconfig not seen");
    std::fs::remove_file(w.dir.join(".gitconfig")).unwrap();
    assert!(!w.wrapped(&small, &["status"]));
    println!("git symlink: outside a repository, small repository: git as it is; thrashing: munmapq; munmapq.enable false/true override; the cache follows git config, in-place edits and ~/.gitconfig");
}

/// `git_dir/objects/17` filled so that git gc --auto's estimate (and the
/// wrapper's) reads at least 7,680 loose objects, well over gc.auto's 6,700.
/// Returns the estimate: the repository's own objects land in `17` too when
/// their hashes (which carry the commit's time) start with it.
fn many_loose(git_dir: &Path) -> usize {
    let seventeen = git_dir.join("objects/17");
    std::fs::create_dir_all(&seventeen).unwrap();
    for i in 0..30 {
        std::fs::write(seventeen.join(format!("{i:038x}")), "").unwrap();
    }
    std::fs::read_dir(&seventeen).unwrap().count() * 256
}

#[test]
fn loose_objects_alone_do_not_wrap_on_linux_and_doctor_names_the_rule() {
    let w = World::new("wrapper-loose");
    let loose = repo::small_repo(&w.dir, "loose");
    let estimate = many_loose(&loose.join(".git"));
    // On Linux munmapq measured slower on loose objects: git as it is.
    assert!(!w.wrapped(&loose, &["status"]), "wrapped for loose objects");
    let mut c = w.cmd(launcher().to_str().unwrap(), &loose, &[]);
    let out = output_within(c.args(["doctor", "git", "log"]), MINUTE);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains("would run git here without munmapq")
            && said.contains("rule loose (linux)")
            && said.contains(&format!("{estimate} loose objects"))
            && said.contains("cheap"),
        "{said}"
    );
    // Loose objects do not stop the rules that do pay: thrashing windows
    // and munmapq.enable=true.
    let thrash = thrashing_repo(&w);
    let _ = many_loose(&thrash.join(".git"));
    assert!(w.wrapped(&thrash, &["log", "--raw"]), "thrashing and loose");
    w.real_git(&loose, &["config", "munmapq.enable", "true"]);
    assert!(w.wrapped(&loose, &["status"]), "munmapq.enable=true");
    println!("git symlink: {estimate} loose objects (estimated): git as it is on Linux, doctor names rule loose (linux); thrashing or munmapq.enable=true with loose objects: munmapq");
}

#[test]
fn git_symlink_is_an_exec_with_gits_status_and_never_runs_itself() {
    let w = World::new("wrapper-exec");
    let small = repo::small_repo(&w.dir, "small");
    // git's own pid: the alias's shell is git's child.
    let child = w
        .git_cmd(&small, &[&w.bin], &["-c", "alias.ppid=!echo $PPID", "ppid"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
    // git's status and signals.
    let out = w.git(&small, &["rev-parse", "--verify", "-q", "no-such-ref"]);
    assert_eq!(out.status.code(), Some(1));
    let out = w.git(&small, &["-c", "alias.die=!kill -TERM $PPID", "die"]);
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}", out.status);
    // The signals its caller ignored stay ignored (exec keeps them; git
    // passes them to the alias's shell).
    let ignored = |head: &[&Path]| {
        let mut sh = w.cmd("sh", &small, head);
        sh.args([
            "-c",
            "trap '' HUP; git -c 'alias.ign=!grep SigIgn /proc/$$/status' ign",
        ]);
        String::from_utf8(output_within(&mut sh, MINUTE).stdout).unwrap()
    };
    let (direct, wrapped) = (ignored(&[]), ignored(&[&w.bin]));
    assert!(direct.starts_with("SigIgn:"), "{direct}");
    assert_eq!(wrapped, direct);
    // Another munmapq linked as git after this one: both skipped.
    let other = w.dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(launcher(), other.join("git")).unwrap();
    let out = output_within(
        &mut w.git_cmd(&small, &[&w.bin, &other, &w.bin], &["--version"]),
        MINUTE,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let real = output_within(Command::new("git").arg("--version"), MINUTE);
    assert_eq!(out.stdout, real.stdout);
    // Only munmapqs in PATH: one line, 127, no loop.
    let out = output_within(
        w.git_cmd(&small, &[], &["--version"])
            .env("PATH", std::env::join_paths([&w.bin, &other]).unwrap()),
        MINUTE,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    println!("git symlink: git's pid, exit 1, SIGTERM and ignored SIGHUP are git's own; a second munmapq as git skipped; none but munmapqs in PATH: exit 127");
}

#[test]
fn doctor_explains_the_wrapper() {
    let (w, small, thrash) = two_repos("wrapper-doctor");
    let doctor = |cwd: &Path, head: &[&Path]| {
        let mut c = w.cmd(launcher().to_str().unwrap(), cwd, head);
        let out = output_within(c.args(["doctor", "git", "log"]), MINUTE);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = doctor(&thrash, &[&w.bin]);
    assert!(said.contains("would run git here with munmapq"), "{said}");
    assert!(said.contains("the git wrapper is installed"), "{said}");
    assert!(said.contains("rule thrash"), "{said}");
    let said = doctor(&small, &[]);
    assert!(
        said.contains("would run git here without munmapq"),
        "{said}"
    );
    assert!(
        said.contains("ln -s") && said.contains("shell-init"),
        "{said}"
    );
    println!("doctor git: the wrapper's decision (with munmapq where git thrashes, without in a small repository) and how to install both forms");
}

/// Lines of `file` that contain `what`.
fn count_in(file: &Path, what: &str) -> usize {
    let text = std::fs::read(file).unwrap_or_default();
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

#[test]
fn the_decisions_own_gits_stay_out_of_the_users_traces() {
    let w = World::new("wrapper-trace");
    let small = repo::small_repo(&w.dir, "small");
    let (trace, event) = (w.dir.join("trace.log"), w.dir.join("event.log"));
    // A trace2 target in the global configuration, GIT_TRACE in the
    // environment; the cache is empty, so the wrapper asks git first.
    std::fs::write(
        w.dir.join(".gitconfig"),
        format!("[trace2]\n\teventTarget = {}\n", event.display()),
    )
    .unwrap();
    let out = output_within(
        w.git_cmd(&small, &[&w.bin], &["rev-parse", "HEAD"])
            .env("GIT_TRACE", &trace),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let runs = count_in(&trace, "trace: built-in: git");
    let starts = count_in(&event, "\"event\":\"start\"");
    assert_eq!((runs, starts), (1, 1), "git runs traced: GIT_TRACE, trace2");
    println!("GIT_TRACE and trace2.eventTarget: one git run traced, as without the wrapper");
}

/// The decision cache's entries (files), once a first git has stored one:
/// the repository's files must be older than a second to be stored.
fn cache_entries(w: &World) -> Vec<PathBuf> {
    let dir = w.dir.join("cache/munmapq/git");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// A small repository of `w` and its cache entry, stored by a first git.
fn small_and_its_entry(w: &World) -> (PathBuf, PathBuf) {
    let small = repo::small_repo(&w.dir, "small");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!w.wrapped(&small, &["status"]));
    let entry = cache_entries(w).pop().expect("no cache entry stored");
    (small, entry)
}

#[test]
fn a_cache_entry_that_is_not_a_file_is_passed_over() {
    let w = World::new("wrapper-cache-fifo");
    let (small, entry) = small_and_its_entry(&w);
    std::fs::remove_file(&entry).unwrap();
    let path = std::ffi::CString::new(entry.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    // A FIFO no one writes: reading it would wait for good.
    let out = output_within(
        &mut w.git_cmd(&small, &[&w.bin], &["log", "-1", "--format=%s"]),
        std::time::Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    println!("a FIFO at the cache entry's path: git ran (the entry was asked again)");
}

#[test]
fn a_git_that_could_not_tell_leaves_no_lasting_answer() {
    use std::os::unix::process::CommandExt;
    let w = World::new("wrapper-no-poison");
    let small = repo::small_repo(&w.dir, "small");
    w.real_git(&small, &["config", "munmapq.enable", "true"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // git fails here (as it does without the wrapper), then runs as asked.
    let out = w.git(&small, &["-C", "no-such-dir", "status"]);
    assert_eq!(out.status.code(), Some(128), "{}", text(&out.stderr));
    assert!(w.wrapped(&small, &["status"]), "after a -C that missed");
    std::fs::remove_dir_all(w.dir.join("cache")).unwrap();
    let sub = small.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = output_within(
        w.git_cmd(&sub, &[&w.bin], &["status"])
            .env("GIT_CEILING_DIRECTORIES", &small),
        MINUTE,
    );
    assert_eq!(out.status.code(), Some(128), "{}", text(&out.stderr));
    assert!(
        w.wrapped(&small, &["status"]),
        "after GIT_CEILING_DIRECTORIES"
    );
    // A caller that ignores SIGCHLD: the wrapper still hears git's answer,
    // and git inherits SIGCHLD ignored, as without the wrapper.
    std::fs::remove_dir_all(w.dir.join("cache")).unwrap();
    let ignoring = |head: &[&Path]| {
        let mut c = w.git_cmd(
            &small,
            head,
            &["-c", "alias.ign=!grep SigIgn /proc/$$/status", "ign"],
        );
        // SAFETY: only signal(), async-signal-safe, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGCHLD, libc::SIG_IGN);
                Ok(())
            })
        };
        output_within(&mut c, MINUTE)
    };
    let (direct, wrapped) = (ignoring(&[]), ignoring(&[&w.bin]));
    assert!(
        loaded(&wrapped),
        "SIGCHLD ignored: {}",
        text(&wrapped.stderr)
    );
    assert_eq!(text(&wrapped.stdout), text(&direct.stdout));
    assert!(w.wrapped(&small, &["status"]), "after SIGCHLD ignored");
    println!("munmapq.enable=true: after git -C no-such-dir, GIT_CEILING_DIRECTORIES and a caller ignoring SIGCHLD, git runs with munmapq; SIGCHLD stays ignored for git");
}

#[test]
fn a_cache_entry_cut_short_is_no_answer() {
    let w = World::new("wrapper-cache-cut");
    let (small, entry) = small_and_its_entry(&w);
    let whole = std::fs::read_to_string(&entry).unwrap();
    // The lines naming the files the answer came from, gone; then the
    // entry cut inside its first such line.
    let without: String = whole
        .lines()
        .filter(|l| !l.starts_with("file "))
        .map(|l| format!("{l}\n"))
        .collect();
    let cut = &whole[..whole.find("\nfile ").unwrap() + 8];
    for (how, text) in [("without its file lines", without.as_str()), ("cut", cut)] {
        std::fs::write(&entry, text).unwrap();
        w.real_git(&small, &["config", "munmapq.enable", "true"]);
        assert!(w.wrapped(&small, &["status"]), "entry {how}: stale answer");
        w.real_git(&small, &["config", "--unset", "munmapq.enable"]);
        assert!(!w.wrapped(&small, &["status"]), "entry {how}");
    }
    println!("a cache entry without its file lines, or cut short, is asked again: munmapq.enable=true seen");
}

/// The processes whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
            after.split_whitespace().nth(1) == Some(&pid.to_string())
        })
        .collect()
}

/// Whether `pid` still runs (a zombie no longer does).
fn running(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, a)| a.split_whitespace().next());
    state.is_some_and(|s| s != "Z" && s != "X")
}

#[test]
fn the_decisions_git_dies_with_the_wrapper() {
    let w = World::new("wrapper-sigterm");
    let small = repo::small_repo(&w.dir, "small");
    // An include that blocks the decision's git: a FIFO no one writes.
    let fifo = w.dir.join("fifo");
    let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    w.real_git(&small, &["config", "include.path", fifo.to_str().unwrap()]);
    let mut wrapper = w
        .git_cmd(&small, &[&w.bin], &["status"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let child = loop {
        if let Some(c) = children_of(wrapper.id()).pop() {
            break c;
        }
        assert!(start.elapsed() < MINUTE, "the wrapper started no git");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(wrapper.id() as i32, libc::SIGTERM) };
    assert_eq!(wrapper.wait().unwrap().signal(), Some(libc::SIGTERM));
    let start = std::time::Instant::now();
    while running(child) && start.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = running(child);
    if left {
        // SAFETY: the orphan is the wrapper's git, ours to end.
        unsafe { libc::kill(child as i32, libc::SIGKILL) };
    }
    assert!(!left, "the decision's git {child} outlived the wrapper");
    println!("SIGTERM to the wrapper while its git blocks on an include: that git dies too");
}

#[test]
fn the_cache_follows_what_includes_depend_on() {
    let w = World::new("wrapper-includes");
    let small = repo::small_repo(&w.dir, "small");
    let enable = "[munmapq]\n\tenable = true\n";
    // munmapq on the branch "big" alone; an include that does not exist yet.
    let big = w.dir.join("big.cfg");
    std::fs::write(&big, enable).unwrap();
    let later = w.dir.join("later.cfg");
    w.real_git(&small, &["branch", "big"]);
    w.real_git(
        &small,
        &[
            "config",
            "includeIf.onbranch:big.path",
            big.to_str().unwrap(),
        ],
    );
    w.real_git(&small, &["config", "include.path", "../../later.cfg"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!w.wrapped(&small, &["status"]));
    assert!(!cache_entries(&w).is_empty(), "nothing cached");
    w.real_git(&small, &["checkout", "-q", "big"]);
    assert!(w.wrapped(&small, &["status"]), "on branch big");
    w.real_git(&small, &["checkout", "-q", "-"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!w.wrapped(&small, &["status"]), "back on the first branch");
    // later.cfg, relative to .git/config, appears.
    std::fs::write(&later, enable).unwrap();
    assert!(w.wrapped(&small, &["status"]), "an include that appeared");
    println!("includeIf onbranch: the branch switched, and an include.path that appeared: the cached answer asked again");
}

#[test]
fn the_cache_watches_the_system_configuration_git_reads() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new("wrapper-system-config");
    let small = repo::small_repo(&w.dir, "small");
    // A git whose system configuration is not /etc/gitconfig (as one built
    // under /usr/local reads /usr/local/etc/gitconfig): the real git with
    // its own GIT_CONFIG_SYSTEM, which the wrapper does not see.
    let system = w.dir.join("etc/gitconfig");
    std::fs::create_dir_all(system.parent().unwrap()).unwrap();
    let real = output_within(Command::new("sh").args(["-c", "command -v git"]), MINUTE);
    let other = w.dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let script = other.join("git");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nGIT_CONFIG_SYSTEM='{}' exec '{}' \"$@\"\n",
            system.display(),
            text(&real.stdout).trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let wrapped = || {
        let mut c = w.git_cmd(&small, &[&w.bin, &other], &["status"]);
        let out = output_within(c.env_remove("GIT_CONFIG_NOSYSTEM"), MINUTE);
        assert!(out.status.success(), "{}", text(&out.stderr));
        loaded(&out)
    };
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(!wrapped());
    assert!(!cache_entries(&w).is_empty(), "nothing cached");
    std::fs::write(&system, "[munmapq]\n\tenable = true\n").unwrap();
    assert!(wrapped(), "the system configuration git reads, unseen");
    println!(
        "a git whose system configuration is elsewhere: munmapq.enable=true set there is seen"
    );
}

#[test]
fn paths_that_differ_in_bytes_not_utf8_or_a_newline_are_apart() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new("wrapper-cache-keys");
    for (a, b) in [(&b"lat\xe9"[..], &b"lat\xe8"[..]), (b"n l", b"n\nl")] {
        let make = |n: &[u8]| {
            let dir = w.dir.join(std::ffi::OsStr::from_bytes(n));
            std::fs::create_dir(&dir).unwrap();
            repo::small_repo(&dir, "r")
        };
        let (a, b) = (make(a), make(b));
        w.real_git(&b, &["config", "munmapq.enable", "true"]);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(w.wrapped(&b, &["status"]), "{b:?}: munmapq.enable=true");
        assert!(!w.wrapped(&a, &["status"]), "{a:?} took {b:?}'s answer");
        // The files of the answer are watched by their own names.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(w.wrapped(&b, &["status"]));
        w.real_git(&b, &["config", "munmapq.enable", "false"]);
        assert!(
            !w.wrapped(&b, &["status"]),
            "{b:?}: a change to its config unseen"
        );
    }
    println!("repositories at lat\\xe9 and lat\\xe8, at 'n l' and 'n\\nl': each its own cached answer, which follows its own configuration");
}

#[test]
fn the_cache_writes_no_file_through_a_link() {
    let w = World::new("wrapper-cache-link");
    let (small, entry) = small_and_its_entry(&w);
    std::fs::remove_file(&entry).unwrap();
    let victim = w.dir.join("victim");
    std::fs::write(&victim, "mine\n").unwrap();
    // The wrapper's temporary file is the entry's name with its pid as
    // extension: a link there, made by the shell that becomes the wrapper.
    let mut sh = w.cmd("sh", &small, &[&w.bin]);
    sh.args([
        "-c",
        "ln -s \"$1\" \"$2.$$\" && exec git status",
        "sh",
        victim.to_str().unwrap(),
        entry.to_str().unwrap(),
    ]);
    let out = output_within(&mut sh, MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    assert!(std::fs::symlink_metadata(&entry).unwrap().is_file());
    println!("a link at the cache's temporary file: not followed, the entry written as a file of its own");
}
