//! Long runs: many mappings in a row, threads, fork, signal handlers.
//! Each verifies the bytes it reads and prints what it covered.

use munmapq_check::sys::*;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Maps window `i % windows` of the file `n` times in a row, reading a byte
/// of each of its pages and (unless `leak`) unmapping it. Windows are
/// `MQ_WINDOW_PAGES` pages (default 1). Prints how far it got.
pub fn cycle(file: &str, n: usize, windows: usize, leak: bool) -> i32 {
    let pg = page();
    let pages: usize = std::env::var("MQ_WINDOW_PAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let len = pages * pg;
    let fd = open(file, libc::O_RDONLY);
    let mut wrong = 0;
    for i in 0..n {
        let off = (i % windows) * len;
        match map_file(fd, off, len) {
            Ok(a) => {
                for p in 0..pages {
                    wrong += (peek(a, p * pg + 11) != pattern(off + p * pg + 11)) as usize;
                }
                if !leak {
                    munmap(a, len).unwrap();
                }
            }
            Err(e) => {
                println!("cycle: mmap failed at {i} of {n}: {}", errname(e));
                return 1;
            }
        }
    }
    println!("cycle: {n} mappings, {windows} windows, {wrong} wrong bytes");
    (wrong != 0) as i32
}

static OPS: AtomicUsize = AtomicUsize::new(0);
static WRONG: AtomicUsize = AtomicUsize::new(0);
static VERIFIED: AtomicUsize = AtomicUsize::new(0);

/// Maps a random window (1..=4 pages, so keys differ), checks it, unmaps it.
fn one_op(fd: i32, rng: &mut Rng, file_pages: usize) {
    let pg = page();
    let pages = 1 + rng.below(4) as usize;
    let first = rng.below((file_pages - pages) as u64) as usize;
    let a = map_file(fd, first * pg, pages * pg).expect("mmap");
    let w = wrong_bytes(a, first * pg, pages * pg, 61);
    WRONG.fetch_add(w, Relaxed);
    VERIFIED.fetch_add(pages * pg / 61 + 1, Relaxed);
    munmap(a, pages * pg).expect("munmap");
    OPS.fetch_add(1, Relaxed);
}

fn file_pages(fd: i32) -> usize {
    // SAFETY: plain out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::fstat(fd, &mut st) };
    st.st_size as usize / page()
}

/// Prints the totals: on stdout when they are deterministic (a fixed number
/// of operations), else on stderr (threads that run until told to stop).
fn report(what: &str, deterministic: bool) -> i32 {
    let (ops, wrong, ver) = (
        OPS.load(Relaxed),
        WRONG.load(Relaxed),
        VERIFIED.load(Relaxed),
    );
    let line = format!(
        "{what}: {ops} map/verify/unmap operations, {ver} bytes verified, {wrong} wrong bytes"
    );
    if deterministic {
        println!("{line}");
    } else {
        eprintln!("{line}");
        println!("{what}: {wrong} wrong bytes");
    }
    (wrong != 0) as i32
}

/// `threads` threads doing `ops` operations each.
pub fn threads(file: &str, threads: usize, ops: usize) -> i32 {
    let fd = open(file, libc::O_RDONLY);
    let pages = file_pages(fd);
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9 + t as u64);
                for _ in 0..ops {
                    one_op(fd, &mut rng, pages);
                }
            })
        })
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    report("threads", true)
}

/// Forks `rounds` children while two threads hammer the hooks; each child
/// maps, checks and unmaps 200 windows and exits. A hang is caught by the
/// test's timeout; a bad child by its status.
pub fn forks(file: &str, rounds: usize) -> i32 {
    let fd = open(file, libc::O_RDONLY);
    let pages = file_pages(fd);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hs: Vec<_> = (0..2)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(77 + t);
                while !stop.load(Relaxed) {
                    one_op(fd, &mut rng, pages);
                }
            })
        })
        .collect();
    let mut good = 0;
    for r in 0..rounds {
        // SAFETY: the child only calls async-signal-safe functions and the
        // hooks under test (which must be fork-safe), then _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut rng = Rng(1000 + r as u64);
            let pg = page();
            let mut bad = 0;
            for _ in 0..200 {
                let first = rng.below((pages - 2) as u64) as usize;
                match map_file(fd, first * pg, 2 * pg) {
                    Ok(a) => {
                        bad += wrong_bytes(a, first * pg, 2 * pg, 97);
                        bad += munmap(a, 2 * pg).is_err() as usize;
                    }
                    Err(_) => bad += 1,
                }
            }
            // SAFETY: ends the child without running the parent's handlers.
            unsafe { libc::_exit((bad != 0) as i32) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        good += (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) as usize;
    }
    stop.store(true, Relaxed);
    hs.into_iter().for_each(|h| h.join().unwrap());
    println!("forks: {good} of {rounds} children mapped, verified and exited normally");
    report("forks", false) | (good != rounds) as i32
}

static SIG_FD: AtomicUsize = AtomicUsize::new(0);
static SIG_PAGES: AtomicUsize = AtomicUsize::new(0);
static SIG_RUNS: AtomicUsize = AtomicUsize::new(0);
static SIG_WRONG: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_alarm(_: libc::c_int) {
    // Only async-signal-safe work: the hooks themselves, reads, atomics.
    let pg = page();
    let n = SIG_RUNS.fetch_add(1, Relaxed);
    let first = n % (SIG_PAGES.load(Relaxed) - 1);
    let fd = SIG_FD.load(Relaxed) as i32;
    match map_file(fd, first * pg, pg) {
        Ok(a) => {
            if peek(a, 3) != pattern(first * pg + 3) {
                SIG_WRONG.fetch_add(1, Relaxed);
            }
            if munmap(a, pg).is_err() {
                SIG_WRONG.fetch_add(1, Relaxed);
            }
        }
        Err(_) => {
            SIG_WRONG.fetch_add(1, Relaxed);
        }
    }
}

/// A timer signal every 50us whose handler maps and unmaps, interrupting
/// `ops` operations of the main thread (often inside a hook).
pub fn signals(file: &str, ops: usize) -> i32 {
    let fd = open(file, libc::O_RDONLY);
    let pages = file_pages(fd);
    SIG_FD.store(fd as usize, Relaxed);
    SIG_PAGES.store(pages, Relaxed);
    // SAFETY: installing a handler and an interval timer for this process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        let t = libc::itimerval {
            it_interval: libc::timeval {
                tv_sec: 0,
                tv_usec: 50,
            },
            it_value: libc::timeval {
                tv_sec: 0,
                tv_usec: 50,
            },
        };
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
    let mut rng = Rng(5);
    for _ in 0..ops {
        one_op(fd, &mut rng, pages);
    }
    // SAFETY: stopping the timer.
    unsafe {
        let t: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &t, std::ptr::null_mut());
    }
    let (runs, wrong) = (SIG_RUNS.load(Relaxed), SIG_WRONG.load(Relaxed));
    println!("signals: {runs} handler runs mapped/verified/unmapped, {wrong} failures");
    report("signals", false) | (wrong != 0) as i32
}
