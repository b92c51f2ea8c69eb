//! The hooks' plain ways: where nothing is queued, `mmap`, `munmap` and
//! `close` are made as the program made them, with errno left to the real
//! call (the engine makes no call of its own there, nor retries after
//! ENOMEM). `tests/c/plain.c` makes each call, succeeding and failing,
//! first with nothing queued, then with a window queued (the engine's way,
//! errno kept around its own calls): every result and errno is the same as
//! without the library, and the queue was reached.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn plain_and_engaged_calls_answer_as_without_the_library() {
    let build = scratch("plain-calls");
    let exe = c_program("plain", &build);
    for r in same_as_without(
        "plain-calls",
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir);
            c
        },
        &[],
        Duration::from_secs(30),
    ) {
        assert_contains(&r.out.stdout, "nothing queued: close: 0, errno 4242");
        assert_contains(&r.out.stdout, "one queued: file munmap: 0, errno 4242");
        assert!(r.get(Counter::Deferred) > 0, "the queue was never reached");
    }
}

/// `mmap(0, len, MAP_FIXED | MAP_ANONYMOUS)` replaces what the library
/// tracks in `[0, len)`, whether the gate is closed (a window queued) or
/// open: the old window is never handed out again, and the anonymous
/// memory in its range is never queued as that window
/// (`tests/c/fixedzero.c`; where mapping at 0 is refused, it prints
/// SKIPPED).
fn fixed_at_zero(mode: &str) {
    let name = format!("fixed-zero-{mode}");
    let build = scratch(&name);
    let exe = c_program("fixedzero", &build);
    for r in same_as_without(
        &name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).arg(mode);
            c
        },
        &[],
        Duration::from_secs(30),
    ) {
        assert_contains(&r.out.stdout, "the window mapped again reads 'x'");
        assert!(r.get(Counter::Deferred) > 0, "the queue was never reached");
    }
}

#[test]
fn a_fixed_mapping_at_zero_over_a_queued_window_is_never_handed_out() {
    fixed_at_zero("queued");
}

#[test]
fn a_fixed_mapping_at_zero_over_a_live_window_with_one_queued_is_never_queued_as_it() {
    fixed_at_zero("live");
}

#[test]
fn a_fixed_mapping_at_zero_over_a_live_window_with_nothing_queued_is_never_queued_as_it() {
    fixed_at_zero("live-plain");
}
