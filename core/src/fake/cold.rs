//! The fake kernel's dropped pages: ranges whose pages `drop_pages` took
//! away, so that the fake's RSS falls as the real one does, until they
//! are touched or unmapped.

/// At most this many dropped ranges are remembered (more are not dropped).
const MAX: usize = 256;

pub struct Cold {
    ranges: [(usize, usize); MAX],
    len: usize,
}

impl Cold {
    pub const fn new() -> Self {
        Cold {
            ranges: [(0, 0); MAX],
            len: 0,
        }
    }

    /// `[start, end)` is resident again (or unmapped): taken out of every
    /// range. False when a split found no room (the rest is then forgotten:
    /// more RSS, never less).
    pub fn touch(&mut self, start: usize, end: usize) -> bool {
        let mut ok = true;
        let mut i = 0;
        while i < self.len {
            let (s, e) = self.ranges[i];
            if !(s < end && start < e) {
                i += 1;
                continue;
            }
            self.len -= 1;
            self.ranges[i] = self.ranges[self.len];
            for (a, b) in [(s, start.max(s)), (end.min(e), e)] {
                if a < b {
                    ok &= self.push(a, b);
                }
            }
        }
        ok
    }

    fn push(&mut self, start: usize, end: usize) -> bool {
        if self.len == MAX {
            return false;
        }
        self.ranges[self.len] = (start, end);
        self.len += 1;
        true
    }

    /// `[start, end)` was dropped (what it overlaps is replaced by it).
    /// False when full.
    pub fn add(&mut self, start: usize, end: usize) -> bool {
        self.touch(start, end) && self.push(start, end)
    }

    /// Bytes dropped.
    pub fn bytes(&self) -> usize {
        self.ranges[..self.len].iter().map(|(s, e)| e - s).sum()
    }
}
