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
