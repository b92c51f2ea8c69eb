//! libmunmapq.so / libmunmapq.dylib in the workspace: the
//! `munmapq-interpose` crate, linked whole (its hooks, their exports, its
//! start-up and what a `no_std` library needs).
#![no_std]

extern crate munmapq_interpose;
