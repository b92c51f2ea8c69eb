//! Linux: every hook of `hook_table!` exported under its C name, found
//! first by the dynamic linker because `LD_PRELOAD` puts this library
//! first, with the C signature of its table entry: the only `extern "C"`
//! function of a hook's name (its body takes `args::NAME`). Each export
//! records its frame for the longjmp recovery (but see
//! `frame_unless_laned!`), then runs the hook.

use super::hook_index as linux_hooks;
use super::signatures::args;
use crate::hooks as shared_hooks;
use libc::{c_char, c_int, c_uint, c_ulong, c_void, off_t, size_t, FILE};
use libc::{c_long, pid_t, rlimit};
// The types of policy.rs's hooks.
use libc::{iovec, ssize_t};

/// Records this exported function's frame as the thread's innermost hook
/// frame while it runs (`frames.rs`): the first statement of every export.
macro_rules! hook_frame {
    () => {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        let here = 0u8;
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        let _frame = super::frames::Frame::enter(core::ptr::addr_of!(here) as usize);
    };
}

/// The hooks whose common calls never take the table (they pass straight
/// to the kernel, or only count a close) record no frame on entry: each of
/// their ways to the table records its own (`Os::framed`, called by the
/// engine). Every other export records its frame first.
macro_rules! frame_unless_laned {
    (mmap) => {};
    (mmap64) => {};
    (munmap) => {};
    (close) => {};
    (__close) => {};
    ($name:ident) => {
        hook_frame!();
    };
}

/// `#[no_mangle]` exports of the table's hooks: the shared ones run
/// `hooks.rs`'s function of the same name, Linux's own the function
/// `linux/hook_index.rs` names.
macro_rules! exports {
    (shared { $($shared:tt)* } platform { $($platform:tt)* }) => {
        exports!(@from shared_hooks $($shared)*);
        exports!(@from linux_hooks $($platform)*);
    };
    (@from $hooks:ident $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty, [$($stand_in:tt)*]; )*) => {
        $(
            /// # Safety
            /// As for the C function of the same name.
            #[no_mangle]
            #[allow(non_snake_case, clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                frame_unless_laned!($name);
                // SAFETY: the caller's own arguments, forwarded.
                unsafe { $hooks::$name(args::$name { $($arg),* }) }
            }
        )*
    };
}

super::hook_table!(exports);
