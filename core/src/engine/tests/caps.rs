//! The caps: what may stay queued, and what a full queue evicts.

use super::*;

/// A process of `size` bytes of address space, `resident` of them resident.
fn usage(size: usize, resident: usize) -> Option<Usage> {
    Some(Usage {
        size,
        resident,
        peak: None,
    })
}

/// Maps window `i` of `win` bytes of fd 3.
fn map_window(e: &Engine, os: &FakeOs, win: usize, i: usize) -> usize {
    e.mmap(
        os,
        Mmap::new(
            0,
            win,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            3,
            (i * win) as i64,
        ),
    )
    .unwrap()
}

/// Maps and unmaps windows 0 to `n - 1` of `win` bytes of fd 3, in turn.
fn cycle_windows(e: &Engine, os: &FakeOs, win: usize, n: usize) {
    for i in 0..n {
        let a = map_window(e, os, win, i);
        e.munmap(os, a, win).unwrap();
    }
}

/// `e` started with the defaults, then [`cycle_windows`].
fn cycle_at_defaults(e: &Engine, os: &FakeOs, win: usize, n: usize) {
    e.start(&linux_defaults(), PAGE);
    cycle_windows(e, os, win, n);
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
fn seed_mode_flushes_everything_and_never_reuses() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    let mut cfg = linux_defaults();
    cfg.max_entries = 3;
    cfg.reuse = false;
    cfg.evict = Evict::All;
    E.start(&cfg, PAGE);
    for _ in 0..4 {
        map_unmap(&E, &os, 3, 0);
    }
    assert_eq!(*os.mmaps.borrow(), 4, "never reused");
    // The fourth finds the queue full: all three go, then it is queued.
    assert_eq!(E.queued(&os), Some((1, 2 * PAGE)));
    assert_eq!(E.stats.get(Counter::Flushed), 3);
}

#[test]
fn byte_cap_holds_and_oversized_mappings_are_not_queued() {
    static E: Engine = Engine::new();
    let os = FakeOs::default();
    start_with_byte_cap(&E, 5 * PAGE);
    for i in 0..10 {
        map_unmap(&E, &os, 3, 2 * i * PAGE as i64);
        assert!(E.queued(&os).unwrap().1 <= 5 * PAGE);
    }
    assert!(E.stats.get(Counter::PeakQueuedBytes) <= 5 * PAGE as u64);
    let big = E
        .mmap(
            &os,
            Mmap::new(0, 6 * PAGE, libc::PROT_READ, libc::MAP_PRIVATE, 4, 0),
        )
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
    // 64 MiB windows of which the program touched little: RSS does not
    // grow, far under the 4 MiB floor of the budget. (Until a drop has
    // measured how much of a queued window is resident, the queue assumes
    // all of it: one drop, which frees nothing, tells it.)
    let os = FakeOs {
        usage: usage(200 << 20, 20 << 20),
        can_drop: true,
        ..FakeOs::default()
    };
    cycle_at_defaults(&E, &os, 64 << 20, 8);
    assert_eq!(E.stats.get(Counter::Deferred), 8);
    assert_eq!(os.munmap_count(), 0);
    assert!(*os.drops.borrow() <= 1, "{} drops", os.drops.borrow());
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
    cycle_at_defaults(&E, &os, 256 << 10, 64);
    let peak = E.stats.get(Counter::PeakQueuedBytes) as usize;
    // The budget (4 MiB floor) plus one step (half of it) unmeasured.
    assert!(peak <= (4 << 20) + (2 << 20), "peak {peak}");
    assert!(E.stats.get(Counter::Flushes) > 0);
}

#[test]
fn a_run_whose_pages_could_not_be_dropped_is_unmapped_never_reused() {
    static E: Engine = Engine::new();
    // A failed drop may leave the run inaccessible (macOS drops by
    // mprotect): it must be unmapped, never handed out again.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        ..FakeOs::default()
    };
    cycle_at_defaults(&E, &os, 256 << 10, 64);
    let failed: Vec<(usize, usize)> = os.failed_drops.borrow().iter().copied().collect();
    assert!(!failed.is_empty(), "the budget asked for drops");
    assert!(os.munmap_count() > 0, "the failed runs were unmapped");
    for i in 0..64 {
        let before = *os.mmaps.borrow();
        let a = map_window(&E, &os, 256 << 10, i);
        if *os.mmaps.borrow() == before {
            assert!(
                !failed.iter().any(|&(s, l)| s <= a && a < s + l),
                "window {i} reused at {a:#x}, in a run whose drop failed"
            );
        }
        E.munmap(&os, a, 256 << 10).unwrap();
    }
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
    cycle_at_defaults(&E, &os, 256 << 10, 64);
    assert_eq!(E.stats.get(Counter::Deferred), 64);
    assert_eq!(os.munmap_count(), 0);
    assert!(*os.drops.borrow() > 0);
    assert!(E.stats.get(Counter::PagesDropped) > 0);
}

#[test]
fn over_budget_the_oldest_windows_lose_their_pages_and_reads_are_rare() {
    static E: Engine = Engine::new();
    // Every mapped page is resident once read; the budget is the 4 MiB
    // floor. 48 windows of 1 MiB cycled ten times, each read after it is
    // mapped.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        can_drop: true,
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 1 << 20;
    let mut max_share = 0;
    for round in 0..10 {
        for i in 0..48 {
            let a = map_window(&E, &os, win, i);
            os.touch(a, win);
            E.munmap(&os, a, win).unwrap();
            let resident = os.usage().unwrap().resident;
            *os.reads.borrow_mut() -= 1; // not the library's
            if round > 0 {
                max_share = max_share.max(resident);
            }
        }
    }
    let deferred = E.stats.get(Counter::Deferred) as usize;
    assert_eq!(deferred, 480);
    assert_eq!(os.munmap_count(), 0, "every mapping stays for reuse");
    // Only the queue is resident here: it stays near its budget (4 MiB,
    // and the window just queued).
    assert!(max_share <= (4 << 20) + win, "resident {max_share}");
    // The youngest windows keep their pages: not all of them are dropped
    // at once (some warm length stays).
    let (_, _) = E.queued(&os).unwrap();
    // RSS is read now and then, not at each deferral.
    let reads = *os.reads.borrow();
    assert!(
        reads * 4 <= deferred,
        "{reads} reads for {deferred} deferrals"
    );
    // At most one drop per deferral, and far fewer than the windows queued.
    let drops = *os.drops.borrow();
    assert!(drops <= deferred, "{drops} drops");
}

#[test]
fn a_window_larger_than_the_budget_keeps_part_of_its_pages() {
    static E: Engine = Engine::new();
    // 8 MiB windows, all read, under the 4 MiB floor: each one queued is
    // over the budget alone; it keeps the 3 MiB the budget allows down to
    // 3/4 of it, the older ones lose everything.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        can_drop: true,
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 8 << 20;
    for i in 0..6 {
        let a = map_window(&E, &os, win, i);
        os.touch(a, win);
        E.munmap(&os, a, win).unwrap();
        if i > 0 {
            let resident = os.usage().unwrap().resident;
            assert!(
                (2 << 20..=4 << 20).contains(&resident),
                "after window {i}: resident {resident}"
            );
        }
    }
    assert_eq!(os.munmap_count(), 0);
}

#[test]
fn the_budget_follows_the_programs_peak_rss() {
    static E: Engine = Engine::new();
    // A program whose RSS was 64 MiB at its peak: the queue may keep a
    // quarter of that warm (16 MiB), where its current RSS alone (the
    // queue's pages) would give the 4 MiB floor.
    let os = FakeOs {
        rss_per_page: Some(PAGE),
        can_drop: true,
        peak: Some(64 << 20),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    let win = 1 << 20;
    for i in 0..48 {
        let a = map_window(&E, &os, win, i);
        os.touch(a, win);
        E.munmap(&os, a, win).unwrap();
    }
    let resident = os.usage().unwrap().resident;
    assert!(
        resident > 8 << 20,
        "resident {resident}: more than the floor"
    );
    assert!(
        resident <= (16 << 20) + win,
        "resident {resident}: within the budget"
    );
}

#[test]
fn address_space_limit_keeps_the_queue_small() {
    static E: Engine = Engine::new();
    // 12 MiB of room under RLIMIT_AS: at most 1.5 MiB... and 1 MiB at most.
    let os = FakeOs {
        usage: usage(100 << 20, 10 << 20),
        as_limit: Some(112 << 20),
        ..FakeOs::default()
    };
    let mut cfg = linux_defaults();
    cfg.address_space_limit = Some(112 << 20);
    E.start(&cfg, PAGE);
    for i in 0..12 {
        let a = map_window(&E, &os, 256 << 10, i);
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
        map_unmap(&E, &os, 3, 4 * i * PAGE as i64);
    }
    let peak = E.stats.get(Counter::PeakQueued);
    assert!(peak <= 32, "{peak}");
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
        map_unmap(&E, &os, 3, 2 * i * PAGE as i64);
        assert!(E.queued(&os).unwrap().0 <= 3);
    }
    assert_eq!(E.stats.get(Counter::PeakQueued), 3);
}

#[test]
fn aged_eviction_keeps_young_windows_touching_an_evicted_run() {
    static E: Engine = Engine::new();
    let os = started(&E); // the default policy, `aged`, with a 16-entry queue
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
        unmap(&E, &os, a);
    }
    assert_eq!(os.munmap_count(), 0);
    // One more: the queue is full. The two oldest must go; their old
    // neighbours (the oldest 7/8, 14 windows) share their munmap; the two
    // youngest, though touching that run, stay (`oldest` would unmap all 16).
    map_unmap(&E, &os, 3, 64 * PAGE as i64);
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

#[test]
fn counting_mappings_near_the_limit_stays_rare() {
    static E: Engine = Engine::new();
    // 65,530 allowed, 65,000 in use: each count reads 65,000 lines.
    let os = FakeOs {
        map_count: Some(65_000),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    for i in 0..50_000 {
        map_unmap(&E, &os, 3, 2 * (i % 16) * PAGE as i64);
    }
    let reads = *os.map_reads.borrow();
    // At most one count per 32,500 deferral candidates (half the
    // mappings): 2 here, where 200 were made before.
    assert!(reads <= 2, "{reads} counts of /proc/self/maps");
}

#[test]
fn no_room_worth_queueing_backs_off() {
    static E: Engine = Engine::new();
    let os = FakeOs {
        map_count: Some(65_525),
        ..FakeOs::default()
    };
    E.start(&linux_defaults(), PAGE);
    for i in 0..20_000 {
        map_unmap(&E, &os, 3, 2 * (i % 16) * PAGE as i64);
    }
    let reads = *os.map_reads.borrow();
    assert!(reads <= 4, "{reads} counts of /proc/self/maps");
    assert!(E.stats.get(Counter::PeakQueued) <= 2);
}

#[test]
fn unreadable_usage_is_tried_less_and_less_and_the_queue_stays_bounded() {
    static E: Engine = Engine::new();
    // No /proc: neither usage nor peak can be read.
    let os = FakeOs::default();
    E.start(&linux_defaults(), PAGE);
    let win = 256 << 10;
    for i in 0..2_000 {
        let a = map_window(&E, &os, win, i % 1024);
        os.touch(a, win);
        E.munmap(&os, a, win).unwrap();
    }
    let reads = *os.reads.borrow();
    assert!(reads <= 16, "{reads} tries to read the usage");
    let counts = *os.map_reads.borrow();
    assert!(counts <= 16, "{counts} tries to count the mappings");
    assert_eq!(E.stats.get(Counter::Unreadable), (reads + counts) as u64);
    let peak = E.stats.get(Counter::PeakQueuedBytes) as usize;
    assert!(peak <= crate::sizing::NO_USAGE_BYTES, "{peak}");
}
