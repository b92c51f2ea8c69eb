//! The engine against a fake address space that counts syscalls.

use super::*;
use crate::config::{Config, System};
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
    /// What `usage()` answers: address space, resident.
    usage: Option<Usage>,
    /// Resident bytes per mapped page (the fake's RSS counts mapped pages
    /// at this rate) when `usage` is None and `rss_per_page` is set.
    rss_per_page: Option<usize>,
    map_count: Option<usize>,
    as_limit: Option<usize>,
    can_drop: bool,
    drops: RefCell<usize>,
}

impl FakeOs {
    fn mapped(&self, addr: usize) -> Option<(i32, i64)> {
        self.pages.borrow().get(&(addr / PAGE)).copied()
    }
    fn munmap_count(&self) -> usize {
        self.munmaps.borrow().len()
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

    fn readable_file(&self, fd: i32) -> Option<(u64, u64)> {
        // fd 9 is "open O_WRONLY".
        (fd != 9).then_some((1, fd as u64))
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

    fn map_count(&self) -> Option<usize> {
        self.map_count
    }

    fn address_space_limit(&self) -> Option<usize> {
        self.as_limit
    }

    fn drop_pages(&self, _addr: usize, _len: usize) -> bool {
        *self.drops.borrow_mut() += 1;
        self.can_drop
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
    assert_eq!(E.queued(), Some((2, 4 * PAGE)));
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
    assert_eq!(E.queued(), Some((0, 0)));
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
        let _held = E.table.lock();
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
    assert_eq!(E.queued(), Some((1, 2 * PAGE)));
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
    E.unlock_all();
    let c = map(&E, &os, 5, 0);
    E.munmap(&os, c, 2 * PAGE).unwrap();
    assert!(os.mapped(c).is_some(), "deferred again");
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
        assert!(E.queued().unwrap().1 <= 5 * PAGE);
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
        assert!(E.queued().unwrap().1 <= 1 << 20);
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
    assert!(E.stats.get(Counter::PeakQueued) <= 32);
}
