//! Closes, unlinks and unmounts (`engine/fds.rs`).

use super::*;

/// A close as the hooks make it: before and after the real call, which
/// closed the descriptors.
fn close(e: &Engine, os: &FakeOs, lo: i32, hi: i32) {
    let c = e.closing(os, lo, hi);
    e.closed(c, true);
}

#[test]
fn a_queued_mapping_is_unmapped_before_its_descriptor_is_closed() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    assert_eq!(os.munmap_count(), 0, "deferred");
    // Another descriptor's close costs nothing and releases nothing.
    close(e, &os, 4, 4);
    assert_eq!(os.munmap_count(), 0);
    close(e, &os, 3, 3);
    assert_eq!(os.mapped(a), None, "unmapped at the close");
    assert_eq!(e.stats.get(Counter::ReleasedAtClose), 1);
}

#[test]
fn a_large_mapping_whose_descriptor_closed_first_is_unmapped_at_its_munmap() {
    let (e, os) = fresh();
    let a = map_large(e, &os, 3, 0);
    close(e, &os, 3, 3);
    // It holds the open file the program closed, whose last close is this
    // munmap (and any lock on it): forgotten.
    assert_eq!(e.stats.get(Counter::Forgotten), 1);
    unmap_large(e, &os, a);
    assert_eq!(os.mapped(a), None, "not deferred");
    assert_eq!(e.stats.get(Counter::Deferred), 0);
}

/// A queued mapping is handed back only to a mmap through the descriptor
/// it was made through: through another, the mmap would get (and keep
/// open) the first one's open file.
#[test]
fn a_queued_mapping_is_reused_only_through_its_own_descriptor() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    // The fake names files by descriptor: 5 is another open of 3's file.
    os.inode.borrow_mut()[5] = 3;
    let b = map(e, &os, 5, 0);
    assert_ne!(b, a, "a fresh mapping through 5");
    assert_eq!(os.mapped(a), Some((3, 0)), "still queued");
    assert_eq!(map(e, &os, 3, 0), a, "reused through 3");
    assert_eq!(e.stats.get(Counter::Reused), 1);
}

#[test]
fn a_small_mapping_whose_descriptor_closed_first_is_forgotten_unasked() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    close(e, &os, 3, 3);
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "its munmap went to the kernel");
    assert_eq!(e.stats.get(Counter::Forgotten), 1);
}

#[test]
fn a_number_whose_close_forgot_a_small_mapping_passes_the_next_whole_file_one() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    close(e, &os, 3, 3);
    unmap(e, &os, a);
    // The next whole small file through 3 passes, uncounted by the payoff.
    let statxs = *os.statxs.borrow();
    let b = map(e, &os, 3, 0);
    assert_eq!(*os.statxs.borrow(), statxs, "passed straight");
    assert_eq!(e.stats.get(Counter::PassPayoff), 1);
    unmap(e, &os, b);
    // A window past the start is engaged as ever.
    let c = map(e, &os, 3, PAGE as i64 * 4);
    assert_eq!(*os.statxs.borrow(), statxs + 2, "a miss: two statx");
    // A close of 3 that forgets nothing (the window unmapped, queued,
    // released) lets the next whole small file through the engine.
    unmap(e, &os, c);
    close(e, &os, 3, 3);
    map(e, &os, 3, 0);
    assert_eq!(e.stats.get(Counter::PassPayoff), 1, "engaged again");
}

#[test]
fn close_ranges_release_every_descriptor_in_them() {
    let (e, os) = fresh();
    let (a, b, c) = (map(e, &os, 3, 0), map(e, &os, 6, 0), map(e, &os, 8, 0));
    for x in [a, b, c] {
        unmap(e, &os, x);
    }
    close(e, &os, 4, i32::MAX);
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
        close(e, &os, 3, 3);
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

// What `F_GETFL` said of a descriptor is kept until its close
// (`readonly_fds.rs`): a reuse makes one system call, the `statx`.

#[test]
fn a_reuse_asks_f_getfl_once_per_descriptor() {
    let (e, os) = fresh();
    let a = map_unmap(e, &os, 3, 0);
    assert_eq!(*os.fcntls.borrow(), 1);
    for _ in 0..3 {
        assert_eq!(map_unmap(e, &os, 3, 0), a, "reused");
    }
    map_unmap(e, &os, 3, PAGE as i64);
    assert_eq!(
        *os.fcntls.borrow(),
        1,
        "not asked again for that descriptor"
    );
    map_unmap(e, &os, 4, 0);
    assert_eq!(*os.fcntls.borrow(), 2, "another descriptor is asked");
    assert_eq!(e.stats.get(Counter::Reused), 3);
}

#[test]
fn a_close_makes_the_next_mmap_ask_again() {
    let (e, os) = fresh();
    map_unmap(e, &os, 3, 0);
    let c = e.closing(&os, 3, 3);
    // Mapped while the close is under way: not tracked, nothing asked.
    map_unmap(e, &os, 3, 0);
    assert_eq!(*os.fcntls.borrow(), 1);
    e.closed(c, true);
    // The number now names a write-only description of the same file.
    *os.open_mode.borrow_mut() = libc::O_WRONLY;
    let eligible = e.stats.get(Counter::Eligible);
    map_unmap(e, &os, 3, 0);
    assert_eq!(*os.fcntls.borrow(), 2, "asked again");
    assert_eq!(e.stats.get(Counter::Eligible), eligible, "not tracked");
    // A range, and a dup2 onto the number, clear it the same way.
    *os.open_mode.borrow_mut() = libc::O_RDONLY;
    map_unmap(e, &os, 5, 0);
    map_unmap(e, &os, 5, 0);
    assert_eq!(*os.fcntls.borrow(), 3);
    let c = e.closing(&os, 4, i32::MAX);
    e.closed(c, true);
    map_unmap(e, &os, 5, 0);
    assert_eq!(*os.fcntls.borrow(), 4);
}

#[test]
fn the_same_number_on_another_file_asks_again() {
    let (e, os) = fresh();
    map_unmap(e, &os, 3, 0);
    // The number 3 reused for another file by a close munmapq did not see.
    let other = crate::fake::Traced {
        result: 0x4000_0000,
        file: Some(crate::file::FileFacts {
            dev: 1,
            ino: 99,
            mnt: 1,
            nlink: 1,
            name: 0,
            stamp: FileStamp::default(),
        }),
    };
    let os2: FakeOs = FakeOs {
        traced: Some(other),
        ..FakeOs::default()
    };
    map(e, &os2, 3, 0);
    assert_eq!(*os2.fcntls.borrow(), 1, "identity differs: asked");
    map(e, &os2, 3, 0);
    assert_eq!(*os2.fcntls.borrow(), 1, "that file is now known");
}

#[test]
fn a_reopen_munmapq_did_not_see_keeps_the_old_answer() {
    // The residual case the cache cannot see (docs/guarantees.md, Limits):
    // a write-only reopen of the same file on the same number by a close
    // munmapq did not see is still taken for read-only.
    let (e, os) = fresh();
    let a = map_unmap(e, &os, 3, 0);
    *os.open_mode.borrow_mut() = libc::O_WRONLY;
    assert_eq!(map(e, &os, 3, 0), a);
    assert_eq!(*os.fcntls.borrow(), 1);
}

#[test]
fn an_unlink_or_unmount_that_finds_the_table_busy_is_applied_by_its_next_holder() {
    let (e, os) = fresh();
    let (a, b) = (map(e, &os, 3, 0), map(e, &os, 4, 0));
    unmap(e, &os, a);
    unmap(e, &os, b);
    let c = map(e, &os, 3, 2 * PAGE as i64);
    {
        let Taken::Got(_held) = e.table.try_lock(&os) else {
            panic!("free")
        };
        e.unlinking(&os, 1, 3);
        assert_eq!(os.mapped(a), Some((3, 0)), "never waits");
    }
    e.name_call_done(&os);
    assert_eq!((os.mapped(a), os.mapped(b)), (None, Some((4, 0))));
    // The live mapping of the unlinked file is forgotten: its munmap
    // goes to the kernel.
    unmap(e, &os, c);
    assert_eq!(os.mapped(c), None);
    {
        let Taken::Got(_held) = e.table.try_lock(&os) else {
            panic!("free")
        };
        e.unmounting(&os);
    }
    assert_eq!(os.mapped(b), Some((4, 0)), "not until the next holder");
    map(e, &os, 5, 0);
    assert_eq!(os.mapped(b), None);
}

/// The close lane: a number without records takes its place in line and
/// gives it back after the real call; one whose records appear between
/// the hook's look and its place is left to the whole way, its place
/// given back unused (a mapping whose look spans it is only not recorded).
#[test]
fn the_close_lane_takes_no_number_with_records() {
    let (e, os) = fresh();
    let place = e.close_lane(4).expect("no records: the lane");
    assert!(e.close_seq.seen(4).is_none(), "under way");
    e.closed_lane(4, place);
    assert!(e.close_seq.seen(4).is_some(), "ended");
    let a = map(e, &os, 3, 0);
    let seen = e.close_seq.seen(3).unwrap();
    assert!(e.close_lane(3).is_none(), "mapped through 3");
    assert!(!e.close_seq.unchanged(3, seen), "a place was taken");
    assert!(e.close_seq.seen(3).is_some(), "and given back");
    assert!(e.close_lane(crate::close_seq::SEQ_FDS as i32).is_none());
    assert!(e.close_lane(-1).is_none());
    close(e, &os, 3, 3);
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "released by the whole way");
}

/// The plain ways (the hook's call alone) only while nothing is queued,
/// traced or counted.
#[test]
fn calls_are_plain_only_while_the_gate_is_open() {
    let (e, os) = fresh();
    let anon = Mmap::new(
        0,
        PAGE,
        libc::PROT_READ,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    assert!(!e.mmap_is_plain(anon), "counted");
    assert!(!e.munmap_is_plain(usize::MAX - 4 * PAGE, PAGE), "counted");
    // Counted alone: the same plain ways, out of line, each call counted.
    let calls = |e: &Engine| {
        (
            e.stats.get(Counter::MmapCalls),
            e.stats.get(Counter::MunmapCalls),
        )
    };
    let (mmaps, munmaps) = calls(e);
    assert!(e.mmap_is_plain_counted(anon));
    assert!(e.munmap_is_plain_counted(usize::MAX - 4 * PAGE, PAGE));
    assert_eq!(calls(e), (mmaps + 1, munmaps + 1));
    e.count_quietly();
    assert!(!e.mmap_is_plain_counted(anon));
    assert!(e.mmap_is_plain(anon));
    assert!(!e.mmap_is_plain(Mmap::new(
        0,
        2 * PAGE,
        libc::PROT_READ,
        libc::MAP_PRIVATE,
        3,
        0
    )));
    let a = map(e, &os, 3, 0);
    assert!(!e.munmap_is_plain(a, 2 * PAGE), "tracked");
    unmap(e, &os, a);
    assert!(e.may_have_queued());
    assert!(
        !e.mmap_is_plain(anon),
        "queued: a failure may need the retry"
    );
    assert!(!e.munmap_is_plain(usize::MAX - 4 * PAGE, PAGE));
    close(e, &os, 3, 3);
    assert!(!e.may_have_queued(), "released at the close");
    assert!(e.mmap_is_plain(anon));
    assert!(e.munmap_is_plain(usize::MAX - 4 * PAGE, PAGE));
    e.trace_every_call();
    assert!(!e.mmap_is_plain(anon), "traced");
    assert!(!e.munmap_is_plain(usize::MAX - 4 * PAGE, PAGE), "traced");
    assert!(!e.mmap_is_plain_counted(anon), "traced");
}

#[test]
fn a_close_waits_for_a_table_another_thread_keeps_for_milliseconds() {
    use core::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static E: Engine = Engine::new();
    static PAUSES: AtomicUsize = AtomicUsize::new(0);
    let mut os = started(&E);
    let a = map(&E, &os, 3, 0);
    unmap(&E, &os, a);
    // Another thread takes the table and keeps it past the first part of
    // the wait (it unmaps a window of hundreds of MiB, say).
    let Taken::Got(q) = E.table.try_lock_unhooked() else {
        panic!("free")
    };
    q.keep();
    os.meanwhile = Some(|call, _, _| {
        if call == "pause" && PAUSES.fetch_add(1, SeqCst) + 1 == 3000 {
            // SAFETY: the other thread is done with the table.
            unsafe { E.table.force_unlock() };
        }
    });
    close(&E, &os, 3, 3);
    assert_eq!(PAUSES.load(SeqCst), 3000, "waited");
    assert_eq!(os.mapped(a), None, "unmapped before the close returned");
    assert_eq!(E.stats.get(Counter::ReleasedAtClose), 1);
}
