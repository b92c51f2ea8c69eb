//! Helpers for the integration tests: where the built artifacts are, and
//! running a command with and without libmunmapq.
#![allow(dead_code)]

use munmapq_core::stats::{Counter, Totals, COUNTERS};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_munmapq"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `cargo build --release -q ARGS` into the target directory `dir` beside
/// the tests' own (`""`: theirs), kept between runs so that a re-run
/// costs nothing; answers its `release` directory. For the tests that
/// count what users run: the release profile is link-time optimised, as
/// the launcher and the library it embeds are shipped.
pub fn release_build(dir: &str, args: &[&str]) -> PathBuf {
    let target = target_dir().parent().unwrap().join(dir);
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-q"])
        .args(args)
        .arg("--target-dir")
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success(), "cargo build --release {args:?} failed");
    target.join("release")
}

fn artifact(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (cargo build --workspace), as scripts/test.sh does",
        p.display()
    );
    p
}

pub use munmapq_check::platform::{LIB_NAME, PRELOAD_VAR};

/// The library under test; `MUNMAPQ_TEST_LIB` names another build (to
/// show that a test fails without a change).
pub fn lib() -> PathBuf {
    match std::env::var_os("MUNMAPQ_TEST_LIB") {
        Some(p) => PathBuf::from(p),
        None => artifact(LIB_NAME),
    }
}

pub fn probe() -> PathBuf {
    artifact("mq-probe")
}

/// The launcher under test; `MUNMAPQ_TEST_LAUNCHER` names another build
/// (with `MUNMAPQ_TEST_LIB`, to show that a test fails without a change).
pub fn launcher() -> PathBuf {
    match std::env::var_os("MUNMAPQ_TEST_LAUNCHER") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_munmapq")),
    }
}

/// The launcher under test, preloading the library under test.
pub fn munmapq_cmd() -> Command {
    let mut c = Command::new(launcher());
    c.env("MUNMAPQ_LIB", lib());
    c
}

/// The write end of a pipe whose reader is gone: a write to it is SIGPIPE
/// (or EPIPE).
pub fn closed_pipe() -> Stdio {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two new descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are ours; the read end is closed at once.
    unsafe {
        libc::close(fds[0]);
        Stdio::from(OwnedFd::from_raw_fd(fds[1]))
    }
}

/// `mq-probe ARGS...`, ready to run.
pub fn probe_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(probe());
    c.args(args);
    c
}

/// Output as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `out` (a run's stdout or stderr) holds `needle`; else the test fails
/// and prints it whole.
pub fn assert_contains(out: &[u8], needle: &str) {
    let out = text(out);
    assert!(out.contains(needle), "{out}");
}

/// A fresh directory for one test, removed when dropped; kept (and its
/// path printed) when the test is failing, to look at what it left.
pub struct Scratch {
    path: PathBuf,
}

pub fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("munmapq-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch { path: d }
}

impl Scratch {
    /// For a directory shared by several tests of a run (made once, in a
    /// static): removed when the test process exits, failed or not.
    pub fn for_the_whole_run(self) -> PathBuf {
        static AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        extern "C" fn remove_all() {
            if let Ok(dirs) = AT_EXIT.lock() {
                for d in dirs.iter() {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
        }
        let mut dirs = AT_EXIT.lock().unwrap();
        if dirs.is_empty() {
            // SAFETY: registers a plain extern "C" function with no
            // arguments; it runs once, at exit, and only removes files.
            unsafe { libc::atexit(remove_all) };
        }
        let p = self.path.clone();
        dirs.push(p.clone());
        std::mem::forget(self);
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept {} (the test failed)", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// A data file of `pages` pages of the probe's pattern.
pub fn data_file(dir: &Path, pages: usize) -> String {
    let f = dir.join("data.bin").to_string_lossy().into_owned();
    let out = Command::new(probe())
        .args(["mkfile", &f, &pages.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    f
}

/// A fresh directory for one test ([`scratch`]) with a data file of
/// `pages` pages in it ([`data_file`]).
pub fn scratch_with_data(name: &str, pages: usize) -> (Scratch, String) {
    let dir = scratch(name);
    let file = data_file(&dir, pages);
    (dir, file)
}

/// What one run produced, and the counters its processes reported.
pub struct Ran {
    pub out: Output,
    pub counters: [u64; COUNTERS],
    pub processes: usize,
}

impl Ran {
    pub fn get(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
    /// Several counters at once, in the order asked.
    pub fn counts<const N: usize>(&self, which: [Counter; N]) -> [u64; N] {
        which.map(|c| self.get(c))
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

/// Runs `cmd` (killing it after `limit`), preloaded with libmunmapq when
/// `preload`, with `env` added.
pub fn run(cmd: &mut Command, preload: bool, env: &[(&str, &str)], limit: Duration) -> Ran {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stats = std::env::temp_dir().join(format!("munmapq-test-stats-{}-{n}", std::process::id()));
    if preload {
        cmd.env(PRELOAD_VAR, lib());
        cmd.env("MUNMAPQ_STATS_FILE", &stats);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = output_within(cmd, limit);
    let text = std::fs::read_to_string(&stats).unwrap_or_default();
    let _ = std::fs::remove_file(&stats);
    let mut totals = Totals::default();
    totals.add_text(&text);
    Ran {
        out,
        counters: totals.values,
        processes: totals.reported,
    }
}

/// `cmd.output()`, but a command still running after `limit` is killed and
/// the test fails: a hang is a failure, not a stuck CI run.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_copied(cmd);
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let read = |mut s: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = s.read_to_end(&mut v);
            v
        })
    };
    let (o, e) = (read(Box::new(stdout)), read(Box::new(stderr)));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

pub const MINUTE: Duration = Duration::from_secs(60);

/// Runs the same command without and with the library; both must succeed
/// with byte-identical stdout. Answers the preloaded run.
pub fn differential(make: impl Fn() -> Command, env: &[(&str, &str)]) -> Ran {
    let plain = run(&mut make(), false, &[], MINUTE);
    let with = run(&mut make(), true, env, MINUTE);
    assert!(
        plain.out.status.success(),
        "without munmapq: {}",
        plain.stderr()
    );
    assert_eq!(
        plain.out.status.code(),
        with.out.status.code(),
        "{}",
        with.stderr()
    );
    assert!(
        plain.out.stdout == with.out.stdout,
        "output differs with munmapq ({} vs {} bytes)",
        plain.out.stdout.len(),
        with.out.stdout.len()
    );
    assert!(
        with.processes > 0,
        "the library reported nothing: not loaded?"
    );
    with
}

/// How many calls to `syscall` reached the kernel, by strace (Linux).
#[cfg(target_os = "linux")]
pub fn strace_count(cmd: &[&str], preload: bool, env: &[(&str, &str)], syscall: &str) -> usize {
    let dir = scratch(&format!("strace-{syscall}-{preload}-{}", cmd.len()));
    let log = dir.join("trace");
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", &format!("trace={syscall}"), "-o"])
        .arg(&log);
    c.args(cmd);
    if preload {
        c.env("LD_PRELOAD", lib());
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = output_within(&mut c, MINUTE);
    assert!(
        out.status.success(),
        "strace {cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let needle = format!("{syscall}(");
    text.lines().filter(|l| l.contains(&needle)).count()
}

/// Like [`output_within`], but a command still running after `limit` is
/// killed and reported (`true`) instead of failing the test here, so a
/// differential test can say which run hung. Output read after the kill is
/// waited for at most 5 s (a grandchild may still hold the pipes).
pub fn output_or_kill(cmd: &mut Command, limit: Duration) -> (Output, bool) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let read = |mut s: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = s.read_to_end(&mut v);
            let _ = tx.send(v);
        });
        rx
    };
    let o = read(Box::new(child.stdout.take().unwrap()));
    let e = read(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let mut hung = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            hung = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wait = if hung {
        Duration::from_secs(5)
    } else {
        Duration::from_secs(60)
    };
    let output = Output {
        status,
        stdout: o.recv_timeout(wait).unwrap_or_default(),
        stderr: e.recv_timeout(wait).unwrap_or_default(),
    };
    (output, hung)
}

/// A run of [`run_bounded`].
pub struct Bounded {
    pub ran: Ran,
    /// Killed after the time limit.
    pub hung: bool,
    /// Processes that announced the library at load (a process that execs
    /// or ends with `_exit` never reports at exit).
    pub loaded: usize,
}

/// [`run`] with [`output_or_kill`]: a hang is reported, not a failure
/// here. `("MUNMAPQ_STATS_FILE", "")` in `env` turns the library's reports
/// off (it ignores an empty path).
pub fn run_bounded(
    cmd: &mut Command,
    preload: bool,
    env: &[(&str, &str)],
    limit: Duration,
) -> Bounded {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stats =
        std::env::temp_dir().join(format!("munmapq-test-bstats-{}-{n}", std::process::id()));
    if preload {
        cmd.env(PRELOAD_VAR, lib());
        cmd.env("MUNMAPQ_STATS_FILE", &stats);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (out, hung) = output_or_kill(cmd, limit);
    let text = std::fs::read_to_string(&stats).unwrap_or_default();
    let _ = std::fs::remove_file(&stats);
    let mut totals = Totals::default();
    totals.add_text(&text);
    let ran = Ran {
        out,
        counters: totals.values,
        processes: totals.reported,
    };
    Bounded {
        ran,
        hung,
        loaded: totals.loaded,
    }
}

/// How a process ended: `exit N`, `killed by signal N` (with its name for
/// the usual ones), or `hung` when it had to be killed.
#[cfg(unix)]
pub fn ending(out: &Output, hung: bool) -> String {
    use std::os::unix::process::ExitStatusExt;
    if hung {
        return "hung (killed by the test)".into();
    }
    match (out.status.code(), out.status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => {
            let name = match s {
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGSYS => " (SIGSYS)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            format!("killed by signal {s}{name}")
        }
        _ => "unknown".into(),
    }
}

/// The differential check of the last-close and sandbox tests: the run with the library must end
/// as the run without it (same status, same stdout). None when it does,
/// else what differs, both outputs shown.
#[cfg(unix)]
pub fn differs(plain: (&Output, bool), with: (&Output, bool)) -> Option<String> {
    let (p, w) = (ending(plain.0, plain.1), ending(with.0, with.1));
    if p == w && plain.0.stdout == with.0.stdout {
        return None;
    }
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    Some(format!(
        "without munmapq: {p}\n{}with munmapq: {w}\n{}stderr with munmapq: {}",
        text(plain.0),
        text(with.0),
        String::from_utf8_lossy(&with.0.stderr).trim()
    ))
}

/// `git -c ... -c ...`: pack windows small enough that git thrashes them
/// (16 KiB windows, 32 KiB in all), so it maps and unmaps all the time.
pub const TINY_WINDOWS: [&str; 4] = [
    "-c",
    "core.packedGitWindowSize=16k",
    "-c",
    "core.packedGitLimit=32k",
];

/// `PROGRAM -C repo` with neither the system's configuration nor the
/// user's (HOME=`home`, the test's own) and no pager: the same git for
/// every run of a test.
pub fn git_at(program: &str, repo: &Path, home: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .env("GIT_PAGER", "cat")
        .arg("-C")
        .arg(repo);
    c
}

/// A packed repository at `dir` (`git init`, then `mq-probe fast-import`'s
/// deterministic stream of `commits` commits of `files` files imported and
/// repacked), `git(dir)` running the import and the repack.
pub fn probe_repo(dir: &Path, commits: usize, files: usize, git: impl Fn(&Path) -> Command) {
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(dir));
    let stream = probe_cmd(&["fast-import", &commits.to_string(), &files.to_string()])
        .output()
        .unwrap()
        .stdout;
    let mut fi = git(dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(fi.stdin.as_mut().unwrap(), &stream).unwrap();
    drop(fi.stdin.take());
    assert!(fi.wait().unwrap().success());
    ok(git(dir).args(["repack", "-adq"]));
}

/// `tests/c/NAME.c`, built with the system's C compiler into `dir`.
pub fn c_program(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = dir.join(name);
    // MUNMAPQ_TEST_CC: a cross compiler, where the tests run under
    // emulation (scripts/arm64-test.sh).
    let cc = std::env::var("MUNMAPQ_TEST_CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .args(["-O1", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("cc (the C compiler) must be installed");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The settings the last-close and sandbox scenarios run under: the defaults and a
/// one-entry queue.
pub const BOTH_SETTINGS: [(&str, &[(&str, &str)]); 2] = [
    ("defaults", &[]),
    ("MUNMAPQ_MAX_ENTRIES=1", &[("MUNMAPQ_MAX_ENTRIES", "1")]),
];

/// Runs `make(dir)` without the library and then with it, under each of
/// [`BOTH_SETTINGS`] (plus `env`), every run killed after `limit`. The
/// run without must succeed; if it prints a line `SKIPPED: why`, the
/// scenario cannot run here: that is printed and nothing is compared.
/// Each run with the library must end as the one without (status or
/// signal, stdout) and must have loaded the library (announced at load,
/// unless `env` turns reports off). Every setting runs before the test
/// fails, and the failure names each difference. Answers the runs with the
/// library.
///
/// `MUNMAPQ_TEST_CONTROL=disable` in the test's environment adds
/// `MUNMAPQ_DISABLE=1` to the runs with the library (loaded, passing every
/// call through): the control that shows a scenario passes when the
/// library does nothing.
pub fn same_as_without(
    name: &str,
    make: impl Fn(&Path) -> Command,
    env: &[(&str, &str)],
    limit: Duration,
) -> Vec<Ran> {
    let reports = !env
        .iter()
        .any(|(k, v)| *k == "MUNMAPQ_STATS_FILE" && v.is_empty());
    let control = std::env::var_os("MUNMAPQ_TEST_CONTROL").is_some_and(|v| v == "disable");
    let mut failures = Vec::new();
    let mut runs = Vec::new();
    for (i, (label, settings)) in BOTH_SETTINGS.iter().enumerate() {
        let dir = scratch(&format!("{name}-{i}"));
        let Bounded {
            ran: plain,
            hung: plain_hung,
            ..
        } = run_bounded(&mut make(&dir), false, &[], limit);
        assert!(
            !plain_hung && plain.out.status.success(),
            "{name} without munmapq: {}\n{}{}",
            ending(&plain.out, plain_hung),
            plain.stdout(),
            plain.stderr()
        );
        if let Some(l) = plain.stdout().lines().find(|l| l.starts_with("SKIPPED:")) {
            println!("{name}: {l}");
            return runs;
        }
        let mut all: Vec<(&str, &str)> = settings.iter().chain(env).copied().collect();
        if control {
            all.push(("MUNMAPQ_DISABLE", "1"));
        }
        let Bounded {
            ran: with,
            hung: with_hung,
            loaded,
        } = run_bounded(&mut make(&dir), true, &all, limit);
        match differs((&plain.out, plain_hung), (&with.out, with_hung)) {
            Some(d) => failures.push(format!("{name} [{label}] differs:\n{d}")),
            None if reports && loaded == 0 => failures.push(format!(
                "{name} [{label}]: no process announced the library (not loaded?)"
            )),
            None => println!(
                "{name} [{label}]: same as without munmapq ({}; deferred {}, reused {}):\n{}",
                ending(&with.out, false),
                with.get(munmapq_core::stats::Counter::Deferred),
                with.get(munmapq_core::stats::Counter::Reused),
                with.stdout().trim_end()
            ),
        }
        let _ = std::fs::remove_dir_all(&dir);
        runs.push(with);
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    runs
}
/// `tests/c/PROGRAM.c DIR ARGS` (run as `name`), the same without and with
/// the library ([`same_as_without`], every run killed after `limit`): its
/// output holds `expect`, and the queue was reached (deferred > 0).
pub fn same_and_queued(name: &str, program: &str, args: &[&str], expect: &str, limit: Duration) {
    let build = scratch(name);
    let exe = c_program(program, &build);
    let runs = same_as_without(
        name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).args(args);
            c
        },
        &[],
        limit,
    );
    for r in runs {
        assert_contains(&r.out.stdout, expect);
        let deferred = r.get(Counter::Deferred);
        assert!(
            deferred > 0,
            "deferred {deferred}: the queue was not reached"
        );
    }
}

pub mod repo;

/// Waits for `child` at most a minute; past that it is killed and the
/// test fails (a command that should have ended did not).
pub fn wait_a_minute(child: &mut std::process::Child) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if start.elapsed() > MINUTE {
            let _ = child.kill();
            panic!("the command did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `cmd.spawn()` for a program a test has just written (a copy of the
/// launcher): while another test thread forks, its child holds the copy's
/// descriptor (close-on-exec, not yet closed) until it execs, and an exec
/// of the copy meanwhile fails with ETXTBSY. It is tried again then.
pub fn spawn_copied(cmd: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r.expect("spawn"),
        }
    }
}

/// Whether the tests run under qemu-user (`scripts/arm64-test.sh`), which
/// rebuilds every program's environment and reports some failures of
/// its own in its own way.
pub fn under_qemu() -> bool {
    std::env::var_os("MUNMAPQ_TEST_QEMU").is_some()
        || std::env::vars_os().any(|(k, _)| k.as_encoded_bytes().starts_with(b"QEMU_"))
}

/// A scratch directory with the git wrapper in its `bin`: a `git` that is
/// a link to the launcher, first in PATH where `bin` is. Each test file
/// adds the ways it runs git there.
pub struct GitWorld {
    pub dir: Scratch,
    pub bin: PathBuf,
}

impl GitWorld {
    pub fn new(name: &str) -> GitWorld {
        let dir = scratch(name);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(launcher(), bin.join("git")).unwrap();
        GitWorld { dir, bin }
    }
}
