//! The queue never makes the C library's own mappings
//! fail. glibc's large mallocs and thread stacks do not pass through the
//! hooks, so they cannot be retried after a flush; the caps are sized from
//! the room left (core/src/sizing.rs). Differential: the same program
//! prints the same thing with and without the library.
#![cfg(target_os = "linux")] // RLIMIT_AS, vm.max_map_count, /proc

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::os::unix::process::CommandExt;

#[test]
fn malloc_under_rlimit_as_set_by_the_program() {
    let (_dir, file) = scratch_with_data("as-room", 1024);
    // 3 MiB of 256 KiB windows queued, 12 MiB of room, malloc(10 MiB).
    let with = differential(|| probe_cmd(&["as-room", &file, "12", "3072", "10"]), &[]);
    println!("{}", with.stdout().trim());
    assert!(with.stdout().ends_with(": ok\n"), "{}", with.stdout());
    assert!(with.get(Counter::Deferred) > 0, "the queue was used");
}

#[test]
fn malloc_of_headroom_less_2mib_under_ulimit_v() {
    let (_dir, file) = scratch_with_data("as-headroom", 1024);
    let with = differential(
        || {
            let mut c = probe_cmd(&["as-headroom", &file, "3072"]);
            // SAFETY: setrlimit is async-signal-safe; like `ulimit -v 262144`.
            unsafe {
                c.pre_exec(|| {
                    let rl = libc::rlimit {
                        rlim_cur: 256 << 20,
                        rlim_max: libc::RLIM_INFINITY,
                    };
                    libc::setrlimit(libc::RLIMIT_AS, &rl);
                    Ok(())
                })
            };
            c
        },
        &[],
    );
    println!("{}", with.stdout().trim());
    assert!(with.stdout().ends_with(": ok\n"), "{}", with.stdout());
    assert!(with.get(Counter::Deferred) > 0, "the queue was used");
}

#[test]
fn threads_near_max_map_count() {
    let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if max > 1 << 20 {
        println!("vm.max_map_count is {max}: filling it would take too long; skipped");
        return;
    }
    let (_dir, file) = scratch_with_data("map-room", 200);
    let with = differential(|| probe_cmd(&["map-room", &file, "150", "100", "50"]), &[]);
    println!(
        "{} ({} deferred, peak {} queued)",
        with.stdout().trim(),
        with.get(Counter::Deferred),
        with.get(Counter::PeakQueued)
    );
    assert!(with.stdout().contains("50 of 50"), "{}", with.stdout());
    assert!(with.get(Counter::Deferred) > 0, "the queue was used");
}

/// `RLIMIT_AS` lowered below what the queue holds by `prlimit` on a thread
/// id (a second thread's own, the main thread's, or 0): limits are the
/// process's whoever names it, and the queue goes before glibc's
/// `malloc(100 MiB)` needs the room (`tests/c/limittid.c`).
#[test]
fn malloc_after_rlimit_as_lowered_through_a_thread_id() {
    for how in ["thread", "main", "self"] {
        same_and_queued(
            &format!("limit-tid-{how}"),
            "limittid",
            &[how],
            "prlimit: 0, malloc(100 MiB): ok",
            std::time::Duration::from_secs(60),
        );
    }
}

/// With 4,000 windows queued, the program maps on its own until 4,400
/// mappings are left under `vm.max_map_count`, then starts 400 threads
/// (glibc's own stacks): the program's mappings made through the hooks
/// count again after a quarter of the room, and the queue shrinks before
/// the room is gone (`tests/c/manymaps.c`; the library of a15e3d5 let 200
/// threads start).
#[test]
fn threads_after_the_program_mapped_most_of_the_room_itself() {
    same_and_queued(
        "many-maps",
        "manymaps",
        &[],
        "threads created: 400 of 400 (ok)",
        std::time::Duration::from_secs(60),
    );
}
