//! What the engine knows about the file behind an eligible mmap: which file
//! it is, whether its contents may have changed since a queued mapping of it
//! was made, and whether its descriptor can be mapped for reading at all.

/// What `fstat` said about a file when a mapping of it was made. A queued
/// mapping is handed back only while the file still reports the same
/// stamp: on XNU a `MAP_PRIVATE` file mapping is a copy-on-write snapshot
/// (vnode objects are copy-delay; `write(2)` pushes the old pages into
/// existing private copies), and on Linux overlayfs a write copies the file
/// up to another inode under the same device and inode number, so an old
/// mapping keeps showing the lower file. Size, mtime and ctime to the
/// nanosecond: a write, a truncate or a copy-up changes at least one of
/// them (ctime moves on every data or metadata change).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileStamp {
    pub size: i64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
    pub ctime_sec: i64,
    pub ctime_nsec: i64,
}

/// A regular file that a `PROT_READ`, `MAP_PRIVATE` mmap of its descriptor
/// would map: which file, and its stamp at the time of asking.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileFacts {
    pub dev: u64,
    pub ino: u64,
    /// The mount the descriptor was opened through (0: unknown). One file
    /// seen through two mounts (a bind mount with `noexec`, `nosuid`, `ro`)
    /// must not share mappings: what a mapping may become (`PROT_EXEC`)
    /// depends on the mount it was made through.
    pub mnt: u64,
    /// Hard links left: 0 for a deleted file, whose mapping must not
    /// outlive the program's (it holds the file's space).
    pub nlink: u64,
    /// Which of the file's names the descriptor was opened through, where
    /// the file has more than one (0 otherwise): a mapping shows that name
    /// in `/proc/self/maps` and `map_files`, so one made through another
    /// hard link must not be handed out for it. A hash of the path, see
    /// `linux/file.rs`; filled in by the engine ([`crate::os::Os::link_name`]),
    /// 0 from [`crate::os::Os::file_facts`].
    pub name: u64,
    pub stamp: FileStamp,
}

/// Can a descriptor whose `F_GETFL` answer is `fl` back a `PROT_READ` mmap?
/// Not when it failed, is write-only, or is a path-only descriptor:
/// `path_only` is the open flags that make one (`O_PATH` on Linux;
/// `O_EXEC` on macOS, which also covers `O_SEARCH = O_EXEC | O_DIRECTORY`,
/// and `O_EVTONLY`, see [`xnu::O_EVTONLY`]).
///
/// On macOS `F_GETFL` answers `OFLAGS(f_flag)`, which for an `O_EXEC`
/// descriptor is its flags with access mode 0, i.e. "`O_RDONLY`" (xnu
/// `bsd/sys/fcntl.h` `OFLAGS`, `bsd/kern/kern_descrip.c` `F_GETFL`), yet
/// mmap refuses `PROT_READ` without `FREAD` with EACCES
/// (`bsd/kern/kern_mman.c`). So the access mode alone says nothing there.
pub fn readable_open_flags(fl: i32, path_only: i32) -> bool {
    fl >= 0 && fl & libc::O_ACCMODE != libc::O_WRONLY && fl & path_only == 0
}

/// May a mapping of a descriptor whose `F_GETFL` answer is `fl` be
/// tracked? Only read-only ones: a descriptor open for writing carries
/// its write access past its close in any mapping made through it (exec
/// of the file fails with ETXTBSY, a read lease is refused, inotify reports
/// `IN_CLOSE_WRITE` late), and eligible mappings of such descriptors are
/// rare, so they are never deferred.
pub fn trackable_open_flags(fl: i32, path_only: i32) -> bool {
    readable_open_flags(fl, path_only) && fl & libc::O_ACCMODE == libc::O_RDONLY
}

/// XNU's open flags (`bsd/sys/fcntl.h`; fixed by the ABI), for the macOS
/// rules on any host.
pub mod xnu {
    /// Open for execute only (`O_SEARCH` is `O_EXEC | O_DIRECTORY`).
    pub const O_EXEC: i32 = 0x4000_0000;
    /// "Descriptor requested for event notifications only". Under
    /// `IOPOL_VFS_DISALLOW_RW_FOR_O_EVTONLY`, `open` strips `FREAD` and
    /// `FWRITE` from such a descriptor (`bsd/vfs/vfs_syscalls.c`
    /// `open1`: `flags &= ~(FREAD | FWRITE)`), so `mmap(PROT_READ)` fails
    /// with EACCES (`bsd/kern/kern_mman.c` `mmap`: no `FREAD`), yet
    /// `F_GETFL` puts `FREAD` back (`bsd/kern/kern_descrip.c` `sys_fcntl`,
    /// `F_GETFL`: "We insert back F_READ so that conversion back to open
    /// flags with OFLAGS() will come out right"), so it reads "`O_RDONLY`".
    /// Whether the policy is in force is the process's, which munmapq
    /// does not ask: such a descriptor is taken as path-only, never as
    /// one a reuse may answer for.
    pub const O_EVTONLY: i32 = 0x8000;
    /// What makes a descriptor path-only on macOS.
    pub const PATH_ONLY: i32 = O_EXEC | O_EVTONLY;
}

/// The path-only open flags of the platform this is built for.
#[cfg(target_os = "linux")]
pub const PATH_ONLY: i32 = libc::O_PATH;
#[cfg(target_vendor = "apple")]
pub const PATH_ONLY: i32 = xnu::PATH_ONLY;
#[cfg(target_vendor = "apple")]
const _: () = assert!(xnu::O_EXEC == libc::O_EXEC && xnu::O_EVTONLY == libc::O_EVTONLY);
#[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
pub const PATH_ONLY: i32 = 0;

#[cfg(test)]
mod tests {
    use super::*;

    /// xnu `bsd/sys/fcntl.h`: the values are fixed by the ABI, so the
    /// macOS decision is tested here on any host.
    const MAC_O_EXEC: i32 = 0x4000_0000;
    const MAC_O_DIRECTORY: i32 = 0x0010_0000;
    const MAC_O_NONBLOCK: i32 = 0x0004;

    #[test]
    fn macos_exec_and_search_descriptors_are_not_readable() {
        // What F_GETFL answers: OFLAGS() strips the access mode of FEXEC.
        assert!(!readable_open_flags(MAC_O_EXEC, MAC_O_EXEC));
        assert!(!readable_open_flags(
            MAC_O_EXEC | MAC_O_DIRECTORY,
            MAC_O_EXEC
        ));
        assert!(!readable_open_flags(
            MAC_O_EXEC | MAC_O_NONBLOCK,
            MAC_O_EXEC
        ));
        // The same answer with access mode 0 but no O_EXEC is O_RDONLY.
        assert!(readable_open_flags(0, MAC_O_EXEC));
        assert!(readable_open_flags(
            libc::O_RDWR | MAC_O_NONBLOCK,
            MAC_O_EXEC
        ));
        assert!(!readable_open_flags(libc::O_WRONLY, MAC_O_EXEC));
        assert!(!readable_open_flags(-1, MAC_O_EXEC));
    }

    #[test]
    fn macos_event_only_descriptors_are_path_only() {
        // What F_GETFL answers for open(path, O_EVTONLY) under the policy
        // that strips its read access: FREAD put back, so "O_RDONLY".
        let evtonly = libc::O_RDONLY | xnu::O_EVTONLY;
        assert!(!readable_open_flags(evtonly, xnu::PATH_ONLY));
        assert!(!trackable_open_flags(evtonly, xnu::PATH_ONLY));
        assert!(!readable_open_flags(
            evtonly | MAC_O_NONBLOCK,
            xnu::PATH_ONLY
        ));
        // O_EXEC is still refused, a plain read-only descriptor is not.
        assert!(!readable_open_flags(MAC_O_EXEC, xnu::PATH_ONLY));
        assert!(trackable_open_flags(libc::O_RDONLY, xnu::PATH_ONLY));
        assert_eq!(MAC_O_EXEC, xnu::O_EXEC);
    }

    #[test]
    fn linux_path_descriptors_are_not_readable() {
        const LINUX_O_PATH: i32 = 0o1000_0000;
        assert!(!readable_open_flags(LINUX_O_PATH, LINUX_O_PATH));
        assert!(readable_open_flags(libc::O_RDONLY, LINUX_O_PATH));
        assert!(!readable_open_flags(libc::O_WRONLY, LINUX_O_PATH));
    }

    #[test]
    fn only_read_only_descriptors_are_tracked() {
        assert!(trackable_open_flags(libc::O_RDONLY, PATH_ONLY));
        assert!(!trackable_open_flags(libc::O_RDWR, PATH_ONLY));
        assert!(!trackable_open_flags(libc::O_WRONLY, PATH_ONLY));
    }

    #[test]
    fn this_platforms_path_flag_is_refused() {
        if PATH_ONLY != 0 {
            assert!(!readable_open_flags(PATH_ONLY, PATH_ONLY));
        }
    }
}
