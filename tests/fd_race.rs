//! A descriptor number re-pointed by `dup2` while other threads map
//! through it (`tests/c/fdrace.c`), without and with the library, under
//! the defaults and `MUNMAPQ_MAX_ENTRIES=1` (`common::same_as_without`).
//!
//! An eligible mmap asks `statx` about the number, maybe `F_GETFL`, then
//! makes the real `mmap`: the answers must be about the file the kernel
//! mapped (`core/src/close_seq.rs`, `Engine::confirm`). The library on
//! main (4781e2d) recorded a mapping of b under a's key when the number
//! switched between the `statx` and the `mmap`: after the race, mappings
//! of a through a descriptor nobody touched showed b's bytes ("wrong:
//! 100" to "wrong: 4000" in 4 of 6 runs of 1.5 s on a loaded 2-core
//! machine); and it judged b's write-only description by a's read-only
//! one's `F_GETFL` answer, handing out b's queued window through it (1-4
//! mappings a run, in nearly every run).
//!
//! `tests/c/closerace.c`: the number closed and opened again (or re-pointed
//! by `dup2`) by a signal handler interrupting mmaps through it. The
//! library at 99a922e recorded a window made through the open file the
//! handler had just ended as the number's when that close came after the
//! mmap's last check: queued at its munmap, it kept that open file, and
//! its lock, past the close ("refused: 1" to "refused: 7" of 6250 checks,
//! in most runs of either kind).
//!
//! `tests/c/lanerace.c`: the other way round, a signal handler maps
//! through the number at the very system call that closes it (a seccomp
//! filter traps `close`, and the SIGSYS handler maps, unmaps, then closes).
//! The close lane (`Engine::close_lane`) takes its place in line before the
//! real call, so the handler's mmap finds a close under way and is not
//! tracked. A lane without a place (370dbd5) had to release such a mapping
//! after the real call: without that release, "refused: 500" of 1000 (the
//! next close, finding the mapping's record, took the whole way).
//!
//! `tests/c/stepclose.c` (x86_64) steps the program's close one instruction
//! at a time with the trap flag: at the first step inside the C library's
//! close a handler maps and unmaps through the number (first closing it
//! and opening the file again read-only, in one mode); after the real
//! close another maps a write-only reopening read-only (EACCES), or asks
//! for an exclusive flock, or leaves with siglongjmp. The lane of 370dbd5
//! (no place in line) failed all three: the mapping succeeded, the lock
//! was refused at the handler, and after the jump.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A run killed after this is a hang.
const LIMIT: Duration = Duration::from_secs(60);

fn race(mode: &str, ms: u32, expect: &str) {
    let build = scratch(&format!("fd-race-{mode}"));
    let exe = c_program("fdrace", &build);
    let runs = same_as_without(
        &format!("fd-race-{mode}"),
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).arg(mode).arg(ms.to_string());
            c
        },
        &[],
        LIMIT,
    );
    for r in runs {
        assert_contains(&r.out.stdout, expect);
    }
}

/// After the race, every mapping through a stable descriptor shows its
/// own file's bytes.
#[test]
fn a_window_mapped_while_the_number_switched_files_shows_its_own_file() {
    race("bytes", 2500, "wrong: 0\n");
}

/// No mapping of b through b's write-only description.
#[test]
fn a_write_only_description_switched_in_never_gets_a_mapping() {
    race("writeonly", 1500, "b through a write-only descriptor: 0\n");
}

fn close_race(mode: &str) {
    same_and_queued(
        &format!("close-race-{mode}"),
        "closerace",
        &[mode, "400000"],
        "refused: 0, wrong bytes: 0\n",
        LIMIT,
    );
}

/// No lock of an open file the program closed outlives its close.
#[test]
fn a_number_closed_and_opened_again_by_a_signal_handler_keeps_no_closed_open_file() {
    close_race("close");
}

#[test]
fn a_number_re_pointed_by_a_signal_handler_keeps_no_closed_open_file() {
    close_race("dup2");
}

/// No lock of an open file the program closed outlives its close, when a
/// signal handler maps through the number during the close.
#[test]
fn a_mapping_made_by_a_signal_handler_during_a_close_keeps_no_closed_open_file() {
    same_and_queued(
        "lane-race",
        "lanerace",
        &["1000"],
        "refused: 0, wrong bytes: 0, mapped at the close: 1000\n",
        LIMIT,
    );
}

/// `tests/c/stepclose.c DIR MODE`, the same without and with the library,
/// with a window of the file queued through another descriptor meanwhile.
fn step_close(mode: &str, expect: &str) {
    same_and_queued(
        &format!("step-close-{mode}"),
        "stepclose",
        &[mode],
        expect,
        LIMIT,
    );
}

/// A handler's close, open and mapping inside a close leave nothing a
/// write-only description opened after it may be handed.
#[test]
fn a_close_stepped_by_signal_handlers_hands_no_window_to_a_write_only_descriptor() {
    step_close(
        "reopen",
        "at H2: read-only mmap of a write-only descriptor failed EACCES, after the close: flock granted\n",
    );
}

/// A window a handler mapped and unmapped inside a close keeps no lock of
/// the closed open file once the close's system call has returned.
#[test]
fn a_window_mapped_inside_a_close_keeps_no_lock_past_its_system_call() {
    step_close(
        "lock",
        "at H2: flock granted, after the close: flock granted\n",
    );
}

/// Nor when a handler leaves the close with siglongjmp right after it.
#[test]
fn a_window_mapped_inside_a_close_left_by_siglongjmp_keeps_no_lock() {
    step_close("jump", "at H2: nothing, after the close: flock granted\n");
}
