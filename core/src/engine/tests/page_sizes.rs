//! The engine at every page size Linux and macOS use: 4 KiB (x86_64, most
//! arm64 distributions), 16 KiB (macOS on arm64, Asahi Linux) and 64 KiB
//! (RHEL and others on arm64 servers). Each test runs once per size, on a
//! fake kernel with that page size ([`FakeOs::with_page`]: it refuses an
//! offset, a munmap or a drop that is not page-aligned, as the kernel does)
//! and an engine started with it.

use super::*;

const PAGES: [usize; 3] = [4 << 10, 16 << 10, 64 << 10];

/// Runs `test` at each page size, with an engine no other test uses.
fn at_each_page(test: impl Fn(&'static Engine, FakeOs, usize)) {
    static ENGINES: [Engine; 24] = [const { Engine::new() }; 24];
    static NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    for page in PAGES {
        let e = &ENGINES[NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)];
        test(e, FakeOs::with_page(page), page);
    }
}

fn start_at(e: &Engine, page: usize, set: impl FnOnce(&mut Config)) {
    let mut cfg = linux_defaults();
    set(&mut cfg);
    e.start(&cfg, page);
}

fn mmap(e: &Engine, os: &FakeOs, len: usize, off: usize) -> Result<usize, Errno> {
    e.mmap(
        os,
        Mmap::new(0, len, libc::PROT_READ, libc::MAP_PRIVATE, 3, off as i64),
    )
}

#[test]
fn offsets_not_on_a_page_pass_through_and_lengths_count_whole_pages() {
    at_each_page(|e, os, page| {
        start_at(e, page, |_| {});
        // 4 KiB-aligned, but a page only where pages are 4 KiB: the
        // kernel's answer elsewhere (EINVAL), nothing tracked.
        let r = mmap(e, &os, 4096, 4096);
        if page == 4096 {
            let a = r.unwrap();
            e.munmap(&os, a, 4096).unwrap();
            assert_eq!(os.munmap_count(), 0, "{page}: deferred");
        } else {
            assert_eq!(r, Err(libc::EINVAL), "{page}");
            assert_eq!(e.stats.get(Counter::Eligible), 0, "{page}");
            assert_eq!(e.stats.get(Counter::PassIneligible), 1, "{page}");
        }
        // Half a page off: no page size takes it.
        assert_eq!(mmap(e, &os, page, page / 2), Err(libc::EINVAL), "{page}");
        // A length of one byte past half a page, at a page's offset: one
        // whole page, queued as one and unmapped as one.
        let before = e.queued(&os).unwrap().1;
        let a = mmap(e, &os, page / 2 + 1, 2 * page).unwrap();
        assert_eq!(a % page, 0, "{page}: {a:#x}");
        e.munmap(&os, a, page / 2 + 1).unwrap();
        assert_eq!(e.queued(&os).unwrap().1 - before, page, "{page}");
        assert_eq!(os.munmap_count(), 0, "{page}: deferred");
        // The same page mapped again, by its whole length: handed back.
        let mmaps = *os.mmaps.borrow();
        assert_eq!(mmap(e, &os, page, 2 * page), Ok(a), "{page}");
        assert_eq!(*os.mmaps.borrow(), mmaps, "{page}: reused");
    });
}

#[test]
fn reuse_keys_are_whole_pages_of_the_systems_size() {
    at_each_page(|e, os, page| {
        start_at(e, page, |_| {});
        // 4 KiB and 8 KiB of the file's start are one page where pages are
        // 16 or 64 KiB (the kernel maps the same), two different lengths
        // where they are 4 KiB.
        let a = mmap(e, &os, 4096, 0).unwrap();
        e.munmap(&os, a, 4096).unwrap();
        let mmaps = *os.mmaps.borrow();
        let b = mmap(e, &os, 8192, 0).unwrap();
        let reused = *os.mmaps.borrow() == mmaps;
        assert_eq!(reused, page > 4096, "{page}");
        assert_eq!(reused, a == b, "{page}");
        e.munmap(&os, b, 8192).unwrap();
        // Another page's offset is another key.
        let mmaps = *os.mmaps.borrow();
        let c = mmap(e, &os, page, page).unwrap();
        assert_eq!(*os.mmaps.borrow(), mmaps + 1, "{page}: not reused");
        assert_ne!(c, b, "{page}");
        e.munmap(&os, c, page).unwrap();
        // And its own key is found again.
        let mmaps = *os.mmaps.borrow();
        assert_eq!(mmap(e, &os, page, page), Ok(c), "{page}");
        assert_eq!(*os.mmaps.borrow(), mmaps, "{page}: reused");
    });
}

#[test]
fn the_byte_cap_counts_whole_pages() {
    at_each_page(|e, os, page| {
        start_at(e, page, |c| c.max_bytes = Some(5 * page));
        // One-byte windows of ten different pages: each costs a page.
        for i in 0..10 {
            let a = mmap(e, &os, 1, i * page).unwrap();
            e.munmap(&os, a, 1).unwrap();
            let (n, bytes) = e.queued(&os).unwrap();
            assert_eq!(bytes, n * page, "{page}: window {i}");
            assert!(bytes <= 5 * page, "{page}: window {i}: {bytes}");
        }
        assert_eq!(e.queued(&os).unwrap().1, 5 * page, "{page}");
        assert!(e.stats.get(Counter::PeakQueuedBytes) <= 5 * page as u64);
        // More than the cap by one byte: six pages, never queued.
        let big = mmap(e, &os, 5 * page + 1, 0).unwrap();
        e.munmap(&os, big, 5 * page + 1).unwrap();
        assert_eq!(os.mapped(big), None, "{page}: unmapped now");
        for &(start, len) in os.munmaps.borrow().iter() {
            assert_eq!(start % page, 0, "{page}: munmap at {start:#x}");
            assert!(len > 0, "{page}");
        }
    });
}

#[test]
fn full_queue_flushes_touching_windows_in_one_munmap() {
    at_each_page(|e, os, page| {
        start_at(e, page, |c| c.max_entries = 3);
        // Five windows of a page and a half side by side (two pages each
        // once rounded); the middle one stays mapped.
        let win = page + page / 2;
        let a: Vec<usize> = (0..5)
            .map(|i| mmap(e, &os, win, 2 * i * page).unwrap())
            .collect();
        for w in a.windows(2) {
            assert_eq!(w[1] - w[0], 2 * page, "{page}: side by side");
        }
        for i in [0, 1, 3] {
            e.munmap(&os, a[i], win).unwrap();
        }
        assert_eq!(os.munmap_count(), 0, "{page}");
        e.munmap(&os, a[4], win).unwrap();
        // The oldest two, touching, leave in one munmap of four pages.
        assert_eq!(os.munmaps.borrow().clone(), [(a[0], 4 * page)], "{page}");
        assert_eq!(e.queued(&os), Some((2, 4 * page)), "{page}");
        assert!(os.mapped(a[2]).is_some() && os.mapped(a[3]).is_some());
        assert_eq!(os.mapped(a[0]), None, "{page}");
        assert_eq!(os.mapped(a[1] + win), None, "{page}: the rounded tail too");
    });
}

/// Maps window `i` of `win` bytes (a page-multiple offset), reads it all
/// and unmaps it.
fn read_window(e: &Engine, os: &FakeOs, win: usize, stride: usize, i: usize) -> usize {
    let a = mmap(e, os, win, i * stride).unwrap();
    os.touch(a, win);
    e.munmap(os, a, win).unwrap();
    a
}

/// `os` where every page read is resident and pages can be dropped.
fn resident_as_read(os: FakeOs) -> FakeOs {
    FakeOs {
        rss_per_page: Some(crate::fake::PAGE),
        can_drop: true,
        ..os
    }
}

#[test]
fn the_resident_budget_drops_whole_pages_and_keeps_the_mappings() {
    at_each_page(|e, os, page| {
        // Every page read is resident; the budget is the 4 MiB floor.
        let os = resident_as_read(os);
        start_at(e, page, |_| {});
        // Windows of 256 KiB and half a page; 64 of them are far over the
        // budget.
        let win = (256 << 10) + page / 2;
        let stride = (256 << 10) + page;
        for round in 0..3 {
            for i in 0..64 {
                read_window(e, &os, win, stride, i);
                if round > 0 || i > 16 {
                    let resident = os.usage().unwrap().resident;
                    *os.reads.borrow_mut() -= 1; // not the library's
                    assert!(
                        resident <= (4 << 20) + 3 * stride,
                        "{page}: window {i}: resident {resident}"
                    );
                }
            }
        }
        assert_eq!(e.stats.get(Counter::Deferred), 3 * 64, "{page}");
        assert_eq!(os.munmap_count(), 0, "{page}: every mapping kept");
        assert!(*os.drops.borrow() > 0, "{page}");
        let failed = os.failed_drops.borrow().iter().count();
        assert_eq!(failed, 0, "{page}: a drop not on whole pages");
    });
}

#[test]
fn a_window_over_the_budget_keeps_whole_pages_of_its_start() {
    at_each_page(|e, os, page| {
        let os = resident_as_read(os);
        start_at(e, page, |_| {});
        // 8 MiB and a half page windows, all read, under the 4 MiB floor:
        // each one alone is over the budget, so part of its pages go.
        let win = (8 << 20) + page / 2;
        let stride = (8 << 20) + page;
        for i in 0..5 {
            read_window(e, &os, win, stride, i);
            if i > 0 {
                let resident = os.usage().unwrap().resident;
                *os.reads.borrow_mut() -= 1;
                assert!(
                    (2 << 20..=(4 << 20) + page).contains(&resident),
                    "{page}: after window {i}: resident {resident}"
                );
                assert_eq!(resident % page, 0, "{page}: whole pages dropped");
            }
        }
        assert_eq!(os.munmap_count(), 0, "{page}");
        let failed = os.failed_drops.borrow().iter().count();
        assert_eq!(failed, 0, "{page}: a drop not on whole pages");
    });
}

#[test]
fn a_partial_munmap_of_a_queued_window_is_the_kernels() {
    at_each_page(|e, os, page| {
        start_at(e, page, |_| {});
        let a = mmap(e, &os, 4 * page, 0).unwrap();
        e.munmap(&os, a, 4 * page).unwrap();
        assert_eq!(os.munmap_count(), 0, "{page}");
        // Not on a page: the kernel's EINVAL, the queue untouched.
        if page > 4096 {
            assert_eq!(e.munmap(&os, a + 4096, 4096), Err(libc::EINVAL));
            assert_eq!(e.queued(&os), Some((1, 4 * page)), "{page}");
        }
        // One page in the middle, by a length short of it: the whole
        // queued window is released first, then the kernel unmaps the
        // page.
        assert_eq!(e.munmap(&os, a + page, page - 1), Ok(()), "{page}");
        assert_eq!(e.queued(&os), Some((0, 0)), "{page}");
        assert_eq!(os.mapped(a + page), None, "{page}");
        // And the file's first page, mapped again, is a fresh mapping.
        let mmaps = *os.mmaps.borrow();
        mmap(e, &os, 4 * page, 0).unwrap();
        assert_eq!(*os.mmaps.borrow(), mmaps + 1, "{page}");
    });
}
