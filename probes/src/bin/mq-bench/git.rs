//! git itself under each configuration: tiny windows with and without
//! munmapq and the seed's queue, git's default windows as the floor, and
//! the pass-through cost where nothing thrashes.

use crate::measure::*;
use std::path::Path;

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

pub fn bench_git(repo: &Path, what: &[&str], rounds: usize, scratch: &Path) {
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
    // Wall and CPU time, each as a ratio of configuration a's to b's.
    let both = |what: &str, a: usize, b: usize, bound: f64| {
        [("wall", &wall), ("CPU", &cpu)].map(|(m, v)| (format!("{m}: {what}"), v[a] / v[b], bound))
    };
    let mut rows = Vec::new();
    rows.extend(both("munmapq / tiny windows without", 3, 1, 0.85));
    rows.extend(both("munmapq / default config (floor)", 3, 0, 1.04));
    rows.push((
        "CPU: tiny windows without / floor (what tiny windows cost git)".into(),
        cpu[1] / cpu[0],
        f64::NAN,
    ));
    rows.extend(both("seed queue / tiny windows without", 2, 1, f64::NAN));
    rows.push((
        "mmap+munmap syscalls: munmapq / distinct windows".into(),
        calls[3] as f64 / windows.max(1) as f64,
        1.05,
    ));
    for (what, a, b, bound) in [
        ("munmapq / default config", 3, 0, 1.0),
        ("munmapq / tiny windows without", 3, 1, 1.5),
        ("seed queue / tiny windows without", 2, 1, f64::NAN),
    ] {
        rows.push((format!("peak RSS: {what}"), rss[a] / rss[b], bound));
    }
    print_ratios(&rows);
}

pub fn bench_passthrough(repo: &Path, log: &[&str], rounds: usize) {
    println!(
        "\n## pass-through cost: default config (nothing thrashes), git {}\n",
        log.join(" ")
    );
    let run = |p: Preload| {
        let mut c = git_command(repo, false, log);
        preload_env(&mut c, p);
        c
    };
    without_and_with(rounds, 3, run);
}
