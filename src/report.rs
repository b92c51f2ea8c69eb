//! Reads the lines each process of the command appended to the statistics
//! file and combines them as the core's protocol says (sums add up, peaks
//! take the largest: [`Totals`]).

use munmapq_core::stats::{Counter, Totals, COUNTERS};
use std::fmt::Write as _;

#[derive(Default)]
pub struct Report {
    /// Processes that loaded the library.
    pub loaded: usize,
    /// Processes that reported counters at exit.
    pub reported: usize,
    pub totals: [u64; COUNTERS],
}

impl Report {
    pub fn parse(text: &str) -> Report {
        let mut t = Totals::default();
        t.add_text(text);
        Report {
            loaded: t.loaded,
            reported: t.reported,
            totals: t.values,
        }
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.totals[c as usize]
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "munmapq: {} process(es) loaded the library, {} reported at exit",
            self.loaded, self.reported
        );
        let avoided = |calls, syscalls| self.get(calls).saturating_sub(self.get(syscalls));
        let _ = writeln!(
            s,
            "munmapq: syscalls avoided: {} mmap, {} munmap",
            avoided(Counter::MmapCalls, Counter::MmapSyscalls),
            avoided(Counter::MunmapCalls, Counter::MunmapSyscalls)
        );
        for (i, &c) in Counter::ALL.iter().enumerate() {
            let _ = writeln!(s, "  {:<18} {:>12}  {}", c.key(), self.totals[i], c.doc());
        }
        s
    }

    pub fn json(&self) -> String {
        let mut s = format!(
            "{{\"loaded\":{},\"reported\":{},\"counters\":{{",
            self.loaded, self.reported
        );
        for (i, &c) in Counter::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}\"{}\":{}", c.key(), self.totals[i]);
        }
        s.push_str("}}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_counters_and_keeps_peaks() {
        let r = Report::parse(
            "munmapq-loaded pid=1\nmunmapq-loaded pid=2\n\
             munmapq pid=1 deferred=3 peak_queued=5\n\
             munmapq pid=2 deferred=4 peak_queued=2 some_future_key=9\n\
             garbage\n",
        );
        assert_eq!((r.loaded, r.reported), (2, 2));
        assert_eq!(r.get(Counter::Deferred), 7);
        assert_eq!(r.get(Counter::PeakQueued), 5);
        assert!(r.json().contains("\"deferred\":7"));
        assert!(r.text().contains("deferred"));
    }
}
