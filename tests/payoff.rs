//! Never slower than without, in system calls: a program that reads files
//! as git reads loose objects (open, fstat, mmap the whole file, close,
//! munmap; thousands of files, one in 16 read twice: `tests/c/loose.c`)
//! makes no more system calls with the library than without, once the
//! library has measured that its queue does not pay here
//! (core/src/payoff.rs). Counted as the difference between reading 3,000
//! and 6,000 files (strace -f -c), so the library's start-up and its one
//! measuring window do not count; the output is the same.
//! The library of 4781e2d made one more per file (`statx` and `fcntl`
//! for the munmap it saved). `MUNMAPQ_TEST_LIB` names another build to
//! count.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const FILES: usize = 6000;

fn library() -> PathBuf {
    std::env::var_os("MUNMAPQ_TEST_LIB").map_or_else(lib, PathBuf::from)
}

/// Every system call of `loose DIR COUNT 16` (strace -f -c's total), and
/// its output.
fn calls(exe: &Path, dir: &Path, count: usize, preload: bool) -> (usize, String) {
    let log = dir.join(format!("strace-{count}-{preload}"));
    // Without address randomization both runs lay their mappings out
    // alike, so the measuring window costs each the same: the munmaps that
    // release what it queued, one per run of touching mappings, depend on
    // where the kernel put them.
    let mut c = Command::new("setarch");
    c.args(["-R", "strace", "-f", "-c", "-o"]).arg(&log);
    if preload {
        c.arg("-E")
            .arg(format!("LD_PRELOAD={}", library().display()));
    }
    c.arg(exe)
        .arg(dir.join("objects"))
        .args([count.to_string(), "16".into()]);
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "strace: {}", text(&out.stderr));
    let report = std::fs::read_to_string(&log).unwrap();
    let total = report
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.last() == Some(&"total")).then(|| f[3].parse::<usize>().ok())?
        })
        .next()
        .unwrap_or_else(|| panic!("no total in {report}"));
    (total, text(&out.stdout))
}

/// The library as it is shipped, optimized (instructions are counted on
/// it), built here if need be; or `MUNMAPQ_TEST_LIB`.
fn release_library() -> PathBuf {
    if let Some(p) = std::env::var_os("MUNMAPQ_TEST_LIB") {
        return p.into();
    }
    release_build("", &["-p", "munmapq-interpose"]).join("libmunmapq.so")
}

/// User-space instructions of `loose DIR COUNT 16` (callgrind's total),
/// and its output.
fn instructions(exe: &Path, dir: &Path, count: usize, preload: bool) -> (u64, String) {
    let out_file = dir.join(format!("callgrind-{count}-{preload}"));
    let mut c = Command::new("valgrind");
    c.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(exe)
        .arg(dir.join("objects"))
        .args([count.to_string(), "16".into(), "256".into()]);
    if preload {
        c.env("LD_PRELOAD", release_library());
    }
    let out = output_within(&mut c, 5 * MINUTE);
    assert!(out.status.success(), "valgrind: {}", text(&out.stderr));
    let report = std::fs::read_to_string(&out_file).unwrap();
    let total = report
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no totals in {}", out_file.display()));
    (total, text(&out.stdout))
}

/// `FILES` files of the sizes compressed objects have (100 to 8,099 bytes,
/// each its own), and the program reading them.
fn objects_and_reader(name: &str) -> (Scratch, PathBuf) {
    let dir = scratch(name);
    let objects = dir.join("objects");
    std::fs::create_dir_all(&objects).unwrap();
    for i in 0..FILES {
        let len = 100 + (i * 7919) % 8000;
        let data: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
        std::fs::write(objects.join(i.to_string()), data).unwrap();
    }
    let exe = c_program("loose", &dir);
    (dir, exe)
}

/// `measure` of reading half the files and all of them, without the
/// library and with it (in that order); the outputs must agree.
fn counted<T: Copy>(measure: impl Fn(usize, bool) -> (T, String)) -> [T; 4] {
    let runs = [
        (FILES / 2, false),
        (FILES, false),
        (FILES / 2, true),
        (FILES, true),
    ]
    .map(|(count, preload)| measure(count, preload));
    assert_eq!((&runs[2].1, &runs[3].1), (&runs[0].1, &runs[1].1), "output");
    runs.map(|(n, _)| n)
}

/// Once the library has stepped aside, what it adds to a file read (its
/// open is not hooked; its mmap, close and munmap are) is the hooks'
/// bookkeeping, never a search of the queue. The reads land between the
/// first reads' addresses and a file the program keeps mapped (`loose`'s
/// HOLE, as git's reads land where its arrays were): the library of
/// c50d418 kept the small mappings it had queued while measuring, so the
/// table's bound covered those addresses, and every later mmap and munmap
/// took its lock and searched it (1,313 instructions a read; 601 now;
/// the program itself makes about 21,600).
#[test]
fn loose_object_reads_cost_few_instructions_once_aside() {
    let (dir, exe) = objects_and_reader("payoff-instructions");
    let half = FILES / 2;
    let [without_few, without_all, with_few, with_all] =
        counted(|count, preload| instructions(&exe, &dir, count, preload));
    let reads = (half + half / 16) as u64;
    let (without, with) = (without_all - without_few, with_all - with_few);
    let added = with.saturating_sub(without) / reads;
    println!(
        "loose reads: {reads} more reads: {without} instructions without the library, {with} \
         with: {added} added a read"
    );
    assert!(added <= 800, "{added} instructions added a read");
}

#[test]
fn loose_object_reads_make_no_more_system_calls_than_without() {
    let (dir, exe) = objects_and_reader("payoff-loose");
    let half = FILES / 2;
    let [without_few, without_all, with_few, with_all] =
        counted(|count, preload| calls(&exe, &dir, count, preload));
    let (without, with) = (without_all - without_few, with_all - with_few);
    println!(
        "loose reads: {half} more files (one in 16 twice): {without} system calls without the \
         library, {with} with (totals {without_few}/{without_all} and {with_few}/{with_all})"
    );
    assert!(
        with <= without,
        "{with} system calls with the library for {half} more files, {without} without"
    );
}
