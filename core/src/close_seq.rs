//! Whether a descriptor number went on naming the same open file
//! description over a stretch of time, as far as the close hooks see:
//! the eligible mmap asks `statx`, then (maybe) `F_GETFL`, then makes the
//! real `mmap`, three system calls about one number between which another
//! thread (or a signal handler) may `dup2` another file onto it. Were the
//! three answers about different files, a mapping of one file would be
//! recorded under the other's key, and every later reuse of that window
//! would hand out the wrong file's pages.
//!
//! Each number below [`SEQ_FDS`] has one counter word, and all the others
//! (and every range a `close_range` or `closefrom` ends) share one: its
//! high half counts the closes that began ([`CloseSeq::begin`], before the
//! real call), its low half those that returned ([`CloseSeq::end`]). A
//! caller takes a [`Seen`] before its first system call about the number
//! (none while a close of it is under way), and asks
//! [`CloseSeq::unchanged`] after its last one: unchanged means no hooked
//! close, `dup2` or `dup3` onto the number began in between, so every
//! answer was about one description. Closes no hook sees (a raw `syscall`
//! instruction, io_uring, another process sharing the table) are not
//! counted: the caller asks the kernel again where it matters.
//!
//! A close costs one atomic add before the real call and one after.

use core::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Numbers below this have their own word (32 KiB of `.bss`, touched only
/// where used); the others share one.
pub const SEQ_FDS: usize = 4096;

const BEGUN: u64 = 1 << 32;
const ENDED: u64 = 1;

/// What the counters of one number were when a caller first looked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Seen {
    own: u64,
    shared: u64,
}

pub struct CloseSeq {
    words: [AtomicU64; SEQ_FDS],
    shared: AtomicU64,
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

/// No close began that has not returned.
#[inline]
fn settled(v: u64) -> bool {
    v >> 32 == v & 0xffff_ffff
}

impl CloseSeq {
    pub const fn new() -> Self {
        CloseSeq {
            words: [const { AtomicU64::new(0) }; SEQ_FDS],
            shared: AtomicU64::new(0),
        }
    }

    /// The word one close of `[lo, hi]` counts in.
    #[inline]
    fn word(&self, lo: i32, hi: i32) -> &AtomicU64 {
        match index(lo) {
            Some(i) if lo == hi => &self.words[i],
            _ => &self.shared,
        }
    }

    /// A close (or replacement) of `[lo, hi]` is about to reach the kernel.
    #[inline]
    pub fn begin(&self, lo: i32, hi: i32) {
        self.word(lo, hi).fetch_add(BEGUN, SeqCst);
    }

    /// The real call of [`CloseSeq::begin`] returned, whatever it answered.
    #[inline]
    pub fn end(&self, lo: i32, hi: i32) {
        self.word(lo, hi).fetch_add(ENDED, SeqCst);
    }

    /// Before the first system call about `fd`: None while a close of it
    /// (or of a range, or of any high number) is under way.
    #[inline]
    pub fn seen(&self, fd: i32) -> Option<Seen> {
        let own = index(fd).map_or(0, |i| self.words[i].load(SeqCst));
        let shared = self.shared.load(SeqCst);
        (settled(own) && settled(shared)).then_some(Seen { own, shared })
    }

    /// After the last system call about `fd`: whether no hooked close of
    /// it began since `seen`.
    #[inline]
    pub fn unchanged(&self, fd: i32, seen: Seen) -> bool {
        let own = index(fd).map_or(0, |i| self.words[i].load(SeqCst));
        own == seen.own && self.shared.load(SeqCst) == seen.shared
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
        s.begin(4, 4);
        s.end(4, 4);
        assert!(s.unchanged(3, a), "another number");
        s.begin(3, 3);
        assert!(s.seen(3).is_none(), "under way");
        assert!(!s.unchanged(3, a));
        s.end(3, 3);
        let b = s.seen(3).unwrap();
        assert!(!s.unchanged(3, a) && s.unchanged(3, b));
    }

    #[test]
    fn ranges_and_high_numbers_share_a_word() {
        let s = CloseSeq::new();
        let low = s.seen(3).unwrap();
        let high = s.seen(SEQ_FDS as i32 + 7).unwrap();
        s.begin(SEQ_FDS as i32 + 9, SEQ_FDS as i32 + 9);
        assert!(s.seen(SEQ_FDS as i32 + 7).is_none() && s.seen(3).is_none());
        s.end(SEQ_FDS as i32 + 9, SEQ_FDS as i32 + 9);
        assert!(!s.unchanged(SEQ_FDS as i32 + 7, high));
        assert!(!s.unchanged(3, low), "conservative for low numbers");
        let low = s.seen(3).unwrap();
        s.begin(0, i32::MAX);
        s.end(0, i32::MAX);
        assert!(!s.unchanged(3, low));
    }

    #[test]
    fn overlapping_closes_of_one_number() {
        let s = CloseSeq::new();
        s.begin(3, 3);
        s.begin(3, 3);
        s.end(3, 3);
        assert!(s.seen(3).is_none());
        s.end(3, 3);
        assert!(s.seen(3).is_some());
    }
}
