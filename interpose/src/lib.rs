//! libmunmapq: loaded into unmodified programs with `LD_PRELOAD` (Linux) or
//! `DYLD_INSERT_LIBRARIES` (macOS). A thin layer: the decisions are in the
//! `munmapq_core` crate; here are the hooks, the real functions, the way
//! the dynamic loader is made to call the hooks, and start-up.
//!
//! This crate is the whole library, `no_std`: a cdylib crate of one line,
//! `extern crate munmapq_interpose;`, links it into libmunmapq (see
//! `panic.rs` for what a `no_std` library needs).
//!
//! Shared by every platform: `hooks.rs` (the bodies of the hooks every
//! platform has, with their errno handling), `init.rs` (start-up and exit),
//! `trace.rs`, `errno.rs`, `posix.rs` (system calls both platforms make the
//! same way), and `shared_hooks!`, the list of those hooks.
//!
//! # The platform contract
//!
//! `linux/` and `macos/` (the one built is `platform`) each provide:
//!
//! - `hook_table!` (in its `mod.rs`): every hook of the platform, those of
//!   `shared_hooks!` followed by its own, each with its C signature.
//!   `real`, `exports` and `signatures` are generated from it, so that is
//!   where a hook is declared, and the only place its C types are written.
//! - `signatures`: `args::NAME` (a struct of the hook's C arguments) and
//!   `ret::NAME` (its C result) for every hook of the table
//!   (`signatures!`), which the hook's body takes and answers.
//! - `real`: `resolve()`, called once by the constructor before anything
//!   else, and for each hook of the table that has one, `real::NAME`, the
//!   system's function of that name (never the hook), with the same C
//!   signature; and `interposed()`, asked once by the constructor: whether
//!   the program's calls reach the hooks at all (a library the dynamic
//!   loader loaded without binding the program to it stays off and says
//!   so). Nothing is looked up from inside a hook.
//! - `exports`: what makes the dynamic loader bind the program's calls to
//!   the hooks (Linux: exports under the C names; macOS: the
//!   `__DATA,__interpose` table and its replacements): the only `extern
//!   "C"` functions of the hooks' names, generated from the table, each
//!   calling its hook's body with `args::NAME`. Nothing calls into it.
//! - `hooks`: the bodies of the platform's own hooks, as the shared ones in
//!   `hooks.rs` are: `unsafe fn NAME(args::NAME { .. }: args::NAME) ->
//!   ret::NAME`, never restating a C type.
//! - `os`: `RealOs`, the platform's implementation of the core's `Os`
//!   trait (its contract: `munmapq_core::os::Os`).
#![no_std]

mod environment;
mod errno;
mod hooks;
mod init;
mod live;
mod panic;
mod posix;
mod selfio;
mod trace;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as platform;

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
use macos as platform;

use munmapq_core::engine::Engine;

/// The one engine of this process, `const`-initialised to all zero bytes
/// (so it sits in `.bss`): usable (as a pure pass-through) before the
/// constructor has run.
pub(crate) static ENGINE: Engine = Engine::new();

/// The hooks every platform has (their bodies are in `hooks.rs`), for a
/// platform's `hook_table!`. Each entry is a C function's name and
/// signature and, in brackets, what stands in for its real function on
/// Linux until the constructor has found it (`syscall SYS_NAME`: the raw
/// system call with the same arguments). The types are `libc`'s, named
/// where the table is expanded.
///
/// `shared_hooks!(generate PLATFORM-ENTRIES...)` expands to
/// `generate! { shared { THESE-ENTRIES } platform { PLATFORM-ENTRIES } }`.
/// scripts/inspect_macho.py reads this list (one entry a line).
macro_rules! shared_hooks {
    ($generate:ident $($platform:tt)*) => {
        $generate! {
            shared {
                mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, [syscall SYS_mmap];
                munmap(addr: *mut c_void, len: size_t) -> c_int, [syscall SYS_munmap];
                mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int, [syscall SYS_mprotect];
                madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int, [syscall SYS_madvise];
                mlock(addr: *const c_void, len: size_t) -> c_int, [syscall SYS_mlock];
                munlock(addr: *const c_void, len: size_t) -> c_int, [syscall SYS_munlock];
                mlockall(flags: c_int) -> c_int, [syscall SYS_mlockall];
                munlockall() -> c_int, [syscall SYS_munlockall];
                msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int, [syscall SYS_msync];
                mincore(addr: *mut c_void, len: size_t, vec: *mut c_void) -> c_int, [syscall SYS_mincore];
            }
            platform { $($platform)* }
        }
    };
}
pub(crate) use shared_hooks;

/// For a platform's `signatures.rs`: from `hook_table!`, the only place a
/// hook's C types are written, `args::NAME` (a struct of the hook's C
/// arguments, under their names in the table) and `ret::NAME` (its C
/// result) for every hook. A hook's body takes the one and answers the
/// other, so it never restates the types; the platform's `exports` writes
/// the C function around it from the same entry, and the compiler holds
/// the two together. The types are named where this is expanded.
macro_rules! signatures {
    (shared { $($shared:tt)* } platform { $($platform:tt)* }) => {
        $crate::signatures!(@all $($shared)* $($platform)*);
    };
    (@all $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty $(, [$($stand_in:tt)*])?; )*) => {
        /// Each hook's C arguments, a struct named after the hook.
        pub mod args {
            use super::*;
            $(
                #[doc = concat!("The C arguments of `", stringify!($name), "`.")]
                #[allow(non_camel_case_types)]
                pub struct $name { $(pub $arg: $ty,)* }
            )*
        }
        /// Each hook's C result, named after the hook.
        pub mod ret {
            use super::*;
            $(
                #[doc = concat!("The C result of `", stringify!($name), "`.")]
                #[allow(non_camel_case_types)]
                pub type $name = $ret;
            )*
        }
    };
}
pub(crate) use signatures;
