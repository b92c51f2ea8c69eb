//! The seed's own setting: git's default 1 GiB windows under
//! `core.packedGitLimit=128m`, on a generated repository whose pack is
//! larger than one window, and the scaled 64m/128m variant. Printed next to
//! the seed's figures.

use crate::measure::{
    generated_repo, measure, median, preload_env, strace_counts, Preload, NO_STRACE, STRACE,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A repository from `mq-probe fast-import-big`: `commits` commits each
/// adding a `blob_kib` KiB incompressible blob (stored uncompressed, so it
/// is quick to generate), text edits in 300 directories.
pub fn make_big_repo(dir: &Path, commits: usize, blob_kib: usize) -> PathBuf {
    let name = format!("seed-repo-{commits}-{blob_kib}");
    let what = format!(
        "{commits} commits, a {} MiB pack",
        commits * blob_kib / 1024
    );
    generated_repo(dir, &name, &what, |repo| {
        let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
        let probe = std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .join("mq-probe");
        let mut gen = Command::new(probe)
            .args(["fast-import-big", &commits.to_string(), "300"])
            .arg(blob_kib.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        ok(Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["-c", "pack.compression=0", "-c", "core.compression=0"])
            .args(["fast-import", "--quiet"])
            .stdin(gen.stdout.take().unwrap()));
        assert!(gen.wait().unwrap().success());
    })
}

/// One row of the seed's benchmark: git's settings, the window they make
/// git map, and what the row reproduces.
pub struct Row {
    pub settings: &'static [&'static str],
    /// `core.packedGitWindowSize` in force, MiB.
    pub window_mib: u64,
    /// The pack must be at least this many windows long for git to thrash.
    pub min_windows: f64,
    pub reproduces: &'static str,
}

/// git's default window on 64-bit systems is 1 GiB (git
/// `git-compat-util.h`, `DEFAULT_PACKED_GIT_WINDOW_SIZE`; the documentation
/// of `core.packedGitWindowSize`: "Default is 1 GiB on 64 bit platforms"),
/// under the seed's 128m limit.
pub const DEFAULT_WINDOWS: Row = Row {
    settings: &["core.packedGitLimit=128m"],
    window_mib: 1024,
    // Two windows for git to move between (mq-bench's default 1100 MiB);
    // CI's row uses 1200 MiB (scripts/check-bench-workflow.py).
    min_windows: 1.05,
    reproduces: "the seed's own case: git log --raw, default 1 GiB windows under core.packedGitLimit=128m (macOS, Linux kernel repository: 518 min without the queue, 2 min 26 s with it)",
};

/// The scaled case: 64 MiB windows under 128m.
pub const SCALED: Row = Row {
    settings: &["core.packedGitWindowSize=64m", "core.packedGitLimit=128m"],
    window_mib: 64,
    min_windows: 4.0,
    reproduces: "the seed's case scaled down: 64 MiB windows under core.packedGitLimit=128m (BENCHMARKS' git.git rows)",
};

/// The seed's ratio: `git log --raw` time without the queue over the time
/// with it (518 min / 2 min 26 s).
pub const SEED_RATIO: f64 = 518.0 * 60.0 / 146.0;

/// Total size of the repository's packs, MiB.
fn pack_mib(repo: &Path) -> u64 {
    let dir = repo.join(".git/objects/pack");
    let dir = if dir.exists() {
        dir
    } else {
        repo.join("objects/pack")
    };
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
        >> 20
}

fn git(repo: &Path, settings: &[&str], what: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PAGER", "cat")
        .arg("-C")
        .arg(repo);
    for s in settings {
        c.args(["-c", s]);
    }
    c.args(what);
    c
}

/// Counters of one preloaded run, from the statistics file.
fn counters(mut cmd: Command, scratch: &Path) -> std::collections::HashMap<String, u64> {
    let file = scratch.join("seed-stats");
    let _ = std::fs::remove_file(&file);
    preload_env(&mut cmd, Preload::Munmapq);
    cmd.env("MUNMAPQ_STATS_FILE", &file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    assert!(cmd.status().unwrap().success());
    let mut m = std::collections::HashMap::new();
    for line in std::fs::read_to_string(&file).unwrap_or_default().lines() {
        for kv in line.split(' ') {
            if let Some((k, v)) = kv.split_once('=') {
                if let Ok(v) = v.parse::<u64>() {
                    *m.entry(k.to_string()).or_insert(0) += v;
                }
            }
        }
    }
    m
}

/// A preloaded run traced (`MUNMAPQ_TRACE`) and replayed under macOS's
/// rules (`mq-replay --rules macos`): real munmaps that removed the last
/// mapping of a file, the munmap macOS charges most for, and window maps.
fn last_mapping_unmaps(mut cmd: Command, scratch: &Path) -> Option<(u64, u64)> {
    let trace = scratch.join("seed.trace");
    let _ = std::fs::remove_file(&trace);
    preload_env(&mut cmd, Preload::Munmapq);
    cmd.env("MUNMAPQ_TRACE", &trace)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    assert!(cmd.status().unwrap().success());
    let replay = std::env::current_exe().ok()?.with_file_name("mq-replay");
    let out = Command::new(replay)
        .arg(&trace)
        .args(["--rules", "macos"])
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&trace);
    let text = String::from_utf8_lossy(&out.stdout);
    // "last-mapping unmaps: N of M window maps (x%) ..."
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("last-mapping unmaps: "))?;
    let mut words = line.split(' ');
    let n = words.next()?.parse().ok()?;
    let m = words.nth(1)?.parse().ok()?;
    Some((n, m))
}

/// Total length passed to munmap, from a strace log.
fn munmapped_bytes(trace: &str) -> u64 {
    trace
        .lines()
        .filter_map(|l| l.split("munmap(").nth(1))
        .filter_map(|rest| rest.split(", ").nth(1))
        .filter_map(|n| n.split(')').next()?.parse::<u64>().ok())
        .sum()
}

pub fn bench_seed(row: &Row, repo: &Path, what: &[&str], rounds: usize, scratch: &Path) {
    let settings = row.settings;
    println!(
        "\n## the seed's setting: git {} {} on {}\n\nreproduces: {}",
        settings
            .iter()
            .map(|s| format!("-c {s}"))
            .collect::<Vec<_>>()
            .join(" "),
        what.join(" "),
        repo.display(),
        row.reproduces
    );
    // A pack within one window is mapped once: nothing to defer, no row.
    let pack = pack_mib(repo);
    let windows = pack as f64 / row.window_mib as f64;
    if windows < row.min_windows {
        println!(
            "NOT THE SEED'S CASE: the largest pack is {pack} MiB, {windows:.2} windows of {} MiB: git would not thrash (at least {} windows needed; --seed-pack-mib); row skipped",
            row.window_mib, row.min_windows
        );
        return;
    }
    println!(
        "pack: {pack} MiB, {windows:.1} windows of {} MiB: git thrashes\n",
        row.window_mib
    );
    // 0: the setting without munmapq; 1: with munmapq (defaults);
    // 2: git's default configuration, no preload.
    let make = |i: usize| {
        let mut c = git(repo, if i == 2 { &[] } else { settings }, what);
        if i == 1 {
            preload_env(&mut c, Preload::Munmapq);
        }
        c
    };
    let mut samples: Vec<Vec<crate::measure::Sample>> = (0..3).map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for k in 0..3 {
            let i = (k + r) % 3;
            samples[i].push(measure(make(i)));
        }
    }
    let reference = (samples[0][0].hash, samples[0][0].bytes);
    let identical = samples
        .iter()
        .flatten()
        .all(|s| (s.hash, s.bytes) == reference);
    assert!(identical, "outputs differ");
    let wall: Vec<f64> = (0..3)
        .map(|i| median(samples[i].iter().map(|s| s.secs).collect()))
        .collect();
    let cpu: Vec<f64> = (0..3)
        .map(|i| median(samples[i].iter().map(|s| s.cpu).collect()))
        .collect();
    let rss: Vec<f64> = (0..3)
        .map(|i| samples[i].iter().map(|s| s.rss_kib).max().unwrap() as f64 / 1024.0)
        .collect();
    let c = counters(git(repo, settings, what), scratch);
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    let (_, _, plain) = strace_counts(git(repo, settings, what), scratch);
    let mut with_cmd = git(repo, settings, what);
    preload_env(&mut with_cmd, Preload::Munmapq);
    let (_, _, with) = strace_counts(with_cmd, scratch);
    let maps = get("eligible");
    let last = last_mapping_unmaps(git(repo, settings, what), scratch);
    // Counts only strace can give: "-" where there is none.
    let traced = |v: String| if STRACE { v } else { "-".to_string() };
    let plain_unmaps = traced(
        plain
            .lines()
            .filter(|l| l.contains("munmap("))
            .count()
            .to_string(),
    );
    println!(
        "output: {} bytes, identical in every run: {identical}\n",
        reference.1
    );
    println!("| setting | window maps | deferred | reused | real munmaps | peak RSS MiB | median wall s | median CPU s | bytes munmapped |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    println!(
        "| no preload | {maps} | - | - | {plain_unmaps} | {:.1} | {:.3} | {:.3} | {} |",
        rss[0],
        wall[0],
        cpu[0],
        traced(munmapped_bytes(&plain).to_string())
    );
    println!(
        "| munmapq, defaults | {maps} | {} | {} | {} | {:.1} | {:.3} | {:.3} | {} |",
        get("deferred"),
        get("reused"),
        get("munmap_syscalls"),
        rss[1],
        wall[1],
        cpu[1],
        traced(munmapped_bytes(&with).to_string())
    );
    println!(
        "| git's default config, no preload | - | - | - | - | {:.1} | {:.3} | {:.3} | - |",
        rss[2], wall[2], cpu[2]
    );
    println!(
        "\n(pages dropped to stay within the resident budget: {} times; strace counts include start-up)",
        get("pages_dropped")
    );
    if !STRACE {
        println!("{NO_STRACE}");
    }
    match last {
        Some((n, m)) => println!(
            "last-mapping unmaps (this run traced, replayed under macOS rules): {n} of {m} window maps"
        ),
        None => println!("last-mapping unmaps: the traced run could not be replayed"),
    }
    println!(
        "\nseed ratio: git {} time without munmapq / with = {:.1} (median wall {:.3} s / {:.3} s; the seed: 518 min / 2 min 26 s = {:.0})",
        what.join(" "),
        wall[0] / wall[1],
        wall[0],
        wall[1],
        SEED_RATIO
    );
    println!("\nThe seed's own figures (macOS, Linux kernel repository, git log --raw, packedGitLimit=128m): 3,072,538 mmaps, 518 min without the queue, 2 min 26 s with it (git's defaults: 9 mmaps, 1 min 4 s). git.git scaled to 64m/128m on Linux: 1,400 window maps, 1,396 munmaps, 76 MiB without the library; nothing deferred under the old byte cap.");
    let munmaps = get("munmap_calls").max(1) as f64;
    let maps_f = maps.max(1) as f64;
    // (name, value, bound, true when the bound is a minimum)
    let last_ratio = last.map_or(f64::NAN, |(n, m)| n as f64 / m.max(1) as f64);
    let rows: [(&str, f64, f64, bool); 8] = [
        (
            "deferred / munmaps",
            get("deferred") as f64 / munmaps,
            0.95,
            true,
        ),
        (
            "reused / window maps",
            get("reused") as f64 / maps_f,
            0.90,
            true,
        ),
        (
            "real munmaps / window maps",
            get("munmap_syscalls") as f64 / maps_f,
            0.05,
            false,
        ),
        (
            "last-mapping unmaps / window maps (replayed, macOS rules)",
            last_ratio,
            if last.is_some() { 0.05 } else { f64::NAN },
            false,
        ),
        (
            "peak RSS: munmapq / no preload",
            rss[1] / rss[0],
            1.6,
            false,
        ),
        (
            "peak RSS: munmapq / git's default config",
            rss[1] / rss[2],
            1.15,
            false,
        ),
        (
            "wall: munmapq / no preload",
            wall[1] / wall[0],
            f64::NAN,
            false,
        ),
        (
            "CPU: munmapq / no preload",
            cpu[1] / cpu[0],
            f64::NAN,
            false,
        ),
    ];
    println!("\n| ratio | value | bound | |\n| --- | --- | --- | --- |");
    for (name, v, bound, min) in rows {
        if bound.is_nan() {
            println!("| {name} | {v:.3} | - | |");
        } else {
            let met = if min { v >= bound } else { v <= bound };
            let op = if min { ">=" } else { "<=" };
            let verdict = if met { "met" } else { "MISSED" };
            println!("| {name} | {v:.4} | {op} {bound} | {verdict} |");
        }
    }
}
