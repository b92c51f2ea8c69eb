//! The engine under macOS's rules (`FakeOs::macos`): no close is seen, a
//! mapping forgets its descriptor (so `F_GETFL` is asked on a hit only),
//! `O_EVTONLY` is path-only, one usage read is one system call, no resident
//! budget, and the hooks that end a file's name or a volume.

use super::*;
use crate::file::xnu;

fn macos() -> FakeOs {
    FakeOs {
        macos: true,
        ..FakeOs::default()
    }
}

/// An engine of its own (16-entry queue) and a fake under macOS's rules.
fn engine() -> (&'static Engine, FakeOs) {
    static ENGINES: [Engine; 12] = [const { Engine::new() }; 12];
    static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let e = &ENGINES[NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)];
    start(e, 16);
    (e, macos())
}

fn fcntls(os: &FakeOs) -> usize {
    *os.fcntls.borrow()
}

#[test]
fn a_miss_asks_no_f_getfl_and_a_hit_asks_one() {
    let (e, os) = engine();
    let a = map(e, &os, 3, 0);
    assert_eq!(
        (fcntls(&os), *os.mmaps.borrow()),
        (0, 1),
        "miss: the kernel's mmap alone"
    );
    unmap(e, &os, a);
    assert_eq!(os.munmap_count(), 0, "deferred");
    assert_eq!(map(e, &os, 3, 0), a, "reused");
    assert_eq!(
        (fcntls(&os), *os.mmaps.borrow()),
        (1, 1),
        "hit: one F_GETFL, no mmap"
    );
    // Another window of the same file: a miss again, still no F_GETFL.
    map(e, &os, 3, 2 * PAGE as i64);
    assert_eq!((fcntls(&os), *os.mmaps.borrow()), (1, 2));
    // Under Linux's rules the first miss asks (and keeps the answer).
    let (l, los) = fresh();
    map(l, &los, 3, 0);
    assert_eq!(fcntls(&los), 1);
}

#[test]
fn a_miss_through_an_unreadable_descriptor_fails_as_the_kernel_does() {
    let (e, os) = engine();
    *os.open_mode.borrow_mut() = libc::O_RDONLY | xnu::O_EVTONLY;
    let r = e.mmap(
        &os,
        Mmap::new(0, 2 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 3, 0),
    );
    assert_eq!(r, Err(libc::EACCES));
    assert_eq!(e.stats.get(Counter::Reused), 0);
    assert_eq!(*os.mmaps.borrow(), 1, "the kernel was asked, and refused");
}

#[test]
fn an_event_only_descriptor_is_not_answered_with_a_queued_mapping() {
    let (e, os) = engine();
    let a = map(e, &os, 3, 0);
    unmap(e, &os, a);
    // The same file, now through a descriptor opened O_EVTONLY: F_GETFL
    // reads "O_RDONLY | O_EVTONLY", the kernel's mmap refuses it.
    *os.open_mode.borrow_mut() = libc::O_RDONLY | xnu::O_EVTONLY;
    let r = e.mmap(
        &os,
        Mmap::new(0, 2 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 3, 0),
    );
    assert_eq!(r, Err(libc::EACCES), "as without munmapq");
    assert_eq!(e.stats.get(Counter::Reused), 0);
    assert_eq!(os.mapped(a), None, "the queued mapping was given up");
    // O_EXEC too; a read-write descriptor may be answered (a private
    // mapping is the same whatever its write access).
    *os.open_mode.borrow_mut() = libc::O_RDWR;
    let b = map(e, &os, 3, 0);
    unmap(e, &os, b);
    *os.open_mode.borrow_mut() = xnu::O_EXEC;
    assert!(e
        .mmap(
            &os,
            Mmap::new(0, 2 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 3, 0),
        )
        .is_err());
    *os.open_mode.borrow_mut() = libc::O_RDWR;
    let c = map(e, &os, 3, 0);
    unmap(e, &os, c);
    assert_eq!(map(e, &os, 3, 0), c, "reused through O_RDWR");
}

#[test]
fn one_usage_read_is_one_call_and_no_budget_is_kept() {
    static ENGINES: [Engine; 2] = [const { Engine::new() }; 2];
    // Every mapped page resident once read, the budget at its 4 MiB floor:
    // 48 windows of 1 MiB, each read, cycled five times (as caps.rs's
    // over_budget test does under Linux's rules).
    for macos in [false, true] {
        let e = &ENGINES[macos as usize];
        let os = FakeOs {
            macos,
            rss_per_page: Some(PAGE),
            peak: Some(1 << 20),
            can_drop: true,
            ..FakeOs::default()
        };
        e.start(&linux_defaults(), PAGE);
        let win = 1 << 20;
        for _ in 0..5 {
            for i in 0..48 {
                let a = e
                    .mmap(
                        &os,
                        Mmap::new(
                            0,
                            win,
                            libc::PROT_READ,
                            libc::MAP_PRIVATE,
                            3,
                            (i * win) as i64,
                        ),
                    )
                    .unwrap();
                os.touch(a, win);
                e.munmap(&os, a, win).unwrap();
            }
        }
        assert_eq!(e.stats.get(Counter::Deferred), 240);
        let (reads, peaks, drops) = (
            *os.reads.borrow(),
            *os.peak_reads.borrow(),
            *os.drops.borrow(),
        );
        if macos {
            assert_eq!(peaks, 0, "the peak comes with the usage read");
            assert_eq!(reads, 1, "read once, at the first deferral");
            assert_eq!(drops, 0, "no drop: it would free nothing");
            assert_eq!(os.munmap_count(), 0, "and nothing unmapped for it");
        } else {
            // Linux: the peak is another read (getrusage) at each read.
            assert!(reads > 1 && peaks > 0 && peaks <= reads, "{reads} {peaks}");
            assert!(drops > 0, "Linux drops over its budget");
        }
    }
}

#[test]
fn unlink_rename_and_unmount_release_under_macos_rules() {
    let (e, os) = engine();
    let (a, b) = (map(e, &os, 3, 0), map(e, &os, 4, 0));
    unmap(e, &os, a);
    let live = map(e, &os, 5, 0);
    // unlink, unlinkat, rename over, renameatx_np, delete: the file's
    // (dev, ino) as lstat/fstatat names it (the fake's inode is the fd).
    e.unlinking(&os, 1, 3);
    assert_eq!(
        os.mapped(a),
        None,
        "the unlinked file's queued mapping is unmapped"
    );
    assert_eq!(e.stats.get(Counter::ReleasedAtClose), 1);
    e.unlinking(&os, 1, 5);
    unmap(e, &os, live);
    assert_eq!(
        os.mapped(live),
        None,
        "forgotten: its munmap went to the kernel"
    );
    unmap(e, &os, b);
    assert_eq!(os.mapped(b), Some((4, 0)), "another file's stays queued");
    // unmount: every queued mapping goes, so none keeps the volume busy.
    e.unmounting(&os);
    assert_eq!(os.mapped(b), None);
    assert_eq!(e.stats.get(Counter::ReleasedAtClose), 2);
    assert_eq!(fcntls(&os), 0, "no F_GETFL on the way");
}

/// An unmount while another thread holds the table waits for it (a
/// bounded while), so that no queued mapping keeps the volume busy when
/// the real call runs: recorded for the next holder, it would fail with
/// EBUSY. The holder lets go during the wait (`meanwhile` at `pause`).
#[test]
fn unmount_waits_for_a_busy_table_rather_than_fail_with_ebusy() {
    static E: Engine = Engine::new();
    start(&E, 16);
    let mut os = macos();
    let a = map(&E, &os, 3, 0);
    unmap(&E, &os, a);
    assert_eq!(os.mapped(a), Some((3, 0)), "queued");
    // Another thread holds the table, and lets go while this one waits.
    let Taken::Got(held) = E.table.try_lock_unhooked() else {
        panic!("free")
    };
    core::mem::forget(held);
    os.meanwhile = Some(|call, _, _| {
        if call == "pause" {
            // SAFETY: the "other thread" of this test is done with it.
            unsafe { E.table.force_unlock() };
        }
    });
    E.unmounting(&os);
    assert_eq!(
        os.mapped(a),
        None,
        "unmapped before the real unmount, not by a later holder"
    );
    assert_eq!(E.stats.get(Counter::ReleasedAtClose), 1);
}

/// Small mappings of files never mapped again pass through here too: the
/// queue would only defer their last-mapping teardowns (`payoff.rs`), and
/// the pass-through asks nothing.
#[test]
fn small_files_never_reused_pass_through() {
    use crate::payoff::WINDOW;
    let (e, os) = engine();
    let n = 4 * WINDOW as usize;
    for i in 0..n {
        let call = Mmap::new(
            0,
            PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            3,
            (i * PAGE) as i64,
        );
        let a = e.mmap(&os, call).unwrap();
        e.munmap(&os, a, PAGE).unwrap();
    }
    let passed = e.stats.get(Counter::PassPayoff) as usize;
    assert!(passed >= n - 2 * WINDOW as usize, "{passed} of {n} passed");
    let statxs = *os.statxs.borrow();
    assert!(statxs <= WINDOW as usize, "{statxs} fstat for {n} maps");
}
