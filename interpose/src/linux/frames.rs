//! Linux: each thread's innermost hook frame, for `munmapq_core::holder`
//! (which recognises a table lock that a `siglongjmp` out of a signal
//! handler abandoned inside a hook).
//!
//! Every exported hook (`exports.rs`) records, on entry, the address of a
//! local of its own frame in a thread-local, and puts the previous value
//! back on return; a nested signal handler's hook does the same below it.
//! The hottest hooks (mmap, munmap, close) record it only on their ways to
//! the table (`framed`, inlined into the export: the same frame).
//! A hook left by a longjmp never puts the old value back, which is
//! harmless: the next hook entered replaces it, and the engine compares
//! frames only when the table is held by this very thread. The `Os` hands
//! the cells to the core (`os.rs`).
//!
//! The thread-local is a 16-byte initial-exec object (`tls.rs`). On other
//! architectures there are no cells, and the recovery is off (the lock
//! then names its holder by `pthread_self`).

use super::tls::{tls_address, tls_object};
use munmapq_core::os::PerThread;

tls_object!("munmapq_frame_cells", 16);

/// The calling thread's cells (all zero in a new thread: `PerThread::new`).
pub fn cells() -> &'static PerThread {
    const _: () = assert!(core::mem::size_of::<PerThread>() == 16);
    let at = tls_address!("munmapq_frame_cells");
    // SAFETY: 16 zero-initialised bytes of this thread's TLS block, alive as
    // long as the thread, used only by this thread (its hooks and their
    // nested signal handlers); `PerThread` is two `Cell<usize>`, for which
    // all-zero is `PerThread::new()`.
    unsafe { &*(at as *const PerThread) }
}

/// One exported function's frame, while it runs.
pub struct Frame {
    cells: &'static PerThread,
    previous: usize,
}

impl Frame {
    /// Records `at` (an address in the hook's own frame) as
    /// this thread's innermost hook frame. One TLS look-up per hook.
    #[inline(always)]
    pub fn enter(at: usize) -> Frame {
        let cells = cells();
        Frame {
            cells,
            previous: cells.frame.replace(at),
        }
    }
}

impl Drop for Frame {
    #[inline(always)]
    fn drop(&mut self) {
        self.cells.frame.set(self.previous);
    }
}

/// Runs `f` with the calling function's frame recorded as the thread's
/// innermost hook frame (`Os::framed`). Inlined, so that the frame
/// recorded is the export's own, as if it had recorded it on entry: the
/// lanes that call this are inlined into their exports.
#[inline(always)]
pub fn framed<R>(f: impl FnOnce() -> R) -> R {
    let here = 0u8;
    let _frame = Frame::enter(core::ptr::addr_of!(here) as usize);
    f()
}
