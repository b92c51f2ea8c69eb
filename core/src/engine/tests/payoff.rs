//! Small mappings whose reuse is too rare to pay pass straight through
//! (`payoff.rs`): a program reading git's loose objects (open, map the
//! whole file, close, unmap; many files, few read twice) makes no more
//! system calls than without munmapq once the first window is measured.

use super::*;
use crate::payoff::{SMALL, WINDOW};

/// The system calls the fake kernel saw (mmap, munmap, `F_GETFL`, `statx`).
fn syscalls(os: &FakeOs) -> usize {
    *os.mmaps.borrow() + os.munmaps.borrow().total + *os.fcntls.borrow() + *os.statxs.borrow()
}

/// Object `i` read as git reads a loose object: its own file (here a page
/// of its own at offset `i`), through the lowest free descriptor.
fn read_object(e: &Engine, os: &FakeOs, i: usize, len: usize) {
    let fd = 3;
    let off = (i * len) as i64;
    let a = e
        .mmap(
            os,
            Mmap::new(0, len, libc::PROT_READ, libc::MAP_PRIVATE, fd, off),
        )
        .unwrap();
    let c = e.closing(os, fd, fd);
    e.closed(c, true);
    e.munmap(os, a, len).unwrap();
}

#[test]
fn loose_objects_with_rare_reuse_pass_through_at_no_extra_call() {
    let (e, os) = fresh();
    let w = WINDOW as usize;
    // The first window is measured through the engine: an eighth reused.
    for i in 0..w {
        read_object(e, &os, if i % 8 == 7 { i - 1 } else { i }, PAGE);
    }
    // Then one object in 16 read twice in a row.
    let (before, mut reads) = (syscalls(&os), 0);
    for i in w..9 * w {
        read_object(e, &os, i, PAGE);
        reads += 1;
        if i % 16 == 0 {
            read_object(e, &os, i, PAGE);
            reads += 1;
        }
    }
    let made = syscalls(&os) - before;
    // Without munmapq: one mmap and one munmap each.
    assert!(made <= 2 * reads, "{made} system calls for {reads} reads");
    assert!(e.stats.get(Counter::PassPayoff) as usize >= reads - 2 * w);
    let statxs = *os.statxs.borrow();
    assert!(statxs <= w, "{statxs} statx: some after the first window");
}

/// Window `i` of a file kept open (git's packs): mapped and unmapped.
fn read_window(e: &Engine, os: &FakeOs, i: usize, len: usize) {
    let a = e
        .mmap(
            os,
            Mmap::new(
                0,
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                3,
                (i * len) as i64,
            ),
        )
        .unwrap();
    e.munmap(os, a, len).unwrap();
}

#[test]
fn reused_small_windows_and_large_mappings_stay_in_the_queue() {
    let (e, os) = fresh();
    // 8 windows in turn, as git reads a pack in tiny windows.
    for i in 0..4 * WINDOW as usize {
        read_window(e, &os, i % 8, 4 * PAGE);
    }
    assert_eq!(e.stats.get(Counter::PassPayoff), 0);
    assert!(*os.mmaps.borrow() <= 8, "{} mmaps", *os.mmaps.borrow());
    // Distinct large mappings are never passed through unasked.
    let (e, os) = fresh();
    for i in 0..2 * WINDOW as usize {
        read_object(e, &os, i, SMALL + PAGE);
    }
    assert_eq!(e.stats.get(Counter::PassPayoff), 0);
    assert_eq!(e.stats.get(Counter::Eligible) as usize, 2 * WINDOW as usize);
}

#[test]
fn stepping_aside_lets_go_of_small_queued_mappings_and_keeps_large_ones() {
    let (e, _) = fresh();
    // Room for every mapping of the measured window.
    start(e, 1024);
    let os = FakeOs::default();
    // A large mapping queued before: a pack window, say.
    let big = SMALL + PAGE;
    let b = e
        .mmap(
            &os,
            Mmap::new(0, big, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0),
        )
        .unwrap();
    e.munmap(&os, b, big).unwrap();
    // A small one the program still has mapped when the engine turns.
    let held = e
        .mmap(
            &os,
            Mmap::new(0, PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 5, 0),
        )
        .unwrap();
    // Distinct small files, none read twice: the engine steps aside.
    let mut i = 0;
    while !e.payoff.is_aside() {
        read_object(e, &os, i, PAGE);
        i += 1;
    }
    read_object(e, &os, i, PAGE);
    assert_eq!(e.queued(&os), Some((1, big)), "only the large one stays");
    let munmaps = os.munmap_count();
    e.munmap(&os, held, PAGE).unwrap();
    assert_eq!(os.munmap_count(), munmaps + 1, "unmapped, not queued");
    assert_eq!(e.queued(&os), Some((1, big)));
    // The large window is still reused.
    let again = e
        .mmap(
            &os,
            Mmap::new(0, big, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0),
        )
        .unwrap();
    assert_eq!(again, b);
}
