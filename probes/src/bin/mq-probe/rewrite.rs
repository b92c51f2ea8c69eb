//! `mq-probe rewrite FILE ROUNDS`: a file rewritten in place, through
//! another descriptor, while a mapping of it sits unmapped (queued, under
//! munmapq). Each round maps a window, reads it, unmaps it, rewrites the
//! file one way (same size, another size, truncate then write), then maps
//! the window again through the old descriptor and through a fresh one and
//! prints what it reads. Without munmapq every read shows the new bytes; a
//! reused stale mapping would show the old ones (on XNU always, where a
//! private mapping is a snapshot; on Linux through overlayfs, where the
//! first write copies the file up to another inode).

use std::ffi::CString;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

const WINDOW_PAGES: usize = 2;

fn page() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn open_read(path: &str) -> i32 {
    let c = CString::new(path).unwrap();
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open {path}");
    fd
}

/// Maps the first window of `fd` (the eligible kind), answers a digest of
/// its bytes, and unmaps it.
fn read_window(fd: i32) -> String {
    let len = WINDOW_PAGES * page();
    // SAFETY: a fresh private read-only mapping; the file is at least
    // `len` long in every round, so every byte read is backed.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            fd,
            0,
        )
    };
    assert!(p != libc::MAP_FAILED, "mmap");
    // SAFETY: inside the mapping just made.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let firsts: Vec<u8> = (0..WINDOW_PAGES).map(|i| bytes[i * page()]).collect();
    // SAFETY: our own mapping, no longer used.
    assert_eq!(unsafe { libc::munmap(p, len) }, 0);
    format!("{h:016x} {firsts:?}")
}

/// The bytes of round `round`, `len` of them.
fn contents(round: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(13) ^ (round + 1).wrapping_mul(0x5b)) as u8)
        .collect()
}

/// Rewrites `path` through a descriptor of its own, the way `round` says.
fn rewrite(path: &str, round: usize) -> &'static str {
    let page = page();
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for writing");
    let size = f.metadata().unwrap().len() as usize;
    match round % 3 {
        0 => {
            f.write_all_at(&contents(round, size), 0).unwrap();
            "same size"
        }
        1 => {
            // Alternately grow and shrink, never below the window.
            let new = if size > 4 * page { 3 * page } else { 5 * page };
            f.set_len(new as u64).unwrap();
            f.write_all_at(&contents(round, new), 0).unwrap();
            "another size"
        }
        _ => {
            f.set_len(0).unwrap();
            f.write_all_at(&contents(round, size), 0).unwrap();
            "truncate, write"
        }
    }
}

pub fn run(path: &str, rounds: usize) -> i32 {
    let old_fd = open_read(path);
    println!("before: {}", read_window(old_fd));
    for round in 0..rounds {
        let how = rewrite(path, round);
        println!("round {round} ({how}) old fd: {}", read_window(old_fd));
        let fd = open_read(path);
        println!("round {round} ({how}) new fd: {}", read_window(fd));
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        // Queue a mapping of the new contents for the next round.
        println!("round {round} again: {}", read_window(old_fd));
    }
    0
}
