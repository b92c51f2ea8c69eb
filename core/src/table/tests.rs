//! The table on its own: indexes, the FIFO, eviction runs.

use super::*;
use spin::mutex::SpinMutex;
use std::vec::Vec;

fn key(off: u64) -> FileKey {
    FileKey {
        dev: 1,
        ino: 2,
        mnt: 1,
        off,
        len: 4096,
        name: 0,
        ctx: 0,
        stamp: FileStamp::default(),
    }
}

fn hit(t: &mut Table, k: &FileKey) -> Option<usize> {
    match t.take_queued(k, Some(3)) {
        Lookup::Hit(a) => Some(a),
        _ => None,
    }
}

/// Pages 1 to `n` (page `i` at `0x1000 * i`) mapped, then the pages in
/// `queued` queued in that order.
fn queue_pages(t: &mut Table, n: usize, queued: &[usize]) {
    for i in 1..=n {
        assert!(t.insert_live(0x1000 * i, 0x1000, key(i as u64), 0, 3));
    }
    for &i in queued {
        let e = t.find(0x1000 * i).unwrap();
        t.enqueue(e.slot);
    }
}

/// What unmapping the marked entries unmaps.
fn evicted(t: &mut Table) -> Vec<(usize, usize)> {
    let mut calls = Vec::new();
    t.evict_marked(|s, l| calls.push((s, l)));
    calls
}

/// The table is too large for a test thread's stack: each test gets a
/// static one.
macro_rules! table {
    () => {{
        static T: SpinMutex<Table> = SpinMutex::new(Table::new());
        T.lock()
    }};
}

/// A hint left behind by an entry that went (removed, its slot taken by
/// another address, or the whole table forgotten) never answers `find`.
#[test]
fn find_never_answers_from_a_stale_hint() {
    let mut t = table!();
    assert!(t.insert_live(0x10000, 0x1000, key(0), 0, 3));
    let gone = t.find(0x10000).unwrap();
    t.remove(gone.slot);
    assert_eq!(t.find(0x10000), None);
    // The freed slot is taken again, at another address.
    assert!(t.insert_live(0x20000, 0x1000, key(1), 0, 3));
    assert_eq!(t.find(0x20000).unwrap().slot, gone.slot);
    assert_eq!(t.find(0x10000), None);
    // clear() leaves the slots' states: the hints must not outlive it.
    t.clear();
    assert_eq!(t.find(0x20000), None);
    // Many entries: each is found, by its hint or by the search.
    for i in 1..=3000usize {
        assert!(t.insert_live(0x100000 + 0x1000 * i, 0x1000, key(i as u64), 0, 3));
    }
    for i in 1..=3000usize {
        assert_eq!(
            t.find(0x100000 + 0x1000 * i).unwrap().start,
            0x100000 + 0x1000 * i
        );
    }
    assert_eq!(t.find(0x100000), None);
}

#[test]
fn find_and_overlap() {
    let mut t = table!();
    assert!(t.insert_live(0x3000, 0x1000, key(0), 0, 3));
    assert!(t.insert_live(0x1000, 0x1000, key(1), 0, 3));
    assert!(t.insert_live(0x5000, 0x2000, key(2), 0, 3));
    assert_eq!(t.find(0x1000).unwrap().len, 0x1000);
    assert!(t.find(0x2000).is_none());
    assert_eq!(t.last_overlap(0x0, 0x8000).unwrap().start, 0x5000);
    assert_eq!(t.last_overlap(0x2000, 0x3001).unwrap().start, 0x3000);
    assert!(t.last_overlap(0x2000, 0x3000).is_none());
    assert_eq!(t.last_overlap(0x6fff, 0x7000).unwrap().start, 0x5000);
    assert!(t.last_overlap(0x7000, 0x9000).is_none());
}

#[test]
fn queue_reuse_and_fifo() {
    let mut t = table!();
    for i in 0..4u64 {
        assert!(t.insert_live(0x10000 + i as usize * 0x1000, 0x1000, key(i), 0, 3));
    }
    for i in [2u64, 0, 3] {
        let e = t.find(0x10000 + i as usize * 0x1000).unwrap();
        t.enqueue(e.slot);
    }
    assert_eq!((t.queued(), t.queued_bytes()), (3, 0x3000));
    assert_eq!(hit(&mut t, &key(0)), Some(0x10000));
    assert_eq!(hit(&mut t, &key(0)), None);
    assert_eq!(hit(&mut t, &key(1)), None, "live, not queued");
    assert_eq!(t.oldest_queued().unwrap().start, 0x12000);
    assert_eq!(t.find(0x10000).unwrap().state, State::Live);
    assert_eq!(t.queued(), 2);
}

#[test]
fn same_window_with_another_stamp_is_stale_not_a_hit() {
    let mut t = table!();
    assert!(t.insert_live(0x1000, 0x1000, key(0), 0, 3));
    let slot = t.find(0x1000).unwrap().slot;
    t.enqueue(slot);
    let mut changed = key(0);
    changed.stamp.ctime_nsec = 1;
    match t.take_queued(&changed, Some(3)) {
        Lookup::Stale(e) => {
            assert_eq!((e.start, e.state), (0x1000, State::Queued));
            t.remove(e.slot);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.take_queued(&changed, Some(3)), Lookup::Miss);
    assert_eq!((t.queued(), t.len()), (0, 0));
}

#[test]
fn eviction_merges_touching_runs() {
    let mut t = table!();
    // Four touching pages, a live one, then two touching pages.
    for i in 0..7usize {
        assert!(t.insert_live(0x1000 * (i + 1), 0x1000, key(i as u64), 0, 3));
    }
    for i in [0usize, 1, 2, 3, 5, 6] {
        let e = t.find(0x1000 * (i + 1)).unwrap();
        t.enqueue(e.slot);
    }
    t.mark_all();
    let mut calls = Vec::new();
    let n = t.evict_marked(|s, l| calls.push((s, l)));
    assert_eq!(n, 6);
    assert_eq!(calls, [(0x1000, 0x4000), (0x6000, 0x2000)]);
    assert_eq!(t.len(), 1);
    assert_eq!(t.queued(), 0);
    assert_eq!(t.find(0x5000).unwrap().state, State::Live);
}

#[test]
fn oldest_run_takes_touching_queued_neighbours() {
    let mut t = table!();
    // Pages 1..=6 mapped; 1,2,3 and 5,6 queued, 4 live.
    queue_pages(&mut t, 6, &[2, 6, 1, 3, 5]);
    // The oldest is page 2: its run is pages 1-3, not 5-6 (4 is live).
    assert_eq!(t.mark_oldest_run(), 3);
    assert_eq!(evicted(&mut t), [(0x1000, 0x3000)]);
    assert_eq!(t.queued(), 2);
    assert_eq!(t.oldest_queued().unwrap().start, 0x6000);
}

#[test]
fn by_age_keeps_young_neighbours_within_the_budget() {
    let mut t = table!();
    // Pages 1..=6 all queued and touching, in this order (oldest first).
    queue_pages(&mut t, 6, &[1, 3, 5, 2, 4, 6]);
    // The oldest three (1, 3, 5) must go; with no budget (one munmap),
    // the neighbours between them (2, 4) join, the youngest (6) stays.
    assert_eq!(t.mark_by_age(0x3000, 1, 0, u64::MAX), 1);
    assert_eq!(evicted(&mut t), [(0x1000, 0x5000)]);
    assert_eq!(t.oldest_queued().unwrap().start, 0x6000);
}

#[test]
fn by_age_with_budget_leaves_younger_neighbours() {
    let mut t = table!();
    queue_pages(&mut t, 6, &[1, 3, 5, 2, 4, 6]);
    // A budget of one munmap per queued entry: 1, 3 and 5 go alone.
    assert_eq!(t.mark_by_age(0x3000, 1, 0, 1), 3);
    assert_eq!(
        evicted(&mut t),
        [(0x1000, 0x1000), (0x3000, 0x1000), (0x5000, 0x1000)]
    );
    assert_eq!(t.queued(), 3);
}

#[test]
fn full_table_refuses_and_slots_recycle() {
    let mut t = table!();
    for i in 0..SLOTS {
        assert!(t.insert_live(i * 0x1000, 0x1000, key(i as u64), 0, 3));
    }
    assert!(t.is_full());
    assert!(!t.insert_live(SLOTS * 0x1000, 0x1000, key(0), 0, 3));
    let e = t.find(0x5000).unwrap();
    t.remove(e.slot);
    assert!(t.insert_live(SLOTS * 0x1000, 0x1000, key(0), 0, 3));
    assert_eq!(t.last_overlap(0, usize::MAX).unwrap().start, SLOTS * 0x1000);
}

#[test]
fn removing_a_queued_entry_unlinks_it() {
    let mut t = table!();
    for i in 0..3usize {
        t.insert_live(0x1000 * (i + 1), 0x1000, key(7), 0, 3);
        let e = t.find(0x1000 * (i + 1)).unwrap();
        t.enqueue(e.slot);
    }
    let mid = t.find(0x2000).unwrap();
    t.remove(mid.slot);
    assert_eq!(t.queued(), 2);
    let a = hit(&mut t, &key(7)).unwrap();
    let b = hit(&mut t, &key(7)).unwrap();
    assert_ne!(a, 0x2000);
    assert_ne!(b, 0x2000);
    assert!(hit(&mut t, &key(7)).is_none());
    assert!(t.oldest_queued().is_none());
}

#[test]
fn a_mapping_made_through_another_mount_is_not_reused() {
    static TABLE: SpinMutex<Table> = SpinMutex::new(Table::new());
    let mut t = TABLE.lock();
    assert!(t.insert_live(0x1000, 0x1000, key(0), 0, 3));
    let slot = t.find(0x1000).unwrap().slot;
    t.enqueue(slot);
    let other = FileKey { mnt: 2, ..key(0) };
    assert_eq!(t.take_queued(&other, Some(3)), Lookup::Miss);
    assert_eq!(hit(&mut t, &key(0)), Some(0x1000));
}

#[test]
fn a_mapping_made_through_another_descriptor_is_reused_only_through_it() {
    static TABLE: SpinMutex<Table> = SpinMutex::new(Table::new());
    let mut t = TABLE.lock();
    assert!(t.insert_live(0x1000, 0x1000, key(0), 0, 3));
    assert!(t.insert_live(0x3000, 0x1000, key(0), 0, 4));
    for start in [0x1000, 0x3000] {
        let slot = t.find(start).unwrap().slot;
        t.enqueue(slot);
    }
    assert_eq!(t.take_queued(&key(0), Some(5)), Lookup::Miss);
    assert_eq!(t.take_queued(&key(0), Some(3)), Lookup::Hit(0x1000));
    // Closed: an orphan is made through no open descriptor.
    let slot = t.find(0x3000).unwrap().slot;
    let live = t.find(0x1000).unwrap().slot;
    t.enqueue(live);
    t.orphan(live);
    t.orphan(slot);
    assert_eq!(t.take_queued(&key(0), Some(3)), Lookup::Miss);
    assert_eq!(t.take_queued(&key(0), Some(4)), Lookup::Miss);
    // Where a mapping holds no open file (macOS), through any.
    assert!(matches!(t.take_queued(&key(0), None), Lookup::Hit(_)));
}

#[test]
fn a_close_finds_the_entries_of_its_descriptor_listed_or_by_a_walk() {
    let mut t = table!();
    for i in 0..8u64 {
        let fd = if i == 5 { 7 } else { NO_FD };
        assert!(t.insert_live(0x1000 * (i as usize + 1), 0x1000, key(i), 0, fd));
    }
    assert!(t.insert_live(0x20000, 0x1000, key(9), 0, 4));
    let e = t.next_with_fd(0, 7, 7).unwrap().1;
    assert_eq!((e.start, e.fd), (0x6000, 7));
    t.orphan(e.slot);
    assert!(t.next_with_fd(0, 7, 7).is_none());
    assert_eq!(t.with_fd, 1);
    let e = t.next_with_fd(0, 0, 10).unwrap().1;
    t.remove(e.slot);
    assert_eq!((t.with_fd, t.fd_overflow), (0, false));
    // More than the list holds: found by a walk, in address order, until
    // none is left.
    for i in 0..FD_SET as u64 + 4 {
        let fd = 3 + (i % 2) as i32;
        assert!(t.insert_live(0x40000 + 0x1000 * i as usize, 0x1000, key(20 + i), 0, fd));
    }
    assert!(t.fd_overflow);
    let mut found = 0;
    let mut pos = 0;
    while let Some((at, e)) = t.next_with_fd(pos, 4, 4) {
        assert_eq!(e.fd, 4);
        t.orphan(e.slot);
        pos = at + 1;
        found += 1;
    }
    assert_eq!(found, (FD_SET + 4) / 2);
    while let Some((_, e)) = t.next_with_fd(0, 3, 3) {
        t.remove(e.slot);
    }
    assert_eq!((t.with_fd, t.fd_overflow), (0, false));
    assert!(t.insert_live(0x30000, 0x1000, key(10), 0, 3));
    assert_eq!(t.next_with_fd(0, 3, 3).unwrap().1.start, 0x30000);
    t.clear();
    assert_eq!(t.with_fd, 0);
}

#[test]
fn a_failed_partial_drop_evicts_the_entry() {
    let mut t = table!();
    // One 4-page window queued; a budget of 2 pages drops part of it.
    assert!(t.insert_live(0x10000, 0x4000, key(0), 0, 3));
    let e = t.find(0x10000).unwrap();
    t.enqueue(e.slot);
    let mut asked = Vec::new();
    let gone = t.cool_by_age(0x2000, 4, 0x1000, &mut |s, l| {
        asked.push((s, l));
        false
    });
    assert_eq!(asked, [(0x10000, 0x2000)], "only part of it was to go");
    assert_eq!(gone, 0x4000, "the whole window is gone");
    let mut k = key(0);
    k.len = 0x4000;
    assert_eq!(
        hit(&mut t, &k),
        None,
        "never handed out after a failed drop"
    );
    assert_eq!(evicted(&mut t), [(0x10000, 0x4000)]);
    assert_eq!((t.queued(), t.warm_bytes(), t.len()), (0, 0, 0));
}
