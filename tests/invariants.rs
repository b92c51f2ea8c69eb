//! Invariant 1 through a real process: each case answers exactly as it does
//! without the library, and with the kernel's own answer.
#![cfg(target_os = "linux")] // LD_PRELOAD, strace and /proc: Linux only

mod common;
use common::*;
use munmapq_core::stats::Counter;

#[test]
fn every_case_answers_as_without_munmapq() {
    let dir = scratch("invariants");
    let file = data_file(&dir, 64);
    let with = differential(|| probe_cmd(&["invariants", &file]), &[]);
    let out = with.stdout();
    // Not only the same, but right: the kernel's answers.
    for expected in [
        "munmap unaligned: EINVAL",
        "munmap zero length: EINVAL",
        "mprotect freed: ENOMEM",
        "madvise freed: ENOMEM",
        "msync freed: ENOMEM",
        "mincore freed: ENOMEM",
        "mlock freed: ENOMEM",
        "mremap freed: EFAULT",
        "munmap freed again: ok(0)",
        "map noreplace onto freed: ok(true)",
        "map fixed onto freed: ok(true)",
        "map fixed data: 42 0",
        "partial hole: ENOMEM",
        "partial gone: ENOMEM",
        "after write, fresh data: true",
        "map O_WRONLY: EACCES",
        "map O_PATH: EBADF",
        "mremap whole after madvise: ok",
        "after write: 0xee",
        "other file same fd: true 0x5a",
    ] {
        assert!(
            out.lines().any(|l| l == expected),
            "missing {expected:?} in\n{out}"
        );
    }
    // And the library was really at work: mappings were deferred and
    // reused (after O_WRONLY/O_PATH were refused); after the file changed
    // the queued mapping was stale: unmapped, not reused.
    assert!(with.get(Counter::Deferred) >= 8, "{out}");
    assert!(with.get(Counter::Reused) >= 1);
    assert!(with.get(Counter::Stale) >= 1);
    assert!(with.get(Counter::Released) >= 1);
}

#[test]
fn invariants_hold_with_a_tiny_queue_too() {
    let dir = scratch("invariants-tiny");
    let file = data_file(&dir, 64);
    let with = differential(
        || probe_cmd(&["invariants", &file]),
        &[("MUNMAPQ_MAX_ENTRIES", "1"), ("MUNMAPQ_MAX_BYTES", "4096")],
    );
    assert!(with.get(Counter::Flushes) >= 1);
}
