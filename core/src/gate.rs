//! The one word a plain mmap or munmap reads before anything else: while it
//! is zero, the hook may tell the call from its arguments alone and make it
//! as the program made it. Each bit names a reason every call must meet the
//! engine instead.
//!
//! Writers: the table's holder sets and clears [`QUEUED`] with a load and a
//! plain store, since it changes each time the queue empties or fills, and
//! a locked instruction there would cost every reuse. The other bits change
//! with atomic read-modify-writes, and only while the library starts
//! ([`TRACED`], and [`COUNTED`] set, before any hook can take the table) or
//! when it is told nobody reads the counters ([`COUNTED`] cleared). A
//! holder's store racing with that last change can only undo it: the gate
//! then stays closed, which costs calls their plain way and nothing else.
//! No writer but the holder touches [`QUEUED`], and the holder is one
//! thread at a time, so a set [`QUEUED`] is never lost.

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// A mapping may be queued: a failed mmap may be retried after the queue
/// is let go of, and any range may meet a queued one.
pub const QUEUED: u32 = 1;
/// Every call is written to the trace file.
pub const TRACED: u32 = 2;
/// The counters are read (a report will be written): each call is counted.
/// Alone, it leaves the plain ways open, out of line (see
/// `Engine::gate_counts_only`): every test that reads the counters runs
/// them too.
pub const COUNTED: u32 = 4;

/// See the module's documentation.
pub struct Gate(AtomicU32);

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// Open: no bit set (all zero bytes, so that an engine stays in `.bss`).
    pub const fn new() -> Self {
        Gate(AtomicU32::new(0))
    }

    /// No bit is set: the plain ways are open.
    #[inline(always)]
    pub fn open(&self) -> bool {
        self.0.load(Relaxed) == 0
    }

    /// The word, for a caller that tests it together with another.
    #[inline(always)]
    pub fn word(&self) -> u32 {
        self.0.load(Relaxed)
    }

    /// Exactly `bits` are set.
    #[inline(always)]
    pub fn is(&self, bits: u32) -> bool {
        self.0.load(Relaxed) == bits
    }

    #[inline(always)]
    pub fn has(&self, bit: u32) -> bool {
        self.0.load(Relaxed) & bit != 0
    }

    /// Sets or clears [`QUEUED`]; by the table's holder only, which is its
    /// only writer. Stores only where the bit changes.
    #[inline]
    pub fn holder_sets_queued(&self, queued: bool) {
        let now = self.0.load(Relaxed);
        if (now & QUEUED != 0) != queued {
            self.0.store(now ^ QUEUED, Relaxed);
        }
    }

    /// Sets or clears a bit other than [`QUEUED`].
    pub fn set_static(&self, bit: u32, on: bool) {
        debug_assert!(bit & QUEUED == 0, "QUEUED is the holder's");
        if on {
            self.0.fetch_or(bit, Relaxed);
        } else {
            self.0.fetch_and(!bit, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bit_closes_the_gate_until_it_is_cleared() {
        let g = Gate::new();
        assert!(g.open());
        g.holder_sets_queued(true);
        assert!(!g.open() && g.has(QUEUED));
        g.set_static(COUNTED, true);
        g.holder_sets_queued(false);
        assert!(!g.open() && g.has(COUNTED) && !g.has(QUEUED));
        g.set_static(TRACED, true);
        g.set_static(COUNTED, false);
        assert!(!g.open() && g.has(TRACED));
        g.set_static(TRACED, false);
        assert!(g.open());
    }
}
