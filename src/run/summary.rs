//! The text report of `--stats` (`--stats=full`: every counter): what the
//! command used, as `time` says it, then what munmapq did, in at most a
//! dozen lines, with counts a reader reads at a glance (proper plurals,
//! byte counts in KiB/MiB).

use super::report::{Notes, Report, Run};
use super::signals;
use super::units::{bytes, count, seconds};
use munmapq_core::stats::Counter;
use std::fmt::Write as _;
use std::time::Duration;

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

/// A counter's value in the table: bytes in units.
fn value(c: Counter, v: u64) -> String {
    if c.key().ends_with("_bytes") {
        bytes(v)
    } else {
        v.to_string()
    }
}

/// What the command used and how it ended, `time`'s figures (without
/// `munmapq: `): `git: 1.23 s elapsed, 0.80 s CPU (0.70 s user, 0.10 s
/// sys), 45.2 MiB peak RSS`.
pub fn usage_line(run: &Run) -> Option<String> {
    let name = run.command.first()?;
    let mut s = format!(
        "{name}: {} elapsed",
        seconds(Duration::from_millis(run.elapsed_ms))
    );
    if let Some(u) = &run.usage {
        let _ = write!(
            s,
            ", {} CPU ({} user, {} sys)",
            seconds(u.cpu()),
            seconds(u.user),
            seconds(u.sys)
        );
        if let Some(rss) = u.max_rss_bytes {
            let _ = write!(s, ", {} peak RSS", bytes(rss));
        }
    }
    match (run.exit_code, run.signal) {
        (Some(0), _) | (None, None) => {}
        (Some(code), _) => {
            let _ = write!(s, ", exit status {code}");
        }
        (None, Some(sig)) => {
            let _ = write!(s, ", killed by {}", signals::name(sig));
        }
    }
    Some(s)
}

impl Report {
    /// The summary (at most a dozen lines), or every counter when `full`.
    /// When no process's counters were read there is no table: one line
    /// says so (the `incomplete` note, why).
    pub fn text(&self, full: bool, run: &Run, notes: &Notes) -> String {
        let mut s = String::new();
        if let Some(line) = usage_line(run) {
            let _ = writeln!(s, "munmapq: {line}");
        }
        if self.loaded == 0 && !self.has_counters() {
            s.push_str("munmapq: no process loaded the library\n");
        } else {
            let _ = write!(
                s,
                "munmapq: {} loaded the library",
                count(self.loaded, "process", "processes")
            );
            if self.forks > 0 {
                let _ = write!(
                    s,
                    " (and {}, counted in)",
                    count(self.forks, "fork child", "fork children")
                );
            }
            s.push('\n');
        }
        if self.has_counters() {
            let shown: &[Counter] = if full { Counter::ALL } else { &SHORT };
            for &c in shown {
                let _ = writeln!(
                    s,
                    "  {:<18} {:>12}  {}",
                    c.key(),
                    value(c, self.get(c)),
                    c.doc()
                );
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
        }
        if let Some(line) = self.not_interposed_line() {
            let _ = writeln!(s, "munmapq: {line}");
        }
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
            let _ = writeln!(s, "munmapq: {}", git.text);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::usage::Usage;

    #[test]
    fn the_summary_says_what_the_command_used() {
        let r = Report::parse(
            "munmapq-loaded pid=1\nmunmapq pid=1 peak_queued_bytes=2359296 mmap_calls=3\n",
        );
        let run = Run {
            command: vec!["git".into(), "log".into()],
            exit_code: None,
            signal: Some(libc::SIGPIPE),
            elapsed_ms: 1234,
            usage: Some(Usage {
                user: Duration::from_millis(700),
                sys: Duration::from_millis(100),
                max_rss_bytes: Some(45 << 20),
            }),
        };
        let t = r.text(false, &run, &Notes::default());
        assert!(t.starts_with(
            "munmapq: git: 1.23 s elapsed, 0.80 s CPU (0.70 s user, 0.10 s sys), 45.0 MiB peak RSS, killed by SIGPIPE\n\
             munmapq: 1 process loaded the library\n"
        ), "{t}");
        assert!(t.contains("  peak_queued_bytes       2.2 MiB  "), "{t}");
        assert!(!t.contains("(es)"), "{t}");
    }

    #[test]
    fn no_counters_no_table() {
        let r = Report::parse("munmapq-loaded pid=1\nmunmapq-loaded pid=2\n");
        let notes = Notes {
            incomplete: Some("why".into()),
            git: None,
        };
        let t = r.text(true, &Run::default(), &notes);
        assert_eq!(
            t,
            "munmapq: 2 processes loaded the library\nmunmapq: incomplete: why\n"
        );
        let json = r.json(&Run::default(), &notes);
        assert!(json.contains("\"counters\":null,"), "{json}");
        let t = Report::parse("").text(false, &Run::default(), &Notes::default());
        assert_eq!(t, "munmapq: no process loaded the library\n");
    }
}
