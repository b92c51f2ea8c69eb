//! Calls that reach the kernel past the hooks of the functions munmapq
//! hooks by name, and unlinks made while another thread holds the table.
//! Each test runs one program (`mq-probe past-hooks SCENARIO`,
//! probes/src/bin/mq-probe/pasthooks.rs) without and with the library,
//! with the defaults and with `MUNMAPQ_MAX_ENTRIES=1`, and requires the
//! same exit status and output. A scenario the kernel here cannot run
//! prints `SKIPPED: why` and passes.
//!
//! On 4781e2d: `syscall(SYS_unlink)`/`SYS_unlinkat` and `shm_unlink` left
//! the deleted file mapped (1 against 0); a raw `mremap` of the program's
//! page into a range it had unmapped, then `mincore` there, killed it
//! (SIGSEGV, "Y" without); the mapping after `mbind(MPOL_BIND)`, munmap
//! and mmap had mode 2 (0 without); after `process_madvise(MADV_DONTFORK)`
//! the fork child died of SIGSEGV (exit 0 without), as after a raw
//! `madvise(MADV_DONTFORK)`; after a raw `mprotect` to read-write and a
//! write, the window mapped again showed the write; threads unlinking
//! while others held the table left 0 to 4 deleted files mapped.
//!
//! `tests/c/rawargs.c`: libc's `syscall` routed through the hooks gives
//! the kernel the words the program gave it.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// `mq-probe past-hooks SCENARIO AT`, AT a fresh directory or a data file
/// of 64 pages in it.
fn scenario(name: &str, on_file: bool, extra: &[&str]) {
    same_as_without(
        &format!("past-hooks-{name}"),
        |dir: &Path| {
            let at = if on_file {
                data_file(dir, 64)
            } else {
                dir.to_str().unwrap().to_string()
            };
            let mut args = vec!["past-hooks", name, &at];
            args.extend_from_slice(extra);
            probe_cmd(&args)
        },
        &[],
        LIMIT,
    );
}

#[test]
fn raw_unlink_through_syscall_releases_the_file() {
    scenario("raw-unlink", false, &[]);
}

#[test]
fn shm_unlink_releases_the_object() {
    scenario("shm-unlink", false, &[]);
}

#[test]
fn raw_mremap_never_costs_the_program_its_page() {
    scenario("raw-mremap", true, &[]);
}

#[test]
fn raw_mprotect_and_madvise_are_not_carried_into_a_reuse() {
    scenario("raw-calls", true, &[]);
}

#[test]
fn mbind_policy_is_not_carried_into_a_reuse() {
    scenario("mbind", true, &[]);
}

#[test]
fn process_madvise_on_itself_is_not_carried_into_a_reuse() {
    scenario("process-madvise", true, &[]);
}

#[test]
fn unlinks_that_find_the_table_busy_are_applied() {
    // Load-dependent on a library that drops them: three rounds.
    for _ in 0..3 {
        scenario("busy-unlink", false, &["8", "250"]);
    }
}

// mlockall and process_madvise act on every mapping, and replace none: a
// queued one is the library's still, to unmap. The library at d02eb11
// had the table's next holder forget every queued mapping when such a
// call found the table busy, and left deleted files mapped.

#[test]
fn mlockall_that_finds_the_table_busy_leaves_no_deleted_file_mapped() {
    scenario("busy-mlockall", false, &[]);
}

#[test]
fn process_madvise_that_finds_the_table_busy_leaves_no_deleted_file_mapped() {
    scenario("busy-process-madvise", false, &[]);
}

// libc's `syscall` with words the C functions would take as `int`, a
// persona answered as `unsigned int`, and `msync` (a cancellation point
// as a C function, not through `syscall`): `tests/c/rawargs.c`. The
// library at d5088f6 passed these numbers to the C functions: bit 32 of
// `mprotect`'s protection was dropped (success where the kernel says
// EINVAL), a flag `MAP_SHARED_VALIDATE` refuses got a mapping, a persona
// with bit 31 came back negative, and a pending cancellation was acted on.

/// `tests/c/rawargs.c ARGS`, the same without and with the library, in a
/// directory named after `test` (two tests of one run may pass the same
/// arguments: a shared directory would be removed under the other).
fn raw_args(test: &str, args: &[&str], expect: &str) {
    let name = format!("rawargs-{test}");
    let build = scratch(&name);
    let exe = c_program("rawargs", &build);
    for r in same_as_without(
        &name,
        |dir: &Path| {
            let mut c = std::process::Command::new(&exe);
            c.arg(dir).args(args);
            c
        },
        &[],
        LIMIT,
    ) {
        assert_contains(&r.out.stdout, expect);
    }
}

#[test]
fn syscall_passes_the_words_the_program_gave() {
    raw_args("words", &[], "mprotect, bit 32 in prot: -1, errno 22\n");
}

/// The same refusal at a place the program unmapped and munmapq keeps: the
/// library at b55822b made the raw call with the window still there, and
/// the kernel said EEXIST before it looked at the flags.
#[test]
fn syscall_mmap_refused_for_its_flags_meets_no_queued_window() {
    raw_args(
        "freed-window",
        &[],
        "onto the freed window, bit 32: Operation not supported\n",
    );
}

#[test]
fn syscall_msync_acts_on_no_pending_cancellation() {
    raw_args("cancel", &["cancel"], "not cancelled\n");
}
