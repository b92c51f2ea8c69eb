//! What every benchmark shares: the configurations' environments, one
//! measured run (time, CPU, peak RSS, a hash of its output), syscall
//! counts by strace, medians and the ratio table.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub const TINY: [&str; 4] = [
    "-c",
    "core.packedGitWindowSize=16k",
    "-c",
    "core.packedGitLimit=32k",
];

#[derive(Clone, Copy, PartialEq)]
pub enum Preload {
    No,
    Seed,
    Munmapq,
}

pub struct Sample {
    pub secs: f64,
    /// user + system CPU time of the child: steadier than wall time on a
    /// shared machine.
    pub cpu: f64,
    pub rss_kib: u64,
    pub hash: u64,
    pub bytes: u64,
}

#[cfg(target_os = "macos")]
pub const LIB: (&str, &str) = ("libmunmapq.dylib", "DYLD_INSERT_LIBRARIES");
#[cfg(not(target_os = "macos"))]
pub const LIB: (&str, &str) = ("libmunmapq.so", "LD_PRELOAD");

pub fn lib() -> PathBuf {
    let p = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join(LIB.0);
    assert!(
        p.exists(),
        "{} missing: cargo build --release --workspace",
        p.display()
    );
    p
}

pub fn preload_env(cmd: &mut Command, p: Preload) {
    match p {
        Preload::No => {}
        Preload::Seed => {
            // The seed: queue everything (as many as we allow), never reuse,
            // unmap all at once when full.
            cmd.env(LIB.1, lib())
                .env("MUNMAPQ_REUSE", "0")
                .env("MUNMAPQ_EVICT", "all")
                .env("MUNMAPQ_MAX_ENTRIES", "8192")
                .env("MUNMAPQ_MAX_BYTES", "1T");
        }
        Preload::Munmapq => {
            cmd.env(LIB.1, lib());
        }
    }
}

/// Runs `cmd`, hashing its stdout; wall time and the child's peak RSS.
#[allow(clippy::zombie_processes)] // reaped below with wait4, for its rusage
pub fn measure(mut cmd: Command) -> Sample {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let mut out = child.stdout.take().unwrap();
    let (mut hash, mut bytes) = (0xcbf2_9ce4_8422_2325u64, 0u64);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        bytes += n as u64;
        for &b in &buf[..n] {
            hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let mut status = 0;
    // SAFETY: plain out-parameters; reaping our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let secs = start.elapsed().as_secs_f64();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed"
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Sample {
        secs,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        rss_kib: ru.ru_maxrss as u64 / MAXRSS_UNIT,
        hash,
        bytes,
    }
}

/// Bytes per unit of `ru_maxrss`, for KiB: Linux counts KiB (getrusage(2)),
/// macOS bytes (xnu `bsd/man/man2/getrusage.2`: "the maximum resident set
/// size utilized (in bytes)").
#[cfg(target_os = "macos")]
const MAXRSS_UNIT: u64 = 1024;
#[cfg(not(target_os = "macos"))]
const MAXRSS_UNIT: u64 = 1;

/// Whether [`strace_counts`] can count: strace is Linux's (macOS has
/// dtruss, which needs root and SIP relaxed: not on a CI runner).
pub const STRACE: bool = cfg!(target_os = "linux");

/// What the tables print where a count needs strace and there is none.
pub const NO_STRACE: &str =
    "(mmap/munmap counts by strace: none on macOS, shown as -; the library's own counters are)";

/// Calls per syscall name that reached the kernel, by `strace -c` (all
/// zero and an empty log where there is no strace: [`STRACE`]).
pub fn strace_counts(cmd: Command, dir: &Path) -> (u64, u64, String) {
    if !STRACE {
        return (0, 0, String::new());
    }
    let log = dir.join("strace.out");
    let prog = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut s = Command::new("strace");
    s.args(["-f", "-qq", "-e", "trace=mmap,munmap", "-o"])
        .arg(&log)
        .arg(prog)
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => s.env(k, v),
            None => s.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        s.current_dir(d);
    }
    let ok = s
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success());
    if ok.ok() != Some(true) {
        return (0, 0, String::new());
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let count = |name: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("{name}(")))
            .count() as u64
    };
    (count("mmap"), count("munmap"), text)
}

/// Distinct (length, fd, offset) of read-only private file mappings.
pub fn distinct_windows(trace: &str) -> usize {
    let mut set = HashSet::new();
    for l in trace.lines() {
        if let Some(rest) = l.split("mmap(NULL, ").nth(1) {
            let f: Vec<&str> = rest.split(", ").collect();
            if f.len() >= 5
                && f[1] == "PROT_READ"
                && f[2] == "MAP_PRIVATE"
                && !f[3].starts_with('-')
            {
                let off = f[4].split(')').next().unwrap_or("");
                set.insert((f[0].to_string(), f[3].to_string(), off.to_string()));
            }
        }
    }
    set.len()
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn verdict(ratio: f64, bound: f64) -> &'static str {
    if ratio <= bound {
        "met"
    } else {
        "MISSED"
    }
}

pub fn git_command(repo: &Path, tiny: bool, what: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PAGER", "cat")
        .arg("-C")
        .arg(repo);
    if tiny {
        c.args(TINY);
    }
    c.args(what);
    c
}

pub fn make_repo(dir: &Path, commits: usize, files: usize) -> PathBuf {
    let name = format!("bench-repo-{commits}-{files}");
    generated_repo(
        dir,
        &name,
        &format!("{commits} commits, {files} files"),
        |repo| {
            let mut fi = Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["fast-import", "--quiet"])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            {
                let mut w = std::io::BufWriter::new(fi.stdin.take().unwrap());
                munmapq_probes::repo::fast_import(commits, files, &mut w).unwrap();
            }
            assert!(fi.wait().unwrap().success());
            let st = Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["repack", "-adq"])
                .status()
                .unwrap();
            assert!(st.success());
        },
    )
}

/// `dir/name`, a repository generated once and kept for later runs: `git
/// init`, then `fill(repo)`, then a file `done` (a repository without one
/// was cut short and is generated again). `what` says what it will hold.
pub fn generated_repo(dir: &Path, name: &str, what: &str, fill: impl FnOnce(&Path)) -> PathBuf {
    let repo = dir.join(name);
    if repo.join("done").exists() {
        return repo;
    }
    let _ = std::fs::remove_dir_all(&repo);
    eprintln!("generating {} ({what})...", repo.display());
    let st = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(st.success());
    fill(&repo);
    std::fs::write(repo.join("done"), "").unwrap();
    repo
}

/// The same command `without_and_with(Preload::No)` and `(Preload::Munmapq)`,
/// alternated for `rounds` rounds each: the medians (`digits` decimals) and
/// their ratios.
pub fn without_and_with(rounds: usize, digits: usize, cmd: impl Fn(Preload) -> Command) {
    let m = alternate(
        2 * rounds,
        &[&|| cmd(Preload::No), &|| cmd(Preload::Munmapq)],
    );
    println!(
        "median wall {:.digits$} s without, {:.digits$} s with; CPU {:.digits$} s without, {:.digits$} s with",
        m[0].0, m[1].0, m[0].1, m[1].1
    );
    print_ratios(&[
        ("wall: munmapq / without", m[1].0 / m[0].0, 1.02),
        ("CPU: munmapq / without", m[1].1 / m[0].1, 1.02),
    ]);
}

pub fn print_ratios<S: AsRef<str>>(rows: &[(S, f64, f64)]) {
    println!("\n| ratio | value | bound | |");
    println!("| --- | --- | --- | --- |");
    for (name, v, bound) in rows {
        let (name, v, bound) = (name.as_ref(), *v, *bound);
        if bound.is_nan() {
            println!("| {name} | {v:.3} | - | |");
        } else {
            println!(
                "| {name} | {v:.4} | <= {bound:.3} | {} |",
                verdict(v, bound)
            );
        }
    }
}

/// Runs each command `rounds` times, alternating; medians of wall and CPU.
pub fn alternate(rounds: usize, cmds: &[&dyn Fn() -> Command]) -> Vec<(f64, f64)> {
    let n = cmds.len();
    let mut t: Vec<Vec<Sample>> = (0..n).map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for k in 0..n {
            let i = (k + r) % n;
            t[i].push(measure(cmds[i]()));
        }
    }
    t.iter()
        .map(|v| {
            (
                median(v.iter().map(|s| s.secs).collect()),
                median(v.iter().map(|s| s.cpu).collect()),
            )
        })
        .collect()
}
