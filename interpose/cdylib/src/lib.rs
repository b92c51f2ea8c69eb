//! libmunmapq.so / libmunmapq.dylib in the workspace: the
//! `munmapq-interpose` crate, linked whole (its hooks, their exports, its
//! start-up and what a `no_std` library needs).
#![no_std]

// Not in a test build of this crate (`cargo test --all-targets` makes one):
// the test harness brings std, whose panic handler would be a second one.
#[cfg(not(test))]
extern crate munmapq_interpose;
