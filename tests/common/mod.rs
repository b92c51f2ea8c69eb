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

fn artifact(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (cargo build --workspace), as scripts/test.sh does",
        p.display()
    );
    p
}

#[cfg(target_os = "macos")]
pub const LIB_NAME: &str = "libmunmapq.dylib";
#[cfg(not(target_os = "macos"))]
pub const LIB_NAME: &str = "libmunmapq.so";

/// dyld's variable on macOS, ld.so's elsewhere.
#[cfg(target_os = "macos")]
pub const PRELOAD_VAR: &str = "DYLD_INSERT_LIBRARIES";
#[cfg(not(target_os = "macos"))]
pub const PRELOAD_VAR: &str = "LD_PRELOAD";

pub fn lib() -> PathBuf {
    artifact(LIB_NAME)
}

pub fn probe() -> PathBuf {
    artifact("mq-probe")
}

pub fn launcher() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_munmapq"))
}

/// `mq-probe ARGS...`, ready to run.
pub fn probe_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(probe());
    c.args(args);
    c
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
    let mut child = cmd.spawn().expect("spawn");
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

pub mod repo;
