//! The C library's own mappings (large mallocs, thread
//! stacks) never pass through the hooks, so the queue must leave them room
//! under `RLIMIT_AS` and `vm.max_map_count`. Each scenario prints what the
//! program saw; the tests compare it with the same run without munmapq.

use munmapq_check::sys;

pub fn statm_size() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = s.split(' ').next().unwrap().parse().unwrap();
    pages * sys::page()
}

fn say(line: &str) {
    // write(2) directly: no stdout buffer allocated between the checks.
    let b = format!("{line}\n");
    // SAFETY: a valid buffer.
    unsafe { libc::write(1, b.as_ptr().cast(), b.len()) };
}

/// Maps and unmaps `total` bytes of file windows of `win` bytes, one at a
/// time (each munmap is deferrable).
fn cycle_windows(file: &str, total: usize, win: usize) {
    let fd = sys::open(file, libc::O_RDONLY);
    assert!(fd >= 0, "open {file}");
    for i in 0..total / win {
        let a = sys::map_file(fd, i * win, win).expect("map window");
        sys::peek(a, 0);
        sys::munmap(a, win).expect("munmap");
    }
    sys::close(fd);
}

pub fn try_malloc(len: usize) -> bool {
    // SAFETY: malloc/free of our own block; one byte per page touched is
    // not needed: the question is whether the address space is there.
    unsafe {
        // black_box: the compiler may otherwise elide a malloc/free pair.
        let p = std::hint::black_box(libc::malloc(len));
        let ok = !p.is_null();
        libc::free(p);
        ok
    }
}

pub fn set_as_limit(limit: usize) {
    let rl = libc::rlimit {
        rlim_cur: limit as libc::rlim_t,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0);
}

/// `RLIMIT_AS` set by the program to leave `room_mib` MiB, then
/// `queue_kib` KiB of windows mapped and unmapped, then
/// `malloc(alloc_mib MiB)`.
pub fn as_room(file: &str, room_mib: usize, queue_kib: usize, alloc_mib: usize) {
    set_as_limit(statm_size() + (room_mib << 20));
    cycle_windows(file, queue_kib << 10, 256 << 10);
    say(&format!(
        "malloc({alloc_mib} MiB) with {room_mib} MiB of room after {queue_kib} KiB of windows: {}",
        if try_malloc(alloc_mib << 20) {
            "ok"
        } else {
            "NULL"
        }
    ));
}

/// Run under a limit set before exec (`ulimit -v`): the room left is
/// measured first, then windows are cycled, then `malloc(room - 2 MiB)`.
pub fn as_headroom(file: &str, queue_kib: usize) {
    let mut rl: libc::rlimit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut rl) };
    assert!(rl.rlim_cur != libc::RLIM_INFINITY, "run me under ulimit -v");
    let room = rl.rlim_cur as usize - statm_size();
    cycle_windows(file, queue_kib << 10, 256 << 10);
    let ok = try_malloc(room - (2 << 20));
    say(&format!(
        "malloc(headroom - 2 MiB) after {queue_kib} KiB of windows: {}",
        if ok { "ok" } else { "NULL" }
    ));
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

extern "C" fn wait_at_barrier(b: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: the barrier outlives every thread (joined before it goes).
    unsafe { libc::pthread_barrier_wait(b.cast()) };
    std::ptr::null_mut()
}

/// Fills the address space with mappings to within `left` of
/// `vm.max_map_count`, maps and unmaps `windows` one-page windows, then
/// creates `threads` threads that all live at once.
pub fn map_room(file: &str, left: usize, windows: usize, threads: usize) {
    let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let page = sys::page();
    let fill = max.saturating_sub(left + map_count() + 8);
    for i in 0..fill {
        // Alternating protections: neighbours never merge into one mapping.
        let prot = if i % 2 == 0 {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        // SAFETY: a fresh anonymous mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "filler mapping {i}");
    }
    let fd = sys::open(file, libc::O_RDONLY);
    for i in 0..windows {
        let a = sys::map_file(fd, i * page, page).expect("map window");
        sys::peek(a, 0);
        sys::munmap(a, page).expect("munmap");
    }
    sys::close(fd);
    // SAFETY: plain data; initialised by pthread_barrier_init below.
    let mut barrier: libc::pthread_barrier_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid barrier for `threads + 1` waiters at most.
    unsafe { libc::pthread_barrier_init(&mut barrier, std::ptr::null(), threads as u32 + 1) };
    // SAFETY: plain data; initialised by pthread_attr_init below.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid attribute object; 64 KiB stacks.
    unsafe {
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setstacksize(&mut attr, 64 << 10);
    }
    let mut ids = Vec::with_capacity(threads);
    let mut failed = 0;
    for _ in 0..threads {
        let mut t: libc::pthread_t = 0;
        // SAFETY: `barrier` lives until every created thread is joined.
        let r = unsafe {
            libc::pthread_create(
                &mut t,
                &attr,
                wait_at_barrier,
                (&mut barrier as *mut libc::pthread_barrier_t).cast(),
            )
        };
        if r == 0 {
            ids.push(t);
        } else {
            failed += 1;
        }
    }
    let created = ids.len();
    if failed == 0 {
        // SAFETY: every thread waits at the barrier with us.
        unsafe { libc::pthread_barrier_wait(&mut barrier) };
        for t in ids {
            // SAFETY: our own joinable threads.
            unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
        }
    }
    // (If some failed, the created threads wait at a barrier that never
    // opens; the process exit ends them.)
    say(&format!(
        "{windows} windows within {left} mappings of the limit: {created} of {threads} pthread_create succeeded"
    ));
}
