//! The file calls munmapq makes for itself (the trace, the stats file):
//! `open`, `write` and `close`, on macOS their non-cancelable variants.
//!
//! On macOS all three are pthread cancellation points (xnu
//! `bsd/vfs/vfs_syscalls.c` `open`, `bsd/kern/sys_generic.c` `write`,
//! `bsd/kern/kern_descrip.c` `sys_close` call `__pthread_testcancel(1)`), so
//! a trace record written from inside a hook, or the exit report, would act
//! on a pending cancel in the middle of the program's own call; the
//! `$NOCANCEL` variants (see `macos/real.rs`) never do.
//! scripts/inspect_macho.py checks that the dylib imports no cancelable name
//! but the program's own calls it interposes.

#[cfg(target_os = "macos")]
pub use crate::platform::real::libsystem::{
    close_nocancel as close, open_nocancel as open, write_nocancel as write,
};

#[cfg(target_os = "linux")]
pub use libc::{close, open, write};
