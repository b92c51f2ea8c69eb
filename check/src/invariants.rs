//! One case per invariant: each prints `name: result`. The tests run this
//! with and without libmunmapq and require identical output (and, for the
//! cases where the kernel's answer is certain, that exact answer).

use crate::sys::*;

pub fn run(file: &str) {
    let pg = page();
    let fd = open(file, libc::O_RDONLY);
    assert!(fd >= 0, "open {file}");
    let say = |name: &str, what: String| println!("{name}: {what}");

    // A mapping the program freed, as each call sees it.
    let a = map_file(fd, 0, 2 * pg).unwrap();
    say("munmap whole", show(munmap(a, 2 * pg), true));
    say("munmap unaligned", show(munmap(a + 1, pg), true));
    say("munmap zero length", show(munmap(a, 0), true));
    say("mprotect freed", show(mprotect(a, pg, R), true));
    say(
        "mprotect freed rw",
        show(mprotect(a, pg, R | libc::PROT_WRITE), true),
    );
    say(
        "madvise freed",
        show(madvise(a, pg, libc::MADV_WILLNEED), true),
    );
    say("msync freed", show(msync(a, pg), true));
    say("mincore freed", show(mincore(a, pg), true));
    say("mlock freed", show(mlock(a, pg), true));
    #[cfg(target_os = "linux")]
    say("mremap freed", show(mremap(a, pg, pg, 0, 0), false));
    say("munmap freed again", show(munmap(a, 2 * pg), true));

    // MAP_FIXED_NOREPLACE (where there is one) and MAP_FIXED onto freed ranges.
    let flags = [
        ("noreplace", fixed_noreplace()),
        ("fixed", Some(libc::MAP_FIXED)),
    ];
    for (name, flag) in flags.iter().filter_map(|&(n, f)| Some((n, f?))) {
        let b = map_file(fd, pg, 2 * pg).unwrap();
        munmap(b, 2 * pg).unwrap();
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flag;
        let r = mmap(b, 2 * pg, R | libc::PROT_WRITE, anon, -1, 0, false);
        say(
            &format!("map {name} onto freed"),
            show(r.map(|x| x == b), true),
        );
        if let Ok(x) = r {
            poke(x, 5, 42);
            say(
                &format!("map {name} data"),
                format!("{} {}", peek(x, 5), peek(x, pg + 5)),
            );
            munmap(x, 2 * pg).unwrap();
        }
    }

    // Partial unmap really unmaps.
    let d = map_file(fd, 4 * pg, 3 * pg).unwrap();
    say("partial munmap", show(munmap(d + pg, pg), true));
    say("partial hole", show(mincore(d + pg, pg), true));
    say(
        "partial head",
        format!("{}", peek(d, 3) == pattern(4 * pg + 3)),
    );
    say(
        "partial tail",
        format!("{}", peek(d, 2 * pg + 3) == pattern(6 * pg + 3)),
    );
    say("partial rest", show(munmap(d, 3 * pg), true));
    say("partial gone", show(mincore(d, 3 * pg), true));

    // A mapping the program wrote (after mprotect) must never come back.
    let names = ("mprotect rw", "after write, fresh data");
    write_then_map_again(fd, 8 * pg, pg, mprotect, names, &say);

    // Reuse fails where a fresh mmap would: how the fd was opened counts.
    let h = map_file(fd, 10 * pg, pg).unwrap();
    munmap(h, pg).unwrap();
    let wfd = open(file, libc::O_WRONLY);
    say("map O_WRONLY", show(map_file(wfd, 10 * pg, pg), false));
    // Linux's O_PATH and macOS's O_EXEC: an fd that cannot be read.
    #[cfg(target_os = "linux")]
    let (path_only, path_only_name) = (libc::O_PATH, "map O_PATH");
    #[cfg(target_os = "macos")]
    let (path_only, path_only_name) = (libc::O_EXEC, "map O_EXEC");
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        let pfd = open(file, path_only);
        say(path_only_name, show(map_file(pfd, 10 * pg, pg), false));
        close(pfd);
    }
    close(wfd);
    // Another read-only descriptor of the file: the file's bytes. (Linux:
    // a fresh mapping, holding that open file, not the queued window, which
    // holds the first one; macOS: the queued window, which holds no open
    // file.)
    let rfd = open(file, libc::O_RDONLY);
    let h1 = map_file(rfd, 10 * pg, pg).unwrap();
    say(
        "map another O_RDONLY",
        format!("{}", peek(h1, 1) == pattern(10 * pg + 1)),
    );
    munmap(h1, pg).unwrap();
    close(rfd);
    // The first descriptor again: the queued window is handed back (the
    // library at work), with the file's bytes.
    let h1 = map_file(fd, 10 * pg, pg).unwrap();
    say(
        "map the first O_RDONLY again",
        format!("{}", peek(h1, 1) == pattern(10 * pg + 1)),
    );
    munmap(h1, pg).unwrap();
    // Through a descriptor open for writing: never a queued mapping (its
    // write access must end with it, not with the queue).
    let rwfd = open(file, libc::O_RDWR);
    let h2 = map_file(rwfd, 10 * pg, pg).unwrap();
    say(
        "map O_RDWR",
        format!("{}", peek(h2, 1) == pattern(10 * pg + 1)),
    );
    munmap(h2, pg).unwrap();

    // madvise splits a mapping; what comes back must behave as one mapping.
    let i = map_file(fd, 12 * pg, 2 * pg).unwrap();
    say(
        "madvise part",
        show(madvise(i, pg, libc::MADV_RANDOM), true),
    );
    munmap(i, 2 * pg).unwrap();
    let j = map_file(fd, 12 * pg, 2 * pg).unwrap();
    #[cfg(target_os = "linux")]
    {
        let moved = mremap(j, 2 * pg, 4 * pg, libc::MREMAP_MAYMOVE, 0);
        say("mremap whole after madvise", show(moved.map(drop), false));
        if let Ok(m) = moved {
            say(
                "mremap data",
                format!("{}", peek(m, pg + 9) == pattern(13 * pg + 9)),
            );
            munmap(m, 4 * pg).unwrap();
        }
    }
    // Without mremap: the mapping that comes back reads as the file.
    #[cfg(not(target_os = "linux"))]
    {
        say(
            "after madvise data",
            format!("{}", peek(j, pg + 9) == pattern(13 * pg + 9)),
        );
        munmap(j, 2 * pg).unwrap();
    }

    // Arguments the kernel refuses.
    say(
        "mmap unaligned offset",
        show(mmap(0, pg, R, P, fd, 1, true), false),
    );
    say(
        "mmap zero length",
        show(mmap(0, 0, R, P, fd, 0, true), false),
    );
    say("mmap bad fd", show(mmap(0, pg, R, P, 999, 0, true), false));
    say(
        "mmap closed fd",
        show(mmap(0, pg, R, P, -1, 0, false), false),
    );

    // The file changes while a mapping of it is queued: a reuse shows the
    // file as it is now, like a fresh mapping.
    let k = map_file(fd, 14 * pg, pg).unwrap();
    say(
        "before write",
        format!("{}", peek(k, 0) == pattern(14 * pg)),
    );
    munmap(k, pg).unwrap();
    let wfd = open(file, libc::O_WRONLY);
    // SAFETY: writing one byte from a valid buffer at a valid offset.
    unsafe { libc::pwrite(wfd, [0xEEu8].as_ptr().cast(), 1, (14 * pg) as i64) };
    close(wfd);
    let k2 = map_file(fd, 14 * pg, pg).unwrap();
    say("after write", format!("{:#x}", peek(k2, 0)));
    munmap(k2, pg).unwrap();
    // Put it back for the next run.
    let wfd = open(file, libc::O_WRONLY);
    // SAFETY: as above.
    unsafe { libc::pwrite(wfd, [pattern(14 * pg)].as_ptr().cast(), 1, (14 * pg) as i64) };
    close(wfd);

    // A file replaced under the same fd number is another file.
    let m = map_file(fd, 0, pg).unwrap();
    munmap(m, pg).unwrap();
    close(fd);
    let other = format!("{file}.other");
    std::fs::write(&other, vec![0x5Au8; pg]).unwrap();
    let fd2 = open(&other, libc::O_RDONLY);
    let m2 = map_file(fd2, 0, pg).unwrap();
    say(
        "other file same fd",
        format!("{} {:#x}", fd2 == fd, peek(m2, 0)),
    );
    munmap(m2, pg).unwrap();
    close(fd2);
    let _ = std::fs::remove_file(other);
}

/// A page of `fd` at `off` made writable by `protect` (printed as
/// `names.0`) and written, then unmapped: a fresh mapping of the same page
/// must show the file's data, never the write (printed as `names.1`).
/// Returns where that fresh mapping was; it is unmapped too.
pub fn write_then_map_again(
    fd: i32,
    off: usize,
    pg: usize,
    protect: impl Fn(usize, usize, i32) -> Result<i32, i32>,
    names: (&str, &str),
    say: &dyn Fn(&str, String),
) -> usize {
    let f = map_file(fd, off, pg).unwrap();
    say(names.0, show(protect(f, pg, R | libc::PROT_WRITE), true));
    poke(f, 0, pattern(off).wrapping_add(1));
    munmap(f, pg).unwrap();
    let g = map_file(fd, off, pg).unwrap();
    say(names.1, format!("{}", peek(g, 0) == pattern(off)));
    munmap(g, pg).unwrap();
    g
}
