//! libmunmapq: loaded into unmodified programs with `LD_PRELOAD` (Linux) or
//! `DYLD_INSERT_LIBRARIES` (macOS). A thin layer: the decisions are in the
//! `munmapq_core` crate; here are the real functions, the exported hooks
//! and start-up.
//!
//! This crate is the whole library, `no_std`: a cdylib crate of one line,
//! `extern crate munmapq_interpose;`, links it into libmunmapq (see
//! `panic.rs` for what a `no_std` library needs).
#![no_std]

mod errno;
#[cfg(target_os = "linux")]
mod file_linux;
/// Per-thread hook frames for the longjmp recovery (ELF TLS, by assembly).
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod frames;
mod hooks;
#[cfg(target_os = "linux")]
mod hooks_linux;
mod init;
mod os;
mod panic;
#[cfg(target_os = "linux")]
mod real;
mod trace;

#[cfg(target_os = "macos")]
#[path = "real_macos.rs"]
mod real;
mod usage;

#[cfg(target_os = "linux")]
mod exports_linux;
#[cfg(target_os = "macos")]
mod exports_macos;

use munmapq_core::engine::Engine;

/// The one engine of this process, `const`-initialised to all zero bytes
/// (so it sits in `.bss`): usable (as a pure pass-through) before the
/// constructor has run.
pub(crate) static ENGINE: Engine = Engine::new();
