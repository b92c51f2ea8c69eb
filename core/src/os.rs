//! The engine's way to the real system: the calls it makes and what it
//! asks about the process. The export layer (`interpose/`) implements it
//! with the real functions; the unit tests and `mq-replay` with a fake
//! address space.

use crate::file::FileFacts;

pub type Errno = i32;

/// The process's memory as the kernel counts it, in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Usage {
    /// Address space in use (`VmSize`, what `RLIMIT_AS` limits).
    pub size: usize,
    /// Resident set (`VmRSS`).
    pub resident: usize,
}

/// The real system: mmap, munmap and the file checks a reuse needs.
pub trait Os {
    #[allow(clippy::too_many_arguments)]
    fn mmap(
        &self,
        addr: usize,
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno>;
    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno>;
    /// Device, inode and `fstat` stamp of `fd` when a `PROT_READ`,
    /// `MAP_PRIVATE` mapping of it would succeed: a regular file, open for
    /// reading (not `O_WRONLY`, not path-only: see
    /// [`crate::file::readable_open_flags`]). Checked on every call: fd
    /// numbers are reused, files are rewritten. Asked before the mmap, so a
    /// change racing with it leaves an older stamp than the contents (no
    /// later reuse), never the reverse.
    fn readable_file(&self, fd: i32) -> Option<FileFacts>;
    /// `vm.max_map_count`, where there is one (asked once, before the
    /// first mapping is queued; see
    /// [`crate::engine::Engine::bound_entries_later`]).
    fn max_map_count(&self) -> Option<usize> {
        None
    }
    /// The process's address space and resident set right now (asked when
    /// the queue has grown by a step, see [`crate::sizing`]).
    fn usage(&self) -> Option<Usage>;
    /// How many mappings the process has (asked rarely: it is costly).
    fn map_count(&self) -> Option<usize>;
    /// The `RLIMIT_AS` soft limit, or `None` when unlimited.
    fn address_space_limit(&self) -> Option<usize>;
    /// Drops the resident pages of a queued range munmapq alone owns, the
    /// mapping staying in place (a later fault reads the file again, as a
    /// fresh mapping would). False where the system cannot.
    fn drop_pages(&self, addr: usize, len: usize) -> bool;
}
