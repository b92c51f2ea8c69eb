//! Linux: what a reuse needs to know about a descriptor's file, in one
//! system call in the common case: `statx` for the identity and stamp, and
//! its unique mount id to remember which mounts are neither overlayfs nor
//! hugetlbfs.
//!
//! Files on overlayfs and hugetlbfs are never tracked. hugetlbfs: a
//! private mapping reserves its huge pages at mmap time (Linux
//! `fs/hugetlbfs/inode.c` `hugetlbfs_file_mmap`, `hugetlb_reserve_pages`),
//! so a queued one would keep them from every other allocation, and its
//! mapping covers whole huge pages whatever length was asked, so that a
//! `munmap` of part of it fails with EINVAL (`hugetlb_vm_op_split`) where
//! the queue would have answered 0. Overlayfs: a descriptor opened before a
//! copy-up keeps mapping the lower file, one opened after it maps the upper
//! file, and `fstat` reports the same device, inode, size and times through
//! both (Linux `Documentation/filesystems/overlayfs.rst`, "Non-standard
//! behavior"; `fs/overlayfs/file.c` `ovl_mmap` maps the open file's real
//! file). No stamp can tell a reusable queued mapping from one of the old
//! lower file (tests/file_identity.rs reproduces it). `fstatfs` tells, but
//! costs about as much as the mmap a reuse saves on ext4 (it sums the free
//! block counters), so its answer is kept per mount: unique mount ids
//! (`STATX_MNT_ID_UNIQUE`, Linux 6.8+) are never reused, so a kept answer
//! never goes stale. Without them, every eligible mmap asks `fstatfs`.

use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use munmapq_core::file::{FileFacts, FileStamp};

const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// `statx` with a NULL path was refused (EFAULT: a kernel before 6.11).
static NULL_PATH: AtomicU8 = AtomicU8::new(0);
const NULL_PATH_REFUSED: u8 = 1;

/// Mounts already asked: `unique id << 1 | untracked file system`, 0 =
/// empty.
/// Written in turn; a lost race only costs one more `fstatfs` later.
static MOUNTS: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];
static NEXT_MOUNT: AtomicUsize = AtomicUsize::new(0);

/// Device, inode and stamp of `fd` if it is a regular file not on
/// overlayfs or hugetlbfs (`None` also when it cannot be told).
pub fn regular_file_facts(fd: i32) -> Option<FileFacts> {
    // Not zeroed first (256 bytes on every eligible mmap): read only after
    // the call succeeded, when the kernel has written all of it.
    let mut sx = core::mem::MaybeUninit::<libc::statx>::uninit();
    // Only what is read below (the device is always filled in): the type
    // (a regular file), inode, size, mtime and ctime (the stamp), link
    // count (a deleted file is not tracked), and the mount: the unique id
    // where the kernel has it (6.8+; it answers that one when both are
    // asked), else the plain one. Not STATX_MODE's permission bits, blocks,
    // atime, btime, uid or gid: nothing reads them, and a file system may
    // have to work for some (btime, and network file systems' attributes).
    let mask = libc::STATX_TYPE
        | libc::STATX_INO
        | libc::STATX_SIZE
        | libc::STATX_MTIME
        | libc::STATX_CTIME
        | libc::STATX_NLINK
        | libc::STATX_MNT_ID
        | libc::STATX_MNT_ID_UNIQUE;
    // The raw call: glibc's wrapper may emulate statx with fstatat on old
    // kernels. With AT_EMPTY_PATH the call is about `fd` itself; Linux 6.11+
    // takes a NULL path for that and skips copying in a path, older kernels
    // answer EFAULT, and then "" is used from that call on.
    let null_path = NULL_PATH.load(Relaxed) != NULL_PATH_REFUSED;
    let path = if null_path {
        core::ptr::null()
    } else {
        c"".as_ptr()
    };
    let statx = |path: *const libc::c_char, sx: *mut libc::statx| {
        // SAFETY: a NULL or NUL-terminated empty path and a valid
        // out-pointer; a bad fd only makes the call fail.
        unsafe {
            super::sys::call_errno(
                libc::SYS_statx,
                &[
                    fd as libc::c_long,
                    path as libc::c_long,
                    (libc::AT_EMPTY_PATH | libc::AT_STATX_SYNC_AS_STAT) as libc::c_long,
                    mask as libc::c_long,
                    sx as libc::c_long,
                ],
            )
        }
    };
    // A success is told by one test: the retry without a NULL path and
    // the fallback are on the failure's way.
    if statx(path, sx.as_mut_ptr()) != 0 {
        let mut r = -1;
        if null_path && crate::errno::get() == libc::EFAULT {
            NULL_PATH.store(NULL_PATH_REFUSED, Relaxed);
            r = statx(c"".as_ptr(), sx.as_mut_ptr());
        }
        if r != 0 {
            return fstat_facts(fd); // seccomp or a kernel before 4.11
        }
    }
    // SAFETY: the call succeeded, and a successful statx copies a whole
    // `struct statx` out (Linux fs/stat.c `cp_statx`: a zeroed struct of
    // the full size, filled in, then copy_to_user of all of it). Read in
    // place: the few fields used, not a copy of its 256 bytes.
    let sx = unsafe { sx.assume_init_ref() };
    if u32::from(sx.stx_mode) & libc::S_IFMT != libc::S_IFREG {
        return None;
    }
    let untracked = if sx.stx_mask & libc::STATX_MNT_ID_UNIQUE != 0 {
        mount_is_untracked(sx.stx_mnt_id, fd)?
    } else {
        on_untracked_fs(fd)?
    };
    if untracked {
        return None;
    }
    Some(FileFacts {
        dev: libc::makedev(sx.stx_dev_major, sx.stx_dev_minor),
        ino: sx.stx_ino,
        // The unique id where the kernel has it (6.8+), else the id of a
        // mount now mounted (5.8+; one reused after an unmount is harmless:
        // the unmount hooks flush the queue and outdate every live
        // mapping's key, see `context.rs`); 0 when neither.
        mnt: if sx.stx_mask & (libc::STATX_MNT_ID | libc::STATX_MNT_ID_UNIQUE) != 0 {
            sx.stx_mnt_id
        } else {
            0
        },
        nlink: u64::from(sx.stx_nlink),
        // Asked by the engine, once per description (`link_name`).
        name: 0,
        stamp: FileStamp {
            size: sx.stx_size as i64,
            mtime_sec: sx.stx_mtime.tv_sec,
            mtime_nsec: i64::from(sx.stx_mtime.tv_nsec),
            ctime_sec: sx.stx_ctime.tv_sec,
            ctime_nsec: i64::from(sx.stx_ctime.tv_nsec),
        },
    })
}

/// Which of its names the file behind `fd` was opened through (asked by
/// the engine only where it has more than one): a hash of what `readlink`
/// of `/proc/self/fd/N` answers, the path `/proc/self/maps` would show for
/// a mapping made through it (both are the kernel's `d_path` of the open
/// file). `None` (not tracked) when the path cannot be read, or is 256
/// bytes or longer.
///
/// A file's names change only with its ctime (link, unlink, rename), which
/// the stamp compares; so a name is asked only where two names of one
/// stamp can be open at once.
///
/// Out of line, so that its 300 bytes of stack are taken only for a file
/// with several names.
#[cold]
#[inline(never)]
pub fn link_name(fd: i32) -> Option<u64> {
    // "/proc/self/fd/" and up to 10 digits, NUL-terminated.
    const PREFIX: &[u8] = b"/proc/self/fd/";
    let mut path = [0u8; 32];
    path[..PREFIX.len()].copy_from_slice(PREFIX);
    super::proc::write_decimal(u32::try_from(fd).ok()?, &mut path[PREFIX.len()..]);
    let mut buf = [0u8; 256];
    // SAFETY: a NUL-terminated path and a buffer of the length passed.
    let r = unsafe {
        super::sys::call(
            libc::SYS_readlinkat,
            &[
                libc::AT_FDCWD as libc::c_long,
                path.as_ptr() as libc::c_long,
                buf.as_mut_ptr() as libc::c_long,
                buf.len() as libc::c_long,
            ],
        )
    };
    let len = usize::try_from(r)
        .ok()
        .filter(|&l| l > 0 && l < buf.len())?;
    // FNV-1a; never 0, which means "one name".
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &buf[..len] {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Some(h | 1)
}

/// The kept answer for mount `id`, asking `fstatfs` on `fd` the first time.
fn mount_is_untracked(id: u64, fd: i32) -> Option<bool> {
    for slot in &MOUNTS {
        let v = slot.load(Relaxed);
        if v != 0 && v >> 1 == id {
            return Some(v & 1 != 0);
        }
    }
    let untracked = on_untracked_fs(fd)?;
    let i = NEXT_MOUNT.fetch_add(1, Relaxed) % MOUNTS.len();
    MOUNTS[i].store(id << 1 | untracked as u64, Relaxed);
    Some(untracked)
}

/// Whether `fd`'s file is on overlayfs or hugetlbfs.
fn on_untracked_fs(fd: i32) -> Option<bool> {
    let (magic, _) = super::sys::file_system(fd)?;
    Some(magic == OVERLAYFS_SUPER_MAGIC || magic == HUGETLBFS_MAGIC)
}

/// The page size of hugetlbfs, where `fd`'s file is on it (its block size).
pub fn huge_page_size(fd: i32) -> Option<usize> {
    let (magic, block) = super::sys::file_system(fd)?;
    (magic == HUGETLBFS_MAGIC).then_some(block)
}

/// Where `statx` is refused: `fstat`, then `fstatfs` every time.
fn fstat_facts(fd: i32) -> Option<FileFacts> {
    let facts = crate::posix::regular_file_facts(fd)?;
    (!on_untracked_fs(fd)?).then_some(facts)
}
