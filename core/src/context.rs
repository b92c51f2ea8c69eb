//! What the kernel takes from an mmap call's context, beyond the file and
//! the descriptor, that a queued mapping would carry into a reuse made
//! under another context. Two inputs can change under a queued mapping
//! without changing the file's stamp:
//!
//! - a mount's flags, changed in place (`mount(MS_REMOUNT)`,
//!   `mount_setattr`): the mount id stays, yet a fresh mapping through a
//!   mount made `noexec` may not become executable (Linux `mm/mmap.c`
//!   `do_mmap`: `path_noexec` clears `VM_MAYEXEC`);
//! - the calling thread's personality: with `READ_IMPLIES_EXEC` the kernel
//!   adds `PROT_EXEC` to a `PROT_READ` mapping (`do_mmap` again).
//!
//! Each eligible mmap takes a context word, kept in its key
//! ([`crate::table::FileKey::ctx`]): a queued mapping is handed back only
//! to a call made under the same word. The word costs no system call while
//! the program changes neither: the mount hooks (and the unmount hooks: a
//! mount id may be given again before Linux 6.8) bump a generation after
//! the call (a mapping made before it, or while it ran, keeps the old
//! generation, so it is never reused once the call returned), and the
//! personality is asked of the kernel on each eligible mmap only once a
//! hooked `personality` call changed `READ_IMPLIES_EXEC` in some thread
//! (personalities are per thread; until then every thread has the one the
//! process started with, so all queued mappings were made under it).

use crate::os::Os;
use core::sync::atomic::{AtomicU64, Ordering::*};

/// In [`MmapContext`]'s word: some thread changed `READ_IMPLIES_EXEC`, so
/// each call asks its own personality. The other bits count mount-table
/// calls (in steps of [`MOUNT`]).
const SPLIT: u64 = 1;
const MOUNT: u64 = 2;

/// One word, so that an eligible mmap reads its context in one load.
pub struct MmapContext(AtomicU64);

impl Default for MmapContext {
    fn default() -> Self {
        Self::new()
    }
}

impl MmapContext {
    pub const fn new() -> Self {
        MmapContext(AtomicU64::new(0))
    }

    /// The context word of an eligible mmap the calling thread is about
    /// to make, read before anything else is asked about it; `None` when
    /// it cannot be told (the call is then not tracked). Once split, the
    /// word differs from every word before the split (its `SPLIT` bit),
    /// whose mappings were made under a personality no longer known to be
    /// the caller's.
    #[inline]
    pub fn now<O: Os>(&self, os: &O) -> Option<u64> {
        let w = self.0.load(Acquire);
        let exec = w & SPLIT != 0 && os.read_implies_exec()?;
        Some(w << 1 | exec as u64)
    }

    /// Whether threads may differ in `READ_IMPLIES_EXEC`: then an
    /// `mprotect(PROT_READ)` may make a mapping executable (the kernel
    /// adds `PROT_EXEC` for a thread that has it, `mm/mprotect.c`).
    #[inline]
    pub fn split(&self) -> bool {
        self.0.load(Relaxed) & SPLIT != 0
    }

    /// A mount-table call returned (whether or not it succeeded).
    pub fn mounts_changed(&self) {
        self.0.fetch_add(MOUNT, Release);
    }

    /// A thread is about to change its `READ_IMPLIES_EXEC` (or it cannot
    /// be told whether it does): from now on each call asks its own.
    pub fn personalities_split(&self) {
        self.0.fetch_or(SPLIT, Release);
    }
}
