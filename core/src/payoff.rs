//! Whether the queue pays for small mappings in this process, measured as
//! the process runs; where it does not, the engine steps aside for them.
//!
//! A small eligible mmap costs the engine a `statx` (and, on a descriptor
//! not seen before, an `F_GETFL`) and its table work before the real call
//! it may save. A reuse saves an mmap, a munmap and the page faults of a
//! fresh mapping; a miss saves at most a munmap (merged into a later
//! flush). On Linux, where a small private file mapping is cheap to make
//! and to unmap, the sum is a loss where few small maps are reused. git
//! reading loose objects (each opened, mapped whole, closed, unmapped;
//! scripts/bench-loose.sh) measured, CPU with / without the library:
//! 1.17 at no reuse (`git prune`), 0.86 at 41% (`git blame`), 0.90 at 57%
//! (`git log --stat`): the break-even is near a fifth, so a quarter is the
//! bar. Large mappings (pack windows of a MiB and more) are left alone:
//! what a reuse saves there grows with the mapping.
//!
//! The rule, per window of [`WINDOW`] small eligible-looking mmaps:
//!
//! - **Engaged** (the start): every call goes through the engine, and its
//!   reuses are counted. A window with fewer than a quarter reused steps
//!   aside (one with fewer than an eighth after [`EARLY`] calls, at once).
//! - **Aside**: every small call passes straight to the kernel, before the
//!   `statx`: exactly the call the program made, as when the table is
//!   busy, so nothing is traded for it (a pass-through is always right).
//!   On the turn the engine unmaps the small mappings still queued (by the
//!   verdict they would hardly be reused) and queues no small one at its
//!   munmap: with nothing of them in the table, the calls that pass through
//!   leave it alone too (the tracked bound answers them without the lock:
//!   `Engine::untracked`), where the queued ones kept every later call
//!   searching it.
//!   What is counted instead costs no system call: a *signature* of each
//!   call (descriptor number, offset, length) in a small table. A call whose
//!   signature is there was very likely made before on the same file, so a
//!   window in which half the signatures were seen before is a change of
//!   phase the queue could pay for: the engine engages again and measures
//!   the real reuse. Each window that engaged and did not pay multiplies
//!   by 4 the windows aside before signatures are judged again (up to
//!   `4^MAX_BACKOFF`), so signatures that lie (same length and descriptor,
//!   another file: git's small loose objects often have the same size)
//!   cost fewer engaged windows each time, and an engaged window with
//!   hardly a reuse ends after [`EARLY`] calls.
//!
//! The same rule holds on macOS. There a munmap that removes a file's last
//! mapping is the dear one (its copy object is torn down and `ubc_unmap`
//! runs: probes/src/bin/mq-replay/lastmap.rs), and every loose object's
//! munmap is one; but the queue only defers that teardown to the mapping's
//! eviction (or the exit) unless the file is mapped again first. Replayed
//! under macOS's rules (`mq-replay --rules macos` on traces of the loose
//! workloads), the teardowns fall with reuse and only with it: 25,250 and
//! 2,863 at exit against 59,183 for `git log --stat` (57% reused), 15,277
//! and 2,179 against 29,532 for `git blame` (41%), 65,536 and 3,292 against
//! 68,829 for `git prune` (none reused). Where reuse is rare the queue saves
//! nothing there either, and the pass-through costs nothing; a quarter is
//! a bar measured on Linux, where a reuse saves less, so on macOS it may
//! pass through some calls that would have paid.
//!
//! Counts are relaxed loads and stores: threads racing may lose an update,
//! which only moves a verdict by a call. Nothing here allocates, blocks or
//! makes a system call.

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

/// Mappings up to this long (rounded to pages) are the class measured.
pub const SMALL: usize = 1 << 20;
/// Small calls per verdict.
pub const WINDOW: u32 = 512;
/// An engaged window with fewer than one reuse in 8 after this many calls
/// is judged at once: the queue cannot pay there.
const EARLY: u32 = 128;
/// Signatures remembered: the reuse distance a phase change is seen at.
const SLOTS: usize = 1024;
/// At most `4^MAX_BACKOFF - 1` windows aside before signatures count.
const MAX_BACKOFF: u32 = 5;

/// One process's measure (all zero bytes: off, engaged).
pub struct Payoff {
    on: AtomicBool,
    aside: AtomicBool,
    /// Turned aside, and the engine has not yet let go of the small
    /// mappings it queued.
    turned: AtomicBool,
    /// Small calls in this window.
    calls: AtomicU32,
    /// Engaged: reuses in this window; aside: signatures seen before.
    hits: AtomicU32,
    /// Aside: windows left before signatures are judged.
    skip: AtomicU32,
    /// Engaged windows in a row that did not pay.
    backoff: AtomicU32,
    seen: [AtomicU64; SLOTS],
}

impl Default for Payoff {
    fn default() -> Self {
        Self::new()
    }
}

/// The signature of a call: never 0 (an empty slot).
fn signature(fd: i32, off: i64, len: usize) -> u64 {
    let x = (len as u64) ^ (off as u64).rotate_left(24) ^ ((fd as u32 as u64) << 44);
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

impl Payoff {
    pub const fn new() -> Self {
        Payoff {
            on: AtomicBool::new(false),
            aside: AtomicBool::new(false),
            turned: AtomicBool::new(false),
            calls: AtomicU32::new(0),
            hits: AtomicU32::new(0),
            skip: AtomicU32::new(0),
            backoff: AtomicU32::new(0),
            seen: [const { AtomicU64::new(0) }; SLOTS],
        }
    }

    /// Measures from now on if `on` (and engages).
    pub fn start(&self, on: bool) {
        self.aside.store(false, Relaxed);
        self.turned.store(false, Relaxed);
        self.calls.store(0, Relaxed);
        self.hits.store(0, Relaxed);
        self.on.store(on, Relaxed);
    }

    /// Before anything is asked of the system for an mmap of the eligible
    /// kind, `len` bytes (as asked: the exact length tells files of one page
    /// apart) of `fd` at `off`: whether it goes through the engine (else
    /// straight to the kernel).
    #[inline]
    pub fn engage(&self, fd: i32, off: i64, len: usize) -> bool {
        if len > SMALL || !self.on.load(Relaxed) {
            return true;
        }
        let aside = self.aside.load(Relaxed);
        // Signatures are kept only while aside: an engaged call pays for
        // nothing it does not use (the first window aside starts from
        // older signatures, and sees a phase of reuse a window later).
        if aside {
            let sig = signature(fd, off, len);
            let slot = &self.seen[(sig >> 54) as usize % SLOTS];
            if slot.load(Relaxed) == sig {
                self.hits.store(self.hits.load(Relaxed) + 1, Relaxed);
            } else {
                slot.store(sig, Relaxed);
            }
        }
        let n = self.calls.load(Relaxed) + 1;
        self.calls.store(n, Relaxed);
        if n >= WINDOW {
            self.judge(aside);
        } else if n == EARLY {
            self.judge_early(aside);
        }
        !aside
    }

    /// [`EARLY`] calls into a window: an engaged one with fewer than one
    /// reuse in 8 is judged now. Out of the calls' way: once a window.
    #[cold]
    #[inline(never)]
    fn judge_early(&self, aside: bool) {
        if !aside && self.hits.load(Relaxed) * 8 < EARLY {
            self.judge(aside);
        }
    }

    /// An engaged mmap of `rlen` bytes (rounded to pages) was answered with
    /// a queued mapping.
    #[inline]
    pub fn reused(&self, rlen: usize) {
        if rlen <= SMALL && !self.aside.load(Relaxed) {
            self.hits.store(self.hits.load(Relaxed) + 1, Relaxed);
        }
    }

    /// Whether small mmaps now pass through.
    #[inline]
    pub fn is_aside(&self) -> bool {
        self.aside.load(Relaxed)
    }

    /// Whether the engine should let go of its queued small mappings now:
    /// true once per turn aside (again after [`Payoff::retry_turn`]).
    #[inline]
    pub fn take_turn(&self) -> bool {
        self.turned.load(Relaxed) && self.turned.swap(false, Relaxed)
    }

    /// The engine could not act on [`Payoff::take_turn`] (the table was
    /// busy): it asks again at the next call.
    pub fn retry_turn(&self) {
        self.turned.store(true, Relaxed);
    }

    /// The verdict on a full window.
    fn judge(&self, aside: bool) {
        let hits = self.hits.load(Relaxed);
        // Engaged: reuses that pay (a quarter); aside: signatures that
        // promise them (a half: they also count other files of one length).
        let pays = if aside {
            2 * hits >= WINDOW
        } else {
            4 * hits >= WINDOW
        };
        self.calls.store(0, Relaxed);
        self.hits.store(0, Relaxed);
        if aside {
            let skip = self.skip.load(Relaxed);
            if skip > 0 {
                self.skip.store(skip - 1, Relaxed);
            } else if pays {
                self.aside.store(false, Relaxed);
            }
        } else if pays {
            self.backoff.store(0, Relaxed);
        } else {
            let b = self.backoff.load(Relaxed);
            self.skip.store((1 << (2 * b)) - 1, Relaxed);
            self.backoff.store((b + 1).min(MAX_BACKOFF), Relaxed);
            self.aside.store(true, Relaxed);
            self.turned.store(true, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` calls of distinct signatures, `reuse` of each `WINDOW` engaged
    /// ones answered with a queued mapping: how many went through.
    fn run(p: &Payoff, n: u32, first: u32, reuse: u32) -> u32 {
        let mut engaged = 0;
        for i in first..first + n {
            if p.engage(3, i as i64 * 4096, 4096) {
                engaged += 1;
                if i % WINDOW < reuse {
                    p.reused(4096);
                }
            }
        }
        engaged
    }

    #[test]
    fn rare_reuse_steps_aside_and_large_mappings_never_do() {
        let p = Payoff::new();
        p.start(true);
        // A third reused pays.
        assert_eq!(run(&p, 4 * WINDOW, 0, WINDOW / 3), 4 * WINDOW);
        assert!(!p.is_aside());
        let p = Payoff::new();
        p.start(true);
        assert_eq!(run(&p, WINDOW, 0, WINDOW / 5), WINDOW);
        assert!(p.is_aside());
        assert_eq!(run(&p, 10 * WINDOW, WINDOW, 0), 0, "distinct signatures");
        assert!(p.engage(3, 0, SMALL + 4096), "a large mapping");
        let off = Payoff::new();
        off.start(false);
        assert_eq!(run(&off, 4 * WINDOW, 0, 0), 4 * WINDOW);
    }

    #[test]
    fn a_phase_of_reuse_engages_again_and_stays_while_it_pays() {
        let p = Payoff::new();
        p.start(true);
        run(&p, WINDOW, 0, 0);
        assert!(p.is_aside());
        // 64 windows of 16 KiB in turn: every signature seen before.
        let mut engaged = 0;
        for i in 0..4 * WINDOW {
            if p.engage(5, (i % 64) as i64 * 16384, 16384) {
                engaged += 1;
                p.reused(16384);
            }
        }
        assert!(!p.is_aside() && engaged >= 2 * WINDOW, "{engaged}");
    }

    #[test]
    fn signatures_that_lie_cost_fewer_engaged_windows_each_time() {
        let p = Payoff::new();
        p.start(true);
        // The same signature every time (same size, same descriptor, never
        // the same file): each engagement pays nothing.
        let mut engaged = [0u32; 2];
        for (half, e) in engaged.iter_mut().enumerate() {
            for _ in 0..(1 << MAX_BACKOFF) * WINDOW {
                *e += u32::from(p.engage(4, 0, 4096));
            }
            assert!(half == 0 || p.is_aside());
        }
        // Engaged windows 1, 3, 8 and 25 of the first 64, each ended early.
        assert!(engaged[0] <= 4 * EARLY, "{engaged:?}");
        assert!(engaged[1] <= EARLY, "{engaged:?}");
    }
}
