//! What each hooked call does: mmap and munmap, the calls that act on a
//! range (mprotect, madvise, mlock, msync, mincore, mremap, ...) and
//! mlockall / munlockall.

use super::{round_up, Effect, Engine, Span};
use crate::close_seq::Seen;
use crate::file::{readable_open_flags, trackable_open_flags, FileFacts};
use crate::os::{Errno, FdTable, Mmap, Os};
use crate::payoff::SMALL;
use crate::queue::Queue;
use crate::readonly_fds::identity;
use crate::stats::{Counter, Straight};
use crate::table::{Entry, FileKey, Lookup, State, Table, NO_FD};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// What an mmap's arguments alone tell ([`Engine::mmap_told`]). Each way
/// straight is a variant of its own, so that the answer is one small
/// number the hook branches on as it is made.
#[derive(Clone, Copy)]
enum Told {
    /// Straight, as [`Straight::Mmap`].
    StraightMmap,
    /// Straight, as [`Straight::Payoff`].
    StraightPayoff,
    /// Of the kind the queue may take: the payoff decides.
    Payoff,
    /// At an address to look at first.
    Considered,
}

impl Told {
    #[inline(always)]
    fn straight(self) -> Option<Straight> {
        match self {
            Told::StraightMmap => Some(Straight::Mmap),
            Told::StraightPayoff => Some(Straight::Payoff),
            Told::Payoff | Told::Considered => None,
        }
    }
}

/// Which way an mmap goes ([`Engine::mmap_way`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MmapWay {
    /// The engine is off: the call as the program made it.
    Off,
    /// Straight to the kernel, nothing asked before it.
    Straight(Straight),
    /// At an address, or growing down: what it may meet is looked at
    /// first.
    Addressed,
    /// Of the kind the queue takes, engaged: it may meet the queue
    /// ([`Engine::mmap_of_kind`]).
    OfKind,
    /// Of that kind while the payoff steps aside: straight to the kernel.
    Aside,
}

/// The flags that make an mmap take its address as given, at 0 too:
/// replacing what is there (`MAP_FIXED`), or refusing to (Linux's
/// `MAP_FIXED_NOREPLACE`).
#[cfg(target_os = "linux")]
const AT_ADDRESS: i32 = libc::MAP_FIXED | libc::MAP_FIXED_NOREPLACE;
#[cfg(not(target_os = "linux"))]
const AT_ADDRESS: i32 = libc::MAP_FIXED;

/// A region the kernel grows down on a fault below it (Linux's
/// `MAP_GROWSDOWN`), up to the stack limit, only where no mapping lies
/// within its guard gap (`mm/mmap.c`: `expand_downwards`,
/// `stack_guard_gap`, 1 MiB by default): a queued range there would stop
/// a growth the program's own unmap allowed.
#[cfg(target_os = "linux")]
const GROWSDOWN: i32 = libc::MAP_GROWSDOWN;
#[cfg(not(target_os = "linux"))]
const GROWSDOWN: i32 = 0;

/// Anonymous huge pages (Linux's `MAP_HUGETLB`), with the page size's
/// log2 in the `MAP_HUGE_*` bits (0: the system's default size).
#[cfg(target_os = "linux")]
const HUGETLB: i32 = libc::MAP_HUGETLB;
#[cfg(not(target_os = "linux"))]
const HUGETLB: i32 = 0;
const HUGE_SHIFT: i32 = 26;
const HUGE_MASK: i32 = 0x3f;

/// The largest huge page the architecture has: the size taken where an
/// mmap does not tell it (x86_64's 1 GiB; arm64's 16 GiB, contiguous
/// 512 MiB pages of a 64 KiB-page kernel).
#[cfg(target_arch = "aarch64")]
const HUGE_PAGE_MAX: usize = 16 << 30;
#[cfg(not(target_arch = "aarch64"))]
const HUGE_PAGE_MAX: usize = 1 << 30;

/// The program's own mappings made through the hooks while the engine is
/// engaged before the process's mappings are first counted for them.
const FIRST_RECOUNT: usize = 1024;

/// Under `RLIMIT_AS`, whether the kernel would have room for a fresh
/// mapping of `len` bytes were nothing queued (else the real mmap is made,
/// and fails as it would without munmapq). Reads the process's size only
/// when the room last read leaves doubt (see
/// [`crate::sizing::Sizing::reuse_needs_room_check`]), and never while
/// nothing is queued: there is nothing to reuse then.
fn reuse_fits<O: Os>(os: &O, q: &Queue, len: usize) -> bool {
    if q.table.queued() == 0 || !q.sizing.reuse_needs_room_check(len) {
        return true;
    }
    match (os.address_space_limit(), os.usage()) {
        (None, _) => true,
        (Some(limit), Some(u)) => {
            u.size
                .saturating_sub(q.table.queued_bytes())
                .saturating_add(len)
                <= limit
        }
        (Some(_), None) => false,
    }
}

impl Engine {
    /// The hooked mmap: its way ([`Engine::mmap_way`]), then the call
    /// made that way.
    #[inline(always)]
    pub fn mmap<O: Os>(&self, os: &O, call: Mmap) -> Result<usize, Errno> {
        self.mmap_by_way(os, call, self.mmap_way(call))
    }

    /// Which way an mmap goes, told by its arguments alone, and for the
    /// kind the queue takes by the payoff (which counts it: asked once per
    /// call). No system call is made, nor errno touched: the hook saves
    /// errno after it, before [`Engine::mmap_of_kind`] or
    /// [`Engine::mmap_by_way`].
    #[inline(always)]
    pub fn mmap_way(&self, call: Mmap) -> MmapWay {
        // Off is decided once: an engine started between two looks would
        // take a call of any kind for one it may queue.
        if !self.active() {
            return MmapWay::Off;
        }
        match self.mmap_told(call) {
            Told::StraightMmap => MmapWay::Straight(Straight::Mmap),
            Told::StraightPayoff => MmapWay::Straight(Straight::Payoff),
            Told::Considered => MmapWay::Addressed,
            Told::Payoff => {
                if self.payoff.engage(call.fd, call.off, call.len) {
                    MmapWay::OfKind
                } else {
                    MmapWay::Aside
                }
            }
        }
    }

    /// An mmap made the way [`Engine::mmap_way`] told. The hook takes
    /// [`MmapWay::OfKind`] to [`Engine::mmap_of_kind`] itself, with the
    /// call's length, descriptor and offset alone.
    #[inline(always)]
    pub fn mmap_by_way<O: Os>(&self, os: &O, call: Mmap, way: MmapWay) -> Result<usize, Errno> {
        match way {
            MmapWay::Off => os.mmap(call),
            MmapWay::Straight(how) => self.pass_straight(os, call, how),
            MmapWay::Addressed => os.framed(|| self.mmap_addressed(os, call)),
            MmapWay::Aside => {
                if self.payoff.take_turn() {
                    os.framed(|| self.let_go_of_small(os));
                }
                self.pass_straight(os, call, Straight::Payoff)
            }
            MmapWay::OfKind => {
                let (len, fd, off) = (call.len, call.fd, call.off);
                os.framed(|| self.mmap_of_kind(os, len, fd, off))
            }
        }
    }

    /// Whether the hook may make an mmap as the program made it, with only
    /// [`Engine::mapped_plainly`] after it: nothing is queued, traced or
    /// counted (the gate, `crate::gate`: so no retry after ENOMEM could
    /// change its result, its errno is the kernel's, and nothing is
    /// written down), and the call passes straight, told by its arguments
    /// alone. Else the hook asks [`Engine::mmap_is_plain_counted`], out of
    /// its way, then calls [`Engine::mmap`], which also takes every call
    /// while the engine is off (it passes them through).
    #[inline(always)]
    pub fn mmap_is_plain(&self, call: Mmap) -> bool {
        // The gate open and no address, told by one test of both.
        (self.table.gate().word() as usize | call.addr) == 0
            && self.mmap_told_at_zero(call).straight().is_some()
    }

    /// [`Engine::mmap_is_plain`] where the gate is closed only because the
    /// counters are read (`MUNMAPQ_STATS`): the same answer, each such call
    /// counted as passed straight.
    #[inline(always)]
    pub fn mmap_is_plain_counted(&self, call: Mmap) -> bool {
        self.gate_counts_only() && self.mmap_told_straight(call, true)
    }

    #[inline(always)]
    fn mmap_told_straight(&self, call: Mmap, counted: bool) -> bool {
        match self.mmap_told(call).straight() {
            Some(how) => {
                if counted {
                    self.count_straight(how);
                }
                true
            }
            None => false,
        }
    }

    /// After an mmap made plainly returned `start` (`MAP_FAILED` is above
    /// every tracked entry): what the kernel's place means for the table.
    /// A call at an address (`MAP_FIXED` at 0 included) is never plain: its
    /// range is looked at before the call (`mmap_told`).
    #[inline(always)]
    pub fn mapped_plainly<O: Os>(&self, os: &O, call: Mmap, start: usize) {
        self.placed_by_kernel(os, start, call.len);
    }

    /// What an mmap's arguments alone tell. The commonest calls are told
    /// first: another kind than the queue takes (anonymous, shared,
    /// writable; unless it takes its address as given), then a whole small
    /// file, before the offset's alignment.
    #[inline(always)]
    fn mmap_told(&self, call: Mmap) -> Told {
        if call.addr != 0 {
            return Told::Considered;
        }
        self.mmap_told_at_zero(call)
    }

    /// [`Engine::mmap_told`] of a call at address 0.
    #[inline(always)]
    fn mmap_told_at_zero(&self, call: Mmap) -> Told {
        let (len, fd, off) = (call.len, call.fd, call.off);
        if (call.prot ^ libc::PROT_READ) | (call.flags ^ libc::MAP_PRIVATE) != 0 || fd < 0 {
            // At address 0 as at any other: what it replaces is looked at
            // first. A region that grows down stops the queue.
            if call.flags & (AT_ADDRESS | GROWSDOWN) != 0 {
                return Told::Considered;
            }
            return Told::StraightMmap;
        }
        // A whole small file mapped through a number whose close forgot
        // the last one (`fds.rs`) would be forgotten again at its close:
        // it passes, and the payoff does not count it. Where the queue
        // may not pay for small mappings (`payoff.rs`), they pass before
        // the `statx`.
        if off == 0 && len.wrapping_sub(1) < SMALL {
            return if self.closes_first.get(fd) {
                Told::StraightPayoff
            } else {
                Told::Payoff
            };
        }
        if len == 0 || off < 0 || off as u64 & (self.page() as u64 - 1) != 0 {
            return Told::StraightMmap;
        }
        Told::Payoff
    }

    /// An mmap at an address (`MAP_FIXED` or `MAP_FIXED_NOREPLACE` at 0
    /// too), or of a region that grows down (told by `mmap_told`, the
    /// engine active): what it may meet is looked at first.
    #[inline(never)]
    fn mmap_addressed<O: Os>(&self, os: &O, call: Mmap) -> Result<usize, Errno> {
        if call.flags & GROWSDOWN != 0 {
            return self.map_growing_down(os, call);
        }
        let fixed = call.flags & libc::MAP_FIXED != 0;
        let effect = if fixed {
            Effect::Modify
        } else {
            Effect::Inspect
        };
        if let Some(span) = self.addressed_span(os, call, effect) {
            self.prepare(os, span);
        }
        self.pass_straight(os, call, Straight::Mmap)
    }

    /// An mmap of the kind the queue takes, `PROT_READ` and `MAP_PRIVATE`
    /// at address 0 (its way [`MmapWay::OfKind`]: told by `mmap_told`,
    /// and engaged by the payoff, the engine active), made in a frame
    /// (`Os::framed`): it may meet the queue. Only the length, descriptor
    /// and offset are passed: the rest is told by the way.
    #[inline(never)]
    pub fn mmap_of_kind<O: Os>(
        &self,
        os: &O,
        len: usize,
        fd: i32,
        off: i64,
    ) -> Result<usize, Errno> {
        // The call as the program made it, where it goes to the kernel:
        // made there only, so that a reuse does not write it down.
        let call = || Mmap::new(0, len, libc::PROT_READ, libc::MAP_PRIVATE, fd, off);
        let page = self.page();
        if self.filter_unknown.load(Relaxed) && self.stopped_by_filter(os) {
            return os.mmap(call());
        }
        self.count(Counter::MmapCalls);
        // Before the first system call about `fd`: what the close hooks
        // saw of it (None while one of its closes is under way), and
        // whether this thread's descriptor table is the one the
        // records describe (a vfork child's, or one unshared, is not:
        // its numbers may name other files, so nothing is tracked).
        let seen = self.close_seq.seen(fd).filter(|_| self.own_table(os));
        // The context before the file: a mount changed after this read
        // leaves the mapping an older word than its flags (never reused).
        let ctx = seen.and_then(|_| self.context.now(os));
        // A deleted file's mapping would keep its space once queued.
        // Where a mapping forgets its descriptor (macOS) the descriptor
        // is asked about only on a hit (`map_eligible`).
        let forgets = os.mapping_forgets_descriptor();
        let file = seen.and_then(|seen| {
            let f = os.file_facts(fd).filter(|f| f.nlink > 0)?;
            // Worked out once: the descriptor's record and the table's
            // bucket both take it.
            let id = identity(&f);
            let name = if forgets {
                Some(0)
            } else {
                self.read_only(os, fd, &f, id, seen)
            }?;
            Some((FileFacts { name, ..f }, id, seen))
        });
        if let (Some(rlen), Some((file, id, seen)), Some(ctx)) = (round_up(len, page), file, ctx) {
            self.count(Counter::Eligible);
            let key = FileKey {
                dev: file.dev,
                ino: file.ino,
                mnt: file.mnt,
                off: off as u64,
                len: rlen,
                name: file.name,
                ctx,
                stamp: file.stamp,
            };
            return self.map_eligible(os, key, id, len, fd, off, seen);
        }
        self.pass_ineligible(os, call())
    }

    /// A region that grows down: its growth may reach any range below it
    /// the stack limit allows (and the limit may be raised), so every
    /// range the program unmaps from now on must be free at once.
    #[cold]
    #[inline(never)]
    fn map_growing_down<O: Os>(&self, os: &O, call: Mmap) -> Result<usize, Errno> {
        self.stop_for_good(os);
        os.mmap(call)
    }

    /// The range an mmap at an address may take: `len` bytes from there;
    /// for huge pages (anonymous `MAP_HUGETLB`, a file on hugetlbfs), the
    /// length rounded up to whole pages from the address rounded up to a
    /// page's boundary, as the kernel rounds them (Linux
    /// `ksys_mmap_pgoff`, `hugetlb_get_unmapped_area`), and from the
    /// address itself. Where the page size is not told (`MAP_HUGETLB`
    /// without a `MAP_HUGE_*` size: the system's default), the largest
    /// there is: more of the queue is released than needed, never less.
    fn addressed_span<O: Os>(&self, os: &O, call: Mmap, effect: Effect) -> Option<Span> {
        let huge = if call.flags & libc::MAP_ANONYMOUS != 0 {
            (call.flags & HUGETLB != 0).then(|| match (call.flags >> HUGE_SHIFT) & HUGE_MASK {
                0 => HUGE_PAGE_MAX,
                log2 => 1usize.checked_shl(log2 as u32).unwrap_or(HUGE_PAGE_MAX),
            })
        } else if call.fd >= 0 {
            os.huge_page_size(call.fd)
        } else {
            None
        };
        let Some(page) = huge.filter(|p| p.is_power_of_two()) else {
            return self.span(call.addr, call.len, effect);
        };
        let start = round_up(call.addr, page)?;
        let len = round_up(call.len, page)?;
        self.span(call.addr, (start - call.addr).checked_add(len)?, effect)
    }

    /// On stepping aside (`payoff.rs`): the small mappings queued are
    /// unmapped, as by the verdict they would hardly be reused, and the
    /// tracked bound narrowed, so that the small calls passing through from
    /// now on are answered by it without the lock. A busy table leaves it
    /// to the next small call.
    #[cold]
    #[inline(never)]
    fn let_go_of_small<O: Os>(&self, os: &O) {
        match self.lock(os) {
            Some(mut q) => {
                q.flush_up_to(os, self.books(), SMALL);
                self.publish_bounds(&q.table);
            }
            None => self.payoff.retry_turn(),
        }
    }

    /// An mmap of the deferrable kind that munmapq does not track after
    /// all (counted as a call already): the real call.
    fn pass_ineligible<O: Os>(&self, os: &O, call: Mmap) -> Result<usize, Errno> {
        self.count(Counter::PassIneligible);
        self.count(Counter::MmapSyscalls);
        self.kernel_mmap(os, call)
    }

    /// An mmap that goes to the kernel with nothing asked before it,
    /// counted with one add. Out of the hooks' way: a reuse makes none.
    #[inline(never)]
    fn pass_straight<O: Os>(&self, os: &O, call: Mmap, how: Straight) -> Result<usize, Errno> {
        self.count_straight(how);
        self.made_a_mapping(os);
        self.kernel_mmap(os, call)
    }

    /// The program is making a mapping of its own while the engine is
    /// engaged: once it made as many as the last count of the process's
    /// mappings allows, they are counted again before it, and the queue
    /// shrinks to what the room left allows (`vm.max_map_count`: the C
    /// library's own mappings, which no hook retries, must find three
    /// quarters of the room the program would have without munmapq).
    #[inline(always)]
    fn made_a_mapping<O: Os>(&self, os: &O) {
        let allowed = match self.recount_at.load(Relaxed) {
            0 => FIRST_RECOUNT,
            n => n,
        };
        let made = self.maps_made.load(Relaxed) + 1;
        self.maps_made.store(made, Relaxed);
        if made >= allowed {
            self.recount_maps(os);
        }
    }

    #[cold]
    #[inline(never)]
    fn recount_maps<O: Os>(&self, os: &O) {
        os.framed(|| {
            if let Some(mut q) = self.lock(os) {
                let allowed = q.recount_maps(os, self.books());
                let unreadable = q.sizing.take_unreadable();
                if unreadable > 0 {
                    self.count_n(Counter::Unreadable, unreadable);
                }
                self.maps_made.store(0, Relaxed);
                self.recount_at.store(allowed.max(1), Relaxed);
                self.publish_bounds(&q.table);
            }
        });
    }

    /// The real mmap, and what the kernel's choice of place means for the
    /// table.
    #[inline(always)]
    fn kernel_mmap<O: Os>(&self, os: &O, call: Mmap) -> Result<usize, Errno> {
        let r = self.retry_enomem(os, move || os.mmap(call));
        if let (Ok(start), false) = (r, call.flags & libc::MAP_FIXED != 0) {
            self.placed_by_kernel(os, start, call.len);
        }
        r
    }

    /// Where a mapping forgets its descriptor (macOS), whether `fd` may be
    /// answered with a queued mapping: it can read and is not path-only,
    /// as the kernel's mmap would have checked (`O_RDWR` too: a private
    /// mapping is the same whatever the descriptor's write access, XNU
    /// `bsd/kern/kern_mman.c` `mmap`: for `MAP_PRIVATE` "maxprot |=
    /// VM_PROT_WRITE" whatever `FWRITE`, and the file reference is dropped
    /// before it returns, `fp_drop`).
    fn may_answer<O: Os>(&self, os: &O, fd: i32) -> bool {
        readable_open_flags(os.open_flags(fd), os.path_only_flags())
    }

    /// Whether `fd`, whose file `statx` (or `fstat`) just found to be
    /// `file`, is open read-only: known from an earlier `F_GETFL` on the
    /// same description where closes are seen (see
    /// [`crate::readonly_fds`]), else asked now. An answer is used (and
    /// kept) only if no hooked close of `fd` began since `seen`, taken
    /// before the `statx`: else `statx` and `F_GETFL` may have described
    /// two descriptions (a write-only one judged by a read-only one's
    /// answer). Answers the name the description was opened through
    /// ([`Os::link_name`], kept with the answer; 0 for a file with one
    /// name), None when not read-only or the name cannot be told.
    fn read_only<O: Os>(
        &self,
        os: &O,
        fd: i32,
        file: &FileFacts,
        id: u64,
        seen: Seen,
    ) -> Option<u64> {
        let several = file.nlink > 1;
        let name = |os: &O| if several { os.link_name(fd) } else { Some(0) };
        if !os.tracks_closes() {
            return trackable_open_flags(os.open_flags(fd), os.path_only_flags())
                .then(|| name(os))?;
        }
        debug_assert_eq!(id, identity(file));
        if self.read_only_fds.known(fd, id) {
            // Kept 0 when the file had one name then: it has gained one.
            return match self.read_only_fds.name(fd) {
                0 => name(os),
                kept => Some(kept),
            };
        }
        let claim = self.read_only_fds.claim(fd, os.this_thread());
        let ok = trackable_open_flags(os.open_flags(fd), os.path_only_flags());
        let named = ok.then(|| name(os)).flatten();
        let ok = named.is_some() && self.close_seq.unchanged(fd, seen);
        match (claim, named) {
            (Some(c), Some(n)) if ok => self.read_only_fds.remember(c, id, n),
            (Some(c), _) => self.read_only_fds.give_up(c),
            (None, _) => {}
        }
        named.filter(|_| ok)
    }

    /// Whether the calling thread uses the descriptor table the engine's
    /// per-descriptor records describe (see [`Os::fd_table`]).
    #[inline]
    fn own_table<O: Os>(&self, os: &O) -> bool {
        os.fd_table() == FdTable::Own
    }

    /// After the real mmap of a miss: whether `fd` named, all along, the
    /// file `key` describes, so that the new mapping shows that file. No
    /// hooked close of it began since `seen` (taken before the first
    /// `statx`), and the kernel still names the same file by it now
    /// (which catches a close no hook saw, unless it was undone before
    /// this second look).
    fn confirm<O: Os>(&self, os: &O, fd: i32, key: &FileKey, seen: Seen) -> bool {
        if !self.close_seq.unchanged(fd, seen) {
            return false;
        }
        let now = os.file_facts(fd);
        self.close_seq.unchanged(fd, seen)
            && now.is_some_and(|f| {
                f.nlink > 0 && (f.dev, f.ino, f.mnt) == (key.dev, key.ino, key.mnt)
            })
    }

    /// The kernel handed out `[start, start + len)` to a call that let it
    /// choose (mmap without `MAP_FIXED`, shmat without an address), so
    /// anything we had there was unmapped behind our back: forget it.
    #[inline(always)]
    pub fn placed_by_kernel<O: Os>(&self, os: &O, start: usize, len: usize) {
        // At or above every tracked entry (all of them while none is):
        // decided by one bound, before the range is worked out (the
        // kernel's places are page-aligned). Its release may set errno,
        // which the plain way keeps not.
        if start >= self.tracked_hi.load(Acquire) || !self.active() {
            return;
        }
        self.placed_among_tracked(os, start, len);
    }

    /// Out of the hook's way, with the registers it would need.
    #[cold]
    #[inline(never)]
    fn placed_among_tracked<O: Os>(&self, os: &O, start: usize, len: usize) {
        os.framed(|| os.keeping_errno(|| self.forget_placed(os, start, len)));
    }

    fn forget_placed<O: Os>(&self, os: &O, start: usize, len: usize) {
        if let Some(s) = self.span(start, len, Effect::Modify) {
            if !self.untracked(s.start, s.end) {
                if let Some(mut q) = self.lock(os) {
                    self.forget(&mut q.table, s.start, s.end, u64::MAX, false);
                    self.publish_bounds(&q.table);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn map_eligible<O: Os>(
        &self,
        os: &O,
        key: FileKey,
        id: u64,
        len: usize,
        fd: i32,
        off: i64,
        seen: Seen,
    ) -> Result<usize, Errno> {
        let forgets = os.mapping_forgets_descriptor();
        // Where a mapping holds the open file it was made through, only
        // one made through `fd`'s description is handed back: one made
        // through `fd` with no close of it since (a close releases what was
        // made through it, `fds.rs`), nor since `seen`, before the `statx`
        // (a close under way may have been noted for the table's next
        // holder, and the number opened again).
        let through = (!forgets).then_some(fd);
        if self.reuse.load(Relaxed) {
            let q = self.lock(os).map(|mut q| {
                // A changed RLIMIT_AS must be seen by reuse_fits.
                self.apply_pending(os, &mut q.sizing);
                q
            });
            let q = q.filter(|q| {
                (forgets || self.close_seq.unchanged(fd, seen)) && reuse_fits(os, q, key.len)
            });
            if let Some(mut q) = q {
                loop {
                    match q.table.take_queued_of(&key, id, through) {
                        // A call that found the table busy changed the
                        // range since the drain: replaced it (a `MAP_FIXED`
                        // there: it is the program's now, not this file's
                        // window), or changed the mapping in place (an
                        // `mprotect`: still munmapq's, unmapped here). A
                        // lost record may have replaced it.
                        Lookup::Hit(start)
                            if self.dirty.pending_overlaps(start, start + key.len) =>
                        {
                            let replaced = self.dirty.replaced_or_lost(start, start + key.len);
                            match q.table.find(start) {
                                Some(e) if !replaced => {
                                    self.unmap_queued(os, &mut q.table, e, Counter::Released)
                                }
                                found => {
                                    if let Some(e) = found {
                                        q.table.remove(e.slot);
                                    }
                                    self.count(Counter::ForgottenQueued);
                                }
                            }
                        }
                        Lookup::Hit(start) if !forgets || self.may_answer(os, fd) => {
                            self.count(Counter::Reused);
                            self.payoff.reused(key.len);
                            return Ok(start);
                        }
                        // The kernel would refuse this descriptor, or map
                        // it untracked: the mapping found is given up (a
                        // reuse lost), and the call goes to the kernel.
                        Lookup::Hit(start) => {
                            if let Some(e) = q.table.find(start) {
                                self.unmap_queued(os, &mut q.table, e, Counter::Released);
                            }
                            self.publish_bounds(&q.table);
                            drop(q);
                            let call =
                                Mmap::new(0, len, libc::PROT_READ, libc::MAP_PRIVATE, fd, off);
                            return self.pass_ineligible(os, call);
                        }
                        // The file changed since that mapping was made: it
                        // may show the old contents (see `FileStamp`).
                        Lookup::Stale(e) => self.unmap_queued(os, &mut q.table, e, Counter::Stale),
                        Lookup::Miss => break,
                    }
                }
            }
        }
        self.count(Counter::MmapSyscalls);
        let start = self.retry_enomem(os, || {
            os.mmap(Mmap::new(
                0,
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                fd,
                off,
            ))
        })?;
        // Recorded under `key` only if the mapping shows that file: were it
        // another's (`fd` re-pointed by dup2 between the statx and the
        // mmap), every later reuse of the window would hand it out.
        if !self.confirm(os, fd, &key, seen) {
            self.count(Counter::Unconfirmed);
            // As for any mapping passed through: what we had there is gone.
            self.placed_by_kernel(os, start, len);
            return Ok(start);
        }
        // Where the heap could grow into it, never queued: not tracked.
        if self.in_heap_way(os, start) {
            self.placed_by_kernel(os, start, len);
            return Ok(start);
        }
        let Some(mut q) = self.lock(os) else {
            self.count(Counter::PassContention);
            return Ok(start);
        };
        self.forget(&mut q.table, start, start + key.len, u64::MAX, false);
        if q.table.is_full() && q.table.mark_oldest() {
            q.flush_marked(os, self.books());
        }
        self.widen_bounds(&q.table, start, start + key.len);
        // Before the entry exists: a close that misses this bit finds no
        // entry of the descriptor. And one that began before it was set
        // (it may have missed it, and ended, and the number been opened
        // again) is seen now: the mapping holds the open file that close
        // ended, which no record may give the number.
        self.mapped_fds.set(fd);
        if !self.close_seq.unchanged(fd, seen) {
            self.count(Counter::Unconfirmed);
            return Ok(start);
        }
        if !q
            .table
            .insert_live(start, key.len, key, self.dirty.epoch(), fd)
        {
            self.count(Counter::PassTableFull);
        }
        Ok(start)
    }

    /// Whether a mapping may be queued (see [`TableLock::may_have_queued`]).
    #[inline(always)]
    pub fn may_have_queued(&self) -> bool {
        self.table.may_have_queued()
    }

    /// Whether the hook may make a munmap as the program made it: the gate
    /// is open (nothing queued, so that no retry after ENOMEM could change
    /// its result; nothing traced or counted), and the range lies wholly
    /// outside the tracked bound (whose ends are page-aligned, so the
    /// range need not be worked out). Else the hook asks
    /// [`Engine::munmap_is_plain_counted`], out of its way, then calls
    /// [`Engine::munmap`].
    #[inline(always)]
    pub fn munmap_is_plain(&self, addr: usize, len: usize) -> bool {
        self.gate_open() && self.untracked(addr, addr.wrapping_add(len))
    }

    /// [`Engine::munmap_is_plain`] where the gate is closed only because
    /// the counters are read: the same answer, each such call counted.
    #[inline(always)]
    pub fn munmap_is_plain_counted(&self, addr: usize, len: usize) -> bool {
        let plain = self.gate_counts_only() && self.untracked(addr, addr.wrapping_add(len));
        if plain {
            self.count_straight(Straight::Munmap);
        }
        plain
    }

    /// The hooked munmap: one wholly outside the tracked bound (whose ends
    /// are page-aligned) is told untracked inline, before the range is
    /// worked out; the rest is `munmap_considered`.
    #[inline(always)]
    pub fn munmap<O: Os>(&self, os: &O, addr: usize, len: usize) -> Result<(), Errno> {
        if self.untracked(addr, addr.wrapping_add(len)) && self.active() {
            self.count_straight(Straight::Munmap);
            return self.retry_enomem(os, move || os.munmap(addr, len));
        }
        os.framed(|| self.munmap_considered(os, addr, len))
    }

    #[inline(never)]
    fn munmap_considered<O: Os>(&self, os: &O, addr: usize, len: usize) -> Result<(), Errno> {
        if !self.active() {
            return os.munmap(addr, len);
        }
        // Each munmap is counted once: deferred, or passed through as not
        // queueable, untracked, or for contention.
        // Its end alone is kept (its start is `addr`, its effect Modify):
        // a whole span kept for the release was stored to memory before
        // the table was taken. The retries take `addr` and `len` by value,
        // so that neither needs an address either.
        let Some(end) = self
            .span(addr, len, Effect::Modify)
            .filter(|s| s.start == addr && !self.untracked(s.start, s.end))
            .map(|s| s.end)
        else {
            self.count_straight(Straight::Munmap);
            return self.retry_enomem(os, move || os.munmap(addr, len));
        };
        // Read once for the whole call: the bit is cleared only where
        // nobody reads the counters (`count_quietly`).
        let counted = self.counted();
        if counted {
            self.stats.add(Counter::MunmapCalls, 1);
        }
        let passed = match self.lock(os) {
            Some(mut q) => match self.try_defer(os, &mut q, addr, end, counted) {
                Ok(()) => return Ok(()),
                Err(why) => {
                    let s = Span {
                        start: addr,
                        end,
                        effect: Effect::Modify,
                    };
                    self.release(os, &mut q.table, s);
                    self.publish_bounds(&q.table);
                    why
                }
            },
            None => {
                self.dirty.record(addr, end);
                self.fell_behind(os);
                Counter::PassContention
            }
        };
        self.count(passed);
        self.count(Counter::MunmapSyscalls);
        self.retry_enomem(os, move || os.munmap(addr, len))
    }

    /// Queues the live mapping that is exactly `[start, end)`, if it may
    /// be; else answers the counter that says why not. `counted`: the
    /// counters are read ([`Engine::counted`], read once by the caller).
    fn try_defer<O: Os>(
        &self,
        os: &O,
        q: &mut Queue,
        start: usize,
        end: usize,
        counted: bool,
    ) -> Result<(), Counter> {
        let e = match q.table.find(start) {
            Some(e) if e.state == State::Live && e.end() == end => e,
            _ => return Err(Counter::PassUntracked),
        };
        // Stepped aside: a small mapping would only keep the table in the
        // way of the calls passing through (see `let_go_of_small`).
        if e.len <= SMALL && self.payoff.is_aside() {
            return Err(Counter::PassNotQueued);
        }
        if self.locked_future.load(Relaxed) {
            return Err(Counter::PassNotQueued);
        }
        // Made through a descriptor the program has closed since: it holds
        // that open file, which no mmap may be handed (`take_queued`), and
        // whose last close is this munmap.
        if e.fd == NO_FD && !os.mapping_forgets_descriptor() {
            return Err(Counter::PassNotQueued);
        }
        self.apply_pending(os, &mut q.sizing);
        // Built where it is used, on the ways out of the common one.
        let books = || self.books_counting(counted);
        if !q.make_room(os, books, e.len) {
            let unreadable = q.sizing.take_unreadable();
            if unreadable > 0 {
                books().count(Counter::Unreadable, unreadable);
            }
            return Err(Counter::PassNotQueued);
        }
        self.table.queueing();
        q.table.enqueue(e.slot);
        q.sizing.note_queued(e.len);
        if q.may_be_over_budget() {
            q.keep_within_budget(os, books(), self.page());
        }
        let unreadable = q.sizing.take_unreadable();
        if counted {
            let stats = &self.stats;
            if unreadable > 0 {
                stats.add(Counter::Unreadable, unreadable);
            }
            stats.add(Counter::Deferred, 1);
            stats.peak(Counter::PeakQueued, q.table.queued() as u64);
            stats.peak(Counter::PeakQueuedBytes, q.table.queued_bytes() as u64);
        }
        Ok(())
    }

    /// Whether a window at `start` lies in the heap's way
    /// ([`Os::heap_way`], asked once): it is not tracked, so never queued.
    #[inline(always)]
    fn in_heap_way<O: Os>(&self, os: &O, start: usize) -> bool {
        let (lo, end) = match self.heap_way[1].load(Acquire) {
            0 => self.ask_heap_way(os),
            end => (self.heap_way[0].load(Relaxed), end - 1),
        };
        (lo..end).contains(&start)
    }

    #[cold]
    #[inline(never)]
    fn ask_heap_way<O: Os>(&self, os: &O) -> (usize, usize) {
        let (lo, end) = os.heap_way();
        let end = end.min(usize::MAX - 1);
        // The start first: a reader that finds the end finds it too, or
        // (another thread asking at once) the same answer.
        self.heap_way[0].store(lo, Relaxed);
        self.heap_way[1].store(end + 1, Release);
        (lo, end)
    }

    /// Any other call acting on address ranges (mprotect, madvise, mlock,
    /// msync, mincore, mremap, ...): makes the ranges look as the program
    /// left them, then makes the call, retrying once after a full flush if
    /// it fails with ENOMEM.
    pub fn range_call<O: Os, T>(
        &self,
        os: &O,
        spans: &[Option<Span>],
        call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        self.range_call_retrying(os, spans, false, call)
    }

    /// [`Engine::range_call`] for advice (`madvise`, `posix_madvise`):
    /// where splitting a mapping finds no room for another under
    /// `vm.max_map_count`, the kernel answers EAGAIN, not ENOMEM
    /// (`mm/madvise.c`, `madvise_vma_behavior`), so that is retried after
    /// a flush too.
    pub fn advice_call<O: Os, T>(
        &self,
        os: &O,
        spans: &[Option<Span>],
        call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        self.range_call_retrying(os, spans, true, call)
    }

    #[inline(always)]
    fn range_call_retrying<O: Os, T>(
        &self,
        os: &O,
        spans: &[Option<Span>],
        advice: bool,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if !self.active() {
            return call();
        }
        self.count(Counter::OtherCalls);
        for s in spans.iter().flatten() {
            self.prepare(os, *s);
        }
        self.retry_short_of_room(os, advice, call)
    }

    /// mlockall: queued mappings would be locked (and count against
    /// RLIMIT_MEMLOCK) and live ones become locked, so flush and forget
    /// everything first; with `future`, defer nothing until munlockall.
    /// What is in force afterwards follows the real call's result: XNU's
    /// mlockall always fails with ENOSYS (xnu `bsd/kern/kern_mman.c`), and
    /// a failed call locks nothing, so the earlier state comes back (a
    /// failed call costs the queue, nothing else). A successful one without
    /// `MCL_FUTURE` ends an earlier `MCL_FUTURE` (Linux `mm/mlock.c`
    /// `apply_mlockall_flags` clears the default lock flags first).
    pub fn lock_all<O: Os, T>(
        &self,
        os: &O,
        future: bool,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if self.active() {
            self.count(Counter::OtherCalls);
            // Set during the call, so that no munmap racing with it is
            // queued (and then locked).
            let before = self.locked_future.load(Relaxed);
            self.locked_future.store(before || future, Relaxed);
            self.release_everything(os);
            let r = self.retry_enomem(os, call);
            self.locked_future
                .store(if r.is_ok() { future } else { before }, Relaxed);
            return r;
        }
        call()
    }

    /// A call that may change the state of any mapping of the process
    /// without replacing one (`process_madvise`, whose ranges the kernel
    /// reads behind the program's pointer): everything queued is
    /// unmapped and live mappings stop being tracked first, as for
    /// `mlockall`.
    pub fn everything_call<O: Os, T>(
        &self,
        os: &O,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        if !self.active() {
            return call();
        }
        self.count(Counter::OtherCalls);
        self.release_everything(os);
        self.retry_enomem(os, call)
    }

    /// Unmaps every queued mapping and forgets every live one. Such calls
    /// are rare: a busy table is waited for a bounded while. Where it
    /// stays busy (a signal handler that interrupted this thread's own
    /// hook) the table's next holder does it: it unmaps what is queued,
    /// which is still the library's (these calls replace no mapping),
    /// rather than forgetting it as a range changed by a busy call is.
    fn release_everything<O: Os>(&self, os: &O) {
        match self.lock(os).or_else(|| self.lock_patiently(os)) {
            Some(mut q) => {
                q.flush_all(os, self.books());
                self.count_n(Counter::Forgotten, q.table.len() as u64);
                q.table.clear();
                self.publish_bounds(&q.table);
            }
            None => {
                self.count(Counter::PassContention);
                self.lost_names.everything();
                self.fell_behind(os);
            }
        }
    }

    /// munlockall: deferring may resume once the real call has succeeded
    /// (on XNU it always fails with ENOSYS, and then nothing was locked by
    /// mlockall either).
    pub fn unlock_all<T>(&self, call: impl FnOnce() -> Result<T, Errno>) -> Result<T, Errno> {
        let r = call();
        if r.is_ok() {
            self.locked_future.store(false, Relaxed);
        }
        r
    }

    /// Releases what the program no longer has in `span`, as `span.effect`
    /// says; if the table is busy, records a modifying span for its holder.
    fn prepare<O: Os>(&self, os: &O, span: Span) {
        if self.untracked(span.start, span.end) {
            return;
        }
        match self.lock(os) {
            Some(mut q) => {
                self.release(os, &mut q.table, span);
                self.publish_bounds(&q.table);
            }
            None => {
                self.count(Counter::PassContention);
                match span.effect {
                    Effect::Modify => self.dirty.record(span.start, span.end),
                    Effect::Change => self.dirty.record_change(span.start, span.end),
                    Effect::Inspect => return,
                }
                self.fell_behind(os);
            }
        }
    }

    fn release<O: Os>(&self, os: &O, t: &mut Table, span: Span) {
        let mut hi = span.end;
        while let Some(e) = t.last_overlap(span.start, hi) {
            hi = e.start;
            match e.state {
                State::Queued => self.unmap_queued(os, t, e, Counter::Released),
                State::Live if span.effect != Effect::Inspect => t.remove(e.slot),
                _ => {}
            }
        }
    }

    /// Really unmaps one queued mapping and takes it out of the table,
    /// counting it under `why`. In flight until it is out of the table, so
    /// that a recovery (`recover_abandoned`) never unmaps it twice.
    /// What a call that found the table busy recorded there since the
    /// holder drained is left alone (see [`crate::queue::Books::unmap`]).
    pub(super) fn unmap_queued<O: Os>(&self, os: &O, t: &mut Table, e: Entry, why: Counter) {
        t.unmap_in_flight(e.start, e.len, || {
            self.books().unmap(os, e.start, e.len);
        });
        t.remove(e.slot);
        t.finish_unmap();
        self.count(why);
    }

    /// Runs `call`; if it fails with ENOMEM while mappings are queued, unmaps
    /// them all and runs it once more, so the queue is never why a call fails.
    #[inline(always)]
    fn retry_enomem<O: Os, T>(
        &self,
        os: &O,
        call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        self.retry_short_of_room(os, false, call)
    }

    /// [`Engine::retry_enomem`], where `advice` also takes EAGAIN for a
    /// want of room (see [`Engine::advice_call`]).
    #[inline(always)]
    fn retry_short_of_room<O: Os, T>(
        &self,
        os: &O,
        advice: bool,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        let r = call();
        let short = match r {
            Err(libc::ENOMEM) => true,
            Err(libc::EAGAIN) => advice,
            _ => false,
        };
        if !short {
            return r;
        }
        os.framed(|| self.retry_after_enomem(os, r, call))
    }

    #[cold]
    #[inline(never)]
    fn retry_after_enomem<O: Os, T>(
        &self,
        os: &O,
        r: Result<T, Errno>,
        mut call: impl FnMut() -> Result<T, Errno>,
    ) -> Result<T, Errno> {
        // Asked before the table is taken: taking it may unmap queued
        // mappings itself (what calls that found it busy left: a close's,
        // an unlink's, a fork child's inherited queue), and the room that
        // frees counts as the flush's.
        let queued_at_failure = self.may_have_queued();
        let flushed = match self.lock(os) {
            Some(mut q) if queued_at_failure || q.table.queued() > 0 => {
                q.flush_all(os, self.books());
                true
            }
            _ => false,
        };
        if !flushed {
            return r;
        }
        self.count(Counter::EnomemRetries);
        call()
    }
}
