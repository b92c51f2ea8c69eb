//! Ordinary calls that once made a program behave differently with munmapq:
//! `pkey_mprotect`, SysV `shmat`/`shmdt` on freed ranges,
//! `mseal`, naming anonymous mappings (`prctl(PR_SET_VMA)`) and shadow
//! stacks at an address (`map_shadow_stack`). Each prints `name: result`; the tests require the same output
//! with and without the library, with default and tiny queues.

use munmapq_check::invariants::write_then_map_again;
use munmapq_check::sys::*;

extern "C" {
    // glibc 2.27+; the libc crate does not declare it.
    fn pkey_mprotect(addr: *mut libc::c_void, len: usize, prot: i32, pkey: i32) -> i32;
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn int(r: i32) -> Result<i32, i32> {
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn pkey_protect(addr: usize, len: usize, prot: i32) -> Result<i32, i32> {
    // SAFETY: protection changes on the probe's own (or freed) ranges.
    int(unsafe { pkey_mprotect(addr as *mut _, len, prot, -1) })
}

/// One group of cases: (fd, page size, printer).
type Group = fn(i32, usize, &dyn Fn(&str, String));

/// Runs one group (`pkey`, `shm`, `mseal`) or, with none, all of them.
pub fn run(file: &str, group: Option<&str>) {
    let pg = page();
    let fd = open(file, libc::O_RDONLY);
    assert!(fd >= 0, "open {file}");
    let say = |name: &str, what: String| println!("{name}: {what}");
    let groups: [(&str, Group); 5] = [
        ("pkey", pkeys),
        ("shm", sysv_shm),
        ("mseal", seals),
        ("name", names),
        ("shadow", shadow_stacks),
    ];
    for (name, f) in groups {
        if group.is_none_or(|g| g == name) {
            f(fd, pg, &say);
        }
    }
    close(fd);
}

/// `pkey_mprotect` is `mprotect` with a protection key: it must end
/// tracking the same way and see freed ranges as freed.
fn pkeys(fd: i32, pg: usize, say: &dyn Fn(&str, String)) {
    let names = ("pkey_mprotect rw", "pkey_mprotect written, fresh data");
    let b = write_then_map_again(fd, 20 * pg, pg, pkey_protect, names, say);
    say("pkey_mprotect freed", show(pkey_protect(b, pg, R), true));
    let c = map_file(fd, 21 * pg, pg).unwrap();
    munmap(c, pg).unwrap();
    say(
        "pkey_mprotect freed rw",
        show(pkey_protect(c, pg, R | libc::PROT_WRITE), true),
    );
}

fn shmat(id: i32, addr: usize, flags: i32) -> Result<usize, i32> {
    // SAFETY: attaching the probe's own segment; a refused address only
    // makes the call fail.
    let p = unsafe { libc::shmat(id, addr as *const _, flags) };
    if p as isize == -1 {
        Err(errno())
    } else {
        Ok(p as usize)
    }
}

fn shmdt(addr: usize) -> Result<i32, i32> {
    // SAFETY: detaching the probe's own attachment (or nothing: EINVAL).
    int(unsafe { libc::shmdt(addr as *const _) })
}

/// A program finds a free address the classic way (map, unmap), then
/// attaches SysV shared memory there.
fn sysv_shm(fd: i32, pg: usize, say: &dyn Fn(&str, String)) {
    let size = 2 * pg;
    // SAFETY: a private segment of two pages.
    let id = unsafe { libc::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o600) };
    if id < 0 {
        say("shmget", errname(errno()));
        return;
    }
    let fill = |at: usize| (0..size).for_each(|i| poke(at, i, b'S'));

    let p = map_file(fd, 24 * pg, size).unwrap();
    munmap(p, size).unwrap();
    let r = shmat(id, p, 0);
    say("shmat onto freed", show(r.map(|x| x == p), true));
    if let Ok(x) = r {
        fill(x);
        say("shmdt", show(shmdt(x), true));
    }

    // SHM_RND: the kernel rounds the address down (to the page on x86_64).
    let r0 = map_file(fd, 28 * pg, size).unwrap();
    munmap(r0, size).unwrap();
    let rounded = r0 + if cfg!(target_arch = "x86_64") { 5 } else { 0 };
    let r = shmat(id, rounded, libc::SHM_RND);
    say("shmat rounded onto freed", show(r.map(|x| x == r0), true));
    if let Ok(x) = r {
        say("shmdt rounded", show(shmdt(x), true));
    }

    // SHM_REMAP over a freed range: the file must not come back as the
    // segment, and after the detach it must be mapped and right.
    let q = map_file(fd, 26 * pg, size).unwrap();
    munmap(q, size).unwrap();
    let r = shmat(id, q, libc::SHM_REMAP);
    say("shmat remap onto freed", show(r.map(|x| x == q), true));
    let again = map_file(fd, 26 * pg, size).unwrap();
    say(
        "file after remap attach",
        format!("{}", peek(again, 1) == pattern(26 * pg + 1)),
    );
    munmap(again, size).unwrap();
    // Other windows come and go (a tiny queue flushes): the attachment
    // must survive.
    for w in 0..6 {
        let m = map_file(fd, (30 + 2 * w) * pg, size).unwrap();
        munmap(m, size).unwrap();
    }
    if let Ok(x) = r {
        say("attachment survives", format!("{:#x}", peek(x, pg + 7)));
        say("shmdt remapped", show(shmdt(x), true));
    }
    let after = map_file(fd, 26 * pg, size).unwrap();
    say(
        "file after detach",
        format!("{}", peek(after, pg + 3) == pattern(27 * pg + 3)),
    );
    munmap(after, size).unwrap();

    // SHM_REMAP over a live tracked mapping: it is the segment now, and
    // its munmap must really unmap it.
    let l = map_file(fd, 44 * pg, size).unwrap();
    let r = shmat(id, l, libc::SHM_REMAP);
    say("shmat remap onto live", show(r.map(|x| x == l), true));
    say("munmap of remapped live", show(munmap(l, size), true));
    say("remapped live gone", show(mincore(l, size), true));
    let l2 = map_file(fd, 44 * pg, size).unwrap();
    say(
        "file after live remap",
        format!("{}", peek(l2, 5) == pattern(44 * pg + 5)),
    );
    munmap(l2, size).unwrap();

    // The kernel picks the address.
    let r = shmat(id, 0, 0);
    say("shmat anywhere", show(r.map(drop), false));
    if let Ok(x) = r {
        say("shmat anywhere data", format!("{:#x}", peek(x, 0)));
        say("shmdt anywhere", show(shmdt(x), true));
    }

    // shmdt where only a freed file mapping is: nothing attached there.
    let f = map_file(fd, 46 * pg, pg).unwrap();
    munmap(f, pg).unwrap();
    say("shmdt freed", show(shmdt(f), true));
    // SAFETY: removing the probe's own segment.
    unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
}

type Mseal = unsafe extern "C" fn(*mut libc::c_void, usize, libc::c_ulong) -> i32;

/// `mseal` through the C library's name where there is one (munmapq
/// exports it), else the system call, as a program built against an older
/// glibc would.
fn mseal(addr: usize, len: usize) -> Result<i32, i32> {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the program's
    // global scope.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mseal".as_ptr()) };
    let r = if f.is_null() {
        // SAFETY: sealing the probe's own (or freed) range.
        unsafe { libc::syscall(libc::SYS_mseal, addr, len, 0) as i32 }
    } else {
        // SAFETY: `mseal` has this prototype.
        let f: Mseal = unsafe { std::mem::transmute(f) };
        // SAFETY: as above.
        unsafe { f(addr as *mut _, len, 0) }
    };
    int(r)
}

/// A sealed mapping cannot be unmapped (EPERM); a freed range cannot be
/// sealed (ENOMEM). Kernels before 6.10 answer ENOSYS both ways.
fn seals(fd: i32, pg: usize, say: &dyn Fn(&str, String)) {
    let a = map_file(fd, 50 * pg, pg).unwrap();
    say("mseal live", show(mseal(a, pg), true));
    say("munmap sealed", show(munmap(a, pg), true));
    say(
        "sealed still mapped",
        format!("{}", peek(a, 2) == pattern(50 * pg + 2)),
    );
    let b = map_file(fd, 52 * pg, pg).unwrap();
    munmap(b, pg).unwrap();
    say("mseal freed", show(mseal(b, pg), true));
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE;
    say(
        "map noreplace onto freed after mseal",
        show(mmap(b, pg, R, anon, -1, 0, false).map(|x| x == b), true),
    );
}

/// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`, through
/// libc's `prctl` or its `syscall`.
fn name(addr: usize, len: usize, raw: bool) -> Result<i32, i32> {
    let (option, what) = (libc::PR_SET_VMA, libc::PR_SET_VMA_ANON_NAME);
    let label = c"mq-probe".as_ptr();
    // SAFETY: naming the probe's own (or freed) range, with a C string.
    let r = unsafe {
        if raw {
            libc::syscall(libc::SYS_prctl, option, what, addr, len, label) as i32
        } else {
            libc::prctl(option, what, addr, len, label)
        }
    };
    int(r)
}

/// Naming walks its range: a file mapping in it is refused (EBADF), a
/// hole is ENOMEM. A range the program freed is a hole. Kernels without
/// `CONFIG_ANON_VMA_NAME` refuse the option itself (EINVAL).
fn names(fd: i32, pg: usize, say: &dyn Fn(&str, String)) {
    let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let a = mmap(0, pg, R | libc::PROT_WRITE, anon, -1, 0, false).unwrap();
    say("name anonymous", show(name(a, pg, false), true));
    munmap(a, pg).unwrap();
    let live = map_file(fd, 54 * pg, pg).unwrap();
    say("name live", show(name(live, pg, false), true));
    munmap(live, pg).unwrap();
    for (how, raw, at) in [("prctl", false, 56), ("syscall", true, 58)] {
        let b = map_file(fd, at * pg, pg).unwrap();
        munmap(b, pg).unwrap();
        say(
            &format!("name freed via {how}"),
            show(name(b, pg, raw), true),
        );
    }
}

/// `map_shadow_stack(addr, size, 0)` (number 453 on x86_64 and arm64)
/// maps at `addr` as `MAP_FIXED_NOREPLACE` does: over a range the program
/// freed it succeeds there. Kernels without user shadow stacks answer
/// ENOSYS (or EOPNOTSUPP where the CPU has none).
fn shadow_stacks(fd: i32, pg: usize, say: &dyn Fn(&str, String)) {
    let b = map_file(fd, 60 * pg, pg).unwrap();
    munmap(b, pg).unwrap();
    // SAFETY: a new mapping at a range the probe freed, or a refusal.
    let r = unsafe { libc::syscall(453, b, pg, 0) };
    let r = if r == -1 {
        Err(errno())
    } else {
        Ok(r as usize == b)
    };
    say("map_shadow_stack onto freed", show(r, true));
}
