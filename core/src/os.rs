//! The core's one way out to the system: the [`Os`] trait, and the small
//! types its methods answer in.

use crate::file::FileFacts;
use core::cell::Cell;

/// An `errno` value.
pub type Errno = i32;

/// The arguments of one `mmap(2)` call, as the C function takes them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mmap {
    pub addr: usize,
    pub len: usize,
    pub prot: i32,
    pub flags: i32,
    pub fd: i32,
    pub off: i64,
}

impl Mmap {
    /// In the C function's order.
    pub const fn new(addr: usize, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> Self {
        Mmap {
            addr,
            len,
            prot,
            flags,
            fd,
            off,
        }
    }
}

/// The process's memory as the kernel counts it, in bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Usage {
    /// Address space in use (`VmSize`, what `RLIMIT_AS` limits).
    pub size: usize,
    /// Resident set (`VmRSS`).
    pub resident: usize,
    /// The most the resident set has been, where the same read tells it
    /// (macOS: `task_info(MACH_TASK_BASIC_INFO)` answers `resident_size`
    /// and `resident_size_max` at once); else `None`, and
    /// [`Os::peak_resident`] is asked.
    pub peak: Option<usize>,
}

/// One mapping of the process as the kernel tells it now (a line of
/// Linux's `/proc/self/maps`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Region {
    pub start: usize,
    pub end: usize,
    /// The file offset of `start`.
    pub off: u64,
    /// The file's inode, 0 where the mapping is not a file's.
    pub ino: u64,
    /// The device of the file's file system (`makedev`), which is not
    /// always the one `stat` reports for the file (btrfs subvolumes,
    /// overlayfs before Linux 6.8).
    pub dev: u64,
    /// `MAP_PRIVATE` (else shared).
    pub private: bool,
    /// `PROT_READ`, `PROT_WRITE`, `PROT_EXEC` as they are now.
    pub prot: i32,
}

/// Everything the core asks of the system it runs on. Nothing in the core
/// calls the system any other way.
///
/// Who implements it: the library, once per platform, over the real system
/// (`interpose/src/linux/os.rs`, `interpose/src/macos/os.rs`); the core's
/// unit tests and `mq-replay` over a fake address space, on one thread.
///
/// The contract, for every method of a real implementation:
///
/// - **Called from inside hooked calls**: from any thread, with the table
///   held or not, and from a signal handler that interrupted a hook of the
///   same thread (even one that holds the table). So a method allocates
///   nothing, takes no lock, never waits on another thread, never panics and
///   never prints: only system calls (raw, or through libc functions that
///   are themselves async-signal-safe in practice) and reads of its own
///   statics and thread-locals. It must not call a hooked function through
///   the dynamic linker: it reaches the *real* mmap and munmap (or raw
///   system calls).
/// - **Errors** are the system's `errno` values ([`Errno`]), as the real
///   call would have set them; `None`/`false` answers mean "cannot tell",
///   and the core then takes the cautious path (keeps less, recovers
///   nothing).
/// - **Cost**: `mmap`, `munmap` and `file_facts` run on every eligible
///   call (a reuse makes no other system call where [`Os::tracks_closes`]);
///   `open_flags` once per descriptor and file where [`Os::tracks_closes`],
///   on every reuse (never on a miss) where
///   [`Os::mapping_forgets_descriptor`], else on every eligible call;
///   `this_thread` and `thread_cells` on every call that takes the
///   table; `signal_stack` only when the table is found held by the calling
///   thread; the rest rarely (see each).
///
/// The thread methods serve the table's lock ([`crate::holder`]): its word
/// names the holding thread, and each thread's [`PerThread`] cells say in
/// which hook frame it took the table, so that a lock abandoned by a
/// `siglongjmp` out of a hook can be told from one held below us.
pub trait Os {
    /// The real `mmap` (never the hook).
    fn mmap(&self, call: Mmap) -> Result<usize, Errno>;
    /// The real `munmap` (never the hook).
    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno>;
    /// Device, inode, mount, link count and `fstat` stamp of `fd` when it
    /// is a regular file whose `PROT_READ`, `MAP_PRIVATE` mappings show
    /// what the stamp says (not on overlayfs, see `linux/file.rs`); `None`
    /// otherwise or when it cannot be told. Whether the descriptor may be
    /// mapped is [`Os::open_flags`]'s. Checked on every eligible call: fd
    /// numbers are reused, files are rewritten. Asked before the mmap, so a
    /// change racing with it leaves an older stamp than the contents (no
    /// later reuse), never the reverse.
    fn file_facts(&self, fd: i32) -> Option<FileFacts>;
    /// What `fcntl(fd, F_GETFL)` answers, -1 when it fails: the engine
    /// tracks mappings of read-only descriptors only (see
    /// [`crate::file::trackable_open_flags`]). Where
    /// [`Os::tracks_closes`], asked once per description and file (see
    /// [`crate::readonly_fds`]); where [`Os::mapping_forgets_descriptor`],
    /// only when a queued mapping would answer the call.
    fn open_flags(&self, fd: i32) -> i32;
    /// The open flags that make a descriptor path-only whatever its access
    /// mode reads (see [`crate::file::readable_open_flags`]).
    fn path_only_flags(&self) -> i32 {
        crate::file::PATH_ONLY
    }
    /// Whether a `PROT_READ`, `MAP_PRIVATE` file mapping keeps nothing of
    /// the descriptor it was made through and is the same mapping whatever
    /// that descriptor's access mode, as long as it can read (macOS). Then
    /// the real mmap of a miss is the whole check of the descriptor (it
    /// fails without read access, as it would without munmapq), and
    /// `F_GETFL` is asked only when a queued mapping would answer the call,
    /// whose descriptor the kernel does not see. False (Linux): a mapping
    /// holds the open file and its write access, so only read-only
    /// descriptors are tracked, asked before the mapping is made.
    fn mapping_forgets_descriptor(&self) -> bool {
        false
    }
    /// Whether dropping a queued mapping's resident pages
    /// ([`Os::drop_pages`]) frees memory the system charges the process
    /// for. False on macOS: the pages are clean file pages that stay in the
    /// unified buffer cache, outside the process's footprint, so a drop
    /// would only lower a number; then no resident budget is kept.
    fn drops_free_memory(&self) -> bool {
        true
    }
    /// Whether every call that ends an open file description reaches
    /// [`crate::engine::Engine::closing`] and
    /// [`crate::engine::Engine::closed`] (Linux's hooks), so that what
    /// [`Os::open_flags`] said of a descriptor may be kept until its close.
    /// False: asked on every eligible mmap.
    fn tracks_closes(&self) -> bool {
        false
    }
    /// Whose descriptor table the calling thread uses now, against the
    /// one the engine's per-descriptor records (what `F_GETFL` said, which
    /// descriptors carry a lock, which ones mappings were made through)
    /// describe: the process's. A `vfork` child runs in the parent's
    /// memory, hooks and all, with a copy of the table; a thread that
    /// called `unshare(CLONE_FILES)` (or `close_range` with
    /// `CLOSE_RANGE_UNSHARE`) has its own, and so do the threads it
    /// creates. Asked on every eligible mmap
    /// and every close-type call, so it must cost no system call in the
    /// common case; also before each `fork` (an implementation that marks
    /// a thread at `vfork` may clear the parent's mark there). Where it
    /// cannot be told, [`FdTable::Own`] (the default).
    fn fd_table(&self) -> FdTable {
        FdTable::Own
    }
    /// Whether the process runs under a seccomp filter it inherited, which
    /// may kill it on any system call munmapq makes: asked once, before
    /// the engine's first call of its own, where the engine was started
    /// with [`crate::engine::Engine::check_filter_later`]. Where it answers
    /// true, the implementation has done what the platform needs besides
    /// (no report at exit), and the engine stops for good.
    fn inherited_filter(&self) -> bool {
        false
    }
    /// Which of its names the file behind `fd` was opened through (see
    /// [`crate::file::FileFacts::name`]): asked only of a file with more
    /// than one link, once per description where [`Os::tracks_closes`]
    /// (kept by [`crate::readonly_fds`]). `None`: it cannot be told (the
    /// mapping is then not tracked). 0 where no name is shown.
    fn link_name(&self, _fd: i32) -> Option<u64> {
        Some(0)
    }
    /// The size of the huge pages backing the file behind `fd`, where it is
    /// on a huge page file system (Linux's hugetlbfs), else None: a mapping
    /// of it covers whole pages of that size. Asked only of an mmap at an
    /// address.
    fn huge_page_size(&self, _fd: i32) -> Option<usize> {
        None
    }
    /// Whether a `PROT_READ` mmap by the calling thread would be made
    /// executable by its personality (`READ_IMPLIES_EXEC`); `None` where it
    /// cannot be told. Asked on each eligible mmap only once the program
    /// changed that bit through a hook ([`crate::context`]).
    fn read_implies_exec(&self) -> Option<bool> {
        Some(false)
    }
    /// `vm.max_map_count`, where there is one (asked once, before the
    /// first mapping is queued; see
    /// [`crate::engine::Engine::bound_entries_later`]).
    fn max_map_count(&self) -> Option<usize> {
        None
    }
    /// The process's address space and resident set right now (asked now
    /// and then, see [`crate::sizing`]).
    fn usage(&self) -> Option<Usage>;
    /// The most the process's resident set has been (its high-water mark;
    /// asked with [`Os::usage`] when its answer has no `peak`). `None`
    /// where it cannot be told.
    fn peak_resident(&self) -> Option<usize> {
        None
    }
    /// How many mappings the process has (asked rarely: it is costly).
    fn map_count(&self) -> Option<usize>;
    /// Hands each of the process's mappings to `f` in address order, as
    /// the kernel tells them now; `f` may unmap what it has been handed.
    /// Asked only when records of calls made while the table was busy were
    /// lost, which is rare (see [`crate::dirty`]). `None` where it cannot
    /// be told.
    fn each_region(&self, _f: impl FnMut(Region)) -> Option<()> {
        None
    }
    /// The `RLIMIT_AS` soft limit, or `None` when unlimited.
    fn address_space_limit(&self) -> Option<usize>;
    /// Where a mapping may lie in the heap's way, `[start, end)`: the
    /// program break grows up (`brk`; glibc's `malloc` through its own
    /// `__brk`, which no hook sees) only until the next mapping, so a
    /// queued window the kernel placed right above the heap would make it
    /// fail (ENOMEM) where it grows without munmapq. Empty where no heap
    /// lies below the mappings. Asked once, at the first miss.
    fn heap_way(&self) -> (usize, usize) {
        (0, 0)
    }
    /// Drops the resident pages of a queued range munmapq alone owns, the
    /// mapping staying in place (a later fault reads the file again, as a
    /// fresh mapping would). False where the system cannot.
    fn drop_pages(&self, addr: usize, len: usize) -> bool;
    /// The calling thread's cells: the same object for every call of one
    /// thread, a different one for each live thread, all zero bytes
    /// ([`PerThread::new`]) in a new thread, used by that thread alone (its
    /// hooks and the signal handlers that interrupt them). `None` where the
    /// platform keeps none: then a lock abandoned by a longjmp is never
    /// recovered (every later call passes through).
    fn thread_cells(&self) -> Option<&'static PerThread>;
    /// Runs `f`, a part of a hook that may take the table, with a frame of
    /// its own recorded as the thread's innermost hook frame in
    /// [`Os::thread_cells`] (see `holder.rs`) while it runs. The lanes of
    /// the hottest hooks record none, so every way from them to the table
    /// passes here. Where no cells are kept, just `f()`.
    fn framed<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    /// Runs `f`, which may make system calls, with the calling thread's
    /// errno as it found it afterwards: for the rare ways of a hook whose
    /// common way makes none and so saves nothing.
    fn keeping_errno<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    /// A number naming the calling thread among live threads, never 0 (the
    /// lock's word when [`Os::thread_cells`] is `None`).
    fn this_thread(&self) -> usize;
    /// Whether the calling thread runs on its alternate signal stack
    /// (`sigaltstack`) now.
    fn signal_stack(&self) -> SignalStack;
    /// Lets another thread run a little, between two tries of a bounded
    /// wait for the table (only outside hooks' common paths: before a
    /// fork, before a seccomp filter or a lower `RLIMIT_AS` is set).
    fn pause(&self) {
        core::hint::spin_loop();
    }
    /// Waits longer than [`Os::pause`] (about 100 µs), in the second part
    /// of a bounded wait for the table: a holder may keep it for tens of
    /// milliseconds without being stopped (it unmaps a queued window of
    /// hundreds of MiB, or reads the maps of tens of thousands of
    /// mappings). Where none is given, a pause.
    fn nap(&self) {
        self.pause();
    }
    /// A monotonic clock in microseconds, which bounds a wait for the table
    /// in time (0 where none is given: the wait is bounded by its count of
    /// tries alone).
    fn monotonic_us(&self) -> u64 {
        0
    }
}

/// Whose descriptor table the calling thread uses (see [`Os::fd_table`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FdTable {
    /// The process's: the one the engine's records describe.
    Own,
    /// A copy, in a `vfork` child sharing the parent's memory until it
    /// execs or exits. The parent's table goes on existing meanwhile, so
    /// none of the child's closes can be a last close of a description
    /// the records know of.
    VforkChild,
    /// Maybe not the process's: some thread called
    /// `unshare(CLONE_FILES)`, and which threads share which table since
    /// cannot be told. The table the records describe may be gone (the
    /// thread was its only user), so a close here may be a description's
    /// last.
    Unshared,
}

/// Where the calling thread runs, as far as its alternate signal stack
/// goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SignalStack {
    /// Not on its alternate signal stack (or it has none).
    Elsewhere,
    /// On it: the stack's lowest address and size.
    On { base: usize, size: usize },
    /// It cannot be told.
    Unknown,
}

/// One thread's cells, kept by the [`Os`] (in TLS) and used by the table's
/// lock ([`crate::holder`]). All zero bytes is [`PerThread::new`].
#[repr(C)]
pub struct PerThread {
    /// The innermost hook frame this thread is in (0: none), written by the
    /// library's exported functions on entry and put back on return.
    pub frame: Cell<usize>,
    /// The hook frame at which this thread took (or is taking) the table.
    pub(crate) hold: Cell<usize>,
}

impl Default for PerThread {
    fn default() -> Self {
        Self::new()
    }
}

impl PerThread {
    pub const fn new() -> Self {
        PerThread {
            frame: Cell::new(0),
            hold: Cell::new(0),
        }
    }
}
