//! A library that is loaded but whose hooks the program's calls never
//! reach says so: the Linux analogue of macOS's dyld loading an inserted
//! library without the permission to interpose (see `interpose/src/init.rs`
//! `interposed`). `tests/c/dlopened.c` loads the library with `dlopen`,
//! so its `mmap` is libc's: the library announces its load, then
//! "not interposed", and stays off (it counts nothing).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::stats::{Counter, Totals};
use std::process::Command;
use std::time::Duration;

/// The statistics-file lines of one run of `dlopened LIB FILE`, with
/// LD_PRELOAD too when `preload`.
fn run_dlopened(name: &str, preload: bool) -> (Totals, String) {
    let (dir, file) = scratch_with_data(name, 4);
    let exe = c_program("dlopened", &dir);
    let stats = dir.join("stats");
    let mut cmd = Command::new(&exe);
    cmd.arg(lib()).arg(&file).env("MUNMAPQ_STATS_FILE", &stats);
    if preload {
        cmd.env(PRELOAD_VAR, lib());
    }
    let out = output_within(&mut cmd, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_contains(&out.stdout, "mapped 8");
    let lines = std::fs::read_to_string(&stats).unwrap_or_default();
    let mut t = Totals::default();
    t.add_text(&lines);
    (t, lines)
}

#[test]
fn a_library_loaded_by_dlopen_says_it_is_not_interposed_and_stays_off() {
    let (t, lines) = run_dlopened("interposed-dlopen", false);
    assert_eq!((t.loaded, t.not_interposed), (1, 1), "{lines}");
    assert_eq!(t.get(Counter::MmapCalls), 0, "off: {lines}");
}

#[test]
fn a_preloaded_library_is_interposed() {
    let (t, lines) = run_dlopened("interposed-preload", true);
    assert_eq!((t.loaded, t.not_interposed), (1, 0), "{lines}");
    assert_eq!(t.get(Counter::MmapCalls), 8, "{lines}");
}
