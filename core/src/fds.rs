//! One bit per descriptor number, lock-free, in `.bss`: what the close and
//! lock hooks need to know about a descriptor without the table, so that a
//! close of a descriptor munmapq never saw costs one load.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

/// Descriptors below this have a bit; those above share one flag (a
/// program with 65536 descriptors open is rare, and its high ones are
/// treated conservatively).
pub const FD_BITS: usize = 1 << 16;
const WORDS: usize = FD_BITS / 64;

pub struct FdBits {
    words: [AtomicU64; WORDS],
    /// Set for any descriptor at or above [`FD_BITS`]; never cleared.
    high: AtomicBool,
}

impl Default for FdBits {
    fn default() -> Self {
        Self::new()
    }
}

impl FdBits {
    pub const fn new() -> Self {
        FdBits {
            words: [const { AtomicU64::new(0) }; WORDS],
            high: AtomicBool::new(false),
        }
    }

    /// Sets `fd`'s bit. Sequentially consistent, as are [`FdBits::get`]
    /// and [`FdBits::any`]: a mmap that sets a descriptor's bit, then asks
    /// whether a close of it began (`CloseSeq::unchanged`), and a close of
    /// it or of a range holding it that begins (`CloseSeq::begin`), then
    /// reads the bit, cannot both miss the other.
    pub fn set(&self, fd: i32) {
        match usize::try_from(fd) {
            Ok(i) if i < FD_BITS => {
                self.words[i / 64].fetch_or(1 << (i % 64), SeqCst);
            }
            Ok(_) => {
                self.high.swap(true, SeqCst);
            }
            Err(_) => {}
        }
    }

    /// Clears the bit of `fd` (the high flag stays).
    pub fn clear(&self, fd: i32) {
        if let Ok(i) = usize::try_from(fd) {
            if i < FD_BITS {
                self.words[i / 64].fetch_and(!(1 << (i % 64)), Release);
            }
        }
    }

    /// Whether `fd` may be set (always for a high descriptor once any was).
    #[inline]
    pub fn get(&self, fd: i32) -> bool {
        match usize::try_from(fd) {
            Ok(i) if i < FD_BITS => self.words[i / 64].load(SeqCst) & (1 << (i % 64)) != 0,
            Ok(_) => self.high.load(SeqCst),
            Err(_) => false,
        }
    }

    /// Whether any descriptor in `[lo, hi]` may be set.
    #[inline]
    pub fn any(&self, lo: i32, hi: i32) -> bool {
        // Every close hook but close_range's and closefrom's asks about
        // one descriptor: one load.
        if lo == hi {
            return self.get(lo);
        }
        self.any_in_range(lo, hi)
    }

    fn any_in_range(&self, lo: i32, hi: i32) -> bool {
        let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
            return false;
        };
        if hi < lo {
            return false;
        }
        // Sequentially consistent, as `get`: a range close reads them
        // after it began (see `set`).
        if hi >= FD_BITS && self.high.load(SeqCst) {
            return true;
        }
        let hi = hi.min(FD_BITS - 1);
        (lo / 64..=hi / 64).any(|w| {
            let mut bits = self.words[w].load(SeqCst);
            if w == lo / 64 {
                bits &= !0u64 << (lo % 64);
            }
            if w == hi / 64 && hi % 64 != 63 {
                bits &= (1u64 << (hi % 64 + 1)) - 1;
            }
            bits != 0
        })
    }

    /// Clears every bit of `[lo, hi]`.
    pub fn clear_range(&self, lo: i32, hi: i32) {
        let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
            return;
        };
        if lo >= FD_BITS || hi < lo {
            return;
        }
        let hi = hi.min(FD_BITS - 1);
        for w in lo / 64..=hi / 64 {
            let mut keep = 0u64;
            if w == lo / 64 {
                keep |= !(!0u64 << (lo % 64));
            }
            if w == hi / 64 && hi % 64 != 63 {
                keep |= !0u64 << (hi % 64 + 1);
            }
            self.words[w].fetch_and(keep, Release);
        }
    }

    /// The first set descriptor in `[lo, hi]` below [`FD_BITS`].
    pub fn first(&self, lo: i32, hi: i32) -> Option<i32> {
        let lo = usize::try_from(lo).ok()?;
        let hi = usize::try_from(hi).ok()?.min(FD_BITS - 1);
        let mut i = lo;
        while i <= hi {
            let bits = self.words[i / 64].load(SeqCst) >> (i % 64);
            if bits == 0 {
                i = (i / 64 + 1) * 64;
                continue;
            }
            let j = i + bits.trailing_zeros() as usize;
            return (j <= hi).then_some(j as i32);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_ranges() {
        let b = FdBits::new();
        assert!(!b.any(0, i32::MAX));
        b.set(3);
        b.set(130);
        assert!(b.get(3) && b.get(130) && !b.get(4));
        assert!(b.any(0, 3) && b.any(3, 3) && !b.any(4, 129) && b.any(100, 200));
        assert_eq!(b.first(4, 1000), Some(130));
        assert_eq!(b.first(131, i32::MAX), None);
        b.clear_range(0, 200);
        assert!(!b.any(0, i32::MAX));
        b.set(FD_BITS as i32 + 5);
        assert!(b.get(FD_BITS as i32 + 9) && b.any(0, i32::MAX) && !b.any(0, 10));
        b.clear_range(0, 63);
        b.set(64);
        b.clear_range(0, 64);
        assert!(!b.get(64));
    }
}
