//! Records of busy calls lost (the ring ran full): the holder asks the
//! kernel which queued entries are still munmapq's (`engine/lost.rs`).

use super::*;
use core::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Far above anything the tests map: records there act on no entry.
const AWAY: usize = BASE + (1 << 30);

/// Calls that found the table busy, one more than the ring holds.
fn lose_records(e: &Engine) {
    for i in 0..=64 {
        e.dirty.record(AWAY + i * PAGE, AWAY + (i + 1) * PAGE);
    }
    e.left_for_next_holder();
}

/// A busy call's `MAP_FIXED` of `fd` (-1: anonymous memory) over the
/// window at `addr`, from its page `page` on.
fn replace(os: &FakeOs, addr: usize, fd: i32, page: usize) {
    let flags = libc::MAP_FIXED | libc::MAP_PRIVATE;
    let flags = if fd < 0 {
        flags | libc::MAP_ANONYMOUS
    } else {
        flags
    };
    let at = addr + page * PAGE;
    let call = Mmap::new(at, (2 - page) * PAGE, libc::PROT_READ, flags, fd, 0);
    assert_eq!(os.mmap(call), Ok(at));
}

#[test]
fn a_lost_record_unmaps_what_is_still_munmapqs_and_forgets_the_rest() {
    static E: Engine = Engine::new();
    let os = started(&E);
    // Two windows of one file side by side (one mapping to the kernel),
    // two more files, and one window whose munmap was lost.
    let a = map(&E, &os, 3, 0);
    let a2 = map(&E, &os, 3, 2 * PAGE as i64);
    let b = map(&E, &os, 4, 0);
    let c = map(&E, &os, 5, 0);
    let d = map(&E, &os, 6, 0);
    let live = map(&E, &os, 7, 0);
    let half = map(&E, &os, 10, 0);
    for w in [a, a2, b, c, d, half] {
        unmap(&E, &os, w);
    }
    assert_eq!(a2, a + 2 * PAGE, "merged in the kernel");
    assert_eq!(os.munmap_count(), 0, "all queued");
    // What busy calls did whose records were lost: anonymous memory over
    // the first window, another file at the same offset over `b`, `c`'s
    // range unmapped, anonymous memory over the second page of `half`.
    replace(&os, a, -1, 0);
    replace(&os, b, 8, 0);
    os.munmap(c, 2 * PAGE).unwrap();
    replace(&os, half, -1, 1);
    lose_records(&E);
    // The next holder: a mapping of the first window is no reuse.
    let mmaps = *os.mmaps.borrow();
    let again = map(&E, &os, 3, 0);
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "a fresh mapping");
    assert_eq!(os.mapped(again), Some((3, 0)));
    assert_eq!(E.stats.get(Counter::Reused), 0);
    assert_eq!(os.mapped(a), Some((-1, 0)), "the program's, left");
    assert_eq!(os.mapped(b), Some((8, 0)), "the program's, left");
    assert_eq!(os.mapped(half + PAGE), Some((-1, 0)), "the program's, left");
    // Still munmapq's: unmapped (after the lost munmap of `c`).
    let munmaps = os.munmaps.borrow();
    let ours = [(a2, 2 * PAGE), (d, 2 * PAGE), (half, PAGE)];
    assert_eq!(&munmaps[1..], ours);
    assert_eq!(*os.region_reads.borrow(), 1);
    assert_eq!(E.stats.get(Counter::LostRecords), 1);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 4);
    assert_eq!(E.stats.get(Counter::Released), 2);
    drop(munmaps);
    // The live mapping's munmap goes to the kernel (it may have been
    // replaced too).
    unmap(&E, &os, live);
    assert_eq!(os.mapped(live), None);
    assert_eq!(os.munmap_count(), 5);
}

#[test]
fn a_lost_record_where_the_mappings_cannot_be_read_stops_queueing() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        regions_unknown: true,
        ..started(&E)
    };
    let a = map_unmap(&E, &os, 3, 0);
    replace(&os, a, -1, 0);
    lose_records(&E);
    let b = map(&E, &os, 3, 0);
    assert_ne!(b, a, "no reuse");
    assert_eq!(os.mapped(a), Some((-1, 0)), "the program's, left");
    assert!(!E.active(), "stopped");
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), None, "passed through");
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
    assert_eq!(*os.munmaps.borrow(), [(b, 2 * PAGE)]);
}

#[test]
fn a_lost_record_where_the_kernel_names_the_file_by_another_device_stops_queueing() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        region_dev: 2,
        ..started(&E)
    };
    let a = map_unmap(&E, &os, 3, 0);
    lose_records(&E);
    map(&E, &os, 4, 0);
    assert_eq!(os.mapped(a), Some((3, 0)), "left: it cannot be told");
    assert!(!E.active(), "stopped");
    assert_eq!(os.munmap_count(), 0);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 1);
}

#[test]
fn reads_cut_short_that_judge_a_window_each_go_on_to_the_end() {
    static E: Engine = Engine::new();
    static LOSING: AtomicBool = AtomicBool::new(false);
    // Another thread that makes more calls than the ring holds (the last
    // is lost) each time the holder unmaps a window.
    fn other_thread(call: &str, _: usize, _: usize) {
        if call == "munmap" && LOSING.load(SeqCst) {
            lose_records(&E);
        }
    }
    start_with_byte_cap(&E, 64 << 20);
    let os = FakeOs {
        meanwhile: Some(other_thread),
        ..FakeOs::default()
    };
    // Larger than the payoff lets pass: six windows, no reuse.
    let windows: Vec<usize> = (0..6)
        .map(|fd| {
            let a = map_large(&E, &os, 3 + fd, 0);
            unmap_large(&E, &os, a);
            a
        })
        .collect();
    assert_eq!(*os.munmaps.borrow(), [], "all queued");
    lose_records(&E);
    LOSING.store(true, SeqCst);
    map(&E, &os, 20, 0);
    LOSING.store(false, SeqCst);
    // Each read was cut short after it unmapped a window, and the next went
    // on from there (a seventh found none left): every window unmapped,
    // none forgotten, and queueing goes on.
    let mut munmaps = os.munmaps.borrow().to_vec();
    munmaps.sort();
    let all: Vec<_> = windows.iter().map(|&w| (w, LARGE)).collect();
    assert_eq!(munmaps, all);
    assert_eq!(*os.region_reads.borrow(), 7);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 0);
    assert_eq!(E.stats.get(Counter::Released), 6);
    assert!(E.active(), "still queueing");
}

#[test]
fn calls_made_while_the_holder_reads_the_mappings_leave_the_queue_to_be_unmapped_before_a_fork() {
    static E: Engine = Engine::new();
    static CALLING: AtomicBool = AtomicBool::new(false);
    // Another thread that keeps calling (a munmap of its own mapping,
    // which finds the table busy) while the holder reads the mappings.
    fn other_thread(call: &str, _: usize, _: usize) {
        if call == "regions" && CALLING.load(SeqCst) {
            E.dirty.record(AWAY, AWAY + PAGE);
            E.left_for_next_holder();
        }
    }
    let os = FakeOs {
        meanwhile: Some(other_thread),
        ..started(&E)
    };
    let a = map_unmap(&E, &os, 3, 0);
    assert_eq!(os.mapped(a), Some((3, 0)), "queued");
    // The ring ran full while another holder had the table (a fork's).
    lose_records(&E);
    CALLING.store(true, SeqCst);
    // The prepare handler's holder answers the loss, then unmaps the queue.
    E.before_fork(&os);
    CALLING.store(false, SeqCst);
    // The calls made during its read found room in the ring: none was
    // lost, so no read was cut short and the window was judged munmapq's.
    assert_eq!(os.mapped(a), None, "not copied to the child");
    assert_eq!(*os.munmaps.borrow(), [(a, 2 * PAGE)]);
    assert_eq!(*os.region_reads.borrow(), 1);
    assert_eq!(E.stats.get(Counter::ForgottenQueued), 0);
    assert_eq!(E.stats.get(Counter::Released), 1);
    assert!(E.active(), "still queueing");
    E.after_fork_in_child(&os);
    assert_eq!(os.mapped(a), None, "the child finds it unmapped");
}

#[test]
fn a_replacement_recorded_beside_a_loss_is_still_left_alone_by_the_answer() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    // Busy calls over the queued window: a MAP_FIXED of the same file at
    // the same offset over its first page (the kernel's list cannot tell
    // it from the window), recorded, and anonymous memory over its
    // second, whose record was lost.
    replace(&os, a, 3, 0);
    E.dirty.record(a, a + PAGE);
    replace(&os, a, -1, 1);
    lose_records(&E);
    // The next holder frees the other records before it reads the
    // mappings, but keeps that one, which keeps the answer's unmap off the
    // program's mapping; the rest, anonymous, is the program's too.
    map(&E, &os, 4, 0);
    assert_eq!(os.mapped(a), Some((3, 0)), "the program's, left");
    assert_eq!(os.mapped(a + PAGE), Some((-1, 0)), "the program's, left");
    assert_eq!(os.munmap_count(), 0);
    assert!(!E.dirty.pending(), "all applied after the answer");
    assert!(E.active(), "still queueing");
}

/// A replacement recorded before the window it lands on was mapped (the
/// program's `MAP_FIXED` at an address the kernel then gave another
/// thread's mmap) may reach the kernel only while the answer unmaps: it is
/// kept in the record, whose range the answer's unmaps leave alone.
#[test]
fn a_replacement_recorded_before_its_window_was_mapped_keeps_the_answer_off_its_range() {
    use core::sync::atomic::{AtomicPtr, AtomicUsize};
    static E: Engine = Engine::new();
    static AT: AtomicUsize = AtomicUsize::new(0);
    static OS: AtomicPtr<FakeOs> = AtomicPtr::new(core::ptr::null_mut());
    // The busy MAP_FIXED lands just before the holder unmaps there.
    fn other_thread(call: &str, at: usize, _: usize) {
        let a = AT.load(SeqCst);
        if call == "munmap" && a != 0 && at == a {
            AT.store(0, SeqCst);
            // SAFETY: the test's fake, leaked below, lives to the end.
            replace(unsafe { &*OS.load(SeqCst) }, a, -1, 0);
        }
    }
    let os: &'static FakeOs = Box::leak(Box::new(FakeOs {
        meanwhile: Some(other_thread),
        ..started(&E)
    }));
    OS.store(os as *const FakeOs as *mut FakeOs, SeqCst);
    // The address the next window takes, freed again.
    let probe = map(&E, os, 9, 0);
    E.munmap(os, probe, 2 * PAGE).unwrap();
    let _ = map(&E, os, 9, 0);
    E.munmap(os, probe, 2 * PAGE).unwrap();
    // The call is recorded first, then the window is mapped and queued.
    E.dirty.record(BASE, BASE + (1 << 20));
    let w = map_unmap(&E, os, 3, 0);
    lose_records(&E);
    AT.store(w, SeqCst);
    map(&E, os, 4, 0);
    if AT.swap(0, SeqCst) != 0 {
        replace(os, w, -1, 0);
    }
    assert_eq!(os.mapped(w), Some((-1, 0)), "the program's, left");
}
