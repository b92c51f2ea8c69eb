//! Reads the lines each process of the command appended to the statistics
//! file and combines them as the core's protocol says (sums add up, peaks
//! take the largest: [`Totals`]), and prints them: a short summary
//! (`--stats`), every counter (`--stats=full`) or JSON (`--stats=json`).

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

/// What is said besides the counters.
#[derive(Default)]
pub struct Notes {
    /// Why the figures miss part of the run (the command was killed by a
    /// signal, or interrupted): processes that did not reach their exit
    /// reported nothing.
    pub incomplete: Option<String>,
    /// The git advice (git/check.rs), without the `munmapq: ` prefix.
    pub git: Option<String>,
}

/// The counters of the short summary: what was done instead of the system
/// calls, and the most the queue held.
const SHORT: [Counter; 7] = [
    Counter::MmapCalls,
    Counter::Reused,
    Counter::MunmapCalls,
    Counter::Deferred,
    Counter::MunmapSyscalls,
    Counter::PeakQueued,
    Counter::PeakQueuedBytes,
];

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

    /// mmap and munmap calls the program made, and how many of them never
    /// reached the kernel (a reused mmap; a munmap deferred and later
    /// unmapped with others in one flush, or never).
    fn saved(&self) -> (u64, u64) {
        let calls = self.get(Counter::MmapCalls) + self.get(Counter::MunmapCalls);
        let issued = self.get(Counter::MmapSyscalls) + self.get(Counter::MunmapSyscalls);
        (calls.saturating_sub(issued), calls)
    }

    /// The summary (at most a dozen lines), or every counter when `full`.
    pub fn text(&self, full: bool, notes: &Notes) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "munmapq: {} process(es) loaded the library, {} reported at exit",
            self.loaded, self.reported
        );
        let shown: &[Counter] = if full { Counter::ALL } else { &SHORT };
        for &c in shown {
            let _ = writeln!(s, "  {:<18} {:>12}  {}", c.key(), self.get(c), c.doc());
        }
        let (saved, calls) = self.saved();
        let _ = write!(
            s,
            "munmapq: saved {saved} of {calls} mmap and munmap system calls"
        );
        s.push_str(if full {
            "\n"
        } else {
            " (every counter: --stats=full)\n"
        });
        let unreadable = self.get(Counter::Unreadable);
        if unreadable > 0 {
            let _ = writeln!(
                s,
                "munmapq: the processes' memory use could not be read ({unreadable} failed reads of /proc): the queue was bounded by a fixed length instead of the resident budget"
            );
        }
        if let Some(why) = &notes.incomplete {
            let _ = writeln!(s, "munmapq: incomplete: {why}");
        }
        if let Some(git) = &notes.git {
            let _ = writeln!(s, "munmapq: {git}");
        }
        s
    }

    /// One JSON object: `version`, `loaded`, `reported`, `incomplete`
    /// (null or why), `counters` (every counter by key), `git` (null or the
    /// advice).
    pub fn json(&self, notes: &Notes) -> String {
        let mut s = format!(
            "{{\"version\":{},\"loaded\":{},\"reported\":{},\"incomplete\":{},\"counters\":{{",
            json_str(Some(env!("CARGO_PKG_VERSION"))),
            self.loaded,
            self.reported,
            json_str(notes.incomplete.as_deref())
        );
        for (i, &c) in Counter::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}\"{}\":{}", c.key(), self.totals[i]);
        }
        let _ = writeln!(s, "}},\"git\":{}}}", json_str(notes.git.as_deref()));
        s
    }
}

/// A JSON string (or null).
fn json_str(v: Option<&str>) -> String {
    let Some(v) = v else {
        return "null".into();
    };
    let mut s = String::from("\"");
    for ch in v.chars() {
        match ch {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
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
        let notes = Notes::default();
        assert!(r.json(&notes).contains("\"deferred\":7"));
        assert!(r.text(false, &notes).contains("deferred"));
    }

    #[test]
    fn an_unreadable_proc_is_said() {
        let notes = Notes::default();
        let r = Report::parse("munmapq pid=1 deferred=3\n");
        assert!(!r.text(false, &notes).contains("could not be read"));
        let r = Report::parse("munmapq pid=1 deferred=3 unreadable=12\n");
        assert!(r.text(false, &notes).contains("12 failed reads of /proc"));
    }

    #[test]
    fn short_full_and_json() {
        let r = Report::parse(
            "munmapq-loaded pid=1\nmunmapq pid=1 mmap_calls=10 mmap_syscalls=4 reused=6 \
             munmap_calls=10 munmap_syscalls=1 deferred=10\n",
        );
        let notes = Notes {
            incomplete: Some("sh was killed by SIGINT".into()),
            git: Some("8 window maps \"here\"".into()),
        };
        let short = r.text(false, &notes);
        assert!(short.lines().count() <= 12, "{short}");
        assert!(short.contains("saved 15 of 20 mmap and munmap"), "{short}");
        assert!(!short.contains("avoided"), "{short}");
        assert!(short.contains("munmapq: incomplete: sh was killed by SIGINT\n"));
        assert!(
            short.ends_with("munmapq: 8 window maps \"here\"\n"),
            "{short}"
        );
        let full = r.text(true, &notes);
        assert_eq!(full.lines().count(), COUNTERS + 4, "{full}");
        let json = r.json(&notes);
        assert!(json.starts_with("{\"version\":\""), "{json}");
        assert!(json.contains("\"incomplete\":\"sh was killed by SIGINT\""));
        assert!(
            json.ends_with(",\"git\":\"8 window maps \\\"here\\\"\"}\n"),
            "{json}"
        );
        assert!(Report::default()
            .json(&Notes::default())
            .contains("\"git\":null}"));
    }
}
