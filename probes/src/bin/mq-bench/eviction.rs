//! `mq-bench --eviction`: eviction policies on workloads with short and long
//! reuse distances. For each workload: one traced run (`MUNMAPQ_TRACE`),
//! replayed by `mq-replay` under every policy at the default caps and at
//! fixed byte caps (the curves), then wall/CPU time and peak RSS measured side
//! by side: git's default windows, tiny windows, tiny windows with munmapq
//! (`aged`, the default) and with the previous rule (`oldest`).
//!
//! The default caps (core/src/sizing.rs): no cap on the queued length unless
//! `MUNMAPQ_MAX_BYTES` sets one (`Engine::byte_cap()` is then `usize::MAX`;
//! the resident budget drops queued pages but keeps the mappings, so it
//! causes no miss), and the count cap (1/16 of `vm.max_map_count`, at most
//! 4095 by default). LRU and OPT are modelled under the same count cap and
//! the engine's byte cap at each call, so at the default caps all four
//! policies are bounded by the count cap alone.

use crate::measure::{git_command, make_repo, measure, median, preload_env, print_ratios, Preload};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Workload {
    name: &'static str,
    /// (commits, files) of the generated repository.
    repo: (usize, usize),
    args: &'static [&'static str],
}

const fn workload(
    name: &'static str,
    repo: (usize, usize),
    args: &'static [&'static str],
) -> Workload {
    Workload { name, repo, args }
}

const WORKLOADS: [Workload; 5] = [
    workload("log --raw, 3000 commits", (3000, 600), &["log", "--raw"]),
    workload("log -p, 3000 commits", (3000, 600), &["log", "-p"]),
    workload(
        "log --raw, 20000 commits x 8000 files",
        (20000, 8000),
        &["log", "--raw"],
    ),
    workload(
        "log -p -n 4000, 20000 commits x 8000 files",
        (20000, 8000),
        &["log", "-p", "-n", "4000"],
    ),
    workload(
        "log -p -- src/d01 (one directory's history), 20000 x 8000",
        (20000, 8000),
        &["log", "-p", "--", "src/d01"],
    ),
];

const CAPS: [&str; 5] = ["4M", "8M", "16M", "32M", "64M"];

/// One policy's row of `mq-replay`'s table.
#[derive(Clone, Copy, Default)]
struct Row {
    misses: f64,
    munmaps: f64,
    peak_mib: f64,
    deferred: f64,
}

struct Replay {
    rows: Vec<(String, Row)>,
    distances: String,
}

impl Replay {
    fn get(&self, policy: &str) -> Row {
        self.rows
            .iter()
            .find(|(n, _)| n == policy)
            .map(|r| r.1)
            .unwrap_or_default()
    }
}

fn replay(trace: &Path, cap: Option<&str>) -> Replay {
    let exe = std::env::current_exe().unwrap().with_file_name("mq-replay");
    let mut c = Command::new(exe);
    c.arg(trace).arg("--distances");
    if let Some(cap) = cap {
        c.args(["--cap", cap]);
    }
    let out = c.output().expect("mq-replay");
    assert!(out.status.success(), "mq-replay failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut rows = Vec::new();
    let mut distances = String::new();
    for l in text.lines() {
        if l.starts_with("pid ") && distances.is_empty() {
            distances = l.split_once(": ").map_or("", |p| p.1).to_string();
        }
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        if f.len() > 6 {
            if let (Ok(m), Ok(u), Ok(p), Ok(d)) = (
                f[2].parse::<f64>(),
                f[3].parse::<f64>(),
                f[4].parse::<f64>(),
                f[5].parse::<f64>(),
            ) {
                let row = Row {
                    misses: m,
                    munmaps: u,
                    peak_mib: p,
                    deferred: d,
                };
                rows.push((f[1].to_string(), row));
            }
        }
    }
    Replay { rows, distances }
}

const TINY: [&str; 4] = [
    "-c",
    "core.packedGitWindowSize=16k",
    "-c",
    "core.packedGitLimit=32k",
];

fn traced_run(repo: &Path, w: &Workload, trace: &Path) {
    let _ = std::fs::remove_file(trace);
    let mut cmd = git_command(repo, true, w.args);
    preload_env(&mut cmd, Preload::Munmapq);
    cmd.env("MUNMAPQ_TRACE", trace);
    measure(cmd);
}

pub fn run(scratch: &Path, rounds: usize) {
    println!("\n# Eviction: policies replayed on traces, and timed\n");
    println!("Windows: {} (tiny).", TINY.join(" "));
    let mut repos: Vec<((usize, usize), PathBuf)> = Vec::new();
    for (i, w) in WORKLOADS.iter().enumerate() {
        let repo = match repos.iter().find(|r| r.0 == w.repo) {
            Some(r) => r.1.clone(),
            None => {
                let p = make_repo(scratch, w.repo.0, w.repo.1);
                repos.push((w.repo, p.clone()));
                p
            }
        };
        println!("\n## {}: git {}\n", w.name, w.args.join(" "));
        let trace = scratch.join(format!("eviction-{i}.trace"));
        traced_run(&repo, w, &trace);
        let d = replay(&trace, None);
        println!("{}\n", d.distances);
        println!("At the default caps (count cap; no length cap unless MUNMAPQ_MAX_BYTES is set; replayed, equal to the real run's counters for the policy it ran):\n");
        println!("| policy | misses (real mmaps) | eviction munmaps | peak queued MiB | misses / OPT | misses / LRU | eviction munmaps / deferred |");
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        let (opt, lru) = (d.get("opt").misses.max(1.0), d.get("lru").misses.max(1.0));
        for p in ["today", "aged", "lru", "opt"] {
            let r = d.get(p);
            let name = match p {
                "today" => "today (oldest + touching run, to 3/4)",
                "aged" => "aged (new default)",
                "lru" => "exact LRU",
                _ => "Belady's OPT",
            };
            println!(
                "| {name} | {} | {} | {:.1} | {:.3} | {:.3} | {:.4} |",
                r.misses,
                r.munmaps,
                r.peak_mib,
                r.misses / opt,
                r.misses / lru,
                r.munmaps / r.deferred.max(1.0)
            );
        }
        println!("\nMisses and peak queued MiB against a fixed byte cap:\n");
        println!(
            "| cap | today | aged | LRU | OPT | aged peak queued MiB | aged eviction munmaps |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- |");
        for cap in CAPS {
            let c = replay(&trace, Some(cap));
            println!(
                "| {cap} | {} | {} | {} | {} | {:.1} | {} |",
                c.get("today").misses,
                c.get("aged").misses,
                c.get("lru").misses,
                c.get("opt").misses,
                c.get("aged").peak_mib,
                c.get("aged").munmaps
            );
        }
        let _ = std::fs::remove_file(&trace);
        time_workload(&repo, w, rounds, &d);
    }
}

fn time_workload(repo: &Path, w: &Workload, rounds: usize, d: &Replay) {
    let names = [
        "git's default windows, no preload",
        "tiny windows, no preload",
        "tiny windows, munmapq (aged)",
        "tiny windows, munmapq oldest",
    ];
    let make = |i: usize| {
        let mut c = git_command(repo, i > 0, w.args);
        if i >= 2 {
            preload_env(&mut c, Preload::Munmapq);
        }
        if i == 3 {
            c.env("MUNMAPQ_EVICT", "oldest");
        }
        c
    };
    let mut s: Vec<Vec<(f64, f64, u64)>> = vec![Vec::new(); names.len()];
    for r in 0..rounds {
        for k in 0..names.len() {
            let i = (k + r) % names.len();
            let m = measure(make(i));
            s[i].push((m.secs, m.cpu, m.rss_kib));
        }
    }
    println!("\n| configuration | median wall s | median CPU s | peak RSS MiB |");
    println!("| --- | --- | --- | --- |");
    let mut med = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let wall = median(s[i].iter().map(|x| x.0).collect());
        let cpu = median(s[i].iter().map(|x| x.1).collect());
        let rss = s[i].iter().map(|x| x.2).max().unwrap() as f64 / 1024.0;
        println!("| {n} | {wall:.3} | {cpu:.3} | {rss:.1} |");
        med.push((wall, cpu, rss));
    }
    let aged = d.get("aged");
    print_ratios(&[
        (
            "misses: aged / exact LRU (default caps)",
            aged.misses / d.get("lru").misses.max(1.0),
            1.15,
        ),
        (
            "eviction munmaps / deferred munmaps: aged (default caps)",
            aged.munmaps / aged.deferred.max(1.0),
            0.02,
        ),
        (
            "misses: aged / OPT",
            aged.misses / d.get("opt").misses.max(1.0),
            f64::NAN,
        ),
        ("CPU: aged / tiny windows", med[2].1 / med[1].1, f64::NAN),
        ("wall: aged / tiny windows", med[2].0 / med[1].0, f64::NAN),
        ("CPU: aged / default windows", med[2].1 / med[0].1, f64::NAN),
        ("CPU: oldest / tiny windows", med[3].1 / med[1].1, f64::NAN),
        (
            "peak RSS: aged / tiny windows",
            med[2].2 / med[1].2,
            f64::NAN,
        ),
        (
            "peak RSS: aged / default windows",
            med[2].2 / med[0].2,
            f64::NAN,
        ),
    ]);
}
