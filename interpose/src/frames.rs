//! Linux: each thread's innermost hook frame, for `munmapq_core::holder`
//! (which recognises a table lock that a `siglongjmp` out of a signal
//! handler abandoned inside a hook).
//!
//! Every hook records, on entry, the address of a local of its own frame in
//! a thread-local, and puts the previous value back on return; a nested signal handler's hook does the same below it. A hook
//! left by a longjmp never puts the old value back, which is harmless: the
//! next hook entered replaces it, and the engine compares frames only when
//! the table is held by this very thread.
//!
//! The thread-local is plain `Cell`s with a `const` initialiser and no
//! destructor: rustc places it in the ELF TLS segment (no lazy
//! registration, no allocation; glibc allocates the static TLS of a library
//! loaded at start-up, as `LD_PRELOAD` ones are, with each thread). A
//! library `dlopen`ed later would get dynamic TLS, which glibc may
//! allocate on first use: munmapq is not meant to be `dlopen`ed.

use munmapq_core::holder::PerThread;

thread_local! {
    static CELLS: PerThread = const { PerThread::new() };
}

/// The calling thread's cells.
pub fn cells() -> &'static PerThread {
    // SAFETY: the cells live as long as the calling thread, and only that
    // thread (its hooks and their nested signal handlers) uses the reference.
    CELLS.with(|c| unsafe { &*(c as *const PerThread) })
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
