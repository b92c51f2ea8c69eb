//! The resident budget through a real process: windows that each hold more
//! resident memory than the budget are all queued and reused, their pages
//! dropped as a cache would, and RSS is read now and then, not at each
//! deferral (strace-counted).

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::process::Command;

/// The system calls of one preloaded run, by name (strace -f -c).
fn syscall_counts(cmd: &[&str], env: &[(&str, &str)]) -> (usize, usize, usize) {
    let dir = scratch("resident-strace");
    let log = dir.join("trace");
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", "trace=openat,madvise,munmap", "-o"])
        .arg(&log)
        .args(cmd)
        .env("LD_PRELOAD", lib());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let trace = std::fs::read_to_string(&log).unwrap();
    let count = |what: &str| trace.lines().filter(|l| l.contains(what)).count();
    (
        count("/proc/self/statm"),
        count("madvise("),
        count("munmap("),
    )
}

#[test]
fn windows_larger_than_the_budget_stay_queued_and_rss_is_read_rarely() {
    // 16 windows of 4 MiB (1024 pages of 4 KiB), each read page by page,
    // 480 times: every window queued holds as much resident memory as the
    // 4 MiB floor of the budget.
    let page = munmapq_check::sys::page();
    let pages = (4 << 20) / page;
    let (_dir, file) = scratch_with_data("resident-budget", 16 * pages);
    let probe = probe();
    let window = pages.to_string();
    let env = [("MQ_WINDOW_PAGES", window.as_str())];
    let cmd = [probe.to_str().unwrap(), "cycle", &file, "480", "16"];
    let with = differential(
        || {
            let mut c = Command::new(cmd[0]);
            c.args(&cmd[1..]).env("MQ_WINDOW_PAGES", &window);
            c
        },
        &[],
    );
    let [deferred, reused, dropped] =
        with.counts([Counter::Deferred, Counter::Reused, Counter::PagesDropped]);
    println!("480 cycles over 16 windows of 4 MiB: deferred {deferred}, reused {reused}, page drops {dropped}");
    assert_eq!(deferred, 480, "every munmap deferred");
    assert!(
        reused >= 464,
        "every map after the first 16 reused: {reused}"
    );
    let (statm, madvise, munmaps) = syscall_counts(&cmd, &env);
    println!("strace: {statm} reads of /proc/self/statm, {madvise} madvise, {munmaps} munmap");
    // Once per 16 deferrals, and once more after a drop that read found
    // needed (it measures what the drop freed): far fewer than one per
    // deferral.
    assert!(
        statm <= 2 * (480 / 16 + 1),
        "{statm} reads of RSS for 480 deferrals"
    );
    // Pages dropped, mappings kept: no window is unmapped to stay within
    // the budget. Each window is larger than the budget: each deferral
    // drops what is left of the previous one and part of itself, two
    // calls at most.
    assert!(madvise <= 2 * 480, "{madvise} drops");
    assert!(munmaps < 16, "{munmaps} munmaps: windows were unmapped");
}
