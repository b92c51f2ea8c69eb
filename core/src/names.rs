//! Files that lost a name (unlink, rename over them) and unmounts while the
//! table was held by someone else, for its next holder.
//!
//! The hook of such a call never waits for the table: when it finds it busy
//! it records the file here, lock-free, and makes its call. Whoever holds
//! the table next unmaps that file's queued mappings and forgets its live
//! ones (`Engine::apply_names`), as closes that found it busy are applied
//! (`Engine::apply_closes`). A record that finds every slot taken is not
//! lost: it sets a flag on which the next holder releases everything (what
//! it cannot tell apart), which costs only reuse. An unmount is one flag:
//! every queued mapping is unmapped.
//!
//! The protocol is `crate::dirty`'s: a slot goes FREE -> WRITING (by the
//! compare-and-swap that claims it) -> READY (after its words are written)
//! -> FREE (by the holder, after reading them).

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

const SLOTS: usize = 16;
const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

struct Slot {
    state: AtomicU8,
    dev: AtomicU64,
    ino: AtomicU64,
}

pub struct LostNames {
    slots: [Slot; SLOTS],
    ready: AtomicUsize,
    /// A file could not be recorded: release every file.
    overflow: AtomicBool,
    /// An unmount passed through: unmap every queued mapping.
    unmounted: AtomicBool,
}

/// What the holder has to apply.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lost {
    /// The file `(dev, ino)` lost a name.
    File(u64, u64),
    /// Some file lost a name, which one is not known: every file.
    Any,
    /// A file system was unmounted (or was about to be).
    Unmount,
}

impl Default for LostNames {
    fn default() -> Self {
        Self::new()
    }
}

impl LostNames {
    pub const fn new() -> Self {
        LostNames {
            slots: [const {
                Slot {
                    state: AtomicU8::new(FREE),
                    dev: AtomicU64::new(0),
                    ino: AtomicU64::new(0),
                }
            }; SLOTS],
            ready: AtomicUsize::new(0),
            overflow: AtomicBool::new(false),
            unmounted: AtomicBool::new(false),
        }
    }

    /// Records that `(dev, ino)` lost a name. Wait-free.
    pub fn file(&self, dev: u64, ino: u64) {
        for s in &self.slots {
            if s.state
                .compare_exchange(FREE, WRITING, Acquire, Relaxed)
                .is_ok()
            {
                s.dev.store(dev, Relaxed);
                s.ino.store(ino, Relaxed);
                s.state.store(READY, Release);
                self.ready.fetch_add(1, Release);
                return;
            }
        }
        self.overflow.store(true, Release);
    }

    /// Records a call that may have changed any mapping (without
    /// replacing one): every file is released, as when a record is lost.
    pub fn everything(&self) {
        self.overflow.store(true, Release);
    }

    /// Records an unmount.
    pub fn unmount(&self) {
        self.unmounted.store(true, Release);
    }

    /// Anything recorded and not yet drained? (One load: under every lock
    /// acquisition.)
    #[inline]
    pub fn pending(&self) -> bool {
        self.ready.load(Acquire) != 0 || self.overflow.load(Relaxed) || self.unmounted.load(Relaxed)
    }

    /// Hands every record to `f` and frees it; only the table's holder.
    pub fn drain(&self, mut f: impl FnMut(Lost)) {
        if self.overflow.load(Relaxed) && self.overflow.swap(false, Acquire) {
            f(Lost::Any);
        }
        if self.unmounted.load(Relaxed) && self.unmounted.swap(false, Acquire) {
            f(Lost::Unmount);
        }
        if self.ready.load(Acquire) == 0 {
            return;
        }
        for s in &self.slots {
            if s.state.load(Acquire) == READY {
                f(Lost::File(s.dev.load(Relaxed), s.ino.load(Relaxed)));
                s.state.store(FREE, Release);
                self.ready.fetch_sub(1, Release);
            }
        }
    }

    /// After `fork`, in the child: a slot another (now gone) thread was
    /// writing would stay claimed for good; it becomes "some file".
    pub fn reset_after_fork(&self) {
        for s in &self.slots {
            if s.state.load(Relaxed) == WRITING {
                s.state.store(FREE, Relaxed);
                self.overflow.store(true, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn drained(n: &LostNames) -> Vec<Lost> {
        let mut v = Vec::new();
        n.drain(|l| v.push(l));
        v
    }

    #[test]
    fn records_drain_once_and_overflow_means_any() {
        let n = LostNames::new();
        assert!(!n.pending());
        n.file(1, 2);
        n.unmount();
        assert!(n.pending());
        assert_eq!(drained(&n), [Lost::Unmount, Lost::File(1, 2)]);
        assert!(!n.pending() && drained(&n).is_empty());
        for i in 0..=SLOTS as u64 {
            n.file(1, i);
        }
        let v = drained(&n);
        assert_eq!(v[0], Lost::Any);
        assert_eq!(v.len(), SLOTS + 1);
    }
}
