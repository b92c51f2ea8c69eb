//! Where munmapq's own bookkeeping could cost more than the calls it
//! saves: a fork with a full queue, a process near `vm.max_map_count`.
//! `tests/cost_cliffs.rs` counts their system calls with and without the
//! library.

use munmapq_check::sys::{self, page, peek};

fn open_ro(path: &str) -> i32 {
    sys::open(path, libc::O_RDONLY)
}

/// `windows` one-page windows of `file` queued, none touching another
/// (every other window stays mapped), then `forks` children that each
/// exit at once: a child must not pay for the parent's queue.
pub fn fork_with_a_full_queue(file: &str, windows: usize, forks: usize) {
    let p = page();
    let fd = open_ro(file);
    let all: Vec<usize> = (0..2 * windows)
        .map(|i| sys::map_file(fd, (i % 4096) * p, p).expect("mmap"))
        .collect();
    for a in all.iter().step_by(2) {
        sys::munmap(*a, p).expect("munmap");
    }
    for f in 0..forks {
        // SAFETY: the child only counts its mappings (the last one) and
        // exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            if f + 1 == forks {
                let n = std::fs::read_to_string("/proc/self/maps")
                    .map(|m| m.lines().count())
                    .unwrap_or(0);
                println!("the last child has {n} mappings");
            }
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our child, a valid out-pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
    // A window of the queue mapped again (with the library, a reuse of a
    // mapping the forks above kept out of their children): a fork child
    // must get it, as it would a fresh mapping.
    let again = sys::map_file(fd, 0, p).expect("mmap");
    // SAFETY: the child only reads and exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let ok = peek(again, 0) == sys::pattern(0);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child, a valid out-pointer.
    unsafe { libc::waitpid(child, &mut status, 0) };
    let read = if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit {}", libc::WEXITSTATUS(status))
    };
    sys::munmap(again, p).expect("munmap");
    sys::close(fd);
    println!("{windows} windows unmapped, {forks} children forked");
    println!("a child reading a window mapped again: {read}");
}

/// The process holds `total` mappings (one-page anonymous fillers, none
/// merging with its neighbour), then maps and unmaps a window of `file`
/// `cycles` times: near `vm.max_map_count` the queue may hold little,
/// and finding that out must not cost a read of `/proc/self/maps` each
/// time.
pub fn near_map_count(file: &str, total: usize, cycles: usize) {
    let p = page();
    let now = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0);
    for i in 0..total.saturating_sub(now + 8) {
        let prot = if i % 2 == 0 {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        sys::mmap(0, p, prot, flags, -1, 0, false).expect("filler mapping");
    }
    let fd = open_ro(file);
    for i in 0..cycles {
        let a = sys::map_file(fd, (i % 16) * p, p).expect("map window");
        peek(a, 0);
        sys::munmap(a, p).expect("munmap");
    }
    sys::close(fd);
    println!("{cycles} windows mapped and unmapped among {total} mappings");
}
