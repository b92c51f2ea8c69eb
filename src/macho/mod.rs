//! Mach-O architectures, read from the file header; which slice the kernel
//! runs and which library slices dyld then loads; dyld's `__RESTRICT`
//! rule. Pure functions on bytes, so they are tested on Linux with fake
//! headers; macOS uses them to keep dyld from killing a program (an
//! inserted dylib that cannot load is fatal: dyld logs "terminating because
//! inserted dylib ... could not be loaded", dyld-1378
//! dyld/DyldRuntimeState.cpp, `RuntimeState::loadInsertedLibraries`).
//!
//! Header layouts: xnu EXTERNAL_HEADERS/mach-o/loader.h (`mach_header_64`,
//! `segment_command_64`, `section_64` and their 32-bit forms) and
//! mach-o/fat.h (`fat_header`, `fat_arch`, `fat_arch_64`: big-endian);
//! CPU types and subtypes: xnu osfmk/mach/machine.h.

// Linux uses these in the doctor's judgement and in tests only.
#![cfg_attr(not(target_os = "macos"), allow(dead_code))]

mod arch;
#[cfg(test)]
pub mod fake;
mod host;
mod parse;
mod slice_choice;
#[cfg(test)]
mod tests;

pub use arch::{names, Arch};
pub use host::Host;
pub use parse::{archs, head, restricted, slice_load_commands};
pub use slice_choice::{kernel_refuses, process_arch, would_kill};
// What only the macOS build uses outside this module.
#[cfg(target_os = "macos")]
pub use host::{arm64e_preview_abi, bootargs, sysctl};
