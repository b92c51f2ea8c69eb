//! A mapping holds the open file it was made from, so a munmap
//! munmapq queues keeps the file open past the program's `close()`, and
//! what the kernel does at the last close waits for the queue. Each test
//! runs one program (`mq-probe last-close SCENARIO`, probes/src/bin/
//! mq-probe/lastclose.rs) without and with the library, with the defaults
//! and with `MUNMAPQ_MAX_ENTRIES=1`, and requires the same exit status and
//! output (`common::same_as_without`). Scenarios that need a mount
//! namespace print `SKIPPED: why` and pass where it cannot be made (not
//! root).
//!
//! The library on main (352f0c0, and fb76cfe) failed every scenario here;
//! the close, lock, unlink and unmount hooks (`interpose/src/linux/
//! lastclose.rs`) make them pass. The git figures
//! (`git_loose_objects_reuse_figures`) show that git's loose objects keep
//! their reuse (the same figures before and after).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Every run is killed after this (the lock scenarios end themselves
/// after 3 s of waiting).
const LIMIT: Duration = Duration::from_secs(30);

/// `mq-probe last-close SCENARIO DIR`, each run in a fresh directory.
fn scenario(name: &str) {
    same_as_without(
        &format!("last-close-{name}"),
        |dir: &Path| probe_cmd(&["last-close", name, dir.to_str().unwrap()]),
        &[],
        LIMIT,
    );
}

// Scenario 1: a lock taken through the descriptor is released at its last
// close. Today: round 2 waits for the lock the queued mapping of round 1
// still holds ("round 2: lock not granted within 3 s: hung", exit 3).

#[test]
fn flock_is_released_at_close() {
    scenario("flock");
}

#[test]
fn ofd_lock_is_released_at_close() {
    scenario("ofd");
}

// Scenario 2: a script written through O_RDWR, mapped, unmapped, closed,
// then executed. Today: "execl: ETXTBSY", exit 126.

#[test]
fn exec_of_a_file_written_mapped_and_closed() {
    scenario("exec");
}

// Scenario 3 (root: a tmpfs in a private mount namespace). Today: the
// second 16 MiB file gets ENOSPC on the 24 MiB tmpfs; umount gets EBUSY.

#[test]
fn tmpfs_space_comes_back_at_unlink() {
    scenario("tmpfs-space");
}

#[test]
fn tmpfs_unmounts_after_close() {
    scenario("tmpfs-umount");
}

// Scenario 3c: the unmounts come while another thread holds the table.
// The library at d02eb11 recorded the unmount for the table's next holder
// and made the real call at once: 1-18 of 400 failed with EBUSY.
#[test]
fn tmpfs_unmounts_while_another_thread_holds_the_table() {
    scenario("busy-umount");
}

// Scenario 4. Today: no IN_CLOSE_* event within 300 ms of the close; the
// read lease gets EAGAIN; /dev/shm gets nothing back at the unlink; maps
// names "first.bin (deleted)".

#[test]
fn inotify_reports_the_close() {
    scenario("inotify");
}

#[test]
fn read_lease_after_the_writer_closed() {
    scenario("lease");
}

#[test]
fn dev_shm_space_comes_back_at_unlink() {
    scenario("shm-space");
}

#[test]
fn proc_maps_names_the_link_mapped() {
    scenario("maps-name");
}

// Scenario 5 (root: a tmpfs and a noexec bind mount of it in a private
// mount namespace). Today: the mapping through the noexec mount is the
// queued one made through the other, and mprotect(PROT_EXEC) succeeds.

#[test]
fn noexec_bind_mount_refuses_prot_exec() {
    scenario("noexec");
}

// Scenario 6: two opens of one file (`tests/c/twoopens.c`). A window
// queued from the first open must not be handed to a mmap through the
// second: the program's mapping would hold the first open file, keeping
// its lock past its close (and its close event until that munmap), or,
// for a window over 1 MiB kept queued past both closes, for good. The
// library at d5088f6 printed "lock held: Resource temporarily unavailable"
// and "0, then 1 close events".

/// `tests/c/twoopens.c DIR HOW KIB`, with the queue reached in every run.
fn two_opens(how: &str, kib: &str) {
    let name = format!("twoopens-{how}-{kib}");
    let build = scratch(&name);
    let exe = c_program("twoopens", &build);
    for r in same_as_without(
        &name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).args([how, kib]);
            c
        },
        &[],
        LIMIT,
    ) {
        let deferred = r.get(Counter::Deferred);
        assert!(
            deferred > 0,
            "deferred {deferred}: the queue was not reached"
        );
    }
}

#[test]
fn a_lock_on_one_open_is_released_at_its_close_while_another_open_maps_the_window() {
    two_opens("flock", "64");
}

#[test]
fn a_lock_on_one_open_is_released_at_its_close_while_another_open_maps_a_large_window() {
    two_opens("flock", "2048");
}

/// An open file alive only in a mapping whose descriptor was closed, the
/// number opened again, then a `dup2` onto it that fails: the mapping's
/// munmap is that open file's last close. The library at b55822b gave the
/// number back the mapping at the failed call, deferred its munmap, and
/// the lock stayed ("lock held").
#[test]
fn a_failed_dup2_onto_a_reopened_number_leaves_the_old_open_files_last_close_at_its_munmap() {
    two_opens("failed-dup2", "2048");
}

#[test]
fn each_open_reports_its_close_when_another_open_mapped_the_window() {
    two_opens("inotify", "64");
}

#[test]
fn each_open_reports_its_close_when_another_open_mapped_a_large_window() {
    two_opens("inotify", "2048");
}

// ------------------------------------------------------------------ git

fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .env("GIT_PAGER", "cat")
        .arg("-C")
        .arg(repo);
    c
}

fn ok(c: &mut Command) {
    let out = output_within(c, MINUTE);
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository whose objects are all loose: the probe's fast-import
/// stream (400 commits over 60 files) into a packed repository, its pack
/// unpacked into a second one.
fn loose_repo() -> Scratch {
    let packed = scratch("loose-src");
    let loose = scratch("loose");
    ok(Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&packed));
    ok(Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&loose));
    let stream = output_within(&mut probe_cmd(&["fast-import", "400", "60"]), MINUTE).stdout;
    let mut fi = git(&packed)
        .args(["fast-import", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(fi.stdin.as_mut().unwrap(), &stream).unwrap();
    drop(fi.stdin.take());
    assert!(fi.wait().unwrap().success());
    for pack in std::fs::read_dir(packed.join(".git/objects/pack")).unwrap() {
        let pack = pack.unwrap().path();
        if pack.extension().is_some_and(|e| e == "pack") {
            // (output_within would give it /dev/null as stdin.)
            let status = git(&loose)
                .args(["unpack-objects", "-q"])
                .stdin(std::fs::File::open(&pack).unwrap())
                .status()
                .unwrap();
            assert!(status.success(), "git unpack-objects");
        }
    }
    let tip = output_within(git(&packed).args(["rev-parse", "main"]), MINUTE).stdout;
    let tip = String::from_utf8(tip).unwrap();
    ok(git(&loose).args(["update-ref", "refs/heads/main", tip.trim()]));
    ok(git(&loose).args(["reset", "-q", "--hard"]));
    let _ = std::fs::remove_dir_all(&packed);
    assert!(
        !loose.join(".git/objects/pack").exists()
            || std::fs::read_dir(loose.join(".git/objects/pack"))
                .unwrap()
                .next()
                .is_none(),
        "the repository has a pack"
    );
    loose
}

/// git maps each loose object whole, unmaps it and closes it, and often
/// reads it again: the reuse a fix that releases mappings at close could
/// lose. Not a failure today: same output with and without munmapq, and
/// the counters printed for both settings, to compare with the fix's.
#[test]
fn git_loose_objects_reuse_figures() {
    let repo = loose_repo();
    let loose = walk_count(&repo.join(".git/objects"));
    let commands: [(&str, &[&str]); 2] = [
        ("git log --stat", &["log", "--stat"]),
        (
            "git blame src/d00/s00/file0000.txt",
            &["blame", "src/d00/s00/file0000.txt"],
        ),
    ];
    println!("a repository of {loose} loose objects (400 commits, 60 files)");
    for (what, args) in commands {
        for (label, env) in BOTH_SETTINGS {
            let with = differential(
                || {
                    let mut c = git(&repo);
                    c.args(args);
                    c
                },
                env,
            );
            println!(
                "{what} [{label}]: {} mmaps, {} reused, {} munmaps deferred, {} real mmaps, {} real munmaps, {} flushes",
                with.get(Counter::MmapCalls),
                with.get(Counter::Reused),
                with.get(Counter::Deferred),
                with.get(Counter::MmapSyscalls),
                with.get(Counter::MunmapSyscalls),
                with.get(Counter::Flushes),
            );
            assert!(
                with.get(Counter::MmapCalls) > 1000,
                "git mapped its objects"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&repo);
}

fn walk_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk_count(&p)
            } else {
                1
            }
        })
        .sum()
}

/// A child with a copy of this memory that no atfork handler hears of
/// (`_Fork`, a fork through `syscall`, `clone` without `CLONE_VM`), made
/// right after a vfork child: its last close of a file releases the lock,
/// as any process's (`tests/c/vforkcopy.c`). The library at cf34cdb took
/// such a child for the vfork child (the thread's mark) and released
/// nothing at its close: the window it unmapped kept the lock.
#[test]
fn a_copy_made_after_a_vfork_is_no_vfork_child_at_its_last_close() {
    for how in ["_Fork", "syscall", "clone"] {
        same_and_queued(
            &format!("vforkcopy-{how}"),
            "vforkcopy",
            &[how],
            "the lock after the child's last close: granted",
            LIMIT,
        );
    }
}

/// A signal handler's close of the one descriptor of a file the program
/// holds an flock on, made while the program maps and unmaps windows
/// through it: right after, the lock is free, as at the last close of a
/// file (`tests/c/sigclose.c`). Where the handler interrupted a hook that
/// held munmapq's table, the library at e365442 left the close's release
/// to the next call that took the table, and the lock held on.
#[test]
fn a_signal_handlers_close_during_a_hook_releases_the_file_at_once() {
    same_and_queued(
        "sigclose",
        "sigclose",
        &["300"],
        "rounds the lock was refused right after the close: 0",
        LIMIT,
    );
}

/// A close of the one descriptor of a file the program holds an flock on,
/// made while another thread maps and unmaps windows of another file:
/// right after, the lock is free, as at the last close of a file
/// (`tests/c/threadclose.c`). Where the other thread's hook held
/// munmapq's table, the library at 5506508 noted the close and returned,
/// and the window made through the descriptor held the lock until that
/// holder let the table go: another process was refused it (about once
/// in a thousand rounds).
#[test]
fn a_close_while_another_thread_holds_the_table_releases_the_file_at_once() {
    same_and_queued(
        "threadclose",
        "threadclose",
        &["10000"],
        "rounds the lock was refused right after the close: 0",
        LIMIT,
    );
}

/// The process's executable file replaced (`prctl(PR_SET_MM,
/// PR_SET_MM_MAP)`, as a checkpoint's restore does) once the program has
/// unmapped all of the old one, a window of it included: granted, where a
/// queued window of it made the kernel refuse with EBUSY
/// (`tests/c/exefile.c`; SKIPPED without the capability it needs).
#[test]
fn the_executable_file_is_replaced_once_the_program_unmapped_it() {
    same_and_queued("exefile", "exefile", &[], "exe file replaced: ok", LIMIT);
}
