//! A table left held by a longjmp.

use super::*;

std::thread_local! {
    static CELLS: PerThread = const { PerThread::new() };
}

fn test_cells() -> &'static PerThread {
    // SAFETY: the cells live as long as this test's thread, which alone
    // uses them.
    CELLS.with(|c| unsafe { &*(c as *const PerThread) })
}

/// A hook left by a longjmp while it held the table: a handler nested below
/// it passes through; a later call from the same frame recovers the table,
/// unmapping what was queued, and the queue works again.
#[test]
fn lock_abandoned_by_a_longjmp_is_recovered_not_a_nested_one() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        cells: Some(test_cells()),
        ..FakeOs::default()
    };
    start(&E, 16);
    let cells = test_cells();
    let loop_frame = 0x7000_0000;
    cells.frame.set(loop_frame);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 3, 2 * PAGE as i64);
    unmap(&E, &os, a);
    unmap(&E, &os, b);
    assert_eq!(E.queued(&os), Some((2, 4 * PAGE)));
    // A hook takes the table, and a longjmp leaves it.
    let Taken::Got(held) = E.table.try_lock(&os) else {
        panic!("free")
    };
    core::mem::forget(held);
    // A signal handler nested in that hook: a frame well below it.
    cells.frame.set(loop_frame - 4096);
    let c = E
        .mmap(
            &os,
            Mmap::new(0, PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0),
        )
        .unwrap();
    assert_eq!(E.stats.get(Counter::Recovered), 0);
    assert_eq!(E.stats.get(Counter::PassContention), 1);
    assert!(os.mapped(a).is_some(), "still queued, untouched");
    // Back in the loop, at the frame the jump returned to.
    cells.frame.set(loop_frame);
    // (munmap(c) is decided without the lock: c is beyond every tracked
    // address. A call that takes the table recovers it.)
    assert_eq!(E.munmap(&os, c, PAGE), Ok(()));
    assert_eq!(E.stats.get(Counter::Recovered), 0);
    let _e = map(&E, &os, 6, 0);
    assert_eq!(E.stats.get(Counter::Recovered), 1);
    // Queued mappings unmapped by the recovery (the new mapping may since
    // have been placed where one of them was).
    let unmapped = os.munmaps.borrow().clone();
    assert!(unmapped.contains(&(a, 2 * PAGE)), "{unmapped:?}");
    assert!(unmapped.contains(&(b, 2 * PAGE)), "{unmapped:?}");
    let d = map(&E, &os, 5, 0);
    unmap(&E, &os, d);
    assert_eq!(E.queued(&os), Some((1, 2 * PAGE)), "deferring again");
    assert!(os.mapped(d).is_some());
}

/// An abandoned eviction: what it had not begun to unmap is unmapped by the
/// recovery; the run whose unmap was in flight is left alone (it may have
/// been done, and the range handed to someone else since).
#[test]
fn recovery_leaves_the_unmap_in_flight_alone() {
    // A static: a table is too large for a test thread's stack.
    static TABLE: spin::mutex::SpinMutex<Table> = spin::mutex::SpinMutex::new(Table::new());
    let mut t = TABLE.lock();
    let key = |off| FileKey {
        dev: 1,
        ino: 2,
        mnt: 1,
        off,
        len: PAGE,
        name: 0,
        ctx: 0,
        stamp: FileStamp::default(),
    };
    for i in 0..4 {
        let start = BASE + 2 * i * PAGE;
        assert!(t.insert_live(start, PAGE, key(i as u64), 0, 3));
        let slot = t.find(start).unwrap().slot;
        t.enqueue(slot);
    }
    t.mark_all();
    // The second run's unmap is in flight when the jump lands.
    t.unmap_in_flight(BASE + 2 * PAGE, PAGE, || {});
    let mut unmapped = Vec::new();
    t.take_each_unmappable_slot(|s, l| unmapped.push((s, l)));
    assert_eq!(
        unmapped,
        [
            (BASE, PAGE),
            (BASE + 4 * PAGE, PAGE),
            (BASE + 6 * PAGE, PAGE)
        ]
    );
    // Interrupted again: nothing is unmapped twice.
    let mut again = Vec::new();
    t.take_each_unmappable_slot(|s, l| again.push((s, l)));
    assert!(again.is_empty());
}

/// A table left by a longjmp while calls that found it busy lost their
/// records: a queued window one of them may have replaced is left mapped
/// by the recovery, as one a record shows replaced.
#[test]
fn recovery_after_lost_records_leaves_the_queue_mapped() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        cells: Some(test_cells()),
        ..FakeOs::default()
    };
    start(&E, 16);
    let cells = test_cells();
    cells.frame.set(0x7000_0000);
    let a = map(&E, &os, 3, 0);
    unmap(&E, &os, a);
    let Taken::Got(held) = E.table.try_lock(&os) else {
        panic!("free")
    };
    core::mem::forget(held);
    // Meanwhile: anonymous memory over the queued window, among more calls
    // than the record holds.
    let fixed = libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let call = Mmap::new(a, 2 * PAGE, libc::PROT_READ, fixed, -1, 0);
    assert_eq!(os.mmap(call), Ok(a));
    let away = BASE + (1 << 30);
    for i in 0..64 {
        E.dirty.record(away + i * PAGE, away + (i + 1) * PAGE);
    }
    E.dirty.record(a, a + 2 * PAGE);
    E.left_for_next_holder();
    let _b = map(&E, &os, 6, 0);
    assert_eq!(E.stats.get(Counter::Recovered), 1);
    assert_eq!(os.mapped(a), Some((-1, 0)), "the program's, left");
    assert!(!os.munmaps.borrow().contains(&(a, 2 * PAGE)));
}
