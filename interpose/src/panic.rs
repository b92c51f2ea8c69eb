//! What a `no_std` library needs from its own code: a panic handler, and
//! the unwinder's personality routine that the precompiled `core` refers
//! to. Here, in the library's crate, so that linking the library is one
//! line (`extern crate munmapq_interpose;`) wherever it is built: in the
//! workspace by `interpose/cdylib/`, for the launcher by its build script
//! from the published sources of this crate.
//!
//! The library is always built with `panic = "abort"`; a panic (none is
//! expected: the hooks never panic on purpose) aborts.
//!
//! Nothing may link this crate into a program that has the standard
//! library: it would bring a second panic handler. The launcher depends on
//! it only for its `links` metadata, and never names it.

// Not in a test build of this crate (`--all-targets` makes one, even with
// `test = false`): the test harness brings std's.
#[cfg(all(not(test), target_os = "linux"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    crate::platform::real::abort()
}

#[cfg(all(not(test), not(target_os = "linux")))]
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
