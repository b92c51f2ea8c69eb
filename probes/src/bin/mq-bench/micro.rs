//! Micro-benchmarks: file windows cycled, the load cost next to
//! libeatmydata, anonymous memory cycling.

use crate::measure::*;
use munmapq_check::sys;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn bench_micro(rounds: usize, scratch: &Path) {
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

/// Where Debian's eatmydata package puts libeatmydata (the reference for
/// what a small preloaded library costs).
pub fn eatmydata() -> Option<PathBuf> {
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
pub fn bench_load(rounds: usize) {
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
            c.env(LIB.1, p);
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
pub fn anon_cycle(n: usize) {
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
pub fn bench_anon(rounds: usize) {
    let n = 100_000;
    println!("\n## anonymous memory: mmap + write + munmap of 64 KiB, {n} times, one thread\n");
    let me = std::env::current_exe().unwrap();
    let cmd = |p: Preload| {
        let mut c = Command::new(&me);
        c.args(["--anon-cycle", &n.to_string()]);
        preload_env(&mut c, p);
        c
    };
    without_and_with(rounds, 4, cmd);
}
