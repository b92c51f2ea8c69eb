//! Every Linux hook of `hook_table!` by its C name, wherever its body
//! lives: what `exports.rs` calls. Only names, no code: the files below
//! may call each other's hooks (`syscall.rs` routes to them) without going
//! through this index.

pub use super::children::*;
pub use super::hooks::*;
pub use super::lastclose::*;

/// glibc's large-file name for mmap: mmap's hook (see `hook_table!`).
pub use crate::hooks::mmap as mmap64;

/// Mount flags and personality: the context of an mmap (`context.rs`).
pub use super::context::{mount, mount_setattr, personality};
/// Memory policy and advice given by other means (`policy.rs`).
pub use super::policy::{mbind, process_madvise};
/// What the program sets up around itself (`sandbox.rs`).
pub use super::sandbox::{prctl, prlimit, prlimit64, setrlimit, setrlimit64};
/// libc's `syscall`, which routes what it would otherwise let past the
/// other hooks (`syscall.rs`).
pub use super::syscall::syscall;
