//! Calls that reach the kernel by other ways than the functions munmapq
//! hooks by name: libc's `syscall` with the number of a hooked call,
//! `shm_unlink` (glibc unlinks inside it), `mbind` and `process_madvise`
//! (a state a reused mapping must not carry), and unlinks made while
//! another thread holds munmapq's table. Each scenario prints what the
//! program saw; `tests/past_hooks.rs` runs it with and without the library
//! and requires the same output and exit status. A scenario the kernel
//! here cannot run prints `SKIPPED: why`.

use munmapq_check::sys::{self, page, peek, poke};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::Relaxed};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn said(r: libc::c_long) -> String {
    if r == -1 {
        sys::errname(errno())
    } else {
        "ok".into()
    }
}

fn skipped(why: String) {
    println!("SKIPPED: {why}");
}

fn c(path: &str) -> CString {
    CString::new(path).unwrap()
}

fn open_ro(path: &str) -> i32 {
    // SAFETY: a NUL-terminated path.
    unsafe { libc::open(c(path).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
}

/// How many lines of `/proc/self/maps` name `path`.
fn maps_of(path: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter(|l| l.contains(path)).count()
}

/// Maps `len` bytes of `fd` read-only and private, reads each page,
/// closes `fd`, unmaps: with the library, the munmap is deferred (a close
/// after it would release the mapping itself).
fn map_close_unmap(fd: i32, len: usize) {
    let a = sys::map_file(fd, 0, len).expect("mmap");
    for p in (0..len).step_by(page()) {
        peek(a, p);
    }
    sys::close(fd);
    sys::munmap(a, len).expect("munmap");
}

/// Where deleted files go: /dev/shm where it is a tmpfs, else `dir`.
fn shm_or(dir: &str) -> String {
    // SAFETY: plain out-parameter.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path, a valid out-pointer.
    let tmpfs =
        unsafe { libc::statfs(c"/dev/shm".as_ptr(), &mut fs) } == 0 && fs.f_type == 0x0102_1994;
    if tmpfs {
        "/dev/shm".into()
    } else {
        dir.into()
    }
}

/// A 4 MiB file mapped, closed, unmapped, then unlinked through
/// `syscall(SYS_unlink)` (x86_64) and `syscall(SYS_unlinkat)`: no mapping
/// of the deleted file may stay (its space would stay taken).
pub fn raw_unlink(dir: &str) {
    let at = shm_or(dir);
    let pid = std::process::id();
    // SYS_unlink exists on x86_64 only (aarch64 has unlinkat alone).
    #[cfg(target_arch = "x86_64")]
    let calls = [
        ("unlinkat", libc::SYS_unlinkat),
        ("unlink", libc::SYS_unlink),
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let calls = [("unlinkat", libc::SYS_unlinkat)];
    for (name, nr) in calls {
        let path = format!("{at}/munmapq-raw-{name}-{pid}.bin");
        sys::make_file(&path, 1024);
        let fd = open_ro(&path);
        map_close_unmap(fd, 1024 * page());
        let p = c(&path);
        // SAFETY: a NUL-terminated path; the system call's own arguments.
        let r = unsafe {
            if nr == libc::SYS_unlinkat {
                libc::syscall(nr, libc::AT_FDCWD, p.as_ptr(), 0)
            } else {
                libc::syscall(nr, p.as_ptr())
            }
        };
        println!(
            "syscall(SYS_{name}): {}; mappings of the deleted file left: {}",
            said(r),
            maps_of(&path)
        );
    }
}

/// A POSIX shared memory object of 4 MiB, opened read-only, mapped
/// private, closed, unmapped and `shm_unlink`ed: nothing may keep it.
pub fn shm_unlink() {
    let name = format!("/munmapq-shm-{}", std::process::id());
    let cname = c(&name);
    let len = 1024 * page();
    // SAFETY: a NUL-terminated name.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o600) };
    if fd < 0 {
        return skipped(format!("shm_open: {}", sys::errname(errno())));
    }
    let data: Vec<u8> = (0..len).map(sys::pattern).collect();
    // SAFETY: `data` is `len` bytes.
    let w = unsafe { libc::write(fd, data.as_ptr().cast(), len) };
    assert_eq!(w, len as isize);
    sys::close(fd);
    // SAFETY: as above.
    let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDONLY, 0) };
    assert!(fd >= 0);
    let a = sys::map_file(fd, 0, len).expect("mmap");
    peek(a, len - 1);
    sys::close(fd);
    sys::munmap(a, len).expect("munmap");
    // SAFETY: a NUL-terminated name.
    let r = unsafe { libc::shm_unlink(cname.as_ptr()) };
    println!(
        "shm_unlink: {}; mappings of the object left: {}",
        said(r as libc::c_long),
        maps_of(&format!("/dev/shm{name}"))
    );
}

/// `syscall(SYS_mremap)` on a file mapping: (1) shrinking it, after which
/// the program unmaps the length it first had and places a page of its own
/// in the freed tail; (2) moving a page of its own into a range it had
/// unmapped. A later call over the range (mincore) must not take the
/// program's page away.
pub fn raw_mremap(file: &str) {
    let p = page();
    let fd = open_ro(file);
    let anon = |at: usize, flags: i32| {
        sys::mmap(
            at,
            p,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
            false,
        )
    };
    // (1) shrink, unmap the old length, a page in the tail.
    let a = sys::map_file(fd, 0, 4 * p).expect("mmap");
    // SAFETY: a mapping of this program.
    let r = unsafe { libc::syscall(libc::SYS_mremap, a, 4 * p, 2 * p, 0, 0) };
    println!("raw mremap shrink: {}", said(r));
    println!(
        "munmap of the old length: {}",
        sys::show(sys::munmap(a, 4 * p), false)
    );
    let noreplace = sys::fixed_noreplace().expect("MAP_FIXED_NOREPLACE");
    let t = anon(a + 2 * p, noreplace);
    println!("page placed in the freed tail: {}", t.is_ok());
    if let Ok(t) = t {
        poke(t, 0, b'Z');
        println!(
            "mincore over the old range: {}",
            sys::show(sys::mincore(a, 4 * p), false)
        );
        println!("the page reads: {}", peek(t, 0) as char);
    }
    // (2) a page of the program moved into a range it had unmapped.
    let b = sys::map_file(fd, 0, 4 * p).expect("mmap");
    sys::munmap(b, 4 * p).expect("munmap");
    let s = anon(0, 0).expect("anonymous page");
    poke(s, 0, b'Y');
    let flags = libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED;
    // SAFETY: the program's own page, moved into a range it gave up.
    let r = unsafe { libc::syscall(libc::SYS_mremap, s, p, p, flags, b + p) };
    println!("raw mremap into the unmapped range: {}", said(r));
    if r != -1 {
        println!(
            "mincore over the range: {}",
            sys::show(sys::mincore(b, 4 * p), false)
        );
        println!("the moved page reads: {}", peek(b + p, 0) as char);
    }
    sys::close(fd);
}

/// `mbind(MPOL_BIND)` on a window (through `syscall`, as libnuma makes
/// it), unmapped and mapped again: the new mapping has the default policy.
pub fn mbind(file: &str) {
    const MPOL_BIND: libc::c_long = 2;
    const MPOL_F_ADDR: libc::c_long = 2;
    let p = page();
    let mask: libc::c_ulong = 1;
    let fd = open_ro(file);
    let a = sys::map_file(fd, 0, 4 * p).expect("mmap");
    // SAFETY: a mapping of this program; a valid node mask.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            a,
            4 * p,
            MPOL_BIND,
            &mask as *const libc::c_ulong,
            64,
            0,
        )
    };
    if r != 0 {
        sys::munmap(a, 4 * p).unwrap();
        return skipped(format!("mbind: {} (no NUMA here?)", sys::errname(errno())));
    }
    sys::munmap(a, 4 * p).expect("munmap");
    let b = sys::map_file(fd, 0, 4 * p).expect("mmap");
    let mut mode: libc::c_int = -1;
    // SAFETY: a valid out-pointer; an address of this program.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            0,
            0,
            b,
            MPOL_F_ADDR,
        )
    };
    println!("get_mempolicy of the new mapping: {} mode {mode}", said(r));
    sys::munmap(b, 4 * p).expect("munmap");
    sys::close(fd);
}

extern "C" {
    // glibc 2.35+.
    fn process_madvise(
        pidfd: libc::c_int,
        iov: *const libc::iovec,
        n: libc::size_t,
        advice: libc::c_int,
        flags: libc::c_uint,
    ) -> libc::ssize_t;
}

/// `process_madvise(MADV_DONTFORK)` on this process's window (by name and
/// through `syscall`), unmapped, mapped again, then fork: the child has
/// the new mapping and reads it.
pub fn process_madvise_self(file: &str) {
    let p = page();
    // SAFETY: no pointers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    if pidfd < 0 {
        return skipped(format!("pidfd_open: {}", sys::errname(errno())));
    }
    let fd = open_ro(file);
    for by_name in [true, false] {
        let a = sys::map_file(fd, 0, 4 * p).expect("mmap");
        peek(a, 0);
        let iov = libc::iovec {
            iov_base: a as *mut libc::c_void,
            iov_len: 4 * p,
        };
        // SAFETY: one valid iovec over a mapping of this program.
        let r = unsafe {
            if by_name {
                process_madvise(pidfd, &iov, 1, libc::MADV_DONTFORK, 0) as libc::c_long
            } else {
                libc::syscall(
                    libc::SYS_process_madvise,
                    pidfd,
                    &iov,
                    1,
                    libc::MADV_DONTFORK,
                    0,
                )
            }
        };
        if r < 0 {
            sys::munmap(a, 4 * p).unwrap();
            return skipped(format!(
                "process_madvise(MADV_DONTFORK) on itself: {} (Linux 6.13+)",
                sys::errname(errno())
            ));
        }
        sys::munmap(a, 4 * p).expect("munmap");
        let b = sys::map_file(fd, 0, 4 * p).expect("mmap");
        // SAFETY: fork; the child only reads and exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = peek(b, 0) == sys::pattern(0);
            // SAFETY: ends the child without running the parent's atexit.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: our child, a valid out-pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        let how = if libc::WIFSIGNALED(status) {
            format!("killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("exit {}", libc::WEXITSTATUS(status))
        };
        let via = if by_name {
            "process_madvise"
        } else {
            "syscall"
        };
        println!("{via}: the fork child reading the new mapping: {how}");
        sys::munmap(b, 4 * p).expect("munmap");
    }
    sys::close(fd);
}

/// `threads` threads each create, map, close, unmap and unlink `rounds`
/// files in `dir` while the others use munmapq's table; then one more
/// map and unmap (whoever takes the table next applies what an unlink
/// that found it busy recorded). No mapping of a deleted file may stay.
pub fn busy_unlink(dir: &str, threads: usize, rounds: usize) {
    let at = shm_or(dir);
    let tag = format!("munmapq-busy-{}", std::process::id());
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (at, tag) = (at.clone(), tag.clone());
            std::thread::spawn(move || {
                for i in 0..rounds {
                    let path = format!("{at}/{tag}-{t}-{i}.bin");
                    sys::make_file(&path, 4);
                    let fd = open_ro(&path);
                    map_close_unmap(fd, 4 * page());
                    std::fs::remove_file(&path).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let last = format!("{at}/{tag}-last.bin");
    sys::make_file(&last, 1);
    let fd = open_ro(&last);
    let a = sys::map_file(fd, 0, page()).expect("mmap");
    sys::munmap(a, page()).expect("munmap");
    sys::close(fd);
    std::fs::remove_file(&last).unwrap();
    println!(
        "{} files unlinked; mappings of deleted files left: {}",
        threads * rounds,
        maps_of(&tag)
    );
}

/// `rounds` times: a file of its own in `dir` mapped, closed and unmapped
/// (queued with the library), then unlinked, while a timer's handler
/// calls `how` every 20 microseconds during the munmap (`mlockall`: `mlockall(MCL_CURRENT |
/// MCL_ONFAULT)` and `munlockall`; `process-madvise`: `MADV_COLD` on a
/// page of its own through a pidfd of itself). The handler often lands
/// inside the munmap's hook while it holds munmapq's table, and finds it
/// busy. No
/// mapping of a deleted file may stay.
pub fn busy_whole(dir: &str, how: &str, rounds: usize) {
    let at = shm_or(dir);
    let tag = format!("munmapq-whole-{}", std::process::id());
    // SAFETY: no pointers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as i32;
    let page_of_mine = sys::mmap(
        0,
        page(),
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
        false,
    )
    .expect("mmap");
    WHOLE_PIDFD.store(pidfd, Relaxed);
    WHOLE_PAGE.store(page_of_mine, Relaxed);
    WHOLE_MLOCKALL.store(how == "mlockall", Relaxed);
    if whole() < 0 {
        return skipped(format!("{how}: {}", sys::errname(errno())));
    }
    let every = |usec: libc::suseconds_t| {
        let t = libc::timeval {
            tv_sec: 0,
            tv_usec: usec,
        };
        let it = libc::itimerval {
            it_interval: t,
            it_value: t,
        };
        // SAFETY: a valid itimerval.
        unsafe { libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut()) };
    };
    // SAFETY: installs a handler that makes only the calls of `whole`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = whole_on_alarm as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
    every(20);
    for i in 0..rounds {
        let path = format!("{at}/{tag}-{i}.bin");
        // Past 1 MiB (never a small mapping the library may step aside
        // for), and sparse: quick to make.
        let len = (1 << 20) + page();
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(len as u64))
            .unwrap();
        let fd = open_ro(&path);
        let a = sys::map_file(fd, 0, len).expect("mmap");
        peek(a, 0);
        sys::close(fd);
        // The handler calls only while the munmap is under way, which then
        // holds the table: a call before would stop the mapping's tracking.
        WHOLE_ARMED.store(true, Relaxed);
        sys::munmap(a, len).expect("munmap");
        WHOLE_ARMED.store(false, Relaxed);
        std::fs::remove_file(&path).unwrap();
    }
    every(0);
    println!(
        "{rounds} rounds under {how}; mappings of deleted files left: {}",
        maps_of(&tag)
    );
}

static WHOLE_PIDFD: AtomicI32 = AtomicI32::new(-1);
static WHOLE_PAGE: AtomicUsize = AtomicUsize::new(0);
static WHOLE_MLOCKALL: AtomicBool = AtomicBool::new(false);
static WHOLE_ARMED: AtomicBool = AtomicBool::new(false);

/// The call of [`busy_whole`]: -1 if it failed.
fn whole() -> libc::c_long {
    // SAFETY: plain calls; the iovec covers a page of this program.
    unsafe {
        if WHOLE_MLOCKALL.load(Relaxed) {
            let r = libc::mlockall(libc::MCL_CURRENT | libc::MCL_ONFAULT);
            libc::munlockall();
            r as libc::c_long
        } else {
            let iov = libc::iovec {
                iov_base: WHOLE_PAGE.load(Relaxed) as *mut libc::c_void,
                iov_len: page(),
            };
            process_madvise(WHOLE_PIDFD.load(Relaxed), &iov, 1, libc::MADV_COLD, 0) as libc::c_long
        }
    }
}

extern "C" fn whole_on_alarm(_: libc::c_int) {
    // Once per munmap: a call slower than the timer's period would
    // otherwise never let the munmap end.
    if !WHOLE_ARMED.swap(false, Relaxed) {
        return;
    }
    let saved = errno();
    whole();
    // SAFETY: the thread's errno, as the interrupted code left it.
    unsafe { *libc::__errno_location() = saved };
}

/// `syscall(SYS_mprotect)` making a window writable, a write, munmap and
/// the same window mapped again: the new mapping shows the file, not the
/// write. Then `syscall(SYS_madvise, MADV_DONTFORK)`, munmap, mapped
/// again, fork: the child reads the new mapping.
pub fn raw_calls(file: &str) {
    let p = page();
    let fd = open_ro(file);
    let a = sys::map_file(fd, 0, 4 * p).expect("mmap");
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as libc::c_long;
    // SAFETY: a mapping of this program.
    let r = unsafe { libc::syscall(libc::SYS_mprotect, a, 4 * p, rw) };
    println!("raw mprotect to read-write: {}", said(r));
    poke(a, 0, b'X');
    sys::munmap(a, 4 * p).expect("munmap");
    let b = sys::map_file(fd, 0, 4 * p).expect("mmap");
    println!(
        "the file's first byte reads as written: {}",
        peek(b, 0) == b'X'
    );
    sys::munmap(b, 4 * p).expect("munmap");
    let c = sys::map_file(fd, 0, 4 * p).expect("mmap");
    // SAFETY: a mapping of this program.
    let r = unsafe { libc::syscall(libc::SYS_madvise, c, 4 * p, libc::MADV_DONTFORK) };
    println!("raw madvise(MADV_DONTFORK): {}", said(r));
    sys::munmap(c, 4 * p).expect("munmap");
    let d = sys::map_file(fd, 0, 4 * p).expect("mmap");
    // SAFETY: fork; the child only reads and exits.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let ok = peek(d, 0) == sys::pattern(0);
        // SAFETY: ends the child without the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child, a valid out-pointer.
    unsafe { libc::waitpid(child, &mut status, 0) };
    println!(
        "the fork child reading the new mapping: signalled {} exit {}",
        libc::WIFSIGNALED(status),
        libc::WEXITSTATUS(status)
    );
    sys::munmap(d, 4 * p).expect("munmap");
    sys::close(fd);
}
