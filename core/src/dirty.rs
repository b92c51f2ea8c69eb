//! Ranges that calls changed while the table was locked by someone else.
//!
//! A hook that cannot take the table lock (another thread holds it, or it
//! interrupted its own thread inside a hook from a signal handler) passes its
//! call straight through. If that call changes mappings (munmap, MAP_FIXED,
//! mprotect, mremap, ...), the table may now describe a range wrongly. The
//! hook first records the range here, lock-free; whoever next holds the lock
//! drops every table entry overlapping a recorded range without unmapping it:
//! the range may hold someone else's mapping now. A call that changes the
//! mappings in place (mprotect, madvise, mlock) records a *change* instead:
//! a queued mapping there is still munmapq's, so the next holder unmaps it
//! (forgotten, it would stay mapped for good), and a change does not keep
//! an unmap away from its range ([`DirtyRanges::each_clear_piece`]).
//!
//! Only entries that existed when the range was recorded: each record takes
//! a number from a global epoch counter *before* its call reaches the
//! kernel, and each entry keeps the epoch read when it was inserted, *after*
//! its mmap returned. A mapping the kernel placed in the range after that
//! call (and which may since have been queued) has a later epoch and is
//! kept; dropping it would leak it.
//!
//! When the ring is full, the next lock holder learns the epoch of the lost
//! record (what it does then: `engine/lost.rs`).

#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

#[cfg(not(loom))]
const RECORDS: usize = 64;
/// Small under loom, so that running out of records is explored too.
#[cfg(loom)]
const RECORDS: usize = 2;
/// How many times [`DirtyRanges::each_clear_piece`] looks at the records
/// again for one range, each time a call was recorded while it looked.
const LOOKS_AGAIN: usize = 16;
const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

struct Record {
    state: AtomicU8,
    start: AtomicUsize,
    end: AtomicUsize,
    epoch: AtomicU64,
    /// A change in place (else a replacement). False at rest: the engine
    /// that holds the ring is all zero, in `.bss`.
    changed: AtomicBool,
}

pub struct DirtyRanges {
    records: [Record; RECORDS],
    ready: AtomicUsize,
    overflow: AtomicBool,
    overflow_epoch: AtomicU64,
    epoch: AtomicU64,
}

impl Default for DirtyRanges {
    fn default() -> Self {
        Self::new()
    }
}

/// What the lock holder has to drop.
pub enum Dirty {
    /// Entries overlapping `[start, end)` with an epoch up to the third.
    Range(usize, usize, u64),
    /// The same, for a change in place: the queued ones are unmapped.
    Changed(usize, usize, u64),
    /// Every entry with an epoch up to this one: a record was lost.
    Upto(u64),
}

impl DirtyRanges {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        DirtyRanges {
            records: [const {
                Record {
                    state: AtomicU8::new(FREE),
                    start: AtomicUsize::new(0),
                    end: AtomicUsize::new(0),
                    epoch: AtomicU64::new(0),
                    changed: AtomicBool::new(false),
                }
            }; RECORDS],
            ready: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
            overflow_epoch: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    /// loom's atomics are not `const`.
    #[cfg(loom)]
    pub fn new() -> Self {
        DirtyRanges {
            records: core::array::from_fn(|_| Record {
                state: AtomicU8::new(FREE),
                start: AtomicUsize::new(0),
                end: AtomicUsize::new(0),
                epoch: AtomicU64::new(0),
                changed: AtomicBool::new(false),
            }),
            ready: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
            overflow_epoch: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    /// The epoch a newly inserted entry carries.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// A standing loss counts as one in `ready`, so that the checks for
    /// pending records see it without a load of their own. Counted before
    /// it stands (and taken back if one stood already): `ready` may count
    /// one too many for a while, never one too few, which would hide a
    /// record from the drain and the checks.
    fn lose(&self, epoch: u64) {
        self.overflow_epoch.fetch_max(epoch, Ordering::AcqRel);
        self.ready.fetch_add(1, Ordering::AcqRel);
        if self.overflow.swap(true, Ordering::AcqRel) {
            self.ready.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Records `[start, end)`, replaced. Wait-free: at most `RECORDS`
    /// attempts.
    pub fn record(&self, start: usize, end: usize) {
        self.record_as(start, end, true);
    }

    /// Records `[start, end)`, changed in place.
    pub fn record_change(&self, start: usize, end: usize) {
        self.record_as(start, end, false);
    }

    fn record_as(&self, start: usize, end: usize, replaced: bool) {
        let epoch = self.epoch.fetch_add(1, Ordering::SeqCst);
        for r in &self.records {
            if r.state
                .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                r.start.store(start, Ordering::Relaxed);
                r.end.store(end, Ordering::Relaxed);
                r.epoch.store(epoch, Ordering::Relaxed);
                r.changed.store(!replaced, Ordering::Relaxed);
                r.state.store(READY, Ordering::Release);
                self.ready.fetch_add(1, Ordering::Release);
                return;
            }
        }
        self.lose(epoch);
    }

    /// Whether [`DirtyRanges::drain`] has anything to hand out (loads only:
    /// asked under every lock acquisition).
    #[inline]
    pub fn pending(&self) -> bool {
        self.overflow.load(Ordering::Relaxed) || self.ready.load(Ordering::Acquire) != 0
    }

    /// Hands every complete record to `f` and frees it. Only the holder of
    /// the table lock calls this.
    pub fn drain(&self, mut f: impl FnMut(Dirty)) {
        if let Some(epoch) = self.loss() {
            f(Dirty::Upto(epoch));
        }
        self.drain_records(|d| {
            f(d);
            true
        });
    }

    /// [`DirtyRanges::drain`] without the loss: hands every complete
    /// record to `f` (never a [`Dirty::Upto`]) and frees its slot, for
    /// calls made from then on, unless `f` answers false (the record
    /// stays, for a later drain, and keeps its range from unmaps and drops
    /// until then). Only the holder of the table lock calls this.
    pub fn drain_records(&self, mut f: impl FnMut(Dirty) -> bool) {
        if self.ready.load(Ordering::Acquire) == 0 {
            return;
        }
        for r in &self.records {
            if r.state.load(Ordering::Acquire) == READY {
                let (start, end, epoch) = (
                    r.start.load(Ordering::Relaxed),
                    r.end.load(Ordering::Relaxed),
                    r.epoch.load(Ordering::Relaxed),
                );
                let taken = f(if !r.changed.load(Ordering::Relaxed) {
                    Dirty::Range(start, end, epoch)
                } else {
                    Dirty::Changed(start, end, epoch)
                });
                if taken {
                    r.state.store(FREE, Ordering::Release);
                    self.ready.fetch_sub(1, Ordering::Release);
                }
            }
        }
    }

    /// Does a complete record not yet drained overlap `[start, end)`, or
    /// was a record lost since the last drain (it may)?
    pub fn pending_overlaps(&self, start: usize, end: usize) -> bool {
        self.pending_overlap(start, end, false)
    }

    /// The epoch of the last lost record, where one was lost since the last
    /// drain (or the last time this was asked), which it now answers for.
    /// Only the holder of the table lock calls this.
    pub fn take_loss(&self) -> Option<u64> {
        if !self.overflow.swap(false, Ordering::Acquire) {
            return None;
        }
        self.ready.fetch_sub(1, Ordering::AcqRel);
        Some(self.overflow_epoch.load(Ordering::Acquire))
    }

    /// [`DirtyRanges::take_loss`], asked with a load first: this runs
    /// under every lock acquisition, and a read-modify-write there is
    /// measurable. Only the holder of the table lock calls this.
    #[inline]
    pub fn loss(&self) -> Option<u64> {
        if !self.lost() {
            return None;
        }
        self.take_loss()
    }

    /// Was a record lost since the last drain?
    pub fn lost(&self) -> bool {
        self.overflow.load(Ordering::Relaxed)
    }

    /// Was the record of a call numbered `since` or later lost (a call
    /// that began after [`DirtyRanges::epoch`] answered `since`)?
    pub fn lost_since(&self, since: u64) -> bool {
        self.lost() && self.overflow_epoch.load(Ordering::SeqCst) >= since
    }

    /// Does a complete replacement not yet drained overlap `[start, end)`?
    pub fn replaced_overlaps(&self, start: usize, end: usize) -> bool {
        self.pending_overlap(start, end, true)
    }

    /// Does a complete replacement not yet drained overlap `[start, end)`,
    /// or was a record lost since the last drain (it may have been one)?
    #[inline(never)]
    pub fn replaced_or_lost(&self, start: usize, end: usize) -> bool {
        self.lost() || self.replaced_overlaps(start, end)
    }

    /// Inline: most calls find no record ready, and answer with one load.
    #[inline]
    fn pending_overlap(&self, start: usize, end: usize, replaced_only: bool) -> bool {
        self.ready.load(Ordering::Acquire) != 0 && self.ready_overlap(start, end, replaced_only)
    }

    /// [`DirtyRanges::pending_overlap`] once a record was found ready.
    #[inline(never)]
    fn ready_overlap(&self, start: usize, end: usize, replaced_only: bool) -> bool {
        !replaced_only && self.lost()
            || self.records.iter().any(|r| {
                r.state.load(Ordering::Acquire) == READY
                    && !(replaced_only && r.changed.load(Ordering::Relaxed))
                    && r.start.load(Ordering::Relaxed) < end
                    && start < r.end.load(Ordering::Relaxed)
            })
    }

    /// Calls `f(start, end)` for each piece of `[start, end)` that no
    /// complete replacement not yet drained overlaps, in address order;
    /// answers whether some of it was left out. The lock holder asks just
    /// before it unmaps or drops a queued range: a call that found the
    /// table busy meanwhile (a `MAP_FIXED` there, say) made that part
    /// someone else's. A change in place leaves it munmapq's.
    ///
    /// A call lost with a number from `since` on (see [`DirtyRanges::epoch`])
    /// may have acted anywhere: the rest of the range is then left out.
    pub fn each_clear_piece(
        &self,
        start: usize,
        end: usize,
        since: u64,
        mut f: impl FnMut(usize, usize),
    ) -> bool {
        if self.ready.load(Ordering::Acquire) == 0 {
            f(start, end);
            return false;
        }
        let mut at = start;
        let mut skipped = false;
        let mut again = 0;
        while at < end {
            // A call recorded while the records are looked at (after its
            // slot was passed) is found by looking again: what is left
            // between the last look and the unmap is a few instructions.
            let seen = self.epoch.load(Ordering::SeqCst);
            // The recorded range overlapping `[at, end)` that begins first.
            let mut next: Option<(usize, usize)> = None;
            for r in &self.records {
                if r.state.load(Ordering::Acquire) != READY || r.changed.load(Ordering::Relaxed) {
                    continue;
                }
                let (rs, re) = (
                    r.start.load(Ordering::Relaxed),
                    r.end.load(Ordering::Relaxed),
                );
                if rs < end && at < re && next.is_none_or(|(ns, _)| rs.max(at) < ns) {
                    next = Some((rs.max(at), re));
                }
            }
            if self.epoch.load(Ordering::SeqCst) != seen {
                // Where calls keep coming, the rest is left mapped.
                again += 1;
                if again > LOOKS_AGAIN || self.lost_since(since) {
                    return true;
                }
                continue;
            }
            match next {
                None => {
                    f(at, end);
                    break;
                }
                Some((rs, re)) => {
                    if rs > at {
                        f(at, rs);
                    }
                    skipped = true;
                    at = re;
                }
            }
        }
        skipped
    }

    /// After `fork`, in the child: a record some other (now gone) thread was
    /// writing would stay half-written forever; treat it as lost. Whether
    /// each record and a standing loss were counted in `ready` is not known
    /// either (that thread may have been between one and its count): the
    /// count is made again.
    pub fn reset_after_fork(&self) {
        let mut lost = false;
        let mut ready = 0;
        for r in &self.records {
            lost |= r.state.load(Ordering::Relaxed) == WRITING;
            if r.state.load(Ordering::Relaxed) == READY {
                ready += 1;
            } else {
                r.state.store(FREE, Ordering::Relaxed);
            }
        }
        let standing = self.overflow.load(Ordering::Relaxed);
        self.ready
            .store(ready + usize::from(standing), Ordering::Relaxed);
        if lost {
            self.lose(self.epoch());
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn drained(d: &DirtyRanges) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        d.drain(|x| match x {
            Dirty::Range(s, e, _) | Dirty::Changed(s, e, _) => v.push((s, e)),
            Dirty::Upto(_) => v.push((0, usize::MAX)),
        });
        v
    }

    #[test]
    fn a_change_in_place_is_drained_as_one_and_keeps_no_unmap_away() {
        let d = DirtyRanges::new();
        d.record_change(20, 30);
        d.record(50, 60);
        assert!(d.pending_overlaps(25, 26), "not to be handed out");
        assert!(!d.replaced_overlaps(25, 26));
        assert!(d.replaced_overlaps(55, 56));
        let mut pieces = Vec::new();
        d.each_clear_piece(0, 100, d.epoch(), |s, e| pieces.push((s, e)));
        assert_eq!(
            pieces,
            [(0, 50), (60, 100)],
            "only the replacement is left out"
        );
        let mut kinds = Vec::new();
        d.drain(|x| {
            kinds.push(match x {
                Dirty::Changed(s, e, _) => (s, e, false),
                Dirty::Range(s, e, _) => (s, e, true),
                Dirty::Upto(_) => (0, 0, true),
            })
        });
        assert_eq!(kinds, [(20, 30, false), (50, 60, true)]);
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
    fn records_are_numbered_before_later_inserts() {
        let d = DirtyRanges::new();
        let before = d.epoch();
        d.record(1, 2);
        let after = d.epoch();
        let mut seen = None;
        d.drain(|x| {
            if let Dirty::Range(_, _, e) = x {
                seen = Some(e)
            }
        });
        let e = seen.unwrap();
        assert!(before <= e && e < after);
    }

    #[test]
    fn clear_pieces_leave_out_what_was_recorded() {
        let d = DirtyRanges::new();
        let pieces = |d: &DirtyRanges, s, e| {
            let mut v = Vec::new();
            let skipped = d.each_clear_piece(s, e, d.epoch(), |a, b| v.push((a, b)));
            (v, skipped)
        };
        assert_eq!(pieces(&d, 0, 100), (std::vec![(0, 100)], false));
        d.record(20, 30);
        d.record(25, 40);
        d.record(90, 200);
        assert_eq!(pieces(&d, 0, 100), (std::vec![(0, 20), (40, 90)], true));
        assert_eq!(pieces(&d, 40, 90), (std::vec![(40, 90)], false));
        assert_eq!(pieces(&d, 22, 35), (std::vec![], true));
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

/// Exhaustive interleavings of the lock-free protocol, with loom:
/// `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (see .ci/run).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;
    use std::vec::Vec;

    /// A busy caller records a range, then "the kernel" frees it; a lock
    /// holder that sees it freed (as the kernel handing the address to its
    /// own mmap) inserts an entry, then drains. The record must be seen
    /// exactly once in all, and never carry an epoch that would make the
    /// drain drop the new entry.
    #[test]
    fn record_drain_and_insert_epochs() {
        loom::model(|| {
            let d = Arc::new(DirtyRanges::new());
            // An earlier record, drained: the epoch has moved on and the
            // slots hold an old epoch a torn read would return.
            d.record(0, 1);
            d.drain(|_| {});
            let freed = Arc::new(AtomicBool::new(false));
            // The epoch an entry inserted before the record would carry.
            let before = Arc::new(loom::sync::atomic::AtomicU64::new(u64::MAX));
            let (d2, f2, b2) = (d.clone(), freed.clone(), before.clone());
            let caller = loom::thread::spawn(move || {
                b2.store(d2.epoch(), Ordering::Release);
                d2.record(0x1000, 0x2000);
                f2.store(true, Ordering::Release);
            });
            let mut seen: Vec<(u64, Option<u64>)> = Vec::new();
            let inserted = freed.load(Ordering::Acquire).then(|| d.epoch());
            d.drain(|x| {
                if let Dirty::Range(s, e, epoch) = x {
                    assert_eq!((s, e), (0x1000, 0x2000));
                    assert!(
                        epoch >= before.load(Ordering::Acquire),
                        "the record misses older entries"
                    );
                    seen.push((epoch, inserted));
                }
            });
            caller.join().unwrap();
            d.drain(|x| {
                if let Dirty::Range(_, _, epoch) = x {
                    seen.push((epoch, inserted));
                }
            });
            assert_eq!(seen.len(), 1, "the record is seen exactly once");
            let (epoch, inserted) = seen[0];
            if let Some(at_insert) = inserted {
                assert!(
                    epoch < at_insert,
                    "a record older than the entry must not drop it"
                );
            }
            // An entry that existed before the record must be dropped by it.
            assert!(
                epoch >= before.load(Ordering::Acquire),
                "the record misses older entries"
            );
        });
    }

    /// Three callers on two records: one is lost, and the drain is told
    /// so with an epoch no older than any record made.
    #[test]
    fn lost_records_are_reported() {
        loom::model(|| {
            let d = Arc::new(DirtyRanges::new());
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let d = d.clone();
                    loom::thread::spawn(move || d.record(i, i + 1))
                })
                .collect();
            d.record(7, 8);
            for h in hs {
                h.join().unwrap();
            }
            let (mut ranges, mut lost) = (0, None);
            d.drain(|x| match x {
                Dirty::Range(..) | Dirty::Changed(..) => ranges += 1,
                Dirty::Upto(e) => lost = Some(e),
            });
            assert_eq!(ranges, 2);
            assert!(lost.is_some_and(|e| e <= 2), "{lost:?}");
        });
    }

    /// A loss while the holder drains: the one complete record is drained
    /// whatever the order (a loss's count must never hide it), and once
    /// both are done nothing stays counted.
    #[test]
    fn a_loss_never_hides_a_record_from_the_drain() {
        loom::model(|| {
            let d = Arc::new(DirtyRanges::new());
            d.record(1, 2);
            // The other record is being written: the next caller's is lost.
            d.records[1].state.store(WRITING, Ordering::Relaxed);
            let d2 = d.clone();
            let caller = loom::thread::spawn(move || d2.record(5, 6));
            let mut ranges = 0;
            d.drain(|x| ranges += usize::from(matches!(x, Dirty::Range(1, 2, _))));
            assert_eq!(ranges, 1, "the complete record was not drained");
            caller.join().unwrap();
            d.drain(|_| {});
            assert_eq!(d.ready.load(Ordering::Relaxed), 0);
        });
    }
}
