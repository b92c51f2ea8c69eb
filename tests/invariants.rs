//! Invariant 1 through a real process: each case answers exactly as it does
//! without the library, and with the kernel's own answer.

mod common;
use common::*;
use munmapq_core::stats::Counter;

#[test]
fn every_case_answers_as_without_munmapq() {
    let (_dir, file) = scratch_with_data("invariants", 64);
    let with = differential(|| probe_cmd(&["invariants", &file]), &[]);
    let out = with.stdout();
    // Not only the same, but right: the kernel's answers (Linux's errnos;
    // on other kernels the differential above is the check).
    let everywhere = [
        "munmap freed again: ok(0)",
        "map fixed onto freed: ok(true)",
        "map fixed data: 42 0",
        "after write, fresh data: true",
        "map O_WRONLY: EACCES",
        "after write: 0xee",
        "other file same fd: true 0x5a",
    ];
    #[cfg(target_os = "linux")]
    let linux = [
        "munmap unaligned: EINVAL",
        "munmap zero length: EINVAL",
        "mprotect freed: ENOMEM",
        "madvise freed: ENOMEM",
        "msync freed: ENOMEM",
        "mincore freed: ENOMEM",
        "mlock freed: ENOMEM",
        "mremap freed: EFAULT",
        "map noreplace onto freed: ok(true)",
        "partial hole: ENOMEM",
        "partial gone: ENOMEM",
        "map O_PATH: EBADF",
        "mremap whole after madvise: ok",
    ];
    #[cfg(not(target_os = "linux"))]
    let linux: [&str; 0] = [];
    // qemu-user (scripts/arm64-test.sh sets MUNMAPQ_TEST_QEMU) answers
    // madvise on unmapped memory with success, with or without munmapq:
    // the differential above still holds there, this kernel answer cannot.
    let qemu = std::env::var_os("MUNMAPQ_TEST_QEMU").is_some();
    let not_emulated = |e: &&str| !(qemu && e.starts_with("madvise freed"));
    for expected in everywhere.into_iter().chain(linux).filter(not_emulated) {
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
    let [deferred, reused, stale] =
        with.counts([Counter::Deferred, Counter::Reused, Counter::Stale]);
    println!(
        "invariants: {} cases identical with and without munmapq, {} with the kernel's answer checked; {deferred} deferred, {reused} reused, {stale} stale",
        out.lines().count(),
        everywhere.len() + linux.len(),
    );
}

#[test]
fn invariants_hold_with_a_tiny_queue_too() {
    let (_dir, file) = scratch_with_data("invariants-tiny", 64);
    // One page, whatever its size: the queue holds at most one.
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.to_string();
    let with = differential(
        || probe_cmd(&["invariants", &file]),
        &[("MUNMAPQ_MAX_ENTRIES", "1"), ("MUNMAPQ_MAX_BYTES", &page)],
    );
    assert!(with.get(Counter::Flushes) >= 1);
    println!(
        "invariants, 1-entry queue: identical; {} flushes",
        with.get(Counter::Flushes)
    );
}
