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
    // The first fork unmaps the queue (4,000 windows, none touching
    // another: as many munmaps as the program made), and no child unmaps
    // it again.
    let without = strace_lines(&cmd, false, &[], "munmap", &["munmap("]);
    let with = strace_lines(&cmd, true, &[], "munmap", &["munmap("]);
    println!("4,000 queued windows, 20 forks: munmaps without {without}, with munmapq {with}");
    assert!(with <= without + 2, "with {with}, without {without}");
}

/// What `mq-probe past-hooks fork-queue FILE WINDOWS FORKS HOW` said,
/// with the library or without: the parent's mappings before the first
/// fork and at most right after each, the last child's, the seconds the
/// forks took.
struct Forked {
    before: usize,
    parent: usize,
    child: usize,
    secs: f64,
}

fn fork_queue(lib: Option<&std::path::Path>, windows: usize, forks: usize, how: &str) -> Forked {
    let dir = scratch(&format!("cliffs-fork-{how}-{windows}"));
    let file = data_file(&dir, 4096);
    let mut c = Command::new(probe());
    c.args(["past-hooks", "fork-queue", &file])
        .args([windows.to_string(), forks.to_string(), how.to_string()])
        // One-page windows: never stepped aside for, all of them queued.
        .env("MUNMAPQ_STEP_ASIDE", "0");
    if let Some(lib) = lib {
        c.env("LD_PRELOAD", lib);
    }
    let out = output_within(&mut c, 2 * MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_contains(&out.stdout, "a child reading a window mapped again: exit 0");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let after = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|l| l.trim_start().split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {prefix:?}: {text}"))
    };
    Forked {
        before: after("before the first fork the parent has") as usize,
        parent: after("right after each fork the parent had at most") as usize,
        child: after("the last child has") as usize,
        secs: after(&format!("{forks} forks ({how}) took")),
    }
}

/// At a fork the parent has unmapped what the program gave up: the kernel
/// neither copies the queue's mappings (nor its list of them) to the
/// child nor tears them down there. The library at 8c6216e kept them out
/// of the child (`MADV_DONTFORK`), but the parent still had them all
/// right after each fork (8,036 mappings for 4,031 without), and the
/// kernel still walked them at each fork. The time of 200 forks with
/// 2,000 windows queued is printed, not checked (a shared machine).
#[test]
fn at_each_fork_the_parent_has_unmapped_what_the_program_gave_up() {
    let (w, f) = (2000, 200);
    let (without, with) = (
        fork_queue(None, w, f, "fork"),
        fork_queue(Some(&lib()), w, f, "fork"),
    );
    println!(
        "{f} forks, {w} windows queued: {:.3} s without, {:.3} s with munmapq",
        without.secs, with.secs
    );
    queue_gone_at_each_child(4000, "fork");
}

/// A child made past the atfork handlers (glibc's `_Fork`, a fork through
/// `syscall`, glibc's `clone` without `CLONE_VM`) gets none of the queue either: the hooks unmap it first.
/// At 8c6216e such a child had every queued window (8,036 mappings for
/// 4,031 without).
#[test]
fn a_child_no_atfork_handler_hears_of_inherits_none_of_the_queue() {
    for how in ["_Fork", "syscall", "clone"] {
        queue_gone_at_each_child(4000, how);
    }
}

/// 20 children made `how` with `windows` queued: the queue was reached
/// (the parent had them all mapped before the first child), and neither
/// the parent right after each child nor the last child has more than
/// the library's own handful of mappings beyond the program's.
fn queue_gone_at_each_child(windows: usize, how: &str) {
    let without = fork_queue(None, windows, 20, how);
    let with = fork_queue(Some(&lib()), windows, 20, how);
    println!(
        "{windows} windows queued, 20 children by {how}: the parent has {} mappings before without, {} with munmapq; right after each child at most {} without, {} with; the last child {} without, {} with",
        without.before, with.before, without.parent, with.parent, without.child, with.child
    );
    assert!(
        with.before >= without.before + windows,
        "{how}: the queue was not reached"
    );
    // The library's own segments and table: a handful.
    assert!(
        with.parent <= without.parent + 16,
        "{how}: parent with {}, without {}",
        with.parent,
        without.parent
    );
    assert!(
        with.child <= without.child + 16,
        "{how}: child with {}, without {}",
        with.child,
        without.child
    );
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
