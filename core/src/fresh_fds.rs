//! Which descriptors name an open file description only this process
//! holds, as far as the hooks see: then no lock can have been taken on it
//! through a copy the hooks did not see made, and its close need not ask
//! the kernel (`Os::description_locked`, three system calls) before live
//! mappings made through it are kept past the close.
//!
//! A description is shared with others when the process forks or spawns
//! (the child inherits it: `fork`, `vfork`, `posix_spawn`, `system`,
//! `popen`), sends or receives descriptors over a socket (`SCM_RIGHTS`),
//! or copies one with `pidfd_getfd`: each such call bumps one epoch
//! ([`FreshFds::shared`]). A description that an `open` creates is the
//! process's alone. So a number is *fresh* when a hooked close of it
//! began in the current epoch (the description it names now was opened
//! after that close, and nothing was shared since), or it is a hooked
//! duplicate of a fresh one. Every other number (never closed through a
//! hook, inherited at exec, received, or named before the last fork) is
//! asked about. What no hook sees (a `fork` or `clone` system call made
//! without libc, another process's `pidfd_getfd` on this one) is not
//! counted: README, Limits.
//!
//! Each number below [`FRESH_FDS`] has one word: 0, or the epoch plus one
//! read when a close of it began; a close costs two loads and one store.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

/// Numbers below this have a word (512 KiB of `.bss`, touched only where
/// used: a page per 512 numbers); the others are never fresh.
pub const FRESH_FDS: usize = crate::fds::FD_BITS;

/// A close of a range (`close_range`, `closefrom`) marks the numbers below
/// this, and above it only those below the highest number ever marked:
/// a number above both never had a word written, and stays not fresh
/// (asked about), which costs only a system call at its close.
const RANGE_FLOOR: usize = 4096;

pub struct FreshFds {
    words: [AtomicU64; FRESH_FDS],
    epoch: AtomicU64,
    /// One more than the highest number whose word was written.
    top: AtomicUsize,
}

impl Default for FreshFds {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn index(fd: i32) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < FRESH_FDS)
}

impl FreshFds {
    pub const fn new() -> Self {
        FreshFds {
            words: [const { AtomicU64::new(0) }; FRESH_FDS],
            epoch: AtomicU64::new(0),
            top: AtomicUsize::new(0),
        }
    }

    /// Descriptions may now be held elsewhere (a fork, a spawn, a
    /// descriptor passed or copied): no number is fresh any more.
    #[inline]
    pub fn shared(&self) {
        self.epoch.fetch_add(1, SeqCst);
    }

    /// Before a close's real call: what to hand [`FreshFds::closed`]. Read
    /// before the call, so that a description another thread opens on the
    /// number meanwhile, and shares before the close hook's store, is not
    /// taken for fresh.
    #[inline]
    pub fn closing(&self) -> u64 {
        self.epoch.load(SeqCst)
    }

    /// The close of `[lo, hi]` that began in `epoch` closed them: a
    /// description opened on one of the numbers from now on is fresh
    /// while nothing is shared.
    pub fn closed(&self, lo: i32, hi: i32, epoch: u64) {
        if lo == hi {
            if let Some(i) = index(lo) {
                self.write(i, epoch + 1);
            }
            return;
        }
        let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
            return;
        };
        let end = hi
            .saturating_add(1)
            .min(self.top.load(SeqCst).max(RANGE_FLOOR));
        for w in self.words.iter().take(end).skip(lo) {
            w.store(epoch + 1, SeqCst);
        }
    }

    /// Writes word `i`, raising the mark of the highest number written
    /// first (one load where it need not move).
    #[inline]
    fn write(&self, i: usize, v: u64) {
        if i >= self.top.load(SeqCst) {
            self.top.fetch_max(i + 1, SeqCst);
        }
        self.words[i].store(v, SeqCst);
    }

    /// `new` now names the description `old` names.
    #[inline]
    pub fn duplicated(&self, old: i32, new: i32) {
        if let Some(n) = index(new) {
            let v = index(old).map_or(0, |o| self.words[o].load(SeqCst));
            self.write(n, v);
        }
    }

    /// Whether the description `fd` names is known to be this process's
    /// alone.
    #[inline]
    pub fn fresh(&self, fd: i32) -> bool {
        index(fd).is_some_and(|i| self.words[i].load(SeqCst) == self.epoch.load(SeqCst) + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_after_a_close_until_something_is_shared() {
        let f = FreshFds::new();
        assert!(!f.fresh(3), "never closed: maybe inherited");
        let e = f.closing();
        f.closed(3, 3, e);
        assert!(f.fresh(3));
        f.duplicated(3, 7);
        assert!(f.fresh(7));
        f.duplicated(5, 3);
        assert!(!f.fresh(3), "a copy of a number never closed");
        f.closed(3, 3, f.closing());
        f.shared();
        assert!(!f.fresh(3) && !f.fresh(7));
        // A close that began before the sharing: not fresh.
        let e = f.closing();
        f.shared();
        f.closed(3, 3, e);
        assert!(!f.fresh(3));
        f.closed(0, i32::MAX, f.closing());
        assert!(f.fresh(0) && f.fresh(RANGE_FLOOR as i32 - 1));
        assert!(
            !f.fresh(RANGE_FLOOR as i32),
            "a number above every one written"
        );
        assert!(!f.fresh(FRESH_FDS as i32) && !f.fresh(-1));
        f.closed(5000, 5000, f.closing());
        assert!(f.fresh(5000));
        f.closed(4096, i32::MAX, f.closing());
        assert!(f.fresh(4999) && !f.fresh(5001));
    }
}
