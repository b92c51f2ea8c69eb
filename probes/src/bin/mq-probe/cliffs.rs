//! Where munmapq's own bookkeeping could cost more than the calls it
//! saves: a fork with a full queue, a process near `vm.max_map_count`.
//! `tests/cost_cliffs.rs` counts their system calls with and without the
//! library.

use munmapq_check::sys::{self, page, peek};

fn open_ro(path: &str) -> i32 {
    sys::open(path, libc::O_RDONLY)
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0)
}

/// What each child does: the last one counts its mappings; then it exits.
fn in_the_child(last: bool) -> ! {
    if last {
        println!("the last child has {} mappings", mappings());
    }
    // SAFETY: ends the child at once.
    unsafe { libc::_exit(0) }
}

extern "C" fn cloned(last: *mut libc::c_void) -> libc::c_int {
    in_the_child(!last.is_null())
}

/// A child that gets a copy of this process, made `how`: `fork` (libc's,
/// with the atfork handlers), `_Fork` (glibc's, without them), `syscall`
/// (`syscall(SYS_fork)`, or `SYS_clone` where there is no `SYS_fork`),
/// `clone` (glibc's, without `CLONE_VM`: the child runs [`cloned`] on
/// its copy of `stack`).
fn copy(how: &str, last: bool, stack: &mut [u8]) -> libc::pid_t {
    // SAFETY: each makes a child of this single-threaded process that
    // only counts its mappings and exits.
    unsafe {
        match how {
            "fork" => libc::fork(),
            "_Fork" => {
                let f = libc::dlsym(libc::RTLD_DEFAULT, c"_Fork".as_ptr());
                assert!(!f.is_null(), "no _Fork in this C library");
                let f: extern "C" fn() -> libc::pid_t = core::mem::transmute(f);
                f()
            }
            #[cfg(target_arch = "x86_64")]
            "syscall" => libc::syscall(libc::SYS_fork) as libc::pid_t,
            #[cfg(not(target_arch = "x86_64"))]
            "syscall" => libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) as libc::pid_t,
            "clone" => {
                // The stack grows down from its 16-byte aligned end.
                let end = stack.as_mut_ptr().add(stack.len());
                let top = end.sub(end as usize % 16);
                let arg = if last { top } else { core::ptr::null_mut() };
                libc::clone(cloned, top.cast(), libc::SIGCHLD, arg.cast())
            }
            _ => panic!("fork, _Fork, syscall or clone, not {how}"),
        }
    }
}

/// `windows` one-page windows of `file` queued, none touching another
/// (every other window stays mapped), then `forks` children made `how`
/// (see [`copy`]) that each exit at once: neither the child nor the fork
/// must pay for the parent's queue. Says how many mappings the parent
/// had before the first fork and at most right after each, how many the
/// last child had, and how long the forks took (with their waits).
pub fn fork_with_a_full_queue(file: &str, windows: usize, forks: usize, how: &str) {
    let p = page();
    let fd = open_ro(file);
    let all: Vec<usize> = (0..2 * windows)
        .map(|i| sys::map_file(fd, (i % 4096) * p, p).expect("mmap"))
        .collect();
    for a in all.iter().step_by(2) {
        sys::munmap(*a, p).expect("munmap");
    }
    // A clone child's stack (its own copy of it).
    let mut stack = vec![0u8; 256 << 10];
    println!(
        "before the first fork the parent has {} mappings",
        mappings()
    );
    let mut after = 0;
    let mut took = std::time::Duration::ZERO;
    for f in 0..forks {
        let t = std::time::Instant::now();
        let child = copy(how, f + 1 == forks, &mut stack);
        if child == 0 {
            in_the_child(f + 1 == forks);
        }
        assert!(child > 0, "{how}: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: our child, a valid out-pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        took += t.elapsed();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        after = after.max(mappings());
    }
    println!("right after each fork the parent had at most {after} mappings");
    println!("{forks} forks ({how}) took {:.3} s", took.as_secs_f64());
    // A window of the queue mapped again: a fork child must get it, as
    // it would a fresh mapping.
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
