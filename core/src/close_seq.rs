//! Whether a descriptor number went on naming the same open file
//! description over a stretch of time, as far as the close hooks see:
//! the eligible mmap asks `statx`, then (maybe) `F_GETFL`, then makes the
//! real `mmap`, three system calls about one number between which another
//! thread (or a signal handler) may `dup2` another file onto it. Were the
//! three answers about different files, a mapping of one file would be
//! recorded under the other's key, and every later reuse of that window
//! would hand out the wrong file's pages.
//!
//! Each number below [`SEQ_FDS`] has a pair of counters, and all the
//! others (and every range a `close_range` or `closefrom` ends) share one:
//! `begun` counts the closes that began ([`CloseSeq::begin`], before the
//! real call), `ended` says up to which of them every one has returned
//! ([`CloseSeq::end`]). A caller takes a [`Seen`] before its first system
//! call about the number (none while a close of it is under way), and asks
//! [`CloseSeq::unchanged`] after its last one: unchanged means no hooked
//! close, `dup2` or `dup3` onto the number began in between, so every
//! answer was about one description. Closes no hook sees (a raw `syscall`
//! instruction, io_uring, another process sharing the table) are not
//! counted: the caller asks the kernel again where it matters.
//!
//! A close costs one atomic add before the real call (its place in line)
//! and a load and a plain store after it: a close stores its place in
//! `ended` when every close before it has (`ended` is its place less one),
//! so `ended` never runs ahead of a close still under way. A close that
//! returns before an earlier one (two closes of one number, or of two
//! numbers sharing the pair, overlapping) counts itself in `late` with a
//! second atomic add instead. No close is under way when `ended + late`
//! is `begun`: `ended` counts the closes of places 1 to `ended`, which all
//! stored in turn, `late` those of higher places that returned early. The
//! counters are 64 bits: none wraps in the life of a process.
use core::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Release, SeqCst},
};

/// Numbers below this have their own counters (96 KiB of `.bss`, touched only
/// where used); the others share one.
pub const SEQ_FDS: usize = 4096;

/// What the counters of one number were when a caller first looked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Seen {
    own: u64,
    shared: u64,
}

/// A close's place in line among the closes of its counters, from
/// [`CloseSeq::begin`] for [`CloseSeq::end`]: how many began before it
/// (its place less one, which is what the end compares, so that nothing
/// is worked out from it before the real call).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Place(u64);

impl Place {
    /// For a close that counts nowhere (and never ends).
    pub const NONE: Place = Place(u64::MAX);
}

struct Counters {
    begun: AtomicU64,
    ended: AtomicU64,
    late: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            late: AtomicU64::new(0),
        }
    }

    /// `begun` when no close is under way, read last: it only grows, and
    /// so do the closes returned, so equal means none began past those
    /// that returned.
    #[inline]
    fn settled(&self) -> Option<u64> {
        let returned = self.ended.load(SeqCst).wrapping_add(self.late.load(SeqCst));
        let begun = self.begun.load(SeqCst);
        (begun == returned).then_some(begun)
    }
}

pub struct CloseSeq {
    words: [Counters; SEQ_FDS],
    shared: Counters,
}

impl Default for CloseSeq {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn index(fd: i32) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < SEQ_FDS)
}

impl CloseSeq {
    pub const fn new() -> Self {
        CloseSeq {
            words: [const { Counters::new() }; SEQ_FDS],
            shared: Counters::new(),
        }
    }

    /// The counters one close of `[lo, hi]` counts in.
    #[inline]
    fn word(&self, lo: i32, hi: i32) -> &Counters {
        match index(lo) {
            Some(i) if lo == hi => &self.words[i],
            _ => &self.shared,
        }
    }

    /// Whether `fd` has counters of its own (else it shares the ranges').
    #[inline(always)]
    pub fn has_own(&self, fd: i32) -> bool {
        index(fd).is_some()
    }

    /// A close (or replacement) of `[lo, hi]` is about to reach the
    /// kernel: its place, for [`CloseSeq::end`].
    #[inline]
    pub fn begin(&self, lo: i32, hi: i32) -> Place {
        Place(self.word(lo, hi).begun.fetch_add(1, SeqCst))
    }

    /// The real call of the close at `place` returned, whatever it
    /// answered.
    #[inline]
    pub fn end(&self, lo: i32, hi: i32, place: Place) {
        let w = self.word(lo, hi);
        // A release store, no fence: a reader that sees it sees the real
        // call returned, and every earlier close's (whose stores this
        // acquire load saw).
        if w.ended.load(Acquire) == place.0 {
            w.ended.store(place.0.wrapping_add(1), Release);
        } else {
            w.late.fetch_add(1, Release);
        }
    }

    /// Before the first system call about `fd`: None while a close of it
    /// (or of a range, or of any high number) is under way.
    #[inline]
    pub fn seen(&self, fd: i32) -> Option<Seen> {
        let own = match index(fd) {
            Some(i) => self.words[i].settled()?,
            None => 0,
        };
        let shared = self.shared.settled()?;
        Some(Seen { own, shared })
    }

    /// After the last system call about `fd`: whether no hooked close of
    /// it began since `seen`.
    #[inline]
    pub fn unchanged(&self, fd: i32, seen: Seen) -> bool {
        let own = index(fd).map_or(0, |i| self.words[i].begun.load(SeqCst));
        own == seen.own && self.shared.begun.load(SeqCst) == seen.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_between_is_seen() {
        let s = CloseSeq::new();
        let a = s.seen(3).unwrap();
        assert!(s.unchanged(3, a));
        let p = s.begin(4, 4);
        s.end(4, 4, p);
        assert!(s.unchanged(3, a), "another number");
        let p = s.begin(3, 3);
        assert!(s.seen(3).is_none(), "under way");
        assert!(!s.unchanged(3, a));
        s.end(3, 3, p);
        let b = s.seen(3).unwrap();
        assert!(!s.unchanged(3, a) && s.unchanged(3, b));
    }

    #[test]
    fn ranges_and_high_numbers_share_a_word() {
        let s = CloseSeq::new();
        let low = s.seen(3).unwrap();
        let high = s.seen(SEQ_FDS as i32 + 7).unwrap();
        let p = s.begin(SEQ_FDS as i32 + 9, SEQ_FDS as i32 + 9);
        assert!(s.seen(SEQ_FDS as i32 + 7).is_none() && s.seen(3).is_none());
        s.end(SEQ_FDS as i32 + 9, SEQ_FDS as i32 + 9, p);
        assert!(!s.unchanged(SEQ_FDS as i32 + 7, high));
        assert!(!s.unchanged(3, low), "conservative for low numbers");
        let low = s.seen(3).unwrap();
        let p = s.begin(0, i32::MAX);
        s.end(0, i32::MAX, p);
        assert!(!s.unchanged(3, low));
    }

    #[test]
    fn overlapping_closes_returning_in_order() {
        let s = CloseSeq::new();
        let a = s.begin(3, 3);
        let b = s.begin(3, 3);
        s.end(3, 3, a);
        assert!(s.seen(3).is_none());
        s.end(3, 3, b);
        assert!(s.seen(3).is_some());
    }

    #[test]
    fn a_later_close_returning_first_never_settles_an_earlier_one() {
        let s = CloseSeq::new();
        let a = s.begin(3, 3);
        let b = s.begin(3, 3);
        s.end(3, 3, b);
        assert!(s.seen(3).is_none(), "the first close is still under way");
        s.end(3, 3, a);
        assert!(s.seen(3).is_some(), "both returned");
        let c = s.begin(3, 3);
        assert!(s.seen(3).is_none());
        s.end(3, 3, c);
        assert!(s.seen(3).is_some(), "and later closes settle again");
    }

    #[test]
    fn numbers_sharing_a_pair_may_return_in_any_order() {
        let s = CloseSeq::new();
        let high = SEQ_FDS as i32;
        let a = s.begin(high, high);
        let b = s.begin(high + 1, high + 1);
        let c = s.begin(0, 10);
        s.end(high + 1, high + 1, b);
        s.end(0, 10, c);
        assert!(
            s.seen(3).is_none(),
            "one close of the shared pair is under way"
        );
        s.end(high, high, a);
        assert!(s.seen(3).is_some() && s.seen(high + 5).is_some());
    }
}
