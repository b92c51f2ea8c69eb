//! The fake kernel's bookkeeping, without allocating: its mappings, sorted
//! by address in an array of `N`, and a log of the munmaps it was asked for.

use super::PAGE;
use core::fmt;
use core::ops::Deref;

/// Mapped pages `[start, end)`: of descriptor `fd` (-1: anonymous) from
/// file page `page` on; `file` when the descriptor was a readable file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Range {
    pub start: usize,
    pub end: usize,
    pub fd: i32,
    pub page: i64,
    pub file: bool,
}

impl Range {
    const EMPTY: Range = Range {
        start: 0,
        end: 0,
        fd: -1,
        page: 0,
        file: false,
    };

    fn pages(&self) -> usize {
        (self.end - self.start) / PAGE
    }

    /// Does `next` continue this range, page for page of the same file (as
    /// the kernel counts mappings)?
    fn runs_into(&self, next: &Range) -> bool {
        self.end == next.start && self.fd == next.fd && self.page + self.pages() as i64 == next.page
    }

    /// The part of this range from `at` on.
    fn from(self, at: usize) -> Range {
        Range {
            start: at,
            page: self.page + ((at - self.start) / PAGE) as i64,
            ..self
        }
    }
}

/// The mappings, sorted by address, never overlapping; a range is merged
/// with the neighbours it continues, so that `N` bounds the number of
/// mappings as the kernel counts them, not the calls that made them.
pub struct Space<const N: usize> {
    ranges: [Range; N],
    len: usize,
}

impl<const N: usize> Space<N> {
    pub const fn new() -> Self {
        Space {
            ranges: [Range::EMPTY; N],
            len: 0,
        }
    }

    pub fn ranges(&self) -> &[Range] {
        &self.ranges[..self.len]
    }

    /// The ranges overlapping `[start, end)`, as positions.
    fn overlapping(&self, start: usize, end: usize) -> core::ops::Range<usize> {
        let first = self.ranges().partition_point(|r| r.end <= start);
        let past = self.ranges().partition_point(|r| r.start < end);
        first..past.max(first)
    }

    pub fn find(&self, addr: usize) -> Option<Range> {
        self.ranges()[self.overlapping(addr, addr + 1)]
            .first()
            .copied()
    }

    /// Is anything mapped in `[start, end)` (only file ranges with
    /// `files_only`)?
    pub fn overlaps(&self, start: usize, end: usize, files_only: bool) -> bool {
        self.ranges()[self.overlapping(start, end)]
            .iter()
            .any(|r| r.file || !files_only)
    }

    pub fn pages(&self) -> usize {
        self.ranges().iter().map(Range::pages).sum()
    }

    /// Mappings as the kernel counts them: runs of ranges that continue
    /// each other.
    pub fn runs(&self) -> usize {
        let r = self.ranges();
        r.len() - r.windows(2).filter(|w| w[0].runs_into(&w[1])).count()
    }

    /// Unmaps `[start, end)`, cutting the ranges it crosses.
    pub fn remove(&mut self, start: usize, end: usize) {
        let at = self.overlapping(start, end);
        if at.is_empty() {
            return;
        }
        let (first, last) = (self.ranges[at.start], self.ranges[at.end - 1]);
        let mut kept = [Range::EMPTY; 2];
        let mut n = 0;
        if first.start < start {
            kept[n] = Range {
                end: start,
                ..first
            };
            n += 1;
        }
        if last.end > end {
            kept[n] = last.from(end);
            n += 1;
        }
        self.splice(at, &kept[..n]);
    }

    /// Maps `r` where nothing is mapped (the caller removed what was).
    pub fn insert(&mut self, mut r: Range) {
        let at = self.ranges().partition_point(|x| x.end <= r.start);
        let mut replaced = at..at;
        if at > 0 && self.ranges[at - 1].runs_into(&r) && self.ranges[at - 1].file == r.file {
            replaced.start -= 1;
            r = Range {
                end: r.end,
                ..self.ranges[at - 1]
            };
        }
        if at < self.len && r.runs_into(&self.ranges[at]) && self.ranges[at].file == r.file {
            replaced.end += 1;
            r.end = self.ranges[at].end;
        }
        self.splice(replaced, &[r]);
    }

    /// The lowest address at or above `from` with `len` bytes free.
    pub fn lowest_gap(&self, from: usize, len: usize) -> usize {
        let mut at = from;
        for r in self.ranges() {
            if r.end <= at {
                continue;
            }
            if r.start >= at + len {
                break;
            }
            at = r.end;
        }
        at
    }

    /// Where Linux's top-down allocator would put `len` bytes: the highest
    /// gap below the highest mapping that holds them, else just below the
    /// lowest mapping.
    pub fn top_down(&self, len: usize) -> usize {
        let mut above: Option<usize> = None;
        for r in self.ranges().iter().rev() {
            if let Some(a) = above {
                if a >= r.end + len {
                    return a - len;
                }
            }
            above = Some(above.map_or(r.start, |a| a.min(r.start)));
        }
        above.unwrap_or(0x7f00_0000_0000) - len
    }

    /// Replaces the ranges at `at` by `with`.
    fn splice(&mut self, at: core::ops::Range<usize>, with: &[Range]) {
        let len = self.len - at.len() + with.len();
        assert!(
            len <= N,
            "the fake address space holds at most {N} mappings"
        );
        self.ranges
            .copy_within(at.end..self.len, at.start + with.len());
        self.ranges[at.start..at.start + with.len()].copy_from_slice(with);
        self.len = len;
    }
}

/// How many munmaps the log keeps (the first ones).
const LOG: usize = 1024;

/// The munmaps the fake was asked for, `(addr, len)`: the first [`LOG`],
/// and how many in all.
#[derive(Clone)]
pub struct Log {
    calls: [(usize, usize); LOG],
    kept: usize,
    pub total: usize,
}

impl Log {
    pub(crate) const fn new() -> Self {
        Log {
            calls: [(0, 0); LOG],
            kept: 0,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, call: (usize, usize)) {
        if self.kept < LOG {
            self.calls[self.kept] = call;
            self.kept += 1;
        }
        self.total += 1;
    }
}

impl Deref for Log {
    type Target = [(usize, usize)];
    fn deref(&self) -> &Self::Target {
        &self.calls[..self.kept]
    }
}

impl<const M: usize> PartialEq<[(usize, usize); M]> for Log {
    fn eq(&self, other: &[(usize, usize); M]) -> bool {
        **self == other[..]
    }
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}
