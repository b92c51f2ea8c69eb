//! Differential random testing: seeded random sequences of memory calls
//! (eligible and ineligible mmaps, whole/partial/invalid/repeated munmaps,
//! MAP_FIXED and MAP_FIXED_NOREPLACE onto freed ranges, mprotect, madvise,
//! mremap, msync, mincore, mlock, reads, fork), run with and without the
//! library: the logs (results, errnos, data checksums) must be identical.
//! A failing seed is printed for replay (`mq-probe random DIR SEED OPS`
//! with `MUNMAPQ_MAX_ENTRIES` as printed) and belongs in
//! tests/random-regressions.txt.

mod common;
use common::*;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const OPS: usize = 200;

/// Queue sizes cycle with the seed: a tiny queue flushes constantly, the
/// default one mostly reuses.
fn caps(seed: u64) -> Option<String> {
    match seed % 4 {
        0 => None,
        n => Some((n * n).to_string()),
    }
}

fn log(dir: &std::path::Path, seed: u64, ops: usize, preload: bool) -> (Vec<u8>, u64) {
    let mut c = Command::new(probe());
    c.args([
        "random",
        dir.to_str().unwrap(),
        &seed.to_string(),
        &ops.to_string(),
    ]);
    let cap = caps(seed);
    let env: Vec<(&str, &str)> = cap
        .iter()
        .map(|c| ("MUNMAPQ_MAX_ENTRIES", c.as_str()))
        .collect();
    let ran = run(&mut c, preload, &env, MINUTE);
    assert!(ran.out.status.success(), "seed {seed}: {}", ran.stderr());
    let touched = ran.get(munmapq_core::stats::Counter::Deferred);
    (ran.out.stdout, touched)
}

fn check(name: &str, seeds: &[(u64, usize)]) -> (usize, u64) {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let lines = AtomicUsize::new(0);
    let deferred = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (next, failures, lines, deferred) = (&next, &failures, &lines, &deferred);
            s.spawn(move || {
                let dir = scratch(&format!("{name}-{t}"));
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(seed, ops)) = seeds.get(i) else {
                        break;
                    };
                    let (plain, _) = log(&dir, seed, ops, false);
                    let (with, d) = log(&dir, seed, ops, true);
                    lines.fetch_add(
                        plain.iter().filter(|&&b| b == b'\n').count(),
                        Ordering::Relaxed,
                    );
                    deferred.fetch_add(d as usize, Ordering::Relaxed);
                    if plain != with {
                        failures.lock().unwrap().push((seed, ops));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "logs differ with munmapq for (seed, ops) {failures:?}; replay: mq-probe random DIR SEED OPS with MUNMAPQ_MAX_ENTRIES per caps(seed)"
    );
    (lines.into_inner(), deferred.into_inner() as u64)
}

#[test]
fn random_sequences_behave_as_without_munmapq() {
    let n: u64 = std::env::var("MUNMAPQ_RANDOM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seeds: Vec<(u64, usize)> = (1..=n).map(|s| (s, OPS)).collect();
    let (lines, deferred) = check("random", &seeds);
    println!("random: {n} seeds x {OPS} steps: {lines} logged results identical with and without munmapq ({deferred} munmaps deferred)");
    assert!(deferred > n, "the library was hardly exercised");
}

#[test]
fn regression_seeds() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/random-regressions.txt"
    ))
    .unwrap();
    let seeds: Vec<(u64, usize)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut w = l.split_whitespace().map(|x| x.parse().unwrap());
            (w.next().unwrap(), w.next().unwrap_or(OPS as u64) as usize)
        })
        .collect();
    let (lines, _) = check("regressions", &seeds);
    println!(
        "random regressions: {} seeds, {lines} results identical",
        seeds.len()
    );
}
