//! `mq-bench`: reproduces the seed's experiment and the project's targets.
//! Not a timed test: it prints medians measured side by side in one run
//! (configurations alternate, round after round), ratios next to their
//! bounds, peak RSS and mmap/munmap syscall counts, and checks that every
//! configuration's output is byte-identical.
//!
//!     mq-bench [--repo PATH] [--limit N] [--rounds N] [--commits N] [--files N] [--micro-only|--load-only]
//!              [--seed-only] [--seed-pack-mib N] [--seed-rows default|scaled|both] [--no-seed]
//!
//! `--micro-only` stops after the micro-benchmarks (file windows, load
//! cost next to libeatmydata, anonymous memory cycling); `--load-only` runs
//! just the last two.
//!     mq-bench --eviction [--rounds N]   (probes/src/eviction.rs)
//!
//! `--limit N` passes `-n N` to `git log`. The seed's setting (git's
//! default windows under `core.packedGitLimit=128m`, and 64m windows under
//! it) runs on a generated repository whose pack is `--seed-pack-mib`
//! (default 1100) MiB, and with `--repo` on that repository too;
//! `--seed-rows` runs one of the two settings (both by default). Each row
//! says what it reproduces and checks that the pack is longer than the
//! row's window (else git maps it once and there is nothing to defer).

mod eviction;
mod git;
mod measure;
mod micro;
mod seed;

use git::{bench_git, bench_passthrough};
use measure::make_repo;
use micro::{anon_cycle, bench_anon, bench_load, bench_micro};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    refuse_protected_git();
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
        let big = seed::make_big_repo(&scratch, mib * 4, 256);
        let mut seed_log = vec!["log", "--raw"];
        if let Some(n) = limit.as_deref() {
            seed_log.extend(["-n", n]);
        }
        let rows = opt("--seed-rows").unwrap_or_else(|| "both".into());
        assert!(
            matches!(rows.as_str(), "default" | "scaled" | "both"),
            "--seed-rows {rows}: default, scaled or both"
        );
        if rows != "scaled" {
            seed::bench_seed(&seed::DEFAULT_WINDOWS, &big, &seed_log, rounds, &scratch);
        }
        if rows != "default" {
            seed::bench_seed(&seed::SCALED, &big, &seed_log, rounds, &scratch);
            if let Some(p) = opt("--repo") {
                seed::bench_seed(&seed::SCALED, Path::new(&p), &seed_log, rounds, &scratch);
            }
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

/// On macOS, `/usr/bin/git` is a SIP-protected binary: dyld drops every
/// `DYLD_*` variable for it, so each "with munmapq" run would silently run
/// without. The git found first in `PATH` must be another (Homebrew's, as
/// scripts/test.sh uses).
fn refuse_protected_git() {
    if !cfg!(target_os = "macos") {
        return;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let git = std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|p| p.is_file());
    match git {
        Some(g) if !g.starts_with("/usr/bin") => println!("(git: {}, DYLD_* kept)", g.display()),
        g => {
            eprintln!(
                "mq-bench: the git in PATH is {:?}, which SIP strips DYLD_INSERT_LIBRARIES from; put Homebrew's first: PATH=\"$(brew --prefix)/bin:$PATH\"",
                g
            );
            std::process::exit(2);
        }
    }
}
