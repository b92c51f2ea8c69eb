//! The engine against a fake address space that counts syscalls.

use super::*;
use crate::config::{Config, System};
use crate::fake::{FakeOs, BASE, NOREPLACE, PAGE, WRITE_ONLY_FD};
use crate::file::FileStamp;
use crate::holder::Taken;
use crate::os::PerThread;
use crate::os::{Errno, Mmap, Usage};
use crate::table::{Evict, FileKey};
use std::vec::Vec;

mod caps;
mod close;
mod context;
mod lost;
mod macos;
mod meanwhile;
mod page_sizes;
mod payoff;
mod process;
mod recovery;
mod truth;

/// The defaults on a stock Linux kernel without RLIMIT_AS.
fn linux_defaults() -> Config {
    Config::defaults(System {
        max_map_count: Some(65530),
        address_space_limit: None,
    })
}

fn start(e: &Engine, max_entries: usize) {
    let mut cfg = linux_defaults();
    cfg.max_entries = max_entries;
    e.start(&cfg, PAGE);
}

/// The fake kernel of most tests, `e` started with a 16-entry queue.
/// A started engine no other test uses (the engines are statics: one is
/// too large for a test thread's stack) and a fake kernel.
fn fresh() -> (&'static Engine, FakeOs) {
    static ENGINES: [Engine; 48] = [const { Engine::new() }; 48];
    static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let e = &ENGINES[NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)];
    let os = started(e);
    (e, os)
}

fn started(e: &Engine) -> FakeOs {
    start(e, 16);
    FakeOs::default()
}

fn map(e: &Engine, os: &FakeOs, fd: i32, off: i64) -> usize {
    e.mmap(
        os,
        Mmap::new(0, 2 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, fd, off),
    )
    .unwrap()
}

/// Unmaps a window [`map`] made (deferred or not: the caller checks).
fn unmap(e: &Engine, os: &FakeOs, a: usize) {
    e.munmap(os, a, 2 * PAGE).unwrap();
}

/// Larger than [`crate::payoff::SMALL`]: a mapping the payoff never lets
/// pass, whose forgetting at its descriptor's close marks nothing (a
/// smaller one marks the number, `engine/fds.rs`).
const LARGE: usize = crate::payoff::SMALL + 2 * PAGE;

/// A mapping of [`LARGE`] bytes of `fd` at `off`.
fn map_large(e: &Engine, os: &FakeOs, fd: i32, off: i64) -> usize {
    e.mmap(
        os,
        Mmap::new(0, LARGE, libc::PROT_READ, libc::MAP_PRIVATE, fd, off),
    )
    .unwrap()
}

/// Unmaps a mapping [`map_large`] made.
fn unmap_large(e: &Engine, os: &FakeOs, a: usize) {
    e.munmap(os, a, LARGE).unwrap();
}

/// A window [`map`]ped and at once [`unmap`]ped: its address.
fn map_unmap(e: &Engine, os: &FakeOs, fd: i32, off: i64) -> usize {
    let a = map(e, os, fd, off);
    unmap(e, os, a);
    a
}

/// The defaults with a byte cap of `max_bytes`.
fn start_with_byte_cap(e: &Engine, max_bytes: usize) {
    let mut cfg = linux_defaults();
    cfg.max_bytes = Some(max_bytes);
    e.start(&cfg, PAGE);
}

#[test]
fn munmap_is_deferred_and_the_mapping_reused() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    unmap(&E, &os, a);
    assert_eq!(os.munmap_count(), 0, "deferred");
    assert_eq!(os.mapped(a), Some((3, 0)), "still mapped");
    assert_eq!(map(&E, &os, 3, 0), a, "reused");
    assert_eq!(*os.mmaps.borrow(), 1, "no second mmap");
    // A different offset or file is a fresh mapping.
    assert_ne!(map(&E, &os, 3, PAGE as i64), a);
    assert_ne!(map(&E, &os, 4, 0), a);
    assert_eq!(E.stats.get(Counter::Reused), 1);
    assert_eq!(E.stats.get(Counter::Deferred), 1);
}

#[test]
fn ineligible_calls_pass_through() {
    static E: Engine = Engine::new();
    let os = started(&E);
    // Writable, shared, anonymous, write-only fd: all untracked.
    for (prot, flags, fd) in [
        (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE, 3),
        (libc::PROT_READ, libc::MAP_SHARED, 3),
        (libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        (libc::PROT_READ, libc::MAP_PRIVATE, WRITE_ONLY_FD),
    ] {
        let a = E.mmap(&os, Mmap::new(0, PAGE, prot, flags, fd, 0)).unwrap();
        assert_eq!(E.munmap(&os, a, PAGE), Ok(()));
        assert_eq!(os.mapped(a), None);
    }
    assert_eq!(os.munmap_count(), 4);
    assert_eq!(E.stats.get(Counter::Deferred), 0);
}

#[test]
fn partial_unmap_really_unmaps_and_untracks() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    assert_eq!(E.munmap(&os, a, PAGE), Ok(()));
    assert_eq!(os.mapped(a), None);
    assert_eq!(os.mapped(a + PAGE), Some((3, 1)));
    // The rest is no longer the tracked mapping: passes through too.
    assert_eq!(E.munmap(&os, a + PAGE, PAGE), Ok(()));
    assert_eq!(os.mapped(a + PAGE), None);
    assert_eq!(os.munmap_count(), 2);
}

#[test]
fn invalid_munmap_reaches_the_kernel() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    assert_eq!(E.munmap(&os, a + 1, PAGE), Err(libc::EINVAL));
    assert_eq!(E.munmap(&os, a, 0), Err(libc::EINVAL));
    assert_eq!(os.mapped(a), Some((3, 0)));
}

#[test]
fn fixed_mapping_over_a_queued_range_unmaps_it_first() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    let r = E.mmap(
        &os,
        Mmap::new(
            a,
            PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE | NOREPLACE,
            5,
            0,
        ),
    );
    assert_eq!(r, Ok(a), "NOREPLACE onto a freed range succeeds");
    assert_eq!(os.munmaps.borrow()[0], (a, 2 * PAGE));
    // The queued mapping is gone: no reuse of a replaced range.
    assert_ne!(map(&E, &os, 3, 0), a);
}

#[test]
fn fixed_mapping_at_address_zero_forgets_what_it_replaced() {
    // The engine tells MAP_FIXED_NOREPLACE only where the kernel has it.
    let kinds: &[i32] = if cfg!(target_os = "linux") {
        &[libc::MAP_FIXED, NOREPLACE]
    } else {
        &[libc::MAP_FIXED]
    };
    for &flags in kinds {
        let (e, os) = fresh();
        let queued = map_unmap(e, &os, 3, 0);
        let live = map(e, &os, 4, 0);
        // Something is queued: the hook's plain way is closed, this is the
        // engine's own.
        assert!(e.may_have_queued());
        let len = queued.max(live) + 2 * PAGE;
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let r = e.mmap(
            &os,
            Mmap::new(
                0,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                anon | flags,
                -1,
                0,
            ),
        );
        if flags == NOREPLACE {
            // The live window is the program's: the kernel refuses.
            assert_eq!(r, Err(libc::EEXIST));
            assert_eq!(os.mapped(queued), None, "the queued one went first");
            continue;
        }
        assert_eq!(r, Ok(0));
        // [0, len) is the program's anonymous memory now: neither window
        // may be handed out, and the live one's munmap is the kernel's.
        let mmaps = *os.mmaps.borrow();
        assert_ne!(map(e, &os, 3, 0), queued, "no reuse of a replaced range");
        assert_eq!(*os.mmaps.borrow(), mmaps + 1);
        unmap(e, &os, live);
        assert_eq!(os.munmaps.borrow().last(), Some(&(live, 2 * PAGE)));
        let q = e.lock(&os).unwrap();
        assert_eq!(q.table.queued(), 0);
    }
}

/// A huge page mapping takes whole huge pages: a queued window past its
/// first small page, inside its first huge one, is released first (Linux
/// rounds the length up to the page size the flags name, or the default).
#[cfg(target_os = "linux")]
#[test]
fn a_fixed_huge_page_mapping_releases_the_whole_huge_pages_it_takes() {
    const HUGE_2M: i32 = 21 << 26;
    for size in [HUGE_2M, 0] {
        let (e, os) = fresh();
        let queued = map_unmap(e, &os, 3, 0);
        let boundary = queued & !((2 << 20) - 1);
        assert!(
            boundary + PAGE <= queued,
            "the window is past the first page"
        );
        let flags = libc::MAP_FIXED
            | libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | libc::MAP_HUGETLB
            | libc::MAP_NORESERVE
            | size;
        let call = Mmap::new(
            boundary,
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        );
        assert_eq!(e.mmap(&os, call), Ok(boundary));
        assert_eq!(os.mapped(queued), None, "unmapped before the call");
        let mmaps = *os.mmaps.borrow();
        map(e, &os, 3, 0);
        assert_eq!(*os.mmaps.borrow(), mmaps + 1, "no reuse of the range");
    }
}

#[test]
fn range_calls_release_queued_and_untrack_live() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 4, 0);
    unmap(&E, &os, a);
    // An mprotect over both: the freed one is really unmapped first (so the
    // kernel can answer ENOMEM as it would), the live one stops being tracked.
    let span = E.span(a.min(b), 4 * PAGE, Effect::Modify);
    let r = E.range_call(&os, &[span], || Ok::<_, Errno>(()));
    assert_eq!(r, Ok(()));
    assert_eq!(os.mapped(a), None);
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), None, "untracked mapping unmapped for real");
}

/// A fake kernel that refuses a fifth page, and `e` started with two
/// windows of two pages queued: `(fd, off)` of the second.
fn four_pages_queued_of_four(e: &Engine, second: (i32, i64)) -> FakeOs {
    let os = FakeOs {
        page_limit: Some(4),
        ..FakeOs::default()
    };
    start(e, 16);
    let a = map(e, &os, 3, 0);
    let b = map(e, &os, second.0, second.1);
    unmap(e, &os, a);
    unmap(e, &os, b);
    os
}

#[test]
fn enomem_flushes_and_retries_once() {
    static E: Engine = Engine::new();
    let os = four_pages_queued_of_four(&E, (4, 0));
    // Four pages queued, limit four: a fresh mapping needs the queue gone.
    let c = map(&E, &os, 5, 0);
    assert!(os.mapped(c).is_some());
    assert_eq!(E.stats.get(Counter::EnomemRetries), 1);
    assert_eq!(E.queued(&os), Some((0, 0)));
    // Without anything queued an ENOMEM stays an ENOMEM.
    let r = E.mmap(
        &os,
        Mmap::new(0, 16 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 6, 0),
    );
    assert_eq!(r, Err(libc::ENOMEM));
}

/// The queue a failed call found is gone by the time the table is taken
/// (a close that found it busy had noted it for its next holder, which
/// unmaps it): the room that freed is the flush's, and the call is made
/// again. The engine of 72152e9 answered ENOMEM.
#[test]
fn enomem_retries_after_taking_the_table_unmapped_the_queue() {
    static E: Engine = Engine::new();
    // Both windows mapped through 3.
    let os = four_pages_queued_of_four(&E, (3, 2 * PAGE as i64));
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        let c = E.closing(&os, 3, 3);
        E.closed(c, true);
    }
    assert_eq!(os.munmap_count(), 0, "noted for the next holder");
    let anon = Mmap::new(
        0,
        2 * PAGE,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    let r = E.mmap(&os, anon);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(E.stats.get(Counter::EnomemRetries), 1);
    assert_eq!(os.munmap_count(), 2, "the queue went at the catch-up");
}

#[test]
fn contention_passes_through_and_is_reconciled() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        // As from a signal handler while the table is held: straight through.
        unmap(&E, &os, a);
        assert_eq!(os.mapped(a), None);
    }
    // The stale live entry is dropped on the next locked call, so a new
    // mapping at `a` is not mistaken for the old one.
    let b = E
        .mmap(
            &os,
            Mmap::new(
                0,
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                7,
                0,
            ),
        )
        .unwrap();
    assert_eq!(b, a);
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), None, "really unmapped, not deferred");
    assert_eq!(E.stats.get(Counter::PassContention), 1);
}

#[test]
fn disabled_engine_only_forwards() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    map_unmap(&E, &os, 3, 0);
    assert_eq!(os.munmap_count(), 1);
    assert_eq!(E.stats.get(Counter::MmapCalls), 0);
}

#[test]
fn mlockall_future_stops_deferral() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 4, 0);
    unmap(&E, &os, a);
    E.lock_all(&os, true, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(os.mapped(a), None, "queue flushed");
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), None, "not deferred while locked");
    E.unlock_all(|| Ok::<_, Errno>(())).unwrap();
    let c = map_unmap(&E, &os, 5, 0);
    assert!(os.mapped(c).is_some(), "deferred again");
}

/// XNU: mlockall and munlockall always fail with ENOSYS
/// (xnu `bsd/kern/kern_mman.c`). A failed mlockall locks nothing, so
/// deferral goes on; the caller sees the kernel's error.
#[test]
fn failing_mlockall_leaves_deferral_on() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    let enosys = || Err::<(), Errno>(libc::ENOSYS);
    assert_eq!(E.lock_all(&os, true, enosys), Err(libc::ENOSYS));
    assert_eq!(os.mapped(a), None, "queue flushed before the call");
    assert_eq!(E.unlock_all(enosys), Err(libc::ENOSYS));
    let b = map_unmap(&E, &os, 4, 0);
    assert!(os.mapped(b).is_some(), "still deferred after ENOSYS");
    assert_eq!(map(&E, &os, 4, 0), b, "and reused");
    unmap(&E, &os, b);
    // In force: a failing mlockall keeps it, a failing munlockall too.
    E.lock_all(&os, true, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(E.lock_all(&os, true, enosys), Err(libc::ENOSYS));
    assert_eq!(E.unlock_all(enosys), Err(libc::ENOSYS));
    let c = map_unmap(&E, &os, 5, 0);
    assert_eq!(os.mapped(c), None, "MCL_FUTURE still in force");
    // A successful mlockall(MCL_CURRENT) ends MCL_FUTURE (Linux).
    E.lock_all(&os, false, || Ok::<_, Errno>(())).unwrap();
    let d = map_unmap(&E, &os, 6, 0);
    assert!(os.mapped(d).is_some(), "deferred again");
}

/// A file rewritten under a queued mapping: the mapping may show the old
/// contents (XNU copy-on-write snapshot, overlayfs copy-up), so it is not
/// handed back but unmapped, and the new mapping is reused normally.
#[test]
fn changed_file_is_not_reused_and_its_stale_mapping_unmapped() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map(&E, &os, 3, 0);
    let other = map(&E, &os, 3, 2 * PAGE as i64);
    unmap(&E, &os, a);
    unmap(&E, &os, other);
    os.rewrite(3);
    let mmaps = *os.mmaps.borrow();
    let b = map(&E, &os, 3, 0);
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "a fresh mmap, not a reuse");
    assert!(
        os.munmaps.borrow().contains(&(a, 2 * PAGE)),
        "stale unmapped"
    );
    assert_eq!(E.stats.get(Counter::Stale), 1);
    assert_eq!(E.stats.get(Counter::Reused), 0);
    assert_eq!(E.queued(&os), Some((1, 2 * PAGE)), "only the other window");
    // The other window, never asked for again, leaves with the queue.
    unmap(&E, &os, b);
    assert_eq!(map(&E, &os, 3, 0), b, "the new mapping is reused");
    E.lock_all(&os, false, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(os.mapped(other), None, "stale window flushed, not leaked");
    assert!(os.mapped(b).is_some(), "the live one stays");
}

#[test]
fn each_munmap_is_counted_once() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start_with_byte_cap(&E, 4 * PAGE);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 3, 2 * PAGE as i64);
    let big = E
        .mmap(
            &os,
            Mmap::new(0, 6 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0),
        )
        .unwrap();
    unmap(&E, &os, a); // deferred
    E.munmap(&os, big, 6 * PAGE).unwrap(); // too large to queue
    let c = map(&E, &os, 5, 0);
    E.munmap(&os, b, PAGE).unwrap(); // part of a mapping
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        unmap(&E, &os, c); // table busy
    }
    let get = |c| E.stats.get(c);
    assert_eq!(get(Counter::MunmapCalls), 4);
    assert_eq!(get(Counter::Deferred), 1);
    assert_eq!(get(Counter::PassNotQueued), 1);
    assert_eq!(get(Counter::PassUntracked), 1);
    assert_eq!(get(Counter::PassContention), 1);
}

#[test]
fn calls_far_from_every_entry_skip_the_lock() {
    static E: Engine = Engine::new();
    let os = started(&E);
    // Nothing tracked: even with the table held, an anonymous munmap is
    // decided without it (no contention, nothing recorded).
    let anon = |e: &Engine| {
        e.mmap(
            &os,
            Mmap::new(
                0,
                16 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            ),
        )
        .unwrap()
    };
    let x = anon(&E);
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        E.munmap(&os, x, 16 * PAGE).unwrap();
    }
    assert_eq!(E.stats.get(Counter::PassContention), 0);
    assert_eq!(E.stats.get(Counter::PassUntracked), 1);
    // A tracked mapping: calls on it take the lock, calls beyond the
    // tracked bound do not.
    let a = map(&E, &os, 3, 0);
    let y = anon(&E);
    assert!(y > a, "the fake kernel maps upwards");
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        E.munmap(&os, y, 16 * PAGE).unwrap();
        assert_eq!(E.stats.get(Counter::PassContention), 0);
        unmap(&E, &os, a);
        assert_eq!(E.stats.get(Counter::PassContention), 1);
    }
    // Once the table is empty again, the bound is empty too.
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, b, PAGE).unwrap();
    assert_eq!(E.tracked_hi.load(Relaxed), 0, "{b:#x}");
}
