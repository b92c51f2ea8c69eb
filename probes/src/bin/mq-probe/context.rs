//! What the kernel takes from an mmap call's context besides the file: a
//! mapping made again must be what a fresh `mmap` would be after the
//! context changed under a queued mapping (a mount's flags, the thread's
//! personality), on a file system whose mappings cannot wait in a queue
//! (hugetlbfs), and through another name of the file (a hard link). Each
//! scenario prints what the program saw; `tests/mmap_context.rs` runs it
//! with and without the library and requires the same output. Scenarios
//! that need a mount namespace or huge pages print `SKIPPED: why`.

use crate::lastclose::{c, int, maps_name, mount_tmpfs, private_mounts, skipped};
use munmapq_check::sys::{self, page, peek, R};

/// `mount_setattr`'s argument (`include/uapi/linux/mount.h`).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Maps the first `pages` of `fd` read-only and private, reads a byte.
fn map(fd: i32, pages: usize) -> usize {
    let a = sys::map_file(fd, 0, pages * page()).expect("mmap");
    peek(a, 1);
    a
}

/// `mprotect(PROT_READ | PROT_EXEC)` on a fresh-looking mapping of `fd`,
/// then its munmap (queued with the library; `fd` stays open).
fn exec_allowed(fd: i32) -> String {
    let a = map(fd, 4);
    let r = sys::show(sys::mprotect(a, 4 * page(), R | libc::PROT_EXEC), false);
    // Back to read-only: a mapping made executable is not tracked, and the
    // next call must meet the queued one, not this.
    sys::munmap(a, 4 * page()).expect("munmap");
    let a = map(fd, 4);
    sys::munmap(a, 4 * page()).expect("munmap");
    r
}

/// Scenario 1: a mount made `noexec` in place, then exec again, while a
/// window of a file on it is queued: `mprotect(PROT_EXEC)` on the window
/// mapped again answers what it would on a fresh mapping. Once through
/// `mount(MS_REMOUNT | MS_BIND)`, once through `mount_setattr` made with
/// `syscall()`.
pub fn remount(dir: &str) {
    let mnt = format!("{dir}/mnt");
    if let Err(why) = private_mounts().and_then(|_| mount_tmpfs(&mnt, 8)) {
        return skipped(why);
    }
    sys::make_file(&format!("{mnt}/code.bin"), 4);
    let fd = sys::open(&format!("{mnt}/code.bin"), libc::O_RDONLY);
    let remount = |flags: libc::c_ulong| {
        // SAFETY: valid NUL-terminated paths.
        int(unsafe {
            libc::mount(
                std::ptr::null(),
                c(&mnt).as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | flags,
                std::ptr::null(),
            )
        })
        .expect("remount");
    };
    let setattr = |set: u64, clr: u64| {
        let attr = MountAttr {
            attr_set: set,
            attr_clr: clr,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: a NUL-terminated path and an attribute of the size passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                c(&mnt).as_ptr(),
                0,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        int(r as i32).map(drop)
    };
    println!("exec mount: mprotect(PROT_EXEC): {}", exec_allowed(fd));
    remount(libc::MS_NOEXEC);
    println!(
        "remounted noexec: mprotect(PROT_EXEC): {}",
        exec_allowed(fd)
    );
    remount(0);
    println!("remounted exec: mprotect(PROT_EXEC): {}", exec_allowed(fd));
    if let Err(e) = setattr(MOUNT_ATTR_NOEXEC, 0) {
        println!("mount_setattr: {e}");
        return;
    }
    println!(
        "noexec by mount_setattr: mprotect(PROT_EXEC): {}",
        exec_allowed(fd)
    );
    setattr(0, MOUNT_ATTR_NOEXEC).expect("mount_setattr");
    println!(
        "exec by mount_setattr: mprotect(PROT_EXEC): {}",
        exec_allowed(fd)
    );
    // Nothing changed since: the queued window is reused.
    println!("unchanged: mprotect(PROT_EXEC): {}", exec_allowed(fd));
    sys::close(fd);
}

/// The permissions `/proc/self/maps` shows for the mapping at `addr`.
fn perms(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut f = line.split(' ');
        let (range, perms) = (f.next().unwrap(), f.next().unwrap());
        let (s, e) = range.split_once('-').unwrap();
        let (s, e) = (
            usize::from_str_radix(s, 16).unwrap(),
            usize::from_str_radix(e, 16).unwrap(),
        );
        if (s..e).contains(&addr) {
            return perms.into();
        }
    }
    "unmapped".into()
}

/// Scenario 2: `READ_IMPLIES_EXEC` set, then cleared, while a window is
/// queued: the kernel makes a `PROT_READ` mapping executable under it, and
/// `/proc/self/maps` shows it. Set through `personality()`, cleared through
/// `syscall(SYS_personality)`. On a tmpfs of our own where one can be
/// made (a `noexec` mount ignores the personality), else in `dir`.
pub fn personality(dir: &str) {
    let mnt = format!("{dir}/mnt");
    let at = match private_mounts().and_then(|_| mount_tmpfs(&mnt, 8)) {
        Ok(()) => mnt,
        Err(_) => dir.to_string(),
    };
    let file = format!("{at}/code.bin");
    sys::make_file(&file, 4);
    let fd = sys::open(&file, libc::O_RDONLY);
    let cycle = || {
        let a = map(fd, 4);
        let p = perms(a);
        sys::munmap(a, 4 * page()).expect("munmap");
        p
    };
    println!("first mapping: {}", cycle());
    // SAFETY: personality takes a number.
    let old = unsafe { libc::personality(0xffff_ffff) };
    // SAFETY: as above.
    unsafe { libc::personality((old | libc::READ_IMPLIES_EXEC) as libc::c_ulong) };
    println!("under READ_IMPLIES_EXEC: {}", cycle());
    println!("under READ_IMPLIES_EXEC again: {}", cycle());
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_personality, old as libc::c_ulong) };
    println!("cleared by syscall(): {}", cycle());
    // Personalities are per thread: another thread's mprotect(PROT_READ)
    // under READ_IMPLIES_EXEC makes this thread's mapping executable.
    let a = map(fd, 4);
    let theirs = std::thread::spawn(move || {
        // SAFETY: as above; this thread's own personality.
        unsafe { libc::personality((old | libc::READ_IMPLIES_EXEC) as libc::c_ulong) };
        sys::mprotect(a, 4 * page(), R).expect("mprotect");
        perms(a)
    })
    .join()
    .unwrap();
    println!("another thread's mprotect(PROT_READ) under it: {theirs}");
    sys::munmap(a, 4 * page()).expect("munmap");
    println!("mapped again by this thread: {}", cycle());
    sys::close(fd);
}

/// Free huge pages of the default size (0 when unknown).
fn free_huge_pages() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The default huge page size in bytes.
fn huge_page_size() -> usize {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("Hugepagesize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .map_or(2 << 20, |k| k << 10)
}

/// Scenario 3: a hugetlbfs holding one huge page. A queued private mapping
/// of one of its files would keep the page reserved (a `fallocate` of
/// another file gets ENOSPC), and `munmap` of one small page of a
/// huge-page mapping fails with EINVAL. A regular file is mapped and
/// unmapped first: the queue is in use.
pub fn hugetlbfs(dir: &str) {
    sys::make_file(&format!("{dir}/plain.bin"), 4);
    let fd = sys::open(&format!("{dir}/plain.bin"), libc::O_RDONLY);
    let a = map(fd, 4);
    sys::munmap(a, 4 * page()).expect("munmap");
    sys::close(fd);
    if free_huge_pages() == 0 {
        return skipped("no free huge page (vm.nr_hugepages)".into());
    }
    let huge = huge_page_size();
    let mnt = format!("{dir}/huge");
    let setup = || -> Result<(), String> {
        private_mounts()?;
        let _ = std::fs::create_dir_all(&mnt);
        let opts = c(&format!("size={huge}"));
        // SAFETY: valid NUL-terminated strings.
        int(unsafe {
            libc::mount(
                c"munmapq-test".as_ptr(),
                c(&mnt).as_ptr(),
                c"hugetlbfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        })
        .map(drop)
        .map_err(|e| format!("mount -t hugetlbfs: {e}"))
    };
    if let Err(why) = setup() {
        return skipped(why);
    }
    let make = |name: &str| {
        let path = format!("{mnt}/{name}");
        let fd = crate::lastclose::open(&path, libc::O_RDWR | libc::O_CREAT, 0o600);
        // SAFETY: a descriptor we opened.
        assert_eq!(unsafe { libc::ftruncate(fd, huge as libc::off_t) }, 0);
        sys::close(fd);
        path
    };
    let (first, second) = (make("first"), make("second"));
    let fd = sys::open(&first, libc::O_RDONLY);
    let a = sys::map_file(fd, 0, huge);
    println!("private mapping of a huge page: {}", sys::show(a, false));
    if let Ok(a) = a {
        println!("its munmap: {}", sys::show(sys::munmap(a, huge), false));
    }
    let fd2 = sys::open(&second, libc::O_RDWR);
    // SAFETY: a descriptor we opened.
    let r = int(unsafe { libc::fallocate(fd2, 0, 0, huge as libc::off_t) });
    println!("fallocate of another file: {}", crate::lastclose::show(r));
    // SAFETY: as above.
    unsafe { libc::ftruncate(fd2, 0) };
    sys::close(fd2);
    let a = sys::map_file(fd, 0, page());
    println!("mapping of one small page: {}", sys::show(a, false));
    if let Ok(a) = a {
        println!(
            "munmap of its first small page: {}",
            sys::show(sys::munmap(a, page()), false)
        );
        println!(
            "munmap of the huge page: {}",
            sys::show(sys::munmap(a, huge), false)
        );
        println!("then /proc/self/maps there: {}", maps_name(a));
    }
    sys::close(fd);
}

/// The path `/proc/self/map_files` gives for the mapping at `addr` of
/// `len` bytes (its last component), or why not.
fn map_files_name(addr: usize, len: usize) -> String {
    let link = format!("/proc/self/map_files/{:x}-{:x}", addr, addr + len);
    match std::fs::read_link(&link) {
        Ok(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        Err(e) => format!("({})", e.kind()),
    }
}

/// Scenario 4: two hard links of one file. A window mapped through the
/// first and unmapped (its descriptor kept open, or closed before the
/// munmap), then mapped through the second: `/proc/self/maps` and
/// `/proc/self/map_files` name the second.
pub fn hard_links(dir: &str) {
    let (first, second) = (format!("{dir}/first.bin"), format!("{dir}/second.bin"));
    // The directory may hold an earlier run's files.
    let _ = std::fs::remove_file(&second);
    sys::make_file(&first, 4);
    std::fs::hard_link(&first, &second).unwrap();
    let len = 4 * page();
    for closed_first in [false, true] {
        let fd = sys::open(&first, libc::O_RDONLY);
        let a = map(fd, 4);
        if closed_first {
            sys::close(fd);
        }
        sys::munmap(a, len).expect("munmap");
        let fd2 = sys::open(&second, libc::O_RDONLY);
        let b = map(fd2, 4);
        let how = if closed_first { "closed" } else { "open" };
        println!(
            "first's descriptor {how}, mapped through second.bin: maps names {}, map_files names {}",
            maps_name(b),
            map_files_name(b, len)
        );
        sys::munmap(b, len).expect("munmap");
        if !closed_first {
            let c = map(fd, 4);
            println!("and through first.bin again: maps names {}", maps_name(c));
            sys::munmap(c, len).expect("munmap");
            sys::close(fd);
        }
        sys::close(fd2);
    }
}
