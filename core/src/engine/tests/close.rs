//! Closes, locks, unlinks and unmounts (`engine/fds.rs`).

use super::*;

#[test]
fn a_queued_mapping_is_unmapped_before_its_descriptor_is_closed() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    assert_eq!(os.munmap_count(), 0, "deferred");
    // Another descriptor's close costs nothing and releases nothing.
    e.closing(&os, 4, 4);
    assert_eq!(os.munmap_count(), 0);
    e.closing(&os, 3, 3);
    assert_eq!(os.mapped(a), None, "unmapped at the close");
    assert_eq!(e.stats.get(Counter::ReleasedAtClose), 1);
}

#[test]
fn a_mapping_whose_descriptor_closed_first_is_still_deferred_and_reused() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    e.closing(&os, 3, 3);
    unmap(e, &os, a);
    assert_eq!(os.munmap_count(), 0, "deferred");
    // The same file opened again (the fake names files by descriptor).
    assert_eq!(map(e, &os, 3, 0), a, "reused");
    // That close is not the one the mapping was made through.
    unmap(e, &os, a);
    e.closing(&os, 3, 3);
    assert_eq!(os.mapped(a), Some((3, 0)), "still queued");
}

#[test]
fn a_locked_descriptor_closed_before_its_munmap_is_not_deferred() {
    let (e, os) = fresh();
    e.fd_locked(3);
    e.fd_duplicated(3, 5);
    let a = map(e, &os, 5, 0);
    e.closing(&os, 3, 3);
    e.closing(&os, 5, 5);
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "the lock goes with the munmap");
    // The bits went with the close.
    let b = map(e, &os, 5, 0);
    e.closing(&os, 5, 5);
    unmap(e, &os, b);
    assert_eq!(os.mapped(b), Some((5, 0)), "deferred again");
}

#[test]
fn close_ranges_release_every_descriptor_in_them() {
    let (e, os) = fresh();
    let (a, b, c) = (map(e, &os, 3, 0), map(e, &os, 6, 0), map(e, &os, 8, 0));
    for x in [a, b, c] {
        unmap(e, &os, x);
    }
    e.closing(&os, 4, i32::MAX);
    assert_eq!(os.mapped(a), Some((3, 0)));
    assert_eq!((os.mapped(b), os.mapped(c)), (None, None));
}

#[test]
fn a_close_that_finds_the_table_busy_is_applied_by_its_next_holder() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    {
        let Taken::Got(_held) = e.table.try_lock(&os) else {
            panic!("free")
        };
        e.closing(&os, 3, 3);
        assert_eq!(os.mapped(a), Some((3, 0)), "never waits");
    }
    map(e, &os, 4, 0);
    assert_eq!(os.munmap_count(), 1, "released by the next holder");
}

#[test]
fn unlink_and_unmount_release_queued_mappings() {
    let (e, os) = fresh();
    let (a, b) = (map(e, &os, 3, 0), map(e, &os, 4, 0));
    unmap(e, &os, a);
    unmap(e, &os, b);
    e.unlinking(&os, 1, 3);
    assert_eq!((os.mapped(a), os.mapped(b)), (None, Some((4, 0))));
    e.unmounting(&os);
    assert_eq!(os.mapped(b), None);
}
