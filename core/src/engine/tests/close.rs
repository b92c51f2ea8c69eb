//! Closes, locks, unlinks and unmounts (`engine/fds.rs`).

use super::*;

#[test]
fn a_queued_mapping_is_unmapped_before_its_descriptor_is_closed() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    assert_eq!(os.munmap_count(), 0, "deferred");
    // Another descriptor's close costs nothing and releases nothing.
    E.closing(&os, 4, 4);
    assert_eq!(os.munmap_count(), 0);
    E.closing(&os, 3, 3);
    assert_eq!(os.mapped(a), None, "unmapped at the close");
    assert_eq!(E.stats.get(Counter::ReleasedAtClose), 1);
}

#[test]
fn a_mapping_whose_descriptor_closed_first_is_still_deferred_and_reused() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    E.closing(&os, 3, 3);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    assert_eq!(os.munmap_count(), 0, "deferred");
    // The same file opened again (the fake names files by descriptor).
    assert_eq!(map(&E, &os, 3, 0), a, "reused");
    // That close is not the one the mapping was made through.
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.closing(&os, 3, 3);
    assert_eq!(os.mapped(a), Some((3, 0)), "still queued");
}

#[test]
fn a_locked_descriptor_closed_before_its_munmap_is_not_deferred() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    E.fd_locked(3);
    E.fd_duplicated(3, 5);
    let a = map(&E, &os, 5, 0);
    E.closing(&os, 3, 3);
    E.closing(&os, 5, 5);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    assert_eq!(os.mapped(a), None, "the lock goes with the munmap");
    // The bits went with the close.
    let b = map(&E, &os, 5, 0);
    E.closing(&os, 5, 5);
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert_eq!(os.mapped(b), Some((5, 0)), "deferred again");
}

#[test]
fn close_ranges_release_every_descriptor_in_them() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let (a, b, c) = (map(&E, &os, 3, 0), map(&E, &os, 6, 0), map(&E, &os, 8, 0));
    for x in [a, b, c] {
        E.munmap(&os, x, 2 * PAGE).unwrap();
    }
    E.closing(&os, 4, i32::MAX);
    assert_eq!(os.mapped(a), Some((3, 0)));
    assert_eq!((os.mapped(b), os.mapped(c)), (None, None));
}

#[test]
fn a_close_that_finds_the_table_busy_is_applied_by_its_next_holder() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        E.closing(&os, 3, 3);
        assert_eq!(os.mapped(a), Some((3, 0)), "never waits");
    }
    map(&E, &os, 4, 0);
    assert_eq!(os.munmap_count(), 1, "released by the next holder");
}

#[test]
fn unlink_and_unmount_release_queued_mappings() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let (a, b) = (map(&E, &os, 3, 0), map(&E, &os, 4, 0));
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.munmap(&os, b, 2 * PAGE).unwrap();
    E.unlinking(&os, 1, 3);
    assert_eq!((os.mapped(a), os.mapped(b)), (None, Some((4, 0))));
    E.unmounting(&os);
    assert_eq!(os.mapped(b), None);
}
