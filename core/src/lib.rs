//! munmapq's core: everything that decides, nothing that hooks.
//!
//! `no_std` outside tests, so nothing here can allocate; the export layer in
//! `interpose/` calls into [`engine::Engine`] from inside hooked libc calls.
#![cfg_attr(not(test), no_std)]

pub mod close_seq;
pub mod config;
pub mod context;
pub mod dirty;
pub mod dyld_env;
// Under `--cfg loom` only the lock-free part is built, with loom's atomics
// (which cannot live in the engine's `const` statics).
#[cfg(not(loom))]
pub mod engine;
/// The fake kernel of the unit tests and `mq-replay`.
#[cfg(all(not(loom), any(test, feature = "fake-os")))]
pub mod fake;
pub mod fds;
pub mod file;
pub mod gate;
#[cfg(not(loom))]
pub mod holder;
pub mod maps_text;
#[cfg(not(loom))]
pub mod names;
pub mod os;
pub mod payoff;
#[cfg(not(loom))]
pub mod queue;
pub mod readonly_fds;
#[cfg(not(loom))]
pub mod sizing;
pub mod stats;
pub mod table;
pub mod trace;
