//! What taking back a window's pages costs, by the two ways the queue can:
//! dropping them and keeping the mapping (`MADV_DONTNEED`), or unmapping
//! it and mapping it again; each followed by the program reading every
//! page again. Run without the library (it times the kernel).

use munmapq_check::sys::*;
use std::time::Instant;

/// `rounds` times for a window of `pages` pages of `file`: prints the
/// microseconds per round of each way and their ratio.
pub fn run(file: &str, pages: usize, rounds: usize) -> i32 {
    let pg = page();
    let len = pages * pg;
    let fd = open(file, libc::O_RDONLY);
    assert!(fd >= 0, "open {file}");
    let touch = |a: usize| (0..pages).map(|p| peek(a, p * pg) as usize).sum::<usize>();
    let mut sum = 0;
    let a = map_file(fd, 0, len).expect("map");
    sum += touch(a);
    let t = Instant::now();
    for _ in 0..rounds {
        // SAFETY: our own read-only private mapping; its pages come back
        // from the file at the next read.
        let r = unsafe { libc::madvise(a as *mut _, len, libc::MADV_DONTNEED) };
        assert_eq!(r, 0);
        sum += touch(a);
    }
    let dropped = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    munmap(a, len).expect("munmap");
    let t = Instant::now();
    for _ in 0..rounds {
        let a = map_file(fd, 0, len).expect("map");
        sum += touch(a);
        munmap(a, len).expect("munmap");
    }
    let remapped = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    close(fd);
    println!(
        "window of {pages} pages: drop + read {dropped:.2} us, munmap + mmap + read {remapped:.2} us, ratio {:.3} (checksum {sum})",
        dropped / remapped
    );
    0
}
