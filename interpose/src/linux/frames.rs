//! Linux: each thread's innermost hook frame, for `munmapq_core::holder`
//! (which recognises a table lock that a `siglongjmp` out of a signal
//! handler abandoned inside a hook).
//!
//! Every exported hook (`exports.rs`) records, on entry, the address of a
//! local of its own frame in a thread-local, and puts the previous value
//! back on return; a nested signal handler's hook does the same below it.
//! A hook left by a longjmp never puts the old value back, which is
//! harmless: the next hook entered replaces it, and the engine compares
//! frames only when the table is held by this very thread. The `Os` hands
//! the cells to the core (`os.rs`).
//!
//! The thread-local is a 16-byte `.tbss` object declared in assembly (the
//! library is `no_std`, and stable Rust has no `#[thread_local]` outside
//! std), reached with the initial-exec TLS model: the thread pointer plus
//! an offset the dynamic linker fixes at load time. No lazy registration,
//! no allocation, no call: glibc places the static TLS of a library loaded
//! at start-up, as `LD_PRELOAD` ones are, in every thread's block (the
//! library is marked `DF_STATIC_TLS`). A library `dlopen`ed later would
//! need surplus static TLS: munmapq is not meant to be `dlopen`ed. On other
//! architectures there are no cells, and the recovery is off (the lock
//! then names its holder by `pthread_self`).

use munmapq_core::os::PerThread;

core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    // Global (every codegen unit of this crate refers to it) but hidden
    // (not exported from the library).
    ".globl munmapq_frame_cells",
    ".hidden munmapq_frame_cells",
    ".type munmapq_frame_cells, @tls_object",
    ".size munmapq_frame_cells, 16",
    "munmapq_frame_cells:",
    ".zero 16",
    ".popsection",
);

/// The calling thread's cells (all zero in a new thread: `PerThread::new`).
pub fn cells() -> &'static PerThread {
    const _: () = assert!(core::mem::size_of::<PerThread>() == 16);
    let at: usize;
    // SAFETY: reads the thread pointer and the GOT slot holding the
    // object's offset from it (initial-exec model); no memory is written.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!(
            "mov {at}, qword ptr [rip + munmapq_frame_cells@GOTTPOFF]",
            "add {at}, qword ptr fs:[0]",
            at = out(reg) at,
            options(nostack, readonly, preserves_flags),
        );
    }
    // SAFETY: as above, for aarch64.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!(
            "mrs {at}, tpidr_el0",
            "adrp {off}, :gottprel:munmapq_frame_cells",
            "ldr {off}, [{off}, #:gottprel_lo12:munmapq_frame_cells]",
            "add {at}, {at}, {off}",
            at = out(reg) at,
            off = out(reg) _,
            options(nostack, readonly, preserves_flags),
        );
    }
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
