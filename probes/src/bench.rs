//! `mq-bench`: reproduces the seed's experiment and the issue's targets.
//! Not a timed test: it prints medians measured side by side in one run
//! (configurations alternate, round after round), ratios next to their
//! bounds, peak RSS and mmap/munmap syscall counts, and checks that every
//! configuration's output is byte-identical.
//!
//!     mq-bench [--repo PATH] [--limit N] [--rounds N] [--commits N] [--files N] [--micro-only|--load-only]
//!              [--seed-only] [--seed-pack-mib N] [--no-seed]
//!
//! `--micro-only` stops after the micro-benchmarks (file windows, load
//! cost next to libeatmydata, anonymous memory cycling); `--load-only` runs
//! just the last two.
//!     mq-bench --eviction [--rounds N]   (probes/src/eviction.rs)
//!
//! `--limit N` passes `-n N` to `git log`. The seed's setting (git's
//! default windows under `core.packedGitLimit=128m`, and 64m windows under
//! it) runs on a generated repository whose pack is `--seed-pack-mib`
//! (default 1100) MiB, and with `--repo` on that repository too.

#[path = "bench_seed.rs"]
mod bench_seed;
/// `--eviction`: eviction policies on short and long reuse distances.
mod eviction;
#[allow(dead_code)]
#[path = "repo.rs"]
mod repo;
#[allow(dead_code)]
#[path = "../../launcher/check/sys.rs"]
mod sys;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const TINY: [&str; 4] = [
    "-c",
    "core.packedGitWindowSize=16k",
    "-c",
    "core.packedGitLimit=32k",
];

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Preload {
    No,
    Seed,
    Munmapq,
}

struct Config {
    name: &'static str,
    tiny: bool,
    preload: Preload,
}

const CONFIGS: [Config; 4] = [
    Config {
        name: "default, no preload (floor)",
        tiny: false,
        preload: Preload::No,
    },
    Config {
        name: "tiny windows, no preload",
        tiny: true,
        preload: Preload::No,
    },
    Config {
        name: "tiny windows, seed queue",
        tiny: true,
        preload: Preload::Seed,
    },
    Config {
        name: "tiny windows, munmapq",
        tiny: true,
        preload: Preload::Munmapq,
    },
];

pub(crate) struct Sample {
    secs: f64,
    /// user + system CPU time of the child: steadier than wall time on a
    /// shared machine.
    cpu: f64,
    rss_kib: u64,
    hash: u64,
    bytes: u64,
}

#[cfg(target_os = "macos")]
const LIB: (&str, &str) = ("libmunmapq.dylib", "DYLD_INSERT_LIBRARIES");
#[cfg(not(target_os = "macos"))]
const LIB: (&str, &str) = ("libmunmapq.so", "LD_PRELOAD");

fn lib() -> PathBuf {
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

pub(crate) fn preload_env(cmd: &mut Command, p: Preload) {
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
pub(crate) fn measure(mut cmd: Command) -> Sample {
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
        rss_kib: ru.ru_maxrss as u64,
        hash,
        bytes,
    }
}

/// Calls per syscall name that reached the kernel, by `strace -c`.
pub(crate) fn strace_counts(cmd: Command, dir: &Path) -> (u64, u64, String) {
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
fn distinct_windows(trace: &str) -> usize {
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

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn verdict(ratio: f64, bound: f64) -> &'static str {
    if ratio <= bound {
        "met"
    } else {
        "MISSED"
    }
}

fn git_command(repo: &Path, tiny: bool, what: &[&str]) -> Command {
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

fn make_repo(dir: &Path, commits: usize, files: usize) -> PathBuf {
    let repo = dir.join(format!("bench-repo-{commits}-{files}"));
    if repo.join("done").exists() {
        return repo;
    }
    let _ = std::fs::remove_dir_all(&repo);
    eprintln!(
        "generating {} ({commits} commits, {files} files)...",
        repo.display()
    );
    let st = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(st.success());
    let mut fi = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut w = std::io::BufWriter::new(fi.stdin.take().unwrap());
        repo::fast_import(commits, files, &mut w).unwrap();
    }
    assert!(fi.wait().unwrap().success());
    let st = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["repack", "-adq"])
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(repo.join("done"), "").unwrap();
    repo
}

fn bench_git(repo: &Path, what: &[&str], rounds: usize, scratch: &Path) {
    println!("\n## git {} on {}\n", what.join(" "), repo.display());
    let mut samples: Vec<Vec<Sample>> = CONFIGS.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for k in 0..CONFIGS.len() {
            let i = (k + r) % CONFIGS.len();
            let c = &CONFIGS[i];
            let mut cmd = git_command(repo, c.tiny, what);
            preload_env(&mut cmd, c.preload);
            samples[i].push(measure(cmd));
        }
    }
    let reference = (samples[0][0].hash, samples[0][0].bytes);
    let identical = samples
        .iter()
        .flatten()
        .all(|s| (s.hash, s.bytes) == reference);
    println!(
        "output: {} bytes, identical in every run of every configuration: {identical}",
        reference.1
    );
    assert!(identical, "outputs differ");
    println!("(syscalls: strace, less those of `git --version` under the same preload)\n");
    println!("| configuration | median wall s | median CPU s | peak RSS MiB | mmap syscalls | munmap syscalls |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let (mut wall, mut cpu, mut rss, mut calls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut windows = 0;
    for (i, c) in CONFIGS.iter().enumerate() {
        let w = median(samples[i].iter().map(|s| s.secs).collect());
        let u = median(samples[i].iter().map(|s| s.cpu).collect());
        let peak = samples[i].iter().map(|s| s.rss_kib).max().unwrap() as f64 / 1024.0;
        let mut cmd = git_command(repo, c.tiny, what);
        preload_env(&mut cmd, c.preload);
        let (mm, mu, trace) = strace_counts(cmd, scratch);
        // What the dynamic loader and start-up map, with the same preload:
        // subtracted, so the counts are git's own.
        let mut base = git_command(repo, c.tiny, &["--version"]);
        preload_env(&mut base, c.preload);
        let (bm, bu, _) = strace_counts(base, scratch);
        let (mm, mu) = (mm.saturating_sub(bm), mu.saturating_sub(bu));
        if i == 1 {
            windows = distinct_windows(&trace);
        }
        println!("| {} | {w:.3} | {u:.3} | {peak:.1} | {mm} | {mu} |", c.name);
        wall.push(w);
        cpu.push(u);
        rss.push(peak);
        calls.push(mm + mu);
    }
    println!("\ndistinct windows (length, fd, offset) in the tiny-window run: {windows}");
    let rows = [
        (
            "wall: munmapq / tiny windows without",
            wall[3] / wall[1],
            0.85,
        ),
        ("CPU: munmapq / tiny windows without", cpu[3] / cpu[1], 0.85),
        (
            "wall: munmapq / default config (floor)",
            wall[3] / wall[0],
            1.04,
        ),
        (
            "CPU: munmapq / default config (floor)",
            cpu[3] / cpu[0],
            1.04,
        ),
        (
            "CPU: tiny windows without / floor (what tiny windows cost git)",
            cpu[1] / cpu[0],
            f64::NAN,
        ),
        (
            "wall: seed queue / tiny windows without",
            wall[2] / wall[1],
            f64::NAN,
        ),
        (
            "CPU: seed queue / tiny windows without",
            cpu[2] / cpu[1],
            f64::NAN,
        ),
        (
            "mmap+munmap syscalls: munmapq / distinct windows",
            calls[3] as f64 / windows.max(1) as f64,
            1.05,
        ),
        ("peak RSS: munmapq / default config", rss[3] / rss[0], 1.0),
        (
            "peak RSS: munmapq / tiny windows without",
            rss[3] / rss[1],
            1.5,
        ),
        (
            "peak RSS: seed queue / tiny windows without",
            rss[2] / rss[1],
            f64::NAN,
        ),
    ];
    print_ratios(&rows);
}

fn print_ratios(rows: &[(&str, f64, f64)]) {
    println!("\n| ratio | value | bound | |");
    println!("| --- | --- | --- | --- |");
    for &(name, v, bound) in rows {
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
fn alternate(rounds: usize, cmds: &[&dyn Fn() -> Command]) -> Vec<(f64, f64)> {
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

fn bench_micro(rounds: usize, scratch: &Path) {
    println!("\n## micro: mmap/read/munmap over 64 distinct 16 KiB windows, 200,000 times\n");
    let file = scratch.join("micro.bin");
    let pg = sys::page();
    sys::make_file(file.to_str().unwrap(), 64 * 16384 / pg + 1);
    let probe = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("mq-probe");
    let cmd = |p: Preload| {
        let mut c = Command::new(&probe);
        c.args(["cycle", file.to_str().unwrap(), "200000", "64"]);
        c.env("MQ_WINDOW_PAGES", (16384 / pg).to_string());
        preload_env(&mut c, p);
        c
    };
    let m = alternate(
        rounds,
        &[&|| cmd(Preload::No), &|| cmd(Preload::Seed), &|| {
            cmd(Preload::Munmapq)
        }],
    );
    println!("| configuration | median wall s | median CPU s |\n| --- | --- | --- |");
    for (i, name) in ["no preload", "seed queue", "munmapq"].iter().enumerate() {
        println!("| {name} | {:.4} | {:.4} |", m[i].0, m[i].1);
    }
    print_ratios(&[
        ("wall: munmapq / no preload", m[2].0 / m[0].0, 0.07),
        ("CPU: munmapq / no preload", m[2].1 / m[0].1, 0.07),
        ("wall: seed queue / no preload", m[1].0 / m[0].0, f64::NAN),
    ]);
}

fn bench_passthrough(repo: &Path, log: &[&str], rounds: usize) {
    println!(
        "\n## pass-through cost: default config (nothing thrashes), git {}\n",
        log.join(" ")
    );
    let run = |p: Preload| {
        let mut c = git_command(repo, false, log);
        preload_env(&mut c, p);
        c
    };
    let m = alternate(
        2 * rounds,
        &[&|| run(Preload::No), &|| run(Preload::Munmapq)],
    );
    println!(
        "median wall {:.3} s without, {:.3} s with; CPU {:.3} s without, {:.3} s with",
        m[0].0, m[1].0, m[0].1, m[1].1
    );
    print_ratios(&[
        ("wall: munmapq / without", m[1].0 / m[0].0, 1.02),
        ("CPU: munmapq / without", m[1].1 / m[0].1, 1.02),
    ]);
}

/// Where Debian's eatmydata package puts libeatmydata (the reference for
/// what a small preloaded library costs).
fn eatmydata() -> Option<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu/libeatmydata.so",
        "/usr/lib/aarch64-linux-gnu/libeatmydata.so",
        "/usr/lib/libeatmydata.so",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// What loading a library costs a short-lived process: `git --version`,
/// without a preload, with libeatmydata, with libmunmapq, alternating.
fn bench_load(rounds: usize) {
    let Some(eat) = eatmydata() else {
        println!("\n## load cost: skipped, libeatmydata not found (apt-get install eatmydata)");
        return;
    };
    let runs = 100 * rounds;
    println!("\n## load cost: git --version, {runs} runs each, alternating\n");
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let git = |preload: Option<&Path>| {
        let mut c = Command::new("git");
        c.arg("--version");
        if let Some(p) = preload {
            c.env("LD_PRELOAD", p);
        }
        c
    };
    let ours = lib();
    let m = alternate(
        runs,
        &[&|| git(None), &|| git(Some(&eat)), &|| git(Some(&ours))],
    );
    println!("| configuration | library bytes | median wall ms | median CPU ms |\n| --- | --- | --- | --- |");
    for (i, (name, bytes)) in [
        ("no preload", 0),
        ("libeatmydata", size(&eat)),
        ("libmunmapq", size(&ours)),
    ]
    .iter()
    .enumerate()
    {
        println!(
            "| {name} | {bytes} | {:.3} | {:.3} |",
            m[i].0 * 1e3,
            m[i].1 * 1e3
        );
    }
    let eat_ratio = m[1].0 / m[0].0;
    print_ratios(&[
        ("wall: libeatmydata / no preload", eat_ratio, f64::NAN),
        ("wall: libmunmapq / no preload", m[2].0 / m[0].0, eat_ratio),
        ("wall: libmunmapq / libeatmydata", m[2].0 / m[1].0, 1.0),
    ]);
}

/// The child of [`bench_anon`]: `n` times, map 64 KiB of anonymous memory,
/// write to it, unmap it.
fn anon_cycle(n: usize) {
    const LEN: usize = 64 * 1024;
    for i in 0..n {
        // SAFETY: a fresh private anonymous mapping, written within its
        // length and unmapped once.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert!(p != libc::MAP_FAILED);
            *(p as *mut u8).add(i % LEN) = 1;
            libc::munmap(p, LEN);
        }
    }
}

/// Calls that can never concern the queue: one thread cycling anonymous
/// 64 KiB mappings, with and without libmunmapq.
fn bench_anon(rounds: usize) {
    let n = 100_000;
    println!("\n## anonymous memory: mmap + write + munmap of 64 KiB, {n} times, one thread\n");
    let me = std::env::current_exe().unwrap();
    let cmd = |p: Preload| {
        let mut c = Command::new(&me);
        c.args(["--anon-cycle", &n.to_string()]);
        preload_env(&mut c, p);
        c
    };
    let m = alternate(
        2 * rounds,
        &[&|| cmd(Preload::No), &|| cmd(Preload::Munmapq)],
    );
    println!(
        "median wall {:.4} s without, {:.4} s with; CPU {:.4} s without, {:.4} s with",
        m[0].0, m[1].0, m[0].1, m[1].1
    );
    print_ratios(&[
        ("wall: munmapq / without", m[1].0 / m[0].0, 1.02),
        ("CPU: munmapq / without", m[1].1 / m[0].1, 1.02),
    ]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, n] = &args[..] {
        if flag == "--anon-cycle" {
            anon_cycle(n.parse().unwrap());
            return;
        }
    }
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let rounds: usize = opt("--rounds").map(|v| v.parse().unwrap()).unwrap_or(7);
    let commits: usize = opt("--commits").map(|v| v.parse().unwrap()).unwrap_or(3000);
    let files: usize = opt("--files").map(|v| v.parse().unwrap()).unwrap_or(600);
    let limit = opt("--limit");
    let scratch = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .join("bench");
    std::fs::create_dir_all(&scratch).unwrap();
    let uname = Command::new("uname")
        .arg("-srm")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let git = Command::new("git")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    println!(
        "# mq-bench: {} rounds, {} cores, {}, {}",
        rounds,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        uname.unwrap_or_default(),
        git.unwrap_or_default()
    );
    let flag = |f: &str| args.iter().any(|a| a == f);
    if flag("--eviction") {
        eviction::run(&scratch, rounds.min(3));
        return;
    }
    if !flag("--load-only") && !flag("--seed-only") {
        bench_micro(rounds, &scratch);
    }
    if !flag("--seed-only") {
        bench_load(rounds);
        bench_anon(rounds);
    }
    if flag("--micro-only") || flag("--load-only") {
        return;
    }
    if !flag("--no-seed") {
        let mib: usize = opt("--seed-pack-mib")
            .map(|v| v.parse().unwrap())
            .unwrap_or(1100);
        let big = bench_seed::make_big_repo(&scratch, mib * 4, 256);
        let mut seed_log = vec!["log", "--raw"];
        if let Some(n) = limit.as_deref() {
            seed_log.extend(["-n", n]);
        }
        bench_seed::bench_seed(
            &big,
            &["core.packedGitLimit=128m"],
            &seed_log,
            rounds,
            &scratch,
        );
        let scaled = ["core.packedGitWindowSize=64m", "core.packedGitLimit=128m"];
        bench_seed::bench_seed(&big, &scaled, &seed_log, rounds, &scratch);
        if let Some(p) = opt("--repo") {
            bench_seed::bench_seed(Path::new(&p), &scaled, &seed_log, rounds, &scratch);
        }
        if flag("--seed-only") {
            return;
        }
    }
    let repo = match opt("--repo") {
        Some(p) => PathBuf::from(p),
        None => make_repo(&scratch, commits, files),
    };
    let mut log = vec!["log", "--raw"];
    if let Some(n) = limit.as_deref() {
        log.extend(["-n", n]);
    }
    bench_git(&repo, &log, rounds, &scratch);
    bench_git(
        &repo,
        &["ls-tree", "-r", "-l", "--full-tree", "HEAD"],
        rounds,
        &scratch,
    );
    bench_passthrough(&repo, &log, rounds);
}
