//! Where munmapq's own bookkeeping could cost more than the calls it
//! saves: exact counts, with and without the library, side by side
//! (printed; run with `--nocapture` to see them).
//!
//! On 4781e2d: 4,000 queued windows and 20 forks made 84,002 munmaps
//! (4,002 without: every child unmapped the whole queue); 50,000 window
//! cycles among 65,000 mappings read /proc/self/maps 188 times (2
//! without), 31 s against 1.7 s; with /proc unreadable, 50,000 window
//! cycles made 49,938 failed opens and 99,879 rt_sigprocmask.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::process::Command;

/// Runs `cmd` under `strace -f -e trace=TRACE` (with the library when
/// `preload`) and counts the lines of the log that contain every one of
/// `needles`.
fn strace_lines(
    cmd: &[&str],
    preload: bool,
    env: &[(&str, &str)],
    trace: &str,
    needles: &[&str],
) -> usize {
    let dir = scratch(&format!("cliffs-{trace}-{preload}-{}", cmd.len()));
    let log = dir.join("trace");
    let mut c = Command::new("strace");
    c.args(["-f", "-qq", "-e", &format!("trace={trace}"), "-o"])
        .arg(&log)
        .args(cmd);
    if preload {
        c.env("LD_PRELOAD", lib());
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = output_within(&mut c, 5 * MINUTE);
    assert!(out.status.success(), "{cmd:?}: {}", text(&out.stderr));
    let log = std::fs::read_to_string(&log).unwrap();
    log.lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .count()
}

fn strace_works() -> bool {
    Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_fork_child_does_not_unmap_the_parents_queue() {
    if !strace_works() {
        println!("SKIPPED: no strace");
        return;
    }
    let dir = scratch("cliffs-fork");
    let file = data_file(&dir, 4096);
    let probe = probe();
    let cmd = [
        probe.to_str().unwrap(),
        "past-hooks",
        "fork-queue",
        &file,
        "4000",
        "20",
    ];
    let without = strace_lines(&cmd, false, &[], "munmap", &["munmap("]);
    let with = strace_lines(&cmd, true, &[], "munmap", &["munmap("]);
    println!("4,000 queued windows, 20 forks: munmaps without {without}, with munmapq {with}");
    assert!(with <= without + 2, "with {with}, without {without}");
}

/// A fork child gets none of the queued windows: they are kept out of it
/// (`MADV_DONTFORK`), each once, at the first fork that finds it queued,
/// so the kernel neither copies them nor tears them down per fork; and a
/// window mapped again from the queue (a reuse) is inherited by the next
/// child, as a fresh mapping is (one `madvise(MADV_DOFORK)`). The
/// library at d02eb11 left the last child 4,000 mappings more than
/// without (and the 2,000-window, 200-fork run of a program took 0.55-1.04
/// s instead of 0.06-0.09 s).
#[test]
fn a_fork_child_inherits_none_of_the_queue() {
    let dir = scratch("cliffs-fork-maps");
    let file = data_file(&dir, 4096);
    let probe = probe();
    let cmd = [
        probe.to_str().unwrap(),
        "past-hooks",
        "fork-queue",
        &file,
        "4000",
        "20",
    ];
    let mappings = |preload: bool| -> usize {
        let mut c = Command::new(cmd[0]);
        // One-page windows: never stepped aside for, all 4,000 queued.
        c.args(&cmd[1..]).env("MUNMAPQ_STEP_ASIDE", "0");
        if preload {
            c.env("LD_PRELOAD", lib());
        }
        let out = output_within(&mut c, MINUTE);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_contains(&out.stdout, "a child reading a window mapped again: exit 0");
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("the last child has "))
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok());
        n.unwrap_or_else(|| panic!("no count: {text}"))
    };
    let (without, with) = (mappings(false), mappings(true));
    println!("4,000 queued windows: the 20th fork child has {without} mappings without, {with} with munmapq");
    // The library's own segments and table: a handful.
    assert!(with <= without + 16, "with {with}, without {without}");
    if !strace_works() {
        println!("SKIPPED: no strace");
        return;
    }
    let env = [("MUNMAPQ_STEP_ASIDE", "0")];
    let kept = strace_lines(&cmd, true, &env, "madvise", &["MADV_DONTFORK"]);
    println!("20 forks: {kept} madvise(MADV_DONTFORK) for 4,000 queued windows");
    assert_eq!(kept, 4000, "each queued window kept out once");
}

#[test]
fn counting_mappings_near_max_map_count_stays_rare() {
    if !strace_works() {
        println!("SKIPPED: no strace");
        return;
    }
    let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let total = max.saturating_sub(530).to_string();
    let dir = scratch("cliffs-maps");
    let file = data_file(&dir, 64);
    let probe = probe();
    let cmd = [
        probe.to_str().unwrap(),
        "past-hooks",
        "near-map-count",
        &file,
        &total,
        "50000",
    ];
    let needles = ["/proc/self/maps"];
    let without = strace_lines(&cmd, false, &[], "openat", &needles);
    let with = strace_lines(&cmd, true, &[], "openat", &needles);
    println!(
        "50,000 window cycles among {total} mappings: /proc/self/maps read without {without}, with munmapq {with}"
    );
    assert!(with <= without + 4, "with {with}, without {without}");
}

#[test]
fn an_unreadable_proc_is_not_read_at_every_deferral() {
    if !strace_works() {
        println!("SKIPPED: no strace");
        return;
    }
    // A mount namespace whose /proc is an empty tmpfs (root only).
    let hide = "mount -t tmpfs none /proc && exec \"$0\" \"$@\"";
    let ok = Command::new("unshare")
        .args(["-m", "sh", "-c", hide, "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: cannot make a mount namespace without /proc here (not root?)");
        return;
    }
    let dir = scratch("cliffs-noproc");
    let file = data_file(&dir, 4096);
    let probe = probe();
    let cmd = [
        "unshare",
        "-m",
        "sh",
        "-c",
        hide,
        probe.to_str().unwrap(),
        "cycle",
        &file,
        "50000",
        "256",
    ];
    let env = [("MQ_WINDOW_PAGES", "16")];
    let count =
        |preload, trace, needles: &[&str]| strace_lines(&cmd, preload, &env, trace, needles);
    let failed = |preload| {
        count(preload, "openat", &["/proc/self/statm", "ENOENT"])
            + count(preload, "openat", &["/proc/self/maps", "ENOENT"])
    };
    let (failed_without, failed_with) = (failed(false), failed(true));
    let masks_without = count(false, "rt_sigprocmask", &["rt_sigprocmask("]);
    let masks_with = count(true, "rt_sigprocmask", &["rt_sigprocmask("]);
    println!(
        "50,000 window cycles without /proc: failed opens of /proc/self/{{statm,maps}} without {failed_without}, with munmapq {failed_with}; rt_sigprocmask without {masks_without}, with {masks_with}"
    );
    assert!(failed_with <= 64, "{failed_with} failed opens");
    assert!(
        masks_with <= masks_without + 128,
        "{masks_with} rt_sigprocmask"
    );
    // Said in the statistics, and the queue stays bounded.
    let mut c = Command::new("unshare");
    c.args(&cmd[1..]).env("MQ_WINDOW_PAGES", "16");
    let ran = run(&mut c, true, &[], MINUTE);
    assert!(ran.out.status.success(), "{}", ran.stderr());
    let unreadable = ran.get(munmapq_core::stats::Counter::Unreadable);
    let peak = ran.get(munmapq_core::stats::Counter::PeakQueuedBytes);
    println!("with munmapq: unreadable={unreadable} peak_queued_bytes={peak}");
    assert!(unreadable > 0);
    assert!(peak <= 64 << 20, "{peak}");
}
