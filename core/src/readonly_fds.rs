//! Which descriptors `F_GETFL` already found open read-only, so that a
//! reuse costs the one `statx` it needs for the file's identity and stamp
//! and not a second system call for the descriptor's access mode.
//!
//! The access mode of an open file description never changes (`F_SETFL`
//! cannot change `O_ACCMODE` or `O_PATH`), so the answer holds as long as
//! the descriptor number names the same description. Each number below
//! [`CACHED_FDS`] has one word, lock-free, in `.bss`, holding a hash of the
//! identity (device, inode, mount) of the file `F_GETFL` was asked about
//! (see [`identity`]): a number that names another file now (reused through
//! a path munmapq does not hook: a raw system call, io_uring, a libc
//! internal close) does not match, and `F_GETFL` is asked again. The hooks
//! that end a description (close, close_range, closefrom, dup2 and dup3
//! onto an open number, fclose, `syscall(SYS_close)`) mark the words of
//! their numbers `CLOSING` before the real call and empty them after it.
//!
//! A word is 0 (nothing known), an identity (even, never 0), a claim (odd:
//! a thread is asking `F_GETFL` now, see [`ReadOnlyFds::claim`]), or
//! `CLOSING`. An answer is recorded only by a compare-and-swap from the
//! asking thread's own claim (a claim not followed by an answer is given
//! up, see [`ReadOnlyFds::give_up`]), and no claim is made on a `CLOSING`
//! word. So
//! an answer about a description a close ended is never recorded: asked
//! before the close began, its claim was overwritten by `CLOSING`; asked
//! after, it could not claim until the real close had returned, and then
//! it asks about what the number names now. `CLOSING` lasts until the real
//! call returns because the number is free for another `open` the moment
//! the kernel has closed it, before the hook's second store.
//!
//! The claim is made after the `statx` that named the file: a close that
//! ended before the claim, but after that `statx`, would let `F_GETFL`
//! describe another description than `statx` did. The engine records an
//! answer only if no close of the number began since before its `statx`
//! (`crate::close_seq`), so that the identity and the access mode it keeps
//! are about one description.
//!
//! A close of a descriptor costs one store before and one after (for a
//! range, one for each number below 4096 or the highest number claimed).
//!
//! Beside each word, the name of the file the description was opened
//! through, for a file with several links (see
//! [`crate::file::FileFacts::name`]): like the access mode it never
//! changes while the number names the description (a rename changes the
//! file's ctime, which the reuse key's stamp compares), so it is asked
//! once per description too. It is written under the claim, before the
//! answer, and read only after [`ReadOnlyFds::known`] found the answer.

use crate::file::FileFacts;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

/// Descriptors below this have a word (512 KiB of `.bss`, touched only
/// where used); the others ask `F_GETFL` on every eligible mmap.
pub const CACHED_FDS: usize = crate::fds::FD_BITS;

/// A range of closes marks the words below this, and above it those
/// below the highest number ever claimed: the others are 0.
const RANGE_FLOOR: usize = 4096;

/// A close of the number is under way: nothing is recorded, nothing hits.
const CLOSING: u64 = u64::MAX;

/// A nonzero, even hash of which file `facts` names (not its stamp: the
/// access mode does not depend on the contents). Two files on one number
/// are told apart unless their 63-bit hashes collide.
pub fn identity(facts: &FileFacts) -> u64 {
    identity_of(facts.dev, facts.ino, facts.mnt)
}

/// [`identity`] of the file with device `dev`, inode `ino`, mount `mnt`.
#[inline(always)]
pub fn identity_of(dev: u64, ino: u64, mnt: u64) -> u64 {
    let mut h = ino.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= dev.rotate_left(23).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    h ^= mnt.rotate_left(41).wrapping_mul(0x1656_67B1_9E37_79F9);
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    (h & !1) | 2
}

/// A thread's right to record what `F_GETFL` answers for one number.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    index: usize,
    mark: u64,
}

pub struct ReadOnlyFds {
    words: [AtomicU64; CACHED_FDS],
    /// The name's hash (0: one name, or not asked).
    names: [AtomicU64; CACHED_FDS],
    /// One more than the highest number ever claimed.
    top: AtomicUsize,
}

impl Default for ReadOnlyFds {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn index(fd: i32) -> Option<usize> {
    usize::try_from(fd).ok().filter(|&i| i < CACHED_FDS)
}

impl ReadOnlyFds {
    pub const fn new() -> Self {
        ReadOnlyFds {
            words: [const { AtomicU64::new(0) }; CACHED_FDS],
            names: [const { AtomicU64::new(0) }; CACHED_FDS],
            top: AtomicUsize::new(0),
        }
    }

    /// Whether `fd` is known to be open read-only on the file `id`. Asked
    /// after the `statx` that found `id`: a close that ended the
    /// description `statx` saw had emptied the word before that.
    #[inline]
    pub fn known(&self, fd: i32, id: u64) -> bool {
        index(fd).is_some_and(|i| self.words[i].load(Acquire) == id)
    }

    /// Before asking `F_GETFL` about `fd`: marks the word as being asked
    /// about by `thread` (nonzero, unique among live threads). None when
    /// the answer cannot be recorded (a close is under way, another thread
    /// changed the word, or the number has no word).
    pub fn claim(&self, fd: i32, thread: usize) -> Option<Claim> {
        let index = index(fd)?;
        // Before the word can hold anything: a range close that reads
        // `top` after this marks it (one before is seen by the caller's
        // `CloseSeq` check, ranges counting in the shared word).
        if index >= self.top.load(SeqCst) {
            self.top.fetch_max(index + 1, SeqCst);
        }
        let mark = (thread as u64) << 1 | 1;
        let w = &self.words[index];
        let now = w.load(Relaxed);
        if now == CLOSING || mark == CLOSING {
            return None;
        }
        w.compare_exchange(now, mark, AcqRel, Relaxed).ok()?;
        Some(Claim { index, mark })
    }

    /// `F_GETFL` said the description is read-only: records `id`, and
    /// the name it was opened through (0 for one name), unless a close
    /// began since the claim.
    pub fn remember(&self, claim: Claim, id: u64, name: u64) {
        self.names[claim.index].store(name, Relaxed);
        let _ = self.words[claim.index].compare_exchange(claim.mark, id, AcqRel, Relaxed);
    }

    /// The name recorded with the answer [`ReadOnlyFds::known`] just found
    /// for `fd` (0: one name when it was asked).
    #[inline]
    pub fn name(&self, fd: i32) -> u64 {
        index(fd).map_or(0, |i| self.names[i].load(Relaxed))
    }

    /// `F_GETFL` said the description is not read-only (or failed): gives
    /// the claim up. Why not leave it: a signal handler's mmap of the same
    /// number, in the same thread, claims with the same mark; had it left
    /// that mark in place after closing and reopening the number, the
    /// interrupted mmap's `remember`, about the old description, would
    /// succeed.
    pub fn give_up(&self, claim: Claim) {
        let _ = self.words[claim.index].compare_exchange(claim.mark, 0, AcqRel, Relaxed);
    }

    /// The descriptors `[lo, hi]` are about to be closed (or replaced).
    #[inline]
    pub fn closing(&self, lo: i32, hi: i32) {
        self.fill(lo, hi, CLOSING);
    }

    /// The real close of `[lo, hi]` returned.
    #[inline]
    pub fn closed(&self, lo: i32, hi: i32) {
        self.fill(lo, hi, 0);
    }

    /// One store for one descriptor (every close but close_range's and
    /// closefrom's): the close hook's whole cost here.
    #[inline]
    fn fill(&self, lo: i32, hi: i32, v: u64) {
        if lo == hi {
            if let Some(i) = index(lo) {
                self.words[i].store(v, Release);
            }
            return;
        }
        self.fill_range(lo, hi, v);
    }

    fn fill_range(&self, lo: i32, hi: i32, v: u64) {
        let (lo, Ok(hi)) = (lo.max(0) as usize, usize::try_from(hi)) else {
            return;
        };
        let end = hi
            .saturating_add(1)
            .min(self.top.load(SeqCst).max(RANGE_FLOOR));
        for w in self.words.iter().take(end).skip(lo) {
            w.store(v, Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(ino: u64) -> FileFacts {
        FileFacts {
            dev: 5,
            ino,
            mnt: 7,
            ..FileFacts::default()
        }
    }

    #[test]
    fn identities_are_even_nonzero_and_differ() {
        let (a, b) = (identity(&facts(1)), identity(&facts(2)));
        assert!(a != 0 && a & 1 == 0 && b & 1 == 0 && a != b);
        assert_eq!(identity(&FileFacts::default()) & 1, 0);
        assert_ne!(identity(&FileFacts::default()), 0);
    }

    #[test]
    fn a_claim_records_unless_a_close_came_between() {
        let f = ReadOnlyFds::new();
        let id = identity(&facts(1));
        assert!(!f.known(3, id));
        let c = f.claim(3, 0x1000).unwrap();
        f.remember(c, id, 0);
        assert!(f.known(3, id));
        assert!(!f.known(3, identity(&facts(2))), "another file");
        // A close between the claim and the answer: nothing recorded.
        let c = f.claim(4, 0x1000).unwrap();
        f.closing(4, 4);
        f.closed(4, 4);
        f.remember(c, id, 0);
        assert!(!f.known(4, id));
        // During a close nothing is claimed or known.
        f.closing(3, 3);
        assert!(!f.known(3, id));
        assert!(f.claim(3, 0x1000).is_none());
        f.closed(3, 3);
        assert!(f.claim(3, 0x1000).is_some());
    }

    #[test]
    fn a_handler_that_reopens_the_number_leaves_no_claim_behind() {
        let f = ReadOnlyFds::new();
        let id = identity(&facts(1));
        // The interrupted mmap asked about the old, read-only description.
        let outer = f.claim(3, 0x1000).unwrap();
        // Its signal handler closes 3, opens the file write-only there and
        // maps it: same thread, same mark; not read-only.
        f.closing(3, 3);
        f.closed(3, 3);
        let inner = f.claim(3, 0x1000).unwrap();
        f.give_up(inner);
        f.remember(outer, id, 0);
        assert!(!f.known(3, id));
    }

    #[test]
    fn a_second_claim_wins_and_the_first_records_nothing() {
        let f = ReadOnlyFds::new();
        let id = identity(&facts(1));
        let first = f.claim(3, 0x1000).unwrap();
        let second = f.claim(3, 0x2000).unwrap();
        f.remember(first, id, 0);
        assert!(!f.known(3, id));
        f.remember(second, id, 0);
        assert!(f.known(3, id));
    }

    #[test]
    fn ranges_and_numbers_without_a_word() {
        let f = ReadOnlyFds::new();
        let id = identity(&facts(1));
        for fd in [0, 5, CACHED_FDS as i32 - 1] {
            let c = f.claim(fd, 0x1000).unwrap();
            f.remember(c, id, 0);
        }
        assert!(f.claim(CACHED_FDS as i32, 0x1000).is_none());
        assert!(f.claim(-1, 0x1000).is_none());
        assert!(!f.known(CACHED_FDS as i32, id) && !f.known(-1, id));
        f.closing(1, i32::MAX);
        f.closed(1, i32::MAX);
        assert!(f.known(0, id) && !f.known(5, id));
        assert!(!f.known(CACHED_FDS as i32 - 1, id));
        f.closed(-3, 2);
        assert!(!f.known(0, id));
    }
}
