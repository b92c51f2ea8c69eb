//! Ranges that calls changed while the table was locked by someone else.
//!
//! A hook that cannot take the table lock (another thread holds it, or it
//! interrupted its own thread inside a hook from a signal handler) passes its
//! call straight through. If that call changes mappings (munmap, MAP_FIXED,
//! mprotect, mremap, ...), the table may now describe a range wrongly. The
//! hook first records the range here, lock-free; whoever next holds the lock
//! drops every table entry overlapping a recorded range without unmapping it.
//! When the ring is full, the next lock holder forgets the whole table.

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

const RECORDS: usize = 32;
const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

struct Record {
    state: AtomicU8,
    start: AtomicUsize,
    end: AtomicUsize,
}

pub struct DirtyRanges {
    records: [Record; RECORDS],
    ready: AtomicUsize,
    overflow: AtomicBool,
}

impl Default for DirtyRanges {
    fn default() -> Self {
        Self::new()
    }
}

/// What the lock holder has to drop.
pub enum Dirty {
    /// Entries overlapping `[start, end)`.
    Range(usize, usize),
    /// Everything: a record was lost.
    All,
}

impl DirtyRanges {
    pub const fn new() -> Self {
        DirtyRanges {
            records: [const {
                Record {
                    state: AtomicU8::new(FREE),
                    start: AtomicUsize::new(0),
                    end: AtomicUsize::new(0),
                }
            }; RECORDS],
            ready: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
        }
    }

    /// Records `[start, end)`. Wait-free: at most `RECORDS` attempts.
    pub fn record(&self, start: usize, end: usize) {
        for r in &self.records {
            if r.state
                .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                r.start.store(start, Ordering::Relaxed);
                r.end.store(end, Ordering::Relaxed);
                r.state.store(READY, Ordering::Release);
                self.ready.fetch_add(1, Ordering::Release);
                return;
            }
        }
        self.overflow.store(true, Ordering::Release);
    }

    /// Hands every complete record to `f` and frees it. Only the holder of
    /// the table lock calls this.
    pub fn drain(&self, mut f: impl FnMut(Dirty)) {
        if self.overflow.swap(false, Ordering::Acquire) {
            f(Dirty::All);
        }
        if self.ready.load(Ordering::Acquire) == 0 {
            return;
        }
        for r in &self.records {
            if r.state.load(Ordering::Acquire) == READY {
                f(Dirty::Range(
                    r.start.load(Ordering::Relaxed),
                    r.end.load(Ordering::Relaxed),
                ));
                r.state.store(FREE, Ordering::Release);
                self.ready.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// After `fork`, in the child: a record some other (now gone) thread was
    /// writing would stay half-written forever; treat it as lost.
    pub fn reset_after_fork(&self) {
        let mut lost = false;
        for r in &self.records {
            lost |= r.state.load(Ordering::Relaxed) == WRITING;
            if r.state.load(Ordering::Relaxed) != READY {
                r.state.store(FREE, Ordering::Relaxed);
            }
        }
        if lost {
            self.overflow.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn drained(d: &DirtyRanges) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        d.drain(|x| match x {
            Dirty::Range(s, e) => v.push((s, e)),
            Dirty::All => v.push((0, usize::MAX)),
        });
        v
    }

    #[test]
    fn records_drain_once() {
        let d = DirtyRanges::new();
        d.record(1, 2);
        d.record(3, 4);
        assert_eq!(drained(&d), [(1, 2), (3, 4)]);
        assert!(drained(&d).is_empty());
    }

    #[test]
    fn overflow_means_everything() {
        let d = DirtyRanges::new();
        for i in 0..=RECORDS {
            d.record(i, i + 1);
        }
        let v = drained(&d);
        assert_eq!(v[0], (0, usize::MAX));
        assert_eq!(v.len(), RECORDS + 1);
        d.record(9, 10);
        assert_eq!(drained(&d), [(9, 10)]);
    }
}
