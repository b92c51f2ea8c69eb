//! A fake kernel for the engine: the address space the unit tests run on,
//! and the one `mq-replay` replays traces on (cargo feature `fake-os`).
//!
//! Mappings are whole pages of [`PAGE`] bytes. On its own the fake places a
//! mapping the caller lets it choose at the lowest free address from
//! [`BASE`] (tests can tell where mappings go), fails mmap with ENOMEM past
//! [`FakeOs::page_limit`] pages, `MAP_FIXED_NOREPLACE` over anything mapped
//! with EEXIST and a zero length with EINVAL, and takes every descriptor for
//! a two-page file whose inode number is the descriptor's, open read-only
//! but for [`WRITE_ONLY_FD`]. Given
//! what the real kernel answered ([`FakeOs::traced`]), it answers that
//! instead: the same error, or the same address unless a file window it
//! still holds is there (the replayed policy kept what the traced run had
//! unmapped), and then the highest gap below, as Linux's allocator would.
//!
//! It allocates nothing (the core has no allocator, and a build of the
//! whole workspace builds the library with this feature on): it holds at
//! most `N` mappings.

pub(crate) mod cold;
mod space;

use crate::file::{FileFacts, FileStamp};
use crate::os::{Errno, FdTable, Mmap, Os, PerThread, Region, SignalStack, Usage};
use core::cell::RefCell;
pub use space::Log;
use space::{Range, Space};

pub const PAGE: usize = 4096;
/// Where the fake's own placement starts.
pub const BASE: usize = 0x10_0000;
/// `MAP_FIXED_NOREPLACE`; macOS has none, the fake only needs a bit.
#[cfg(target_os = "linux")]
pub const NOREPLACE: i32 = libc::MAP_FIXED_NOREPLACE;
#[cfg(not(target_os = "linux"))]
pub const NOREPLACE: i32 = 0x0010_0000;
/// The descriptor the fake takes for one open write-only.
pub const WRITE_ONLY_FD: i32 = 9;
/// Descriptors [`FakeOs::rewrite`] can change the file of.
const FDS: usize = 64;

fn round_up(len: usize, page: usize) -> Option<usize> {
    len.div_ceil(page).checked_mul(page)
}

/// What the real kernel answered the call being replayed.
#[derive(Clone, Copy, Debug)]
pub struct Traced {
    /// What mmap returned: where the program got the mapping, or -errno.
    pub result: i64,
    /// The file behind the descriptor (None: not a readable regular file).
    pub file: Option<FileFacts>,
}

/// What a test runs during a call about a descriptor (see `FakeOs::racing`).
pub type Racing<const N: usize> = fn(&FakeOs<N>, i32);

/// The fake kernel, holding at most `N` mappings; the counters and the
/// munmap log are for tests to read, the other public fields say what it
/// answers. (Every field is visible in the crate, for the unit tests'
/// `FakeOs { .., ..FakeOs::default() }`.)
pub struct FakeOs<const N: usize = 256> {
    pub(crate) space: RefCell<Space<N>>,
    pub mmaps: RefCell<usize>,
    pub munmaps: RefCell<Log>,
    /// `drop_pages` calls.
    pub drops: RefCell<usize>,
    /// The ranges of `drop_pages` calls that failed (`can_drop` false).
    pub failed_drops: RefCell<Log>,
    /// `usage` calls.
    pub reads: RefCell<usize>,
    /// `map_count` calls.
    pub map_reads: RefCell<usize>,
    /// Pages dropped (while `can_drop`), not counted as resident.
    pub(crate) cold: RefCell<cold::Cold>,
    /// How many times each descriptor's file was rewritten (its ctime).
    pub(crate) rewrites: RefCell<[i64; FDS]>,
    /// Fails mmap with ENOMEM once this many pages are mapped.
    pub page_limit: Option<usize>,
    /// What `usage()` answers: address space, resident.
    pub usage: Option<Usage>,
    /// Where `usage` is None: resident bytes per mapped page.
    pub rss_per_page: Option<usize>,
    /// What `peak_resident()` answers.
    pub peak: Option<usize>,
    /// The program's own mappings, which `map_count()` adds the fake's to.
    pub map_count: Option<usize>,
    /// What `max_map_count()` answers (`vm.max_map_count`).
    pub max_map_count: Option<usize>,
    pub as_limit: Option<usize>,
    /// What `drop_pages` answers.
    pub can_drop: bool,
    /// What the real kernel answered the call being replayed (see the
    /// module's text).
    pub traced: Option<Traced>,
    /// The one thread's cells, where a test gives it some.
    pub cells: Option<&'static PerThread>,
    /// The system's page size ([`FakeOs::with_page`]): what mmap and munmap
    /// round lengths to, and mmap wants offsets, munmap and `drop_pages`
    /// addresses aligned to: [`PAGE`], or a multiple of it (16 KiB as
    /// macOS on arm64 and Asahi Linux, 64 KiB as RHEL on arm64; the
    /// bookkeeping stays in [`PAGE`] units).
    pub page: usize,
    /// `open_flags` calls (`F_GETFL`).
    pub fcntls: RefCell<usize>,
    /// `file_facts` calls (`statx`).
    pub statxs: RefCell<usize>,
    /// What `open_flags` answers for every descriptor but
    /// [`WRITE_ONLY_FD`] (`O_RDONLY` unless a test reopens one).
    pub open_mode: RefCell<i32>,
    /// macOS's rules: no close is seen (`tracks_closes` false), a private
    /// read-only mapping forgets its descriptor, path-only is `O_EXEC |
    /// O_EVTONLY`, a usage read answers the peak too (one `task_info`),
    /// and drops free nothing the system charges. A descriptor whose
    /// `open_mode` has no read access is then refused by mmap (EACCES),
    /// as XNU's is.
    pub macos: bool,
    /// `peak_resident` calls.
    pub peak_reads: RefCell<usize>,
    /// Called first in `munmap`, `drop_pages` and `usage` with the call's
    /// name and range, in `pause` with `("pause", 0, 0)` and in
    /// `each_region` with `("regions", 0, 0)`: what another thread does
    /// meanwhile, for a test.
    pub meanwhile: Option<fn(&'static str, usize, usize)>,
    /// What `fd_table` answers.
    pub fd_table: RefCell<FdTable>,
    /// The inode each descriptor names, where a test re-pointed it (0: the
    /// descriptor's own number, as the fake names files).
    pub inode: RefCell<[u64; FDS]>,
    /// Called at the start of each `mmap` and `open_flags`, with the
    /// descriptor: a test's other thread (a `dup2` racing with the call).
    pub racing: RefCell<Option<Racing<N>>>,
    /// What `read_implies_exec` answers (the calling thread's
    /// personality), and how many times it was asked.
    pub read_implies_exec: RefCell<Option<bool>>,
    pub personality_reads: RefCell<usize>,
    /// The link count `file_facts` answers, and the name `link_name`
    /// answers (and how many times it was asked).
    pub nlink: RefCell<u64>,
    pub link: RefCell<u64>,
    pub link_reads: RefCell<usize>,
    /// `each_region` answers None (a process that cannot read its maps).
    pub regions_unknown: bool,
    /// `each_region` calls.
    pub region_reads: RefCell<usize>,
    /// The device `each_region` names files by (`file_facts` answers 1).
    pub region_dev: u64,
}

impl Default for FakeOs {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FakeOs<N> {
    pub fn new() -> Self {
        FakeOs {
            space: RefCell::new(Space::new()),
            mmaps: RefCell::new(0),
            munmaps: RefCell::new(Log::new()),
            drops: RefCell::new(0),
            failed_drops: RefCell::new(Log::new()),
            reads: RefCell::new(0),
            map_reads: RefCell::new(0),
            cold: RefCell::new(cold::Cold::new()),
            rewrites: RefCell::new([0; FDS]),
            page_limit: None,
            usage: None,
            rss_per_page: None,
            peak: None,
            map_count: None,
            max_map_count: None,
            as_limit: None,
            can_drop: false,
            traced: None,
            cells: None,
            page: PAGE,
            fcntls: RefCell::new(0),
            statxs: RefCell::new(0),
            open_mode: RefCell::new(libc::O_RDONLY),
            macos: false,
            peak_reads: RefCell::new(0),
            meanwhile: None,
            fd_table: RefCell::new(FdTable::Own),
            inode: RefCell::new([0; FDS]),
            racing: RefCell::new(None),
            read_implies_exec: RefCell::new(Some(false)),
            personality_reads: RefCell::new(0),
            nlink: RefCell::new(1),
            link: RefCell::new(0),
            link_reads: RefCell::new(0),
            regions_unknown: false,
            region_reads: RefCell::new(0),
            region_dev: 1,
        }
    }

    /// Runs the test's `racing`, if any.
    fn race(&self, fd: i32) {
        let f = *self.racing.borrow();
        if let Some(f) = f {
            f(self, fd);
        }
    }

    /// A fake kernel whose pages are `page` bytes (a multiple of [`PAGE`]).
    pub fn with_page(page: usize) -> Self {
        assert!(page.is_power_of_two() && page >= PAGE);
        FakeOs {
            page,
            ..Self::new()
        }
    }

    /// What is mapped at `addr`: the descriptor and file page (-1 and the
    /// page's number in the mapping for anonymous memory).
    pub fn mapped(&self, addr: usize) -> Option<(i32, i64)> {
        let r = self.space.borrow().find(addr)?;
        Some((r.fd, r.page + ((addr - r.start) / PAGE) as i64))
    }

    /// The program reads `[addr, addr + len)`: its pages are resident.
    pub fn touch(&self, addr: usize, len: usize) {
        let _ = self.cold.borrow_mut().touch(addr, addr + len);
    }

    pub fn munmap_count(&self) -> usize {
        self.munmaps.borrow().total
    }

    /// Another process writes the file behind `fd`: its ctime moves.
    pub fn rewrite(&self, fd: i32) {
        self.rewrites.borrow_mut()[fd as usize] += 1;
    }

    /// Under macOS's rules, whether `fd` has `FREAD` as XNU's mmap checks
    /// it: not write-only, not `O_EXEC`, not `O_EVTONLY` (taken as under
    /// the policy that strips its read access).
    fn macos_can_read(&self, fd: i32) -> bool {
        let fl = if fd == WRITE_ONLY_FD {
            libc::O_WRONLY
        } else {
            *self.open_mode.borrow()
        };
        crate::file::readable_open_flags(fl, crate::file::xnu::PATH_ONLY)
    }

    /// Where a mapping of `len` bytes goes, or the error the kernel gives.
    fn place(&self, addr: usize, len: usize, flags: i32) -> Result<usize, Errno> {
        let space = self.space.borrow();
        let fixed = addr & !(self.page - 1);
        Ok(match self.traced {
            Some(_) if flags & libc::MAP_FIXED != 0 => fixed,
            Some(t) => {
                let hint = t.result as usize;
                if space.overlaps(hint, hint + len, true) {
                    space.top_down(len)
                } else {
                    hint
                }
            }
            None if flags & (libc::MAP_FIXED | NOREPLACE) != 0 => {
                if flags & NOREPLACE != 0 && space.overlaps(fixed, fixed + len, false) {
                    return Err(libc::EEXIST);
                }
                fixed
            }
            None => space.lowest_gap(BASE, len),
        })
    }
}

impl<const N: usize> Os for FakeOs<N> {
    fn mmap(&self, call: Mmap) -> Result<usize, Errno> {
        let Mmap {
            addr,
            len,
            flags,
            fd,
            off,
            ..
        } = call;
        *self.mmaps.borrow_mut() += 1;
        self.race(fd);
        if let Some(t) = self.traced.filter(|t| t.result < 0) {
            return Err(-t.result as Errno);
        }
        // The kernel's EINVAL for an offset that is not a page's (traced
        // calls were answered by the real kernel).
        if len == 0 || (self.traced.is_none() && !(off as u64).is_multiple_of(self.page as u64)) {
            return Err(libc::EINVAL);
        }
        if self.macos && fd >= 0 && !self.macos_can_read(fd) {
            return Err(libc::EACCES);
        }
        let len = round_up(len, self.page).ok_or(libc::ENOMEM)?;
        let mapped = self.space.borrow().pages();
        if self.page_limit.is_some_and(|l| mapped + len / PAGE > l) {
            return Err(libc::ENOMEM);
        }
        let start = self.place(addr, len, flags)?;
        // A write-only descriptor's mapping is refused by a real kernel; the
        // fake maps it as memory that is not a file's.
        let write_only = self.traced.is_none() && fd == WRITE_ONLY_FD;
        // (What `file_facts` would answer, without counting a statx.)
        let file = fd >= 0 && !write_only && self.traced.is_none_or(|t| t.file.is_some());
        let mut space = self.space.borrow_mut();
        space.remove(start, start + len);
        space.insert(Range {
            start,
            end: start + len,
            fd,
            page: off / PAGE as i64,
            file,
        });
        Ok(start)
    }

    fn munmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        if let Some(f) = self.meanwhile {
            f("munmap", addr, len);
        }
        let end = round_up(len, self.page).and_then(|len| addr.checked_add(len));
        let Some(end) = end.filter(|_| addr.is_multiple_of(self.page) && len > 0) else {
            return Err(libc::EINVAL);
        };
        self.munmaps.borrow_mut().push((addr, len));
        self.space.borrow_mut().remove(addr, end);
        let _ = self.cold.borrow_mut().touch(addr, end);
        Ok(())
    }

    fn file_facts(&self, fd: i32) -> Option<FileFacts> {
        *self.statxs.borrow_mut() += 1;
        if let Some(t) = self.traced {
            return t.file;
        }
        let ctime_nsec = self
            .rewrites
            .borrow()
            .get(fd as usize)
            .copied()
            .unwrap_or(0);
        let ino = match self.inode.borrow().get(fd as usize) {
            Some(&i) if i != 0 => i,
            _ => fd as u64,
        };
        (fd >= 0).then_some(FileFacts {
            dev: 1,
            ino,
            mnt: 1,
            nlink: *self.nlink.borrow(),
            name: 0,
            stamp: FileStamp {
                size: 2 * PAGE as i64,
                ctime_nsec,
                ..FileStamp::default()
            },
        })
    }

    /// A traced call's file was checked when it was traced.
    fn open_flags(&self, fd: i32) -> i32 {
        *self.fcntls.borrow_mut() += 1;
        self.race(fd);
        match fd {
            _ if self.traced.is_some() => libc::O_RDONLY,
            WRITE_ONLY_FD => libc::O_WRONLY,
            _ => *self.open_mode.borrow(),
        }
    }

    /// The tests call `closing` and `closed` as the Linux hooks do (not
    /// under macOS's rules).
    fn tracks_closes(&self) -> bool {
        !self.macos
    }

    fn path_only_flags(&self) -> i32 {
        if self.macos {
            crate::file::xnu::PATH_ONLY
        } else {
            crate::file::PATH_ONLY
        }
    }

    fn mapping_forgets_descriptor(&self) -> bool {
        self.macos
    }

    fn drops_free_memory(&self) -> bool {
        !self.macos
    }

    fn fd_table(&self) -> FdTable {
        *self.fd_table.borrow()
    }

    fn link_name(&self, _fd: i32) -> Option<u64> {
        *self.link_reads.borrow_mut() += 1;
        Some(*self.link.borrow())
    }

    fn read_implies_exec(&self) -> Option<bool> {
        *self.personality_reads.borrow_mut() += 1;
        *self.read_implies_exec.borrow()
    }

    fn max_map_count(&self) -> Option<usize> {
        self.max_map_count
    }

    fn usage(&self) -> Option<Usage> {
        if let Some(f) = self.meanwhile {
            f("usage", 0, 0);
        }
        *self.reads.borrow_mut() += 1;
        self.usage
            .or_else(|| {
                let pages = self.space.borrow().pages();
                let cold = self.cold.borrow().bytes() / PAGE;
                self.rss_per_page.map(|r| Usage {
                    size: pages * PAGE,
                    resident: (pages - cold) * r,
                    peak: None,
                })
            })
            .map(|u| Usage {
                // One read answers the peak too under macOS's rules.
                peak: u.peak.or(if self.macos { self.peak } else { None }),
                ..u
            })
    }

    /// `map_count` is the program's own mappings; the fake's are added as
    /// the kernel counts them (one per run of pages contiguous in address
    /// and in the same file), so queued mappings count, as they do.
    fn map_count(&self) -> Option<usize> {
        *self.map_reads.borrow_mut() += 1;
        let runs = self.space.borrow().runs();
        self.map_count.map(|c| c + runs)
    }

    /// A range's inode is its descriptor's now (the fake keeps no other).
    /// One range at a time, none borrowed while `f` runs: `f` may unmap.
    fn each_region(&self, mut f: impl FnMut(Region)) -> Option<()> {
        if let Some(m) = self.meanwhile {
            m("regions", 0, 0);
        }
        *self.region_reads.borrow_mut() += 1;
        if self.regions_unknown {
            return None;
        }
        let mut at = 0;
        loop {
            let space = self.space.borrow();
            let Some(&r) = space.ranges().iter().find(|r| r.end > at) else {
                return Some(());
            };
            drop(space);
            at = r.end;
            let ino = match self.inode.borrow().get(r.fd as usize) {
                _ if !r.file => 0,
                Some(&i) if i != 0 => i,
                _ => r.fd as u64,
            };
            f(Region {
                start: r.start,
                end: r.end,
                off: r.page as u64 * PAGE as u64,
                ino,
                dev: if r.file { self.region_dev } else { 0 },
                private: true,
                prot: libc::PROT_READ,
            });
        }
    }

    fn address_space_limit(&self) -> Option<usize> {
        self.as_limit
    }

    fn peak_resident(&self) -> Option<usize> {
        *self.peak_reads.borrow_mut() += 1;
        self.peak
    }

    fn drop_pages(&self, addr: usize, len: usize) -> bool {
        if let Some(f) = self.meanwhile {
            f("drop", addr, len);
        }
        *self.drops.borrow_mut() += 1;
        // madvise and mprotect refuse an address that is not a page's and
        // act on whole pages.
        let end = round_up(len, self.page).and_then(|l| addr.checked_add(l));
        let ok = self.can_drop
            && addr.is_multiple_of(self.page)
            && end.is_some_and(|end| self.cold.borrow_mut().add(addr, end));
        if !ok {
            self.failed_drops.borrow_mut().push((addr, len));
        }
        ok
    }

    fn thread_cells(&self) -> Option<&'static PerThread> {
        self.cells
    }

    /// One thread.
    fn this_thread(&self) -> usize {
        1
    }

    /// What another thread does while this one waits (`meanwhile`).
    fn pause(&self) {
        if let Some(f) = self.meanwhile {
            f("pause", 0, 0);
        }
    }

    fn signal_stack(&self) -> SignalStack {
        SignalStack::Elsewhere
    }
}
