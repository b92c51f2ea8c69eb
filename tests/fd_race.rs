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
//! A close of a number without records in a single-threaded process takes
//! no place in line (`Engine::close_lane`); without the release after the
//! real call (`Engine::closed_lane`), the window so mapped stayed queued
//! with the open file the close ended, and its lock: "refused: 500" of
//! 1000 (every other close: the next one, finding that mapping's record,
//! took the whole way). Where the lane looks at whether the thread is in an
//! eligible mmap (a close from a handler interrupting one takes its place
//! in line), `closerace.c` fails without that look ("refused: 179").
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
    let name = format!("close-race-{mode}");
    let build = scratch(&name);
    let exe = c_program("closerace", &build);
    let runs = same_as_without(
        &name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).args([mode, "400000"]);
            c
        },
        &[],
        LIMIT,
    );
    for r in runs {
        assert_contains(&r.out.stdout, "refused: 0, wrong bytes: 0\n");
        let deferred = r.get(munmapq_core::stats::Counter::Deferred);
        assert!(
            deferred > 0,
            "deferred {deferred}: the queue was not reached"
        );
    }
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
    let name = "lane-race";
    let build = scratch(name);
    let exe = c_program("lanerace", &build);
    let runs = same_as_without(
        name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).arg("1000");
            c
        },
        &[],
        LIMIT,
    );
    for r in runs {
        assert_contains(
            &r.out.stdout,
            "refused: 0, wrong bytes: 0, mapped at the close: 1000\n",
        );
        let deferred = r.get(munmapq_core::stats::Counter::Deferred);
        assert!(
            deferred > 0,
            "deferred {deferred}: the queue was not reached"
        );
    }
}
