//! libmunmapq: loaded into unmodified programs with `LD_PRELOAD` (Linux) or
//! `DYLD_INSERT_LIBRARIES` (macOS). A thin layer: the decisions are in the
//! `munmapq_core` crate; here are the real functions, the exported hooks
//! and start-up.
//!
//! `no_std`: this library is loaded into every process a shell starts
//! (`munmapq env`), so it carries no standard library, allocator or
//! unwinder: it is small and costs the dynamic loader little. A panic (none
//! is expected: the hooks never panic on purpose) aborts.
//!
//! Every build of the library itself is `panic = "abort"` (the workspace
//! profiles; the launcher's build.rs passes it too). Only when cargo builds
//! this package as a dependency of a test target does it force unwinding,
//! which a `no_std` cdylib cannot link; that copy, never loaded by anything,
//! takes std.
#![cfg_attr(panic = "abort", no_std)]

mod errno;
mod hooks;
mod init;
mod os;
#[cfg(target_os = "linux")]
mod real;
#[cfg(target_os = "macos")]
#[path = "real_macos.rs"]
mod real;

#[cfg(target_os = "linux")]
mod exports_linux;
#[cfg(target_os = "macos")]
mod exports_macos;

use munmapq_core::engine::Engine;

#[cfg(panic = "abort")]
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
#[cfg(all(panic = "abort", target_os = "linux", target_arch = "x86_64"))]
core::arch::global_asm!(
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality, @function",
    "rust_eh_personality: ud2",
);
#[cfg(all(panic = "abort", target_os = "linux", target_arch = "aarch64"))]
core::arch::global_asm!(
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality, @function",
    "rust_eh_personality: brk #1",
);
#[cfg(all(panic = "abort", target_os = "macos", target_arch = "x86_64"))]
core::arch::global_asm!(
    ".globl _rust_eh_personality",
    ".private_extern _rust_eh_personality",
    "_rust_eh_personality: ud2",
);
#[cfg(all(panic = "abort", target_os = "macos", target_arch = "aarch64"))]
core::arch::global_asm!(
    ".globl _rust_eh_personality",
    ".private_extern _rust_eh_personality",
    "_rust_eh_personality: brk #1",
);

/// The one engine of this process, `const`-initialised to all zero bytes
/// (so it sits in `.bss`): usable (as a pure pass-through) before the
/// constructor has run.
pub(crate) static ENGINE: Engine = Engine::new();
