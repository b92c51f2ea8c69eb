//! libmunmapq.so / libmunmapq.dylib: the `munmapq-interpose` crate (the
//! hooks, their exports and start-up) linked into the library programs
//! load. Built by the `munmapq` launcher's build script from the published
//! sources of `munmapq-interpose`, and in a checkout by the workspace
//! member in `cdylib/`.
//!
//! `no_std`: the library is loaded into every process a shell starts
//! (`munmapq preload-env`), so it carries no standard library, allocator or
//! unwinder: it is small and costs the dynamic loader little. It is always
//! built with `panic = "abort"`; a panic (none is expected: the hooks never
//! panic on purpose) aborts.
#![no_std]

// Linked whole: its exported hooks and its .init_array/.fini_array entries.
extern crate munmapq_interpose;

// (Not in a test build of this crate, which `cargo check --all-targets`
// makes for Apple targets with -Zbuild-std: the test harness brings std's.)
#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: abort has no preconditions and does not return.
    unsafe { libc::abort() }
}

// The precompiled `core` was built to unwind and its code refers to
// `rust_eh_personality`; with `panic = "abort"` nothing ever unwinds, so it
// is never called, but without a definition the library would not load
// (undefined symbol). Defined here as a trap, and hidden: exported, it would
// be found before libstd's by a program linked to libstd dynamically.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(test)))]
core::arch::global_asm!(
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality, @function",
    "rust_eh_personality: ud2",
);
#[cfg(all(target_os = "linux", target_arch = "aarch64", not(test)))]
core::arch::global_asm!(
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality, @function",
    "rust_eh_personality: brk #1",
);
#[cfg(all(target_os = "macos", target_arch = "x86_64", not(test)))]
core::arch::global_asm!(
    ".globl _rust_eh_personality",
    ".private_extern _rust_eh_personality",
    "_rust_eh_personality: ud2",
);
#[cfg(all(target_os = "macos", target_arch = "aarch64", not(test)))]
core::arch::global_asm!(
    ".globl _rust_eh_personality",
    ".private_extern _rust_eh_personality",
    "_rust_eh_personality: brk #1",
);
