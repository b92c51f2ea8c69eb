//! What a reuse costs in system calls on Linux, and what keeping
//! `F_GETFL`'s answer per descriptor (core/src/readonly_fds.rs) must never
//! hide, both through a real process (`tests/c/fdmode.c`).
//!
//! The cost: one `statx` per reuse, nothing else (the library on main,
//! 1bf9f4b, made two: `statx` and `fcntl(F_GETFL)`, and fails
//! `a_reuse_costs_one_statx_and_nothing_else`; point `MUNMAPQ_TEST_LIB` at
//! another build of the library to count its calls). A miss costs `statx`,
//! `mmap` and a second `statx` (the mapping is recorded only if the
//! descriptor still names the same file), and the first mmap through a
//! descriptor one `fcntl`.
//!
//! What must not be hidden: a descriptor number closed and opened again on
//! the same file write-only (by close, dup2, dup3, close_range, fclose and
//! `syscall(SYS_close)`) gets EACCES from mmap as without the library,
//! though a mapping of that window is queued, and opened `O_PATH` EBADF;
//! opened read-write, its mappings are not queued.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const WINDOWS: usize = 4;

/// The library to count: this build's, or `MUNMAPQ_TEST_LIB`.
fn library() -> PathBuf {
    std::env::var_os("MUNMAPQ_TEST_LIB").map_or_else(lib, PathBuf::from)
}

/// Every system call `fdmode FILE cycle ROUNDS WINDOWS` makes under the
/// library, by name (strace).
fn calls(exe: &Path, file: &str, dir: &Path, rounds: usize) -> BTreeMap<String, usize> {
    let (r, w) = (rounds.to_string(), WINDOWS.to_string());
    calls_of(exe, &[file, "cycle", &r, &w], dir, true)
}

/// Every system call `fdmode ARGS...` makes, under the library or not.
fn calls_of(exe: &Path, args: &[&str], dir: &Path, preload: bool) -> BTreeMap<String, usize> {
    let log = dir.join(format!("strace-{}-{preload}", args[1..].join("-")));
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-o"]).arg(&log);
    if preload {
        c.arg("-E")
            .arg(format!("LD_PRELOAD={}", library().display()));
    }
    c.arg(exe).args(args);
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "strace: {}", text(&out.stderr));
    let mut by_name = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        // "PID name(args) = result", or "PID +++ exited ..." / "--- SIG".
        let call = line.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
        let Some(name) = call
            .split('(')
            .next()
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        else {
            continue;
        };
        *by_name.entry(name.to_string()).or_insert(0) += 1;
    }
    by_name
}

/// `b - a`, call by call (calls `a` made more are negative), and the total.
fn more(a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>) -> (BTreeMap<String, i64>, i64) {
    let mut d = BTreeMap::new();
    for k in a.keys().chain(b.keys()) {
        let n = *b.get(k).unwrap_or(&0) as i64 - *a.get(k).unwrap_or(&0) as i64;
        if n != 0 {
            d.insert(k.clone(), n);
        }
    }
    let total = d.values().sum();
    (d, total)
}

#[test]
fn a_reuse_costs_one_statx_and_nothing_else() {
    let (dir, file) = scratch_with_data("fd-mode-cycle", 64);
    let exe = c_program("fdmode", &dir);
    // Every window is queued after the first round; each later round
    // reuses all of them.
    let (few, many) = (calls(&exe, &file, &dir, 2), calls(&exe, &file, &dir, 12));
    let reuses = (10 * WINDOWS) as i64;
    let (d, total) = more(&few, &many);
    println!("{reuses} reuses more cost: {d:?}");
    assert_eq!(
        (total, d.get("statx").copied()),
        (reuses, Some(reuses)),
        "one statx per reuse, nothing else: {d:?}"
    );
}

/// A miss asks `statx` once more after its `mmap`: the new mapping is
/// recorded only if the descriptor still names the file the first `statx`
/// described (a `dup2` no hook saw could have re-pointed it between them:
/// tests/fd_race.rs).
#[test]
fn a_miss_costs_two_statx_and_mmap_and_a_descriptor_one_fcntl() {
    let (dir, file) = scratch_with_data("fd-mode-miss", 64);
    let exe = c_program("fdmode", &dir);
    let (none, one) = (calls(&exe, &file, &dir, 0), calls(&exe, &file, &dir, 1));
    let (d, _) = more(&none, &one);
    println!("{WINDOWS} misses more cost: {d:?}");
    let n = WINDOWS as i64;
    let get = |k: &str| d.get(k).copied().unwrap_or(0);
    assert_eq!(
        (get("statx"), get("mmap"), get("fcntl")),
        (2 * n, n, 1),
        "{d:?}"
    );
}

/// What 10 rounds of `fdmode FILE MODE ROUNDS` add (12 rounds against 2),
/// with the library and without.
fn ten_rounds_more(dir: &Path, file: &str, mode: &str) -> [(BTreeMap<String, i64>, i64); 2] {
    let exe = c_program("fdmode", dir);
    let run = |rounds: usize, preload: bool| {
        calls_of(&exe, &[file, mode, &rounds.to_string()], dir, preload)
    };
    [true, false].map(|preload| more(&run(2, preload), &run(12, preload)))
}

/// A descriptor numbered 4096 or more costs what a lower one does: its
/// close no longer asks the kernel about locks, nor each mmap its access
/// mode (the library at d02eb11 read `/proc/self/fdinfo` at every such
/// close, 3 system calls and 2 `rt_sigprocmask`: 130 system calls for the
/// program's 60 here, now 90: a window still live at its descriptor's
/// close is forgotten unasked, its munmap the program's own).
#[test]
fn a_high_descriptor_costs_what_a_low_one_does() {
    // 16 windows: every round maps one not mapped before, a miss.
    let (dir, file) = scratch_with_data("fd-mode-high", 64);
    let [(d_with, with), (_, without)] = ten_rounds_more(&dir, &file, "high");
    println!(
        "10 rounds on a descriptor above 4096: {with} system calls with the library, \
         {without} without: {d_with:?}"
    );
    let get = |k: &str| d_with.get(k).copied().unwrap_or(0);
    // A miss: two statx and the mmap, and the munmap deferred; each new
    // description's access mode asked once (F_GETFL), beside the
    // program's own F_DUPFD: what a descriptor below 4096 costs.
    assert_eq!(
        (
            get("openat"),
            get("read"),
            get("rt_sigprocmask"),
            get("fcntl")
        ),
        (10, 0, 0, 20),
        "no /proc read at a close: {d_with:?}"
    );
}

/// A mapping larger than 1 MiB still live at its descriptor's close costs
/// the close nothing: it is forgotten unasked (its munmap is the open
/// file's last close, and goes to the kernel), where the library of
/// 72152e9 asked the kernel about locks at every such close
/// (`/proc/self/fdinfo`: `openat`, `read`, `close` and two
/// `rt_sigprocmask`, 50 system calls more over these 10 rounds).
#[test]
fn a_large_mapping_outliving_its_descriptor_costs_its_close_nothing() {
    let (dir, file) = scratch_with_data("fd-mode-large", 300);
    let [(d_with, with), (d_without, without)] = ten_rounds_more(&dir, &file, "large");
    println!(
        "10 rounds of a large mapping closed before its munmap: {with} system calls with \
         the library, {without} without: {d_with:?}"
    );
    // Each round's miss asks statx twice (the second after the mmap), and
    // its new description's access mode once (F_GETFL); nothing more.
    let mut expected = d_without.clone();
    *expected.entry("statx".into()).or_insert(0) += 20;
    *expected.entry("fcntl".into()).or_insert(0) += 10;
    assert_eq!(d_with, expected, "without the library: {d_without:?}");
}

/// A run killed after this is a hang.
const LIMIT: Duration = Duration::from_secs(30);

/// `fdmode FILE reopen HOW`, without and with the library (both settings
/// of `same_as_without`): the same output.
fn reopen(how: &str, expect: &str) {
    let dir = scratch(&format!("fd-mode-{how}"));
    let exe = c_program("fdmode", &dir);
    let file = data_file(&dir, 64);
    let runs = same_as_without(
        &format!("fd-mode-{how}"),
        |_: &Path| {
            let mut c = Command::new(&exe);
            c.args([file.as_str(), "reopen", how]);
            c
        },
        &[],
        LIMIT,
    );
    for r in runs {
        assert_contains(&r.out.stdout, expect);
        assert!(
            r.get(munmapq_core::stats::Counter::Deferred) >= 2,
            "the windows were queued: {}",
            r.stderr()
        );
    }
}

const EACCES: &str = "mmap through the new description: Permission denied";

#[test]
fn a_write_only_reopen_after_close_is_refused() {
    reopen("close", EACCES);
}

#[test]
fn a_write_only_dup2_onto_the_number_is_refused() {
    reopen("dup2", EACCES);
}

#[test]
fn a_write_only_dup3_onto_the_number_is_refused() {
    reopen("dup3", EACCES);
}

#[test]
fn a_write_only_reopen_after_close_range_is_refused() {
    reopen("close_range", EACCES);
}

#[test]
fn a_write_only_reopen_after_fclose_is_refused() {
    reopen("fclose", EACCES);
}

#[test]
fn a_write_only_reopen_after_syscall_close_is_refused() {
    reopen("syscall", EACCES);
}

#[test]
fn a_write_only_reopen_after_syscall_close_of_a_wide_number_is_refused() {
    reopen("syscall_high", EACCES);
}

#[test]
fn a_write_only_syscall_dup3_of_wide_numbers_onto_the_number_is_refused() {
    reopen("syscall_dup3_high", EACCES);
}

#[test]
fn a_path_only_reopen_after_close_is_refused() {
    reopen(
        "opath",
        "mmap through the new description: Bad file descriptor",
    );
}

#[test]
fn a_read_write_reopen_is_not_queued() {
    reopen("rdwr", "the mapping made through it is gone");
}
