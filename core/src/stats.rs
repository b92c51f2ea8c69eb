//! Counters and the protocol between the library and whoever reads its
//! lines (the launcher's report, the integration tests): the one-line
//! `key=value` form written at exit, the line announcing a load, and how the
//! lines of several processes combine ([`Totals::add`]: each counter says
//! whether it sums or peaks).
//!
//! They sit on every hooked call's path. An update is a relaxed atomic
//! add: a plain load and store would lose one of two updates made at the
//! same instant, and the report (`--stats`, the tests' exact counts) must
//! add up. Striping keeps the add cheap: each thread mostly writes a line
//! no other thread does, so the locked add finds it in its own cache.
//!
//! The counters every call bumps outside the queue's lock ([`HOT`]) are
//! striped: [`STRIPES`] copies, each stripe on its own cache line, a thread
//! picking its stripe by its stack address; a value read is the sum of its
//! stripes. On macOS libmalloc's own `mach_vm_deallocate`, `madvise` and
//! `mprotect` calls from every thread go through the hooks (they cross from
//! libsystem_malloc into libsystem_kernel through the shared cache's
//! patchable uses, which dyld rebinds), so one shared line written by each
//! call would bounce between the cores of a multi-threaded program that
//! never maps a file.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How one counter of several processes combines.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Merge {
    /// Events: the total is the sum.
    Sum,
    /// A high-water mark: the total is the largest.
    Peak,
}

macro_rules! counters {
    ($($name:ident = $key:literal $merge:ident: $doc:literal,)*) => {
        /// One counter each.
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(usize)]
        pub enum Counter { $(#[doc = $doc] $name,)* }

        impl Counter {
            pub const ALL: &'static [Counter] = &[$(Counter::$name,)*];
            /// The key in the statistics line.
            pub const fn key(self) -> &'static str {
                match self { $(Counter::$name => $key,)* }
            }
            pub const fn doc(self) -> &'static str {
                match self { $(Counter::$name => $doc,)* }
            }
            pub const fn merge(self) -> Merge {
                match self { $(Counter::$name => Merge::$merge,)* }
            }
        }
    };
}

counters! {
    MmapCalls = "mmap_calls" Sum: "mmap/mmap64 calls seen",
    MunmapCalls = "munmap_calls" Sum: "munmap calls seen",
    OtherCalls = "other_calls" Sum: "mprotect, mremap, madvise, mlock, msync, mincore calls seen",
    Eligible = "eligible" Sum: "mmaps of the deferrable kind (NULL, PROT_READ, MAP_PRIVATE, regular file open read-only, with a link)",
    Reused = "reused" Sum: "mmaps answered with a queued mapping: no syscall",
    Deferred = "deferred" Sum: "munmaps queued instead of issued",
    Flushes = "flushes" Sum: "times the queue was (partly) unmapped",
    Flushed = "flushed" Sum: "queued mappings really unmapped",
    MmapSyscalls = "mmap_syscalls" Sum: "real mmaps issued",
    MunmapSyscalls = "munmap_syscalls" Sum: "real munmaps issued (the program's passed-through ones and merged flushes)",
    PassIneligible = "pass_ineligible" Sum: "mmaps passed through untracked: not the deferrable kind",
    PassUntracked = "pass_untracked" Sum: "munmaps passed through: not one whole tracked mapping",
    PassNotQueued = "pass_not_queued" Sum: "munmaps of one whole tracked mapping passed through: larger than the byte cap, or mlockall(MCL_FUTURE) in force",
    PassContention = "pass_contention" Sum: "calls passed through because another thread or a signal handler held the queue",
    PassTableFull = "pass_table_full" Sum: "eligible mmaps left untracked: table full",
    PassPayoff = "pass_payoff" Sum: "of pass_ineligible, small mmaps passed through before the statx: reuse too rare in this process to pay for the queue",
    EnomemRetries = "enomem_retries" Sum: "calls that failed with ENOMEM, were retried after a full flush",
    Released = "released" Sum: "queued mappings unmapped early because a call touched their range",
    Forgotten = "forgotten" Sum: "live entries dropped, their munmap left to the kernel: closed before their munmap (small, or the kernel lists a lock), or their range changed while the queue was busy",
    ForgottenQueued = "forgotten_queued" Sum: "queued mappings dropped, left mapped: the program changed their range while the queue was busy",
    LostRecords = "lost_records" Sum: "times busy calls outran the record ring; live entries were dropped, queued ones checked against the kernel's mappings",
    PeakQueued = "peak_queued" Peak: "most mappings queued at once",
    PeakQueuedBytes = "peak_queued_bytes" Peak: "most bytes queued at once",
    Stale = "stale" Sum: "queued mappings unmapped, not reused: their file changed since they were mapped",
    Recovered = "recovered" Sum: "times the queue was found held by a hook a longjmp had left, and recovered",
    PagesDropped = "pages_dropped" Sum: "times the queue's resident pages were dropped (madvise, mappings kept) to stay within its memory budget",
    Unreadable = "unreadable" Sum: "reads of the process's memory use or mappings (/proc/self/statm, /proc/self/maps) that failed: the queue is then bounded by a fixed length, and the reads are tried less and less often",
    ReleasedAtClose = "released_at_close" Sum: "queued mappings unmapped before the close of the descriptor they were mapped through, or the unlink, rename or unmount of their file",
    Unconfirmed = "unconfirmed" Sum: "eligible mmaps left untracked: the descriptor may have named another file between the checks and the mmap, or been closed before the mapping was recorded",
}

pub const COUNTERS: usize = Counter::ALL.len();

/// The counters bumped on every call's path outside the queue's lock, from
/// any thread (the others are bumped with the queue held, or rarely).
pub const HOT: [Counter; 8] = [
    Counter::MmapCalls,
    Counter::MunmapCalls,
    Counter::OtherCalls,
    Counter::PassIneligible,
    Counter::MmapSyscalls,
    Counter::MunmapSyscalls,
    Counter::PassUntracked,
    Counter::PassContention,
];

/// A call passed straight to the kernel, counted with one add instead of
/// one per counter it stands for ([`Straight::implies`]; [`Stats::get`]
/// reads them back): the calls the engine steps aside for are most of
/// some programs' calls, and each locked add costs as much as a dozen
/// plain instructions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub enum Straight {
    /// An mmap not of the deferrable kind.
    Mmap,
    /// A small mmap of the deferrable kind passed before the `statx`
    /// (`payoff.rs`).
    Payoff,
    /// A munmap of no range the engine tracks.
    Munmap,
}

impl Straight {
    const ALL: [Straight; 3] = [Straight::Mmap, Straight::Payoff, Straight::Munmap];

    /// Whether one call of this kind counts one in `c`.
    pub const fn implies(self, c: Counter) -> bool {
        use Counter::*;
        match self {
            Straight::Mmap => matches!(c, MmapCalls | PassIneligible | MmapSyscalls),
            Straight::Payoff => {
                matches!(c, MmapCalls | PassIneligible | MmapSyscalls | PassPayoff)
            }
            Straight::Munmap => matches!(c, MunmapCalls | PassUntracked | MunmapSyscalls),
        }
    }

    /// Its slot in a stripe, after the hot counters'.
    const fn slot(self) -> usize {
        HOT.len() + self as usize
    }
}

/// Slots in a stripe: the hot counters, then the straight calls.
const STRIPE_SLOTS: usize = HOT.len() + Straight::ALL.len();

/// Where a counter sits among [`HOT`]'s.
const fn hot_slot(c: Counter) -> Option<usize> {
    let mut i = 0;
    while i < HOT.len() {
        if HOT[i] as usize == c as usize {
            return Some(i);
        }
        i += 1;
    }
    None
}

// A peak is not a sum of stripes.
const _: () = {
    let mut i = 0;
    while i < HOT.len() {
        assert!(matches!(HOT[i].merge(), Merge::Sum));
        i += 1;
    }
};

/// How many copies of the hot counters (a power of two).
pub const STRIPES: usize = 8;

/// One copy of the hot counters, alone on its cache line: 128 bytes, the
/// line of Apple's arm64 cores and the pair of 64-byte lines x86's spatial
/// prefetcher fetches together (as crossbeam-utils' `CachePadded` pads for
/// x86_64 and aarch64).
#[repr(C, align(128))]
struct Stripe([AtomicU64; STRIPE_SLOTS]);

/// The other counters, on lines of their own (not shared with the engine's
/// lock word or a stripe).
#[repr(C, align(128))]
struct Cold([AtomicU64; COUNTERS]);

/// Whose counters these are, for a reader of their image (see
/// [`Stats::set_owner`]): `[magic, pid, ended]`.
#[repr(C, align(128))]
struct Owner([AtomicU64; 3]);

/// Says an image holds counters of this layout (the counters, the slots of
/// a stripe and the stripes in its low bits): a launcher of another build
/// reads nothing rather than the wrong figures.
const MAGIC: u64 = 0x6d71_7374_0000_0000
    | ((COUNTERS as u64) << 16)
    | ((STRIPE_SLOTS as u64) << 8)
    | STRIPES as u64;

/// What [`Stats`] is aligned and padded to: a page, so that the counters
/// can be the whole of a file mapping of their own that outlives the
/// process (`munmapq --stats`: interpose/src/live.rs) while every update
/// stays one add to a fixed address. x86_64 has 4 KiB pages, and its
/// linker aligns the library's segments to them: a larger alignment would
/// make ld.so reserve and trim an aligned range, two more system calls at
/// every load. Elsewhere 16 KiB, macOS arm64's pages (where pages are
/// larger still, the counters stay where they are and are reported at
/// exit).
#[cfg(target_arch = "x86_64")]
pub const IMAGE_BYTES: usize = 4096;
#[cfg(not(target_arch = "x86_64"))]
pub const IMAGE_BYTES: usize = 16384;

/// The calling thread's stripe: its stack address in 64 KiB units, hashed
/// (threads' stacks are distinct regions of at least 512 KiB on macOS and
/// 8 MiB by default on Linux; a thread that moves to another stripe, or two
/// threads that share one, only share a line, never lose a count's place).
#[inline(always)]
fn stripe() -> usize {
    let probe = 0u8;
    let at = core::ptr::addr_of!(probe) as usize as u64;
    ((at >> 16).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - STRIPES.trailing_zeros())) as usize
}

#[cfg_attr(target_arch = "x86_64", repr(C, align(4096)))]
#[cfg_attr(not(target_arch = "x86_64"), repr(C, align(16384)))]
pub struct Stats {
    hot: [Stripe; STRIPES],
    values: Cold,
    owner: Owner,
}

const _: () = assert!(core::mem::size_of::<Stats>() == IMAGE_BYTES);

/// The counters one process kept in a file mapping, read back
/// ([`read_image`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    pub pid: u64,
    /// The program reached its exit handler (it did not die of a signal,
    /// `_exit` or an exec).
    pub ended: bool,
    pub values: [u64; COUNTERS],
}

/// Reads the counters of an image [`Stats`] left in a file (its bytes as
/// the process had them): `None` when it is not one (short, of another
/// layout, or never owned).
pub fn read_image(bytes: &[u8]) -> Option<Image> {
    if bytes.len() < IMAGE_BYTES {
        return None;
    }
    let s = Stats::new();
    let base = &s as *const Stats as usize;
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    for slot in s.slots().chain(&s.owner.0) {
        slot.store(word(slot as *const AtomicU64 as usize - base), Relaxed);
    }
    if s.owner.0[0].load(Relaxed) != MAGIC {
        return None;
    }
    let mut values = [0u64; COUNTERS];
    for (v, &c) in values.iter_mut().zip(Counter::ALL) {
        *v = s.get(c);
    }
    Some(Image {
        pid: s.owner.0[1].load(Relaxed),
        ended: s.owner.0[2].load(Relaxed) != 0,
        values,
    })
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub const fn new() -> Self {
        Stats {
            hot: [const { Stripe([const { AtomicU64::new(0) }; STRIPE_SLOTS]) }; STRIPES],
            values: Cold([const { AtomicU64::new(0) }; COUNTERS]),
            owner: Owner([const { AtomicU64::new(0) }; 3]),
        }
    }

    /// Every counter's word (not the owner's).
    fn slots(&self) -> impl Iterator<Item = &AtomicU64> {
        self.hot.iter().flat_map(|s| &s.0).chain(&self.values.0)
    }

    /// Marks the counters as `pid`'s, for [`read_image`] (once they are
    /// where the reader will find them).
    pub fn set_owner(&self, pid: u64) {
        self.owner.0[1].store(pid, Relaxed);
        self.owner.0[2].store(0, Relaxed);
        self.owner.0[0].store(MAGIC, Relaxed);
    }

    /// The program reached its exit handler.
    pub fn set_ended(&self) {
        self.owner.0[2].store(1, Relaxed);
    }

    #[inline]
    pub fn add(&self, c: Counter, n: u64) {
        self.add_in(stripe(), c, n);
    }

    /// `add` as the thread of stripe `s` does it.
    #[inline(always)]
    fn add_in(&self, s: usize, c: Counter, n: u64) {
        let v = match hot_slot(c) {
            Some(h) => &self.hot[s % STRIPES].0[h],
            None => &self.values.0[c as usize],
        };
        v.fetch_add(n, Relaxed);
    }

    #[inline]
    pub fn bump(&self, c: Counter) {
        self.add(c, 1);
    }

    /// One call passed straight to the kernel (see [`Straight`]).
    #[inline]
    pub fn straight(&self, how: Straight) {
        self.straight_in(stripe(), how);
    }

    #[inline(always)]
    fn straight_in(&self, s: usize, how: Straight) {
        self.hot[s % STRIPES].0[how.slot()].fetch_add(1, Relaxed);
    }

    /// For the `Peak` counters (never hot).
    #[inline]
    pub fn peak(&self, c: Counter, v: u64) {
        let p = &self.values.0[c as usize];
        if v > p.load(Relaxed) {
            p.fetch_max(v, Relaxed);
        }
    }

    /// A counter's value: its own adds, and the straight calls it stands
    /// in for.
    pub fn get(&self, c: Counter) -> u64 {
        let slot = |h: usize| {
            self.hot
                .iter()
                .fold(0u64, |sum, s| sum.wrapping_add(s.0[h].load(Relaxed)))
        };
        let own = match hot_slot(c) {
            Some(h) => slot(h),
            None => self.values.0[c as usize].load(Relaxed),
        };
        Straight::ALL
            .iter()
            .filter(|s| s.implies(c))
            .fold(own, |sum, s| sum.wrapping_add(slot(s.slot())))
    }

    /// Zeroes the counters (not their owner).
    pub fn reset(&self) {
        for v in self.slots() {
            v.store(0, Relaxed);
        }
    }

    /// Writes `munmapq pid=N key=value ...\n` into `buf`, answering the
    /// length written (truncated if `buf` is too small).
    pub fn write_line(&self, pid: u64, buf: &mut [u8]) -> usize {
        let mut w = LineWriter { buf, len: 0 };
        w.put(b"munmapq pid=");
        w.num(pid);
        for &c in Counter::ALL {
            w.put(b" ");
            w.put(c.key().as_bytes());
            w.put(b"=");
            w.num(self.get(c));
        }
        w.put(b"\n");
        w.len
    }
}

/// Appends to a fixed buffer, dropping what does not fit.
pub struct LineWriter<'a> {
    pub buf: &'a mut [u8],
    pub len: usize,
}

impl LineWriter<'_> {
    pub fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    pub fn num(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..]);
    }
}

/// Parses one statistics line back into values indexed like
/// [`Counter::ALL`]; unknown keys are ignored (newer library, older launcher).
pub fn parse_line(line: &str) -> Option<[u64; COUNTERS]> {
    let rest = line.trim_end().strip_prefix("munmapq ")?;
    let mut out = [0u64; COUNTERS];
    for field in rest.split(' ') {
        let (k, v) = field.split_once('=')?;
        if let Some(i) = Counter::ALL.iter().position(|c| c.key() == k) {
            out[i] = v.parse().ok()?;
        }
    }
    Some(out)
}

/// How the line announcing that a process loaded the library starts; the
/// pid follows, then a newline.
pub const LOADED: &str = "munmapq-loaded pid=";

/// Writes the load announcement for `pid` into `buf`, answering its length.
pub fn write_loaded_line(pid: u64, buf: &mut [u8]) -> usize {
    let mut w = LineWriter { buf, len: 0 };
    w.put(LOADED.as_bytes());
    w.num(pid);
    w.put(b"\n");
    w.len
}

/// How the line saying that a process loaded the library but that its
/// calls do not reach the hooks starts (written at load, after the load
/// line: on macOS dyld may load the library without applying its
/// interposing); the pid follows, then a newline.
pub const NOT_INTERPOSED: &str = "munmapq-not-interposed pid=";

/// Writes the not-interposed line for `pid` into `buf`, answering its
/// length.
pub fn write_not_interposed_line(pid: u64, buf: &mut [u8]) -> usize {
    let mut w = LineWriter { buf, len: 0 };
    w.put(NOT_INTERPOSED.as_bytes());
    w.num(pid);
    w.put(b"\n");
    w.len
}

/// The counters of several processes combined, and how many lines of each
/// kind went into them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Processes that announced a load.
    pub loaded: usize,
    /// Processes that reported counters at exit.
    pub reported: usize,
    /// Processes that loaded the library without its hooks bound: it did
    /// nothing there.
    pub not_interposed: usize,
    pub values: [u64; COUNTERS],
}

impl Totals {
    /// Adds one process's counters: sums add up, peaks keep the largest.
    pub fn add(&mut self, values: &[u64; COUNTERS]) {
        self.reported += 1;
        for (i, &c) in Counter::ALL.iter().enumerate() {
            self.values[i] = match c.merge() {
                Merge::Sum => self.values[i].wrapping_add(values[i]),
                Merge::Peak => self.values[i].max(values[i]),
            };
        }
    }

    /// Adds every line of a statistics file: load announcements and
    /// counter lines; anything else is ignored.
    pub fn add_text(&mut self, text: &str) {
        for line in text.lines() {
            if line.starts_with(LOADED) {
                self.loaded += 1;
            } else if line.starts_with(NOT_INTERPOSED) {
                self.not_interposed += 1;
            } else if let Some(v) = parse_line(line) {
                self.add(&v);
            }
        }
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.values[c as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trips() {
        let s = Stats::new();
        s.add(Counter::Deferred, 12345);
        s.peak(Counter::PeakQueued, 7);
        s.peak(Counter::PeakQueued, 3);
        let mut buf = [0u8; 1024];
        let n = s.write_line(42, &mut buf);
        let line = core::str::from_utf8(&buf[..n]).unwrap();
        assert!(line.starts_with("munmapq pid=42 mmap_calls=0 "), "{line}");
        assert!(line.ends_with('\n'));
        let v = parse_line(line).unwrap();
        assert_eq!(v[Counter::Deferred as usize], 12345);
        assert_eq!(v[Counter::PeakQueued as usize], 7);
    }

    #[test]
    fn hot_counters_read_as_the_sum_of_their_stripes() {
        let s = Stats::new();
        for (i, &c) in HOT.iter().enumerate() {
            for stripe in 0..STRIPES {
                s.add_in(stripe, c, (i * 100 + stripe) as u64);
            }
        }
        s.add(Counter::OtherCalls, 5);
        s.add(Counter::Deferred, 7);
        let expect = |i: usize| (0..STRIPES).map(|st| (i * 100 + st) as u64).sum::<u64>();
        for (i, &c) in HOT.iter().enumerate() {
            let extra = if c == Counter::OtherCalls { 5 } else { 0 };
            assert_eq!(s.get(c), expect(i) + extra, "{c:?}");
        }
        assert_eq!(s.get(Counter::Deferred), 7);
        // The line is what it was before striping: key=sum.
        let mut buf = [0u8; 1024];
        let n = s.write_line(1, &mut buf);
        let line = core::str::from_utf8(&buf[..n]).unwrap();
        let v = parse_line(line).unwrap();
        assert_eq!(v[Counter::MmapCalls as usize], expect(0));
        assert_eq!(v[Counter::OtherCalls as usize], expect(2) + 5);
        s.reset();
        assert!(Counter::ALL.iter().all(|&c| s.get(c) == 0));
    }

    #[test]
    fn a_straight_call_reads_as_each_counter_it_stands_for() {
        let s = Stats::new();
        s.straight_in(0, Straight::Mmap);
        s.straight_in(3, Straight::Payoff);
        s.straight_in(5, Straight::Payoff);
        s.straight_in(7, Straight::Munmap);
        s.add(Counter::MmapCalls, 10);
        s.add(Counter::PassPayoff, 100);
        assert_eq!(s.get(Counter::MmapCalls), 13);
        assert_eq!(s.get(Counter::PassIneligible), 3);
        assert_eq!(s.get(Counter::MmapSyscalls), 3);
        assert_eq!(s.get(Counter::PassPayoff), 102);
        assert_eq!(s.get(Counter::MunmapCalls), 1);
        assert_eq!(s.get(Counter::PassUntracked), 1);
        assert_eq!(s.get(Counter::MunmapSyscalls), 1);
        assert_eq!(s.get(Counter::Eligible), 0);
        let mut buf = [0u8; 1024];
        let n = s.write_line(1, &mut buf);
        let v = parse_line(core::str::from_utf8(&buf[..n]).unwrap()).unwrap();
        assert_eq!(v[Counter::MmapCalls as usize], 13);
        assert_eq!(v[Counter::PassPayoff as usize], 102);
        s.reset();
        assert!(Counter::ALL.iter().all(|&c| s.get(c) == 0));
    }

    #[test]
    fn stripes_sit_on_lines_of_their_own() {
        assert_eq!(core::mem::size_of::<Stripe>(), 128);
        assert_eq!(core::mem::align_of::<Stats>(), IMAGE_BYTES);
        let s = Stats::new();
        let lines: Vec<usize> = s
            .hot
            .iter()
            .map(|st| st as *const Stripe as usize / 128)
            .collect();
        let cold = &s.values as *const Cold as usize;
        assert!(lines.windows(2).all(|w| w[0] != w[1]));
        assert!(lines.iter().all(|&l| l != cold / 128));
        // Live threads (stacks apart) spread over several stripes.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let b = barrier.clone();
                std::thread::spawn(move || {
                    b.wait();
                    stripe()
                })
            })
            .collect();
        let picks: std::collections::BTreeSet<usize> =
            threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(picks.iter().all(|&p| p < STRIPES));
        assert!(picks.len() > 1, "{picks:?}");
    }

    #[test]
    fn totals_sum_events_and_keep_peaks() {
        let mut t = Totals::default();
        let mut buf = [0u8; 64];
        let n = write_loaded_line(7, &mut buf);
        assert_eq!(&buf[..n], b"munmapq-loaded pid=7\n");
        let loaded = core::str::from_utf8(&buf[..n]).unwrap();
        t.add_text(loaded);
        t.add_text("munmapq pid=1 deferred=3 peak_queued=5\nmunmapq pid=2 deferred=4 peak_queued=2 new_key=9\ngarbage\n");
        assert_eq!((t.loaded, t.reported), (1, 2));
        assert_eq!(t.get(Counter::Deferred), 7);
        assert_eq!(t.get(Counter::PeakQueued), 5);
        assert_eq!(t.not_interposed, 0);
        let n = write_not_interposed_line(9, &mut buf);
        assert_eq!(&buf[..n], b"munmapq-not-interposed pid=9\n");
        t.add_text(core::str::from_utf8(&buf[..n]).unwrap());
        assert_eq!((t.loaded, t.reported, t.not_interposed), (1, 2, 1));
        for &c in Counter::ALL {
            let peak = c.key().starts_with("peak_");
            assert_eq!(c.merge() == Merge::Peak, peak, "{}", c.key());
        }
    }

    #[test]
    fn concurrent_updates_are_all_counted() {
        let s = std::sync::Arc::new(Stats::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    // One stripe for all: the threads meet on one line.
                    for _ in 0..100_000 {
                        s.add_in(0, Counter::MmapCalls, 1);
                        s.add_in(0, Counter::Deferred, 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(s.get(Counter::MmapCalls), 400_000);
        assert_eq!(s.get(Counter::Deferred), 400_000);
    }

    #[test]
    fn an_image_reads_back_as_its_counters() {
        let s = Stats::new();
        s.straight_in(3, Straight::Mmap);
        s.add(Counter::Deferred, 5);
        s.peak(Counter::PeakQueued, 9);
        // SAFETY: the bytes of a live Stats, read as write(2) would.
        let bytes =
            unsafe { core::slice::from_raw_parts(&s as *const Stats as *const u8, IMAGE_BYTES) };
        assert_eq!(read_image(bytes), None, "not owned yet");
        s.set_owner(77);
        // SAFETY: the bytes of a live Stats, read as write(2) would.
        let bytes =
            unsafe { core::slice::from_raw_parts(&s as *const Stats as *const u8, IMAGE_BYTES) };
        let image = read_image(bytes).unwrap();
        assert_eq!((image.pid, image.ended), (77, false));
        assert_eq!(image.values[Counter::MmapCalls as usize], 1);
        assert_eq!(image.values[Counter::Deferred as usize], 5);
        assert_eq!(image.values[Counter::PeakQueued as usize], 9);
        s.set_ended();
        s.reset();
        // SAFETY: the bytes of a live Stats, read as write(2) would.
        let bytes =
            unsafe { core::slice::from_raw_parts(&s as *const Stats as *const u8, IMAGE_BYTES) };
        let image = read_image(bytes).unwrap();
        assert!(image.ended);
        assert_eq!(image.values, [0; COUNTERS]);
        assert_eq!(read_image(&bytes[..100]), None);
    }

    #[test]
    fn truncates_instead_of_overflowing() {
        let s = Stats::new();
        let mut buf = [0u8; 16];
        assert_eq!(s.write_line(1, &mut buf), 16);
    }
}
