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
    let mut c = Command::new("strace");
    c.args(["-f", "-c", "-o"]).arg(&log);
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

#[test]
fn loose_object_reads_make_no_more_system_calls_than_without() {
    let dir = scratch("payoff-loose");
    let objects = dir.join("objects");
    std::fs::create_dir_all(&objects).unwrap();
    // Sizes of 100 to 8,099 bytes, each its own, as compressed objects are.
    for i in 0..FILES {
        let len = 100 + (i * 7919) % 8000;
        let data: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
        std::fs::write(objects.join(i.to_string()), data).unwrap();
    }
    let exe = c_program("loose", &dir);
    let half = FILES / 2;
    let (without_few, out_few) = calls(&exe, &dir, half, false);
    let (without_all, out_all) = calls(&exe, &dir, FILES, false);
    let (with_few, lib_few) = calls(&exe, &dir, half, true);
    let (with_all, lib_all) = calls(&exe, &dir, FILES, true);
    assert_eq!((&lib_few, &lib_all), (&out_few, &out_all), "output");
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
