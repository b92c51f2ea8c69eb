//! macOS: the real functions are libSystem's, called directly (dyld does
//! not interpose the image that holds the interpose table). Same names and
//! C signatures as the hooks, so `exports_macos.rs` can pair them.

use libc::{c_int, c_void, off_t, size_t};

/// Nothing to resolve on macOS.
pub fn resolve() {}

macro_rules! forward {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            /// # Safety
            /// As for the C function of the same name.
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                // SAFETY: the caller's own arguments; pointer parameters are
                // passed on unchanged (mincore's `char *` is `*mut c_void` here).
                unsafe { libc::$name($($arg as _),*) }
            }
        )*
    };
}

crate::common_hooks!(forward);
