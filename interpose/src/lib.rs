//! libmunmapq: loaded into unmodified programs with `LD_PRELOAD` (Linux) or
//! `DYLD_INSERT_LIBRARIES` (macOS). A thin layer: the decisions are in the
//! `munmapq_core` crate; here are the real functions, the exported hooks
//! and start-up.

mod errno;
mod hooks;
mod init;
mod os;
#[cfg(target_os = "linux")]
mod real;
#[cfg(target_os = "macos")]
#[path = "real_macos.rs"]
mod real;
mod usage;

#[cfg(target_os = "linux")]
mod exports_linux;
#[cfg(target_os = "macos")]
mod exports_macos;

use munmapq_core::engine::Engine;

/// The one engine of this process, `const`-initialised: usable (as a pure
/// pass-through) before the constructor has run.
pub(crate) static ENGINE: Engine = Engine::new();
