//! A call that finds the table busy passes through and records its range
//! (`crate::dirty`); what the holder does after its drain must leave that
//! range alone: the range may be the program's new mapping (a `MAP_FIXED`
//! another thread made there), which an unmap or a page drop would hit.
//! The fake's `meanwhile` plays that other thread.

use super::*;
use core::sync::atomic::{AtomicBool, Ordering::SeqCst};

#[test]
fn a_flush_leaves_alone_what_another_thread_mapped_meanwhile() {
    static E: Engine = Engine::new();
    // Windows at BASE, +2, +4 pages: the first and the third queued (two
    // runs), the second live.
    const C: usize = BASE + 4 * PAGE;
    fn other_thread(call: &str, addr: usize, _: usize) {
        if call == "munmap" && addr == BASE {
            // While the holder unmaps the first run, a MAP_FIXED over
            // the third passes through.
            E.dirty.record(C, C + 2 * PAGE);
            E.left_for_next_holder();
        }
    }
    let os = FakeOs {
        meanwhile: Some(other_thread),
        ..FakeOs::default()
    };
    start(&E, 16);
    let a: Vec<usize> = (0..3)
        .map(|i| map(&E, &os, 3, 2 * i * PAGE as i64))
        .collect();
    assert_eq!(a, [BASE, BASE + 2 * PAGE, C]);
    unmap(&E, &os, a[0]);
    unmap(&E, &os, a[2]);
    assert_eq!(os.munmap_count(), 0, "both deferred");
    // mlockall flushes everything.
    E.lock_all(&os, false, || Ok(0)).unwrap();
    assert_eq!(
        *os.munmaps.borrow(),
        [(BASE, 2 * PAGE)],
        "the range recorded meanwhile was not unmapped"
    );
    assert!(os.mapped(C).is_some());
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
}

#[test]
fn a_release_leaves_alone_what_another_thread_mapped_meanwhile() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let b = map_unmap(&E, &os, 3, 0);
    let Taken::Got(mut q) = E.table.try_lock(&os) else {
        panic!("table busy")
    };
    // After the holder's drain, the first page of the queued window
    // became someone else's.
    E.dirty.record(b, b + PAGE);
    E.left_for_next_holder();
    let e = q.table.find(b).expect("queued");
    E.unmap_queued(&os, &mut q.table, e, Counter::Released);
    assert_eq!(*os.munmaps.borrow(), [(b + PAGE, PAGE)]);
    assert!(os.mapped(b).is_some());
    assert!(q.table.find(b).is_none());
}

#[test]
fn a_page_drop_leaves_alone_what_another_thread_mapped_meanwhile() {
    static E: Engine = Engine::new();
    static ARMED: AtomicBool = AtomicBool::new(false);
    static HIT: AtomicBool = AtomicBool::new(false);
    static LATE: AtomicBool = AtomicBool::new(false);
    const WIN: usize = 256 << 10;
    const ALL: (usize, usize) = (BASE, BASE + 64 * WIN);
    fn other_thread(call: &str, addr: usize, len: usize) {
        match call {
            // The holder reads RSS before it drops: meanwhile, MAP_FIXED
            // over everything it holds.
            "usage" if LATE.load(SeqCst) && !ARMED.swap(true, SeqCst) => {
                E.dirty.record(ALL.0, ALL.1);
                E.left_for_next_holder();
            }
            "drop" | "munmap" if ARMED.load(SeqCst) && addr < ALL.1 && ALL.0 < addr + len => {
                HIT.store(true, SeqCst)
            }
            _ => {}
        }
    }
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        can_drop: true,
        meanwhile: Some(other_thread),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let mut dropped_while_armed = false;
    for i in 0..64 {
        // Past the budget's 4 MiB floor: this deferral drops pages.
        LATE.store(i >= 24, SeqCst);
        let a = E
            .mmap(
                &os,
                Mmap::new(
                    0,
                    WIN,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    3,
                    (i * WIN) as i64,
                ),
            )
            .unwrap();
        os.touch(a, WIN);
        E.munmap(&os, a, WIN).unwrap();
        dropped_while_armed |= HIT.load(SeqCst);
        // The next holder drains the record: from then on the range is
        // the holder's business again (what it forgot stays mapped).
        if ARMED.load(SeqCst) {
            break;
        }
    }
    assert!(ARMED.load(SeqCst), "the budget read RSS");
    assert!(
        !dropped_while_armed,
        "a drop or unmap hit the range recorded meanwhile"
    );
}

/// A call that changes a queued range in place (mprotect, madvise, mlock)
/// while the table is busy changes munmapq's mapping there, which the
/// program had unmapped: the table's next holder unmaps it, where a
/// replacement's range would only be forgotten, and it is never handed
/// out again.
#[test]
fn a_change_made_while_the_table_was_busy_is_unmapped_by_the_next_holder() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let changed = map_unmap(&E, &os, 3, 0);
    let replaced = map_unmap(&E, &os, 4, 0);
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("table busy")
        };
        for (at, effect) in [(changed, Effect::Change), (replaced, Effect::Modify)] {
            let span = E.span(at, 2 * PAGE, effect);
            assert_eq!(E.range_call(&os, &[span], || Ok::<_, Errno>(0)), Ok(0));
        }
    }
    assert_eq!(os.munmap_count(), 0, "nothing unmapped while busy");
    let mmaps = *os.mmaps.borrow();
    map(&E, &os, 3, 0);
    assert_eq!(
        *os.munmaps.borrow(),
        [(changed, 2 * PAGE)],
        "the changed one, unmapped"
    );
    assert!(
        os.mapped(replaced).is_some(),
        "the replaced one, left to its new owner"
    );
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "no reuse");
    assert_eq!(E.stats.get(Counter::Released), 1);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
}

#[test]
fn a_busy_unmap_of_part_of_a_queued_window_has_the_rest_unmapped() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    // Another thread unmaps the window's first page again (the table is
    // busy): the kernel takes that page, the rest is still munmapq's.
    E.dirty.record(a, a + PAGE);
    os.munmap(a, PAGE).unwrap();
    E.left_for_next_holder();
    map(&E, &os, 4, 0);
    assert_eq!(*os.munmaps.borrow(), [(a, PAGE), (a + PAGE, PAGE)]);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
}

#[test]
fn a_busy_call_whose_holder_let_go_before_its_mark_catches_up_itself() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    // Another thread's unmap found the table busy; by the time it marks
    // its record, the holder has let the table go and looked already.
    E.dirty.record(a, a + PAGE);
    os.munmap(a, PAGE).unwrap();
    E.fell_behind(&os);
    assert_eq!(
        *os.munmaps.borrow(),
        [(a, PAGE), (a + PAGE, PAGE)],
        "applied by the recorder, with no other call"
    );
    assert!(!E.table.behind_after_release());
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
}
