//! Fork, a seccomp filter and a lower `RLIMIT_AS` (`process.rs`).

use super::*;

#[test]
fn fork_unmaps_the_queue_first_and_keeps_live_entries_tracked() {
    let (e, os) = fresh();
    let queued = map(e, &os, 3, 0);
    let live = map(e, &os, 3, 2 * PAGE as i64);
    unmap(e, &os, queued);
    assert_eq!(os.mapped(queued), Some((3, 0)), "queued");
    let before = os.munmap_count();
    e.before_fork(&os);
    assert_eq!(os.munmap_count(), before + 1);
    assert_eq!(os.mapped(queued), None, "not copied to the child");
    assert!(
        matches!(e.table.try_lock(&os), Taken::Busy),
        "kept across the fork"
    );
    e.after_fork_in_child(&os);
    assert_eq!(os.munmap_count(), before + 1, "nothing more at the fork");
    assert_eq!(os.mapped(live), Some((3, 2)));
    // The live one is still tracked in the child: its munmap is deferred.
    unmap(e, &os, live);
    assert_eq!(os.mapped(live), Some((3, 2)));
}

#[test]
fn fork_parent_gets_the_table_back_with_live_entries() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    let b = map(e, &os, 3, 2 * PAGE as i64);
    unmap(e, &os, a);
    e.before_fork(&os);
    e.after_fork_in_parent(&os);
    assert_eq!(os.mapped(a), None, "the queue was unmapped at the fork");
    unmap(e, &os, b);
    assert_eq!(os.mapped(b), Some((3, 2)), "queued: still tracked");
    assert_eq!(map(e, &os, 3, 2 * PAGE as i64), b, "and reused");
}

#[test]
fn touching_queued_windows_are_unmapped_at_a_fork_in_one_munmap() {
    let (e, os) = fresh();
    let w: Vec<usize> = (0..4)
        .map(|i| map(e, &os, 3, 2 * i * PAGE as i64))
        .collect();
    assert_eq!((w[1], w[2]), (w[0] + 2 * PAGE, w[0] + 4 * PAGE), "touching");
    // w[0] and w[1] touch; w[3] is apart from them (w[2] stays live).
    for a in [w[1], w[0], w[3]] {
        unmap(e, &os, a);
    }
    let before = os.munmap_count();
    e.before_fork(&os);
    e.after_fork_in_parent(&os);
    assert_eq!(os.munmap_count(), before + 2);
    assert_eq!(
        (os.mapped(w[0]), os.mapped(w[1]), os.mapped(w[3])),
        (None, None, None)
    );
    assert_eq!(os.mapped(w[2]), Some((3, 4)));
}

#[test]
fn a_copy_no_atfork_handler_hears_of_unmaps_the_queue_and_leaves_the_table_free() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    let b = map(e, &os, 3, 2 * PAGE as i64);
    unmap(e, &os, a);
    e.before_copy(&os);
    assert_eq!(os.mapped(a), None, "unmapped before the copy");
    assert!(matches!(e.table.try_lock(&os), Taken::Got(_)), "not kept");
    unmap(e, &os, b);
    assert_eq!(os.mapped(b), Some((3, 2)), "still tracked, queued");
}

#[test]
fn seccomp_flushes_and_passes_through_for_good() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    let b = map(e, &os, 3, 2 * PAGE as i64);
    unmap(e, &os, a);
    e.stop_for_good(&os);
    assert_eq!(os.mapped(a), None, "flushed");
    assert!(!e.active());
    unmap(e, &os, b);
    assert_eq!(os.mapped(b), None, "passed through");
}

#[cfg(target_os = "linux")]
#[test]
fn a_region_that_grows_down_flushes_and_passes_through_for_good() {
    for addr in [0, 64 << 30] {
        let (e, os) = fresh();
        let a = map(e, &os, 3, 0);
        let b = map(e, &os, 3, 2 * PAGE as i64);
        unmap(e, &os, a);
        assert_eq!(os.mapped(a), Some((3, 0)), "queued");
        let fixed = if addr == 0 { 0 } else { libc::MAP_FIXED };
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_GROWSDOWN | fixed;
        let call = Mmap::new(addr, PAGE, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0);
        assert!(e.mmap(&os, call).is_ok());
        assert_ne!(os.mapped(a), Some((3, 0)), "flushed");
        assert!(!e.active());
        unmap(e, &os, b);
        assert_eq!(os.mapped(b), None, "passed through");
    }
}

#[test]
fn lower_address_space_limit_flushes_and_reuse_respects_it() {
    static E: Engine = Engine::new();
    let mut os = FakeOs {
        usage: Some(Usage {
            size: 64 << 20,
            resident: 8 << 20,
            peak: None,
        }),
        ..FakeOs::default()
    };
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    unmap(&E, &os, a);
    E.address_space_limit_set(&os, true);
    assert_eq!(os.mapped(a), None, "flushed when the limit fell");
    // Queued again under a limit with room; then the limit changes so
    // that a fresh mapping would not fit: the next reuse checks, and makes
    // a fresh mmap (which the kernel would refuse) instead.
    os.as_limit = Some(80 << 20);
    let b = map(&E, &os, 3, 0);
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), Some((3, 0)), "queued");
    // (The fake's size is fixed: 64 MiB, the queued mapping included.)
    os.as_limit = Some((64 << 20) - PAGE);
    E.address_space_limit_set(&os, false);
    let c = map(&E, &os, 3, 0);
    assert_ne!(c, b, "a fresh mmap, not the queued mapping");
    assert_eq!(E.stats.get(Counter::Reused), 0);
    // With room again, the queued mapping is handed back.
    os.as_limit = Some(80 << 20);
    unmap(&E, &os, c);
    let d = map(&E, &os, 3, 0);
    assert!(d == b || d == c, "reused");
    assert_eq!(E.stats.get(Counter::Reused), 1);
}
