//! Fork, a seccomp filter and a lower `RLIMIT_AS` (`process.rs`).

use super::*;

#[test]
fn fork_child_unmaps_the_queue_at_its_first_call_and_keeps_live_entries() {
    let (e, os) = fresh();
    let queued = map(e, &os, 3, 0);
    let live = map(e, &os, 3, 2 * PAGE as i64);
    unmap(e, &os, queued);
    e.before_fork(&os);
    assert!(
        matches!(e.table.try_lock(&os), Taken::Busy),
        "kept across the fork"
    );
    let before = os.munmap_count();
    e.after_fork_in_child(&os);
    assert_eq!(os.munmap_count(), before, "nothing unmapped at the fork");
    assert_eq!(os.mapped(queued), Some((3, 0)));
    // The child's first call that takes the table unmaps what the parent
    // had queued: a fresh mapping, not the parent's queued one.
    let other = map(e, &os, 4, 0);
    assert_eq!(other, queued, "the child unmapped the queue: room again");
    assert_eq!(os.mapped(queued), Some((4, 0)));
    assert_eq!(os.mapped(live), Some((3, 2)));
    unmap(e, &os, other);
    // The live one is still tracked: its munmap is deferred.
    unmap(e, &os, live);
    assert_eq!(os.mapped(live), Some((3, 2)));
}

#[test]
fn fork_parent_gets_the_table_back() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    e.before_fork(&os);
    e.after_fork_in_parent(&os);
    assert_eq!(os.mapped(a), Some((3, 0)), "the parent keeps its queue");
    assert_eq!(map(e, &os, 3, 0), a, "and reuses it");
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
