//! The engine against a fake address space that counts syscalls.

use super::*;
use crate::config::{Config, System};
use crate::file::{FileFacts, FileStamp};
use crate::holder::Taken;
use crate::os::{PerThread, SignalStack};
use crate::sizing::Usage;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::vec::Vec;

const PAGE: usize = 4096;
#[cfg(target_os = "linux")]
const NOREPLACE: i32 = libc::MAP_FIXED_NOREPLACE;
/// macOS has no MAP_FIXED_NOREPLACE; the fake kernel only needs a bit.
#[cfg(not(target_os = "linux"))]
const NOREPLACE: i32 = 0x0010_0000;
const BASE: usize = 0x10_0000;

/// Page-granular fake of the kernel's view: page -> (fd, file page) or anon.
#[derive(Default)]
struct FakeOs {
    pages: RefCell<BTreeMap<usize, (i32, i64)>>,
    mmaps: RefCell<usize>,
    munmaps: RefCell<Vec<(usize, usize)>>,
    /// Fails mmap with ENOMEM once this many pages are mapped.
    page_limit: Option<usize>,
    /// How many times each fd's file was rewritten (its fstat stamp).
    rewrites: RefCell<BTreeMap<i32, i64>>,
    /// What `usage()` answers: address space, resident.
    usage: Option<Usage>,
    /// Resident bytes per mapped page (the fake's RSS counts mapped pages
    /// at this rate) when `usage` is None and `rss_per_page` is set.
    rss_per_page: Option<usize>,
    map_count: Option<usize>,
    /// What `max_map_count()` answers (`vm.max_map_count`).
    max_map_count: Option<usize>,
    as_limit: Option<usize>,
    can_drop: bool,
    drops: RefCell<usize>,
    /// The test thread's cells, where a test gives it some.
    cells: Option<&'static PerThread>,
}

impl FakeOs {
    fn mapped(&self, addr: usize) -> Option<(i32, i64)> {
        self.pages.borrow().get(&(addr / PAGE)).copied()
    }
    fn munmap_count(&self) -> usize {
        self.munmaps.borrow().len()
    }
    /// Another process writes the file behind `fd`: its ctime moves.
    fn rewrite(&self, fd: i32) {
        *self.rewrites.borrow_mut().entry(fd).or_default() += 1;
    }
}

impl Os for FakeOs {
    fn mmap(
        &self,
        addr: usize,
        len: usize,
        _p: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno> {
        *self.mmaps.borrow_mut() += 1;
        let n = len.div_ceil(PAGE);
        let mut pages = self.pages.borrow_mut();
        if self.page_limit.is_some_and(|l| pages.len() + n > l) {
            return Err(libc::ENOMEM);
        }
        let first = if flags & (libc::MAP_FIXED | NOREPLACE) != 0 {
            let first = addr / PAGE;
            if flags & NOREPLACE != 0 && (first..first + n).any(|p| pages.contains_key(&p)) {
                return Err(libc::EEXIST);
            }
            first
        } else {
            let mut first = BASE / PAGE;
            while (first..first + n).any(|p| pages.contains_key(&p)) {
                first += 1;
            }
            first
        };
        for i in 0..n {
            pages.insert(first + i, (fd, off / PAGE as i64 + i as i64));
        }
        Ok(first * PAGE)
    }

    fn max_map_count(&self) -> Option<usize> {
        self.max_map_count
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        if !addr.is_multiple_of(PAGE) || len == 0 {
            return Err(libc::EINVAL);
        }
        self.munmaps.borrow_mut().push((addr, len));
        let mut pages = self.pages.borrow_mut();
        for p in addr / PAGE..(addr + len).div_ceil(PAGE) {
            pages.remove(&p);
        }
        Ok(())
    }

    fn readable_file(&self, fd: i32) -> Option<FileFacts> {
        // fd 9 is "open O_WRONLY".
        let ctime_nsec = self.rewrites.borrow().get(&fd).copied().unwrap_or(0);
        (fd != 9).then_some(FileFacts {
            dev: 1,
            ino: fd as u64,
            stamp: FileStamp {
                size: 2 * PAGE as i64,
                ctime_nsec,
                ..FileStamp::default()
            },
        })
    }

    fn usage(&self) -> Option<Usage> {
        self.usage.or_else(|| {
            let pages = self.pages.borrow().len();
            self.rss_per_page.map(|r| Usage {
                size: pages * PAGE,
                resident: pages * r,
            })
        })
    }

    /// `map_count` is the program's own mappings; the fake's are added as
    /// the kernel counts them (one per run of pages contiguous in address
    /// and in the same file), so queued mappings count, as they do.
    fn map_count(&self) -> Option<usize> {
        let pages = self.pages.borrow();
        let mut runs = 0;
        let mut prev: Option<(usize, (i32, i64))> = None;
        for (&p, &(fd, off)) in pages.iter() {
            let joins =
                prev.is_some_and(|(q, (pfd, poff))| q + 1 == p && pfd == fd && poff + 1 == off);
            if !joins {
                runs += 1;
            }
            prev = Some((p, (fd, off)));
        }
        self.map_count.map(|c| c + runs)
    }

    fn address_space_limit(&self) -> Option<usize> {
        self.as_limit
    }

    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        *self.drops.borrow_mut() += 1;
        self.can_drop
    }

    fn thread_cells(&self) -> Option<&'static PerThread> {
        self.cells
    }

    /// One thread.
    fn this_thread(&self) -> usize {
        1
    }

    fn signal_stack(&self) -> SignalStack {
        SignalStack::Elsewhere
    }
}

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

fn map(e: &Engine, os: &FakeOs, fd: i32, off: i64) -> usize {
    e.mmap(os, 0, 2 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, fd, off)
        .unwrap()
}

#[test]
fn munmap_is_deferred_and_the_mapping_reused() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    assert_eq!(E.munmap(&os, a, 2 * PAGE), Ok(()));
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
    let os = FakeOs::default();
    start(&E, 16);
    // Writable, shared, anonymous, write-only fd: all untracked.
    for (prot, flags, fd) in [
        (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE, 3),
        (libc::PROT_READ, libc::MAP_SHARED, 3),
        (libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        (libc::PROT_READ, libc::MAP_PRIVATE, 9),
    ] {
        let a = E.mmap(&os, 0, PAGE, prot, flags, fd, 0).unwrap();
        assert_eq!(E.munmap(&os, a, PAGE), Ok(()));
        assert_eq!(os.mapped(a), None);
    }
    assert_eq!(os.munmap_count(), 4);
    assert_eq!(E.stats.get(Counter::Deferred), 0);
}

#[test]
fn partial_unmap_really_unmaps_and_untracks() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
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
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    assert_eq!(E.munmap(&os, a + 1, PAGE), Err(libc::EINVAL));
    assert_eq!(E.munmap(&os, a, 0), Err(libc::EINVAL));
    assert_eq!(os.mapped(a), Some((3, 0)));
}

#[test]
fn fixed_mapping_over_a_queued_range_unmaps_it_first() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    let r = E.mmap(
        &os,
        a,
        PAGE,
        libc::PROT_READ,
        libc::MAP_PRIVATE | NOREPLACE,
        5,
        0,
    );
    assert_eq!(r, Ok(a), "NOREPLACE onto a freed range succeeds");
    assert_eq!(os.munmaps.borrow()[0], (a, 2 * PAGE));
    // The queued mapping is gone: no reuse of a replaced range.
    assert_ne!(map(&E, &os, 3, 0), a);
}

#[test]
fn range_calls_release_queued_and_untrack_live() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    // An mprotect over both: the freed one is really unmapped first (so the
    // kernel can answer ENOMEM as it would), the live one stops being tracked.
    let span = E.span(a.min(b), 4 * PAGE, Effect::Modify);
    let r = E.range_call(&os, &[span], || Ok::<_, Errno>(()));
    assert_eq!(r, Ok(()));
    assert_eq!(os.mapped(a), None);
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert_eq!(os.mapped(b), None, "untracked mapping unmapped for real");
}

#[test]
fn full_queue_evicts_oldest_and_merges_touching_ranges() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 3);
    // Five windows side by side; the middle one stays mapped.
    let a: Vec<usize> = (0..5)
        .map(|i| map(&E, &os, 3, 2 * i * PAGE as i64))
        .collect();
    for i in [0, 1, 3] {
        E.munmap(&os, a[i], 2 * PAGE).unwrap();
    }
    assert_eq!(os.munmap_count(), 0);
    // The fourth does not fit under 3: the oldest (a0) goes with the queued
    // window touching it (a1) in one munmap; a3 is not touching (a2 is
    // live) and stays.
    E.munmap(&os, a[4], 2 * PAGE).unwrap();
    assert_eq!(os.munmaps.borrow().clone(), [(a[0], 4 * PAGE)]);
    assert_eq!(E.queued(&os), Some((2, 4 * PAGE)));
    assert_eq!(E.stats.get(Counter::PeakQueued), 3, "never above the cap");
    assert_eq!(E.stats.get(Counter::Flushed), 2);
    assert!(os.mapped(a[3]).is_some() && os.mapped(a[2]).is_some());
}

#[test]
fn enomem_flushes_and_retries_once() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        page_limit: Some(4),
        ..FakeOs::default()
    };
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.munmap(&os, b, 2 * PAGE).unwrap();
    // Four pages queued, limit four: a fresh mapping needs the queue gone.
    let c = map(&E, &os, 5, 0);
    assert!(os.mapped(c).is_some());
    assert_eq!(E.stats.get(Counter::EnomemRetries), 1);
    assert_eq!(E.queued(&os), Some((0, 0)));
    // Without anything queued an ENOMEM stays an ENOMEM.
    let r = E.mmap(&os, 0, 16 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 6, 0);
    assert_eq!(r, Err(libc::ENOMEM));
}

#[test]
fn contention_passes_through_and_is_reconciled() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        // As from a signal handler while the table is held: straight through.
        assert_eq!(E.munmap(&os, a, 2 * PAGE), Ok(()));
        assert_eq!(os.mapped(a), None);
    }
    // The stale live entry is dropped on the next locked call, so a new
    // mapping at `a` is not mistaken for the old one.
    let b = E
        .mmap(
            &os,
            0,
            2 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE,
            7,
            0,
        )
        .unwrap();
    assert_eq!(b, a);
    assert_eq!(E.munmap(&os, b, 2 * PAGE), Ok(()));
    assert_eq!(os.mapped(b), None, "really unmapped, not deferred");
    assert_eq!(E.stats.get(Counter::PassContention), 1);
}

#[test]
fn seed_mode_flushes_everything_and_never_reuses() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    let mut cfg = linux_defaults();
    cfg.max_entries = 3;
    cfg.reuse = false;
    cfg.evict = Evict::All;
    E.start(&cfg, PAGE);
    for _ in 0..4 {
        let a = map(&E, &os, 3, 0);
        E.munmap(&os, a, 2 * PAGE).unwrap();
    }
    assert_eq!(*os.mmaps.borrow(), 4, "never reused");
    // The fourth finds the queue full: all three go, then it is queued.
    assert_eq!(E.queued(&os), Some((1, 2 * PAGE)));
    assert_eq!(E.stats.get(Counter::Flushed), 3);
}

#[test]
fn disabled_engine_only_forwards() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    let a = map(&E, &os, 3, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    assert_eq!(os.munmap_count(), 1);
    assert_eq!(E.stats.get(Counter::MmapCalls), 0);
}

#[test]
fn mlockall_future_stops_deferral() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.lock_all(&os, true, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(os.mapped(a), None, "queue flushed");
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert_eq!(os.mapped(b), None, "not deferred while locked");
    E.unlock_all(|| Ok::<_, Errno>(())).unwrap();
    let c = map(&E, &os, 5, 0);
    E.munmap(&os, c, 2 * PAGE).unwrap();
    assert!(os.mapped(c).is_some(), "deferred again");
}

/// XNU: mlockall and munlockall always fail with ENOSYS
/// (xnu `bsd/kern/kern_mman.c`). A failed mlockall locks nothing, so
/// deferral goes on; the caller sees the kernel's error.
#[test]
fn failing_mlockall_leaves_deferral_on() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    let enosys = || Err::<(), Errno>(libc::ENOSYS);
    assert_eq!(E.lock_all(&os, true, enosys), Err(libc::ENOSYS));
    assert_eq!(os.mapped(a), None, "queue flushed before the call");
    assert_eq!(E.unlock_all(enosys), Err(libc::ENOSYS));
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert!(os.mapped(b).is_some(), "still deferred after ENOSYS");
    assert_eq!(map(&E, &os, 4, 0), b, "and reused");
    E.munmap(&os, b, 2 * PAGE).unwrap();
    // In force: a failing mlockall keeps it, a failing munlockall too.
    E.lock_all(&os, true, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(E.lock_all(&os, true, enosys), Err(libc::ENOSYS));
    assert_eq!(E.unlock_all(enosys), Err(libc::ENOSYS));
    let c = map(&E, &os, 5, 0);
    E.munmap(&os, c, 2 * PAGE).unwrap();
    assert_eq!(os.mapped(c), None, "MCL_FUTURE still in force");
    // A successful mlockall(MCL_CURRENT) ends MCL_FUTURE (Linux).
    E.lock_all(&os, false, || Ok::<_, Errno>(())).unwrap();
    let d = map(&E, &os, 6, 0);
    E.munmap(&os, d, 2 * PAGE).unwrap();
    assert!(os.mapped(d).is_some(), "deferred again");
}

/// A file rewritten under a queued mapping: the mapping may show the old
/// contents (XNU copy-on-write snapshot, overlayfs copy-up), so it is not
/// handed back but unmapped, and the new mapping is reused normally.
#[test]
fn changed_file_is_not_reused_and_its_stale_mapping_unmapped() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16);
    let a = map(&E, &os, 3, 0);
    let other = map(&E, &os, 3, 2 * PAGE as i64);
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.munmap(&os, other, 2 * PAGE).unwrap();
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
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert_eq!(map(&E, &os, 3, 0), b, "the new mapping is reused");
    E.lock_all(&os, false, || Ok::<_, Errno>(())).unwrap();
    assert_eq!(os.mapped(other), None, "stale window flushed, not leaked");
    assert!(os.mapped(b).is_some(), "the live one stays");
}

#[test]
fn byte_cap_holds_and_oversized_mappings_are_not_queued() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    let mut cfg = linux_defaults();
    cfg.max_bytes = Some(5 * PAGE);
    E.start(&cfg, PAGE);
    for i in 0..10 {
        let a = map(&E, &os, 3, 2 * i * PAGE as i64);
        E.munmap(&os, a, 2 * PAGE).unwrap();
        assert!(E.queued(&os).unwrap().1 <= 5 * PAGE);
    }
    assert!(E.stats.get(Counter::PeakQueuedBytes) <= 5 * PAGE as u64);
    let big = E
        .mmap(&os, 0, 6 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0)
        .unwrap();
    E.munmap(&os, big, 6 * PAGE).unwrap();
    assert_eq!(
        os.mapped(big),
        None,
        "larger than the byte cap: unmapped now"
    );
}

#[test]
fn long_mappings_that_cost_little_resident_memory_are_queued() {
    static E: Engine = Engine::new();
    // 64 MiB windows of which the program touched little: RSS grows by a
    // page per window mapped, far under the 4 MiB floor of the budget.
    let os = FakeOs {
        usage: Some(Usage {
            size: 200 << 20,
            resident: 20 << 20,
        }),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 64 << 20;
    for i in 0..8 {
        let a = E
            .mmap(
                &os,
                0,
                win,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                3,
                i * win as i64,
            )
            .unwrap();
        E.munmap(&os, a, win).unwrap();
    }
    assert_eq!(E.stats.get(Counter::Deferred), 8);
    assert_eq!(os.munmap_count(), 0);
}

#[test]
fn resident_budget_evicts_when_the_queue_holds_too_much() {
    static E: Engine = Engine::new();
    // Every mapped page is resident: the queue's cost is its length. The
    // budget is the 4 MiB floor; the queue must stay near it.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 256 << 10;
    for i in 0..64 {
        let a = E
            .mmap(
                &os,
                0,
                win,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                3,
                i * win as i64,
            )
            .unwrap();
        E.munmap(&os, a, win).unwrap();
    }
    let peak = E.stats.get(Counter::PeakQueuedBytes) as usize;
    // The budget (4 MiB floor) plus one step (half of it) unmeasured.
    assert!(peak <= (4 << 20) + (2 << 20), "peak {peak}");
    assert!(E.stats.get(Counter::Flushes) > 0);
}

#[test]
fn resident_budget_drops_pages_and_keeps_the_mappings() {
    static E: Engine = Engine::new();
    // Where pages can be dropped, the queue keeps every mapping for reuse.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        can_drop: true,
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 256 << 10;
    for i in 0..64 {
        let a = E
            .mmap(
                &os,
                0,
                win,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                3,
                i * win as i64,
            )
            .unwrap();
        E.munmap(&os, a, win).unwrap();
    }
    assert_eq!(E.stats.get(Counter::Deferred), 64);
    assert_eq!(os.munmap_count(), 0);
    assert!(*os.drops.borrow() > 0);
    assert!(E.stats.get(Counter::PagesDropped) > 0);
}

#[test]
fn address_space_limit_keeps_the_queue_small() {
    static E: Engine = Engine::new();
    // 12 MiB of room under RLIMIT_AS: at most 1.5 MiB... and 1 MiB at most.
    let os = FakeOs {
        usage: Some(Usage {
            size: 100 << 20,
            resident: 10 << 20,
        }),
        as_limit: Some(112 << 20),
        ..FakeOs::default()
    };
    let mut cfg = linux_defaults();
    cfg.address_space_limit = Some(112 << 20);
    E.start(&cfg, PAGE);
    for i in 0..12 {
        let a = E
            .mmap(
                &os,
                0,
                256 << 10,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                3,
                i << 18,
            )
            .unwrap();
        E.munmap(&os, a, 256 << 10).unwrap();
        assert!(E.queued(&os).unwrap().1 <= 1 << 20);
    }
    assert!(E.stats.get(Counter::Deferred) > 0);
}

#[test]
fn map_count_room_bounds_the_queue() {
    static E: Engine = Engine::new();
    // 65,530 allowed, 65,400 in use: a quarter of the 130 left.
    let os = FakeOs {
        map_count: Some(65_400),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    for i in 0..100 {
        let a = map(&E, &os, 3, 4 * i * PAGE as i64);
        E.munmap(&os, a, 2 * PAGE).unwrap();
    }
    let peak = E.stats.get(Counter::PeakQueued);
    assert!(peak <= 32, "{peak}");
}

#[test]
fn each_munmap_is_counted_once() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    let mut cfg = linux_defaults();
    cfg.max_bytes = Some(4 * PAGE);
    E.start(&cfg, PAGE);
    let a = map(&E, &os, 3, 0);
    let b = map(&E, &os, 3, 2 * PAGE as i64);
    let big = E
        .mmap(&os, 0, 6 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0)
        .unwrap();
    E.munmap(&os, a, 2 * PAGE).unwrap(); // deferred
    E.munmap(&os, big, 6 * PAGE).unwrap(); // too large to queue
    let c = map(&E, &os, 5, 0);
    E.munmap(&os, b, PAGE).unwrap(); // part of a mapping
    {
        let Taken::Got(_held) = E.table.try_lock(&os) else {
            panic!("free")
        };
        E.munmap(&os, c, 2 * PAGE).unwrap(); // table busy
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
    let os = FakeOs::default();
    start(&E, 16);
    // Nothing tracked: even with the table held, an anonymous munmap is
    // decided without it (no contention, nothing recorded).
    let anon = |e: &Engine| {
        e.mmap(
            &os,
            0,
            16 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
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
        E.munmap(&os, a, 2 * PAGE).unwrap();
        assert_eq!(E.stats.get(Counter::PassContention), 1);
    }
    // Once the table is empty again, the bound is empty too.
    let b = map(&E, &os, 4, 0);
    E.munmap(&os, b, PAGE).unwrap();
    assert_eq!(E.tracked_hi.load(Relaxed), 0, "{b:#x}");
}

#[test]
fn max_map_count_bounds_the_queue_from_the_first_deferral() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        max_map_count: Some(3 * 16),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    E.bound_entries_later();
    for i in 0..6 {
        let a = map(&E, &os, 3, 2 * i * PAGE as i64);
        E.munmap(&os, a, 2 * PAGE).unwrap();
        assert!(E.queued(&os).unwrap().0 <= 3);
    }
    assert_eq!(E.stats.get(Counter::PeakQueued), 3);
}

#[test]
fn aged_eviction_keeps_young_windows_touching_an_evicted_run() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start(&E, 16); // the default policy, `aged`, with a 16-entry queue
                   // 16 windows side by side, unmapped oldest first: all queued.
    let w: Vec<usize> = (0..16)
        .map(|i| map(&E, &os, 3, 2 * i * PAGE as i64))
        .collect();
    for (i, &a) in w.iter().enumerate() {
        assert_eq!(
            a,
            w[0] + 2 * i * PAGE,
            "the fake kernel places them in a row"
        );
        E.munmap(&os, a, 2 * PAGE).unwrap();
    }
    assert_eq!(os.munmap_count(), 0);
    // One more: the queue is full. The two oldest must go; their old
    // neighbours (the oldest 7/8, 14 windows) share their munmap; the two
    // youngest, though touching that run, stay (`oldest` would unmap all 16).
    let extra = map(&E, &os, 3, 64 * PAGE as i64);
    E.munmap(&os, extra, 2 * PAGE).unwrap();
    assert_eq!(*os.munmaps.borrow(), [(w[0], 28 * PAGE)]);
    assert_eq!(E.queued(&os), Some((3, 6 * PAGE)));
    let mmaps = *os.mmaps.borrow();
    assert_eq!(
        map(&E, &os, 3, 30 * PAGE as i64),
        w[15],
        "still queued: reused"
    );
    assert_eq!(*os.mmaps.borrow(), mmaps);
}

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
    E.munmap(&os, a, 2 * PAGE).unwrap();
    E.munmap(&os, b, 2 * PAGE).unwrap();
    assert_eq!(E.queued(&os), Some((2, 4 * PAGE)));
    // A hook takes the table, and a longjmp leaves it.
    let Taken::Got(held) = E.table.try_lock(&os) else {
        panic!("free")
    };
    core::mem::forget(held);
    // A signal handler nested in that hook: a frame well below it.
    cells.frame.set(loop_frame - 4096);
    let c = E
        .mmap(&os, 0, PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0)
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
    assert_eq!(E.munmap(&os, d, 2 * PAGE), Ok(()));
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
        off,
        len: PAGE,
        stamp: FileStamp::default(),
    };
    for i in 0..4 {
        let start = BASE + 2 * i * PAGE;
        assert!(t.insert_live(start, PAGE, key(i as u64), 0));
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
