//! A hook may run in a signal handler on an alternate stack the program
//! sized for libc's own calls: `tests/c/altstack.c` raises a handler on a
//! stack of the kernel's minimum (what its signal frame takes here, at
//! least `AT_MINSIGSTKSZ`) plus 2 KiB, with a guard page below, and makes
//! one hooked call there per step: a miss, the first deferral (which reads
//! the process's memory figures), a reuse, a close that asks the kernel
//! about locks, and the range calls. Each must end as without the
//! library, and take at most [`BOUND`] bytes of stack below the handler's
//! frame (libc alone takes 40).
//!
//! The library at d02eb11 read `/proc/self/maps` into a 4 KiB buffer on
//! the stack at the first deferral: the program died of SIGSEGV on that
//! stack (and took 6,632 bytes there on a large one, 5,224 for a miss, in
//! its unoptimized dev build).
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The stack a hook may take, in bytes (measured: 1,544 at most in the
/// release build, 1,772 in the dev build the tests preload, for a miss).
const BOUND: usize = 2048;

#[test]
fn hooks_fit_in_a_signal_stack_of_the_kernels_minimum_plus_2_kib() {
    let build = scratch("altstack-build");
    let exe = c_program("altstack", &build);
    let runs = same_as_without(
        "altstack",
        |dir: &Path| {
            let file = data_file(dir, 64);
            let mut c = Command::new(&exe);
            c.args([file.as_str(), &BOUND.to_string()]);
            c
        },
        &[],
        Duration::from_secs(30),
    );
    for r in runs {
        assert_contains(
            &r.out.stdout,
            "munmap (first deferral): ok, within the bound",
        );
        assert!(
            r.get(munmapq_core::stats::Counter::Deferred) >= 1,
            "the munmap was deferred: {}",
            r.stderr()
        );
        println!("{}", r.stderr().lines().last().unwrap_or(""));
    }
}
