//! Thin wrappers over the libc calls munmapq hooks: they go through the
//! dynamic linker like any program's calls, and answer `Err(errno)`.

use std::ffi::CString;
use std::io::Error;

pub const R: i32 = libc::PROT_READ;
pub const P: i32 = libc::MAP_PRIVATE;

/// The page size, asked once (the cycling benchmark calls this per window).
pub fn page() -> usize {
    static PAGE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    match PAGE.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {
            // SAFETY: no preconditions.
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize };
            PAGE.store(p, std::sync::atomic::Ordering::Relaxed);
            p
        }
        p => p,
    }
}

fn errno() -> i32 {
    Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn int(r: i32) -> Result<i32, i32> {
    if r == -1 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn ptr(p: *mut libc::c_void) -> Result<usize, i32> {
    if p == libc::MAP_FAILED {
        Err(errno())
    } else {
        Ok(p as usize)
    }
}

/// mmap, or mmap64 when `use64` (git calls mmap64; glibc only: elsewhere
/// `use64` changes nothing).
pub fn mmap(
    addr: usize,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
    use64: bool,
) -> Result<usize, i32> {
    // SAFETY: the probe only maps, reads and unmaps memory it owns; a bad
    // argument is the point of some calls and only makes them fail.
    ptr(unsafe {
        #[cfg(target_os = "linux")]
        if use64 {
            return ptr(libc::mmap64(addr as *mut _, len, prot, flags, fd, off));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = use64;
        libc::mmap(addr as *mut _, len, prot, flags, fd, off)
    })
}

pub fn map_file(fd: i32, off: usize, len: usize) -> Result<usize, i32> {
    // Alternate mmap and mmap64 by window: both must be hooked.
    mmap(
        0,
        len,
        R,
        P,
        fd,
        off as i64,
        (off / page()).is_multiple_of(2),
    )
}

pub fn munmap(addr: usize, len: usize) -> Result<i32, i32> {
    // SAFETY: see `mmap`.
    int(unsafe { libc::munmap(addr as *mut _, len) })
}

pub fn mprotect(addr: usize, len: usize, prot: i32) -> Result<i32, i32> {
    // SAFETY: see `mmap`.
    int(unsafe { libc::mprotect(addr as *mut _, len, prot) })
}

pub fn madvise(addr: usize, len: usize, advice: i32) -> Result<i32, i32> {
    // SAFETY: see `mmap`.
    int(unsafe { libc::madvise(addr as *mut _, len, advice) })
}

pub fn msync(addr: usize, len: usize) -> Result<i32, i32> {
    // SAFETY: see `mmap`.
    int(unsafe { libc::msync(addr as *mut _, len, libc::MS_ASYNC) })
}

pub fn mincore(addr: usize, len: usize) -> Result<i32, i32> {
    let mut v = vec![0u8; len.div_ceil(page()).max(1)];
    // SAFETY: `v` has a byte per page.
    int(unsafe { libc::mincore(addr as *mut _, len, v.as_mut_ptr().cast()) })
}

pub fn mlock(addr: usize, len: usize) -> Result<i32, i32> {
    // SAFETY: see `mmap`.
    int(unsafe { libc::mlock(addr as *const _, len) })
}

/// Linux only: macOS has no mremap.
#[cfg(target_os = "linux")]
pub fn mremap(
    old: usize,
    old_len: usize,
    new_len: usize,
    flags: i32,
    new_addr: usize,
) -> Result<usize, i32> {
    // SAFETY: see `mmap`.
    ptr(unsafe {
        libc::mremap(
            old as *mut _,
            old_len,
            new_len,
            flags,
            new_addr as *mut libc::c_void,
        )
    })
}

/// `MAP_FIXED_NOREPLACE` where the kernel has it (Linux 4.17+), else None.
pub fn fixed_noreplace() -> Option<i32> {
    #[cfg(target_os = "linux")]
    return Some(libc::MAP_FIXED_NOREPLACE);
    #[cfg(not(target_os = "linux"))]
    None
}

pub fn open(path: &str, flags: i32) -> i32 {
    let c = CString::new(path).unwrap();
    // SAFETY: NUL-terminated path.
    unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) }
}

pub fn close(fd: i32) {
    // SAFETY: closing our own fd.
    unsafe { libc::close(fd) };
}

/// Reads byte `i` of a mapping at `addr`.
pub fn peek(addr: usize, i: usize) -> u8 {
    // SAFETY: callers read inside mappings they hold.
    unsafe { std::ptr::read_volatile((addr + i) as *const u8) }
}

pub fn poke(addr: usize, i: usize, v: u8) {
    // SAFETY: callers write inside writable mappings they hold.
    unsafe { std::ptr::write_volatile((addr + i) as *mut u8, v) }
}

/// The byte every data file holds at `pos`.
pub fn pattern(pos: usize) -> u8 {
    ((pos.wrapping_mul(7)) ^ (pos >> 12).wrapping_mul(131)) as u8
}

/// Writes a data file of `pages` pages of [`pattern`].
pub fn make_file(path: &str, pages: usize) {
    let len = pages * page();
    let data: Vec<u8> = (0..len).map(pattern).collect();
    std::fs::write(path, data).expect("write data file");
}

/// Counts bytes of `[addr, addr+len)` that differ from the file at `off`,
/// checking every `step`-th byte plus the last.
pub fn wrong_bytes(addr: usize, off: usize, len: usize, step: usize) -> usize {
    let mut wrong = 0;
    let mut i = 0;
    while i < len {
        wrong += (peek(addr, i) != pattern(off + i)) as usize;
        i += step;
    }
    wrong + (peek(addr, len - 1) != pattern(off + len - 1)) as usize
}

pub fn errname(e: i32) -> String {
    match e {
        libc::EINVAL => "EINVAL".into(),
        libc::ENOMEM => "ENOMEM".into(),
        libc::EACCES => "EACCES".into(),
        libc::EBADF => "EBADF".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EEXIST => "EEXIST".into(),
        libc::ENODEV => "ENODEV".into(),
        libc::EPERM => "EPERM".into(),
        e => format!("errno{e}"),
    }
}

/// `ok` / `ok(N)` for a result, or the errno's name.
pub fn show<T: std::fmt::Debug>(r: Result<T, i32>, value: bool) -> String {
    match r {
        Ok(v) if value => format!("ok({v:?})"),
        Ok(_) => "ok".into(),
        Err(e) => errname(e),
    }
}

/// A tiny deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
