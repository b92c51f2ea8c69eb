//! Reads the lines each process of the command appended to the statistics
//! file and combines them as the core's protocol says (sums add up, peaks
//! take the largest: [`Totals`]), and prints them: a short summary
//! (`--stats`), every counter (`--stats=full`) or JSON (`--stats=json`).

use munmapq_core::stats::{Counter, Totals, COUNTERS, LOADED};
use std::fmt::Write as _;

/// The figures of a run, counted by process as a user counts them: a
/// process is a pid that started a program with the library (an exec in
/// the same pid is the same process; a fork child that never execs is
/// its parent's, and its counters are added to the totals).
#[derive(Default)]
pub struct Report {
    /// Processes that loaded the library.
    pub loaded: usize,
    /// Of those, the ones whose last program reported its counters at exit.
    pub reported: usize,
    /// Fork children (no exec) that reported counters of their own.
    pub forks: usize,
    /// Processes that loaded the library without its hooks bound (on
    /// macOS: dyld loaded it but did not apply its interposing).
    pub not_interposed: usize,
    pub totals: [u64; COUNTERS],
}

/// What the launcher knows of the command itself, for the JSON report.
#[derive(Default)]
pub struct Run {
    pub command: Vec<String>,
    /// Its exit code, or the signal that killed it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed_ms: u64,
}

/// The git advice (git/check.rs) as fields: git mapped its pack windows
/// `window_maps` times, windows of `window_bytes`, under `settings`.
#[derive(Default, Clone)]
pub struct GitAdvice {
    pub window_maps: u64,
    pub window_bytes: u64,
    /// (key, value, where it is set)
    pub settings: Vec<(String, String, String)>,
    /// The same, said in one line.
    pub text: String,
}

/// What is said besides the counters.
#[derive(Default)]
pub struct Notes {
    /// Why the figures miss part of the run (the command was killed by a
    /// signal, or interrupted): processes that did not reach their exit
    /// reported nothing.
    pub incomplete: Option<String>,
    /// The git advice.
    pub git: Option<GitAdvice>,
}

/// The version of the JSON report's layout: 2 added `schema`, `command`,
/// `exit_code`, `signal`, `elapsed_ms`, `forks`, `not_interposed`, and `git` as an object.
pub const SCHEMA: u32 = 2;

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
        // Per pid, in the order written: did it load (exec a program with
        // the library), and did its last program report after its load?
        let mut pids: Vec<(u64, bool, bool)> = Vec::new();
        for line in text.lines() {
            let (loaded, pid) = match line.strip_prefix(LOADED) {
                Some(p) => (true, p.trim()),
                None => match line.strip_prefix("munmapq pid=") {
                    Some(rest) => (false, rest.split(' ').next().unwrap_or("")),
                    None => continue,
                },
            };
            let Ok(pid) = pid.parse::<u64>() else {
                continue;
            };
            let i = match pids.iter().position(|p| p.0 == pid) {
                Some(i) => i,
                None => {
                    pids.push((pid, false, false));
                    pids.len() - 1
                }
            };
            if loaded {
                pids[i].1 = true;
                pids[i].2 = false;
            } else {
                pids[i].2 = true;
            }
        }
        Report {
            loaded: pids.iter().filter(|p| p.1).count(),
            reported: pids.iter().filter(|p| p.1 && p.2).count(),
            forks: pids.iter().filter(|p| !p.1 && p.2).count(),
            not_interposed: t.not_interposed,
            totals: t.values,
        }
    }

    /// Processes that loaded the library and never reported: killed by a
    /// signal, or ended with `_exit`.
    pub fn lost(&self) -> usize {
        self.loaded - self.reported
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.totals[c as usize]
    }

    /// The one line saying that processes loaded the library but their
    /// calls never reached it, if any did (without `munmapq: `).
    pub fn not_interposed_line(&self) -> Option<String> {
        (self.not_interposed > 0).then(|| {
            format!(
                "loaded, not interposed: {} of {} process(es) loaded the library but the dynamic loader did not bind their calls to it (on macOS: dyld may load an inserted library without the permission to interpose); munmapq did nothing there",
                self.not_interposed, self.loaded
            )
        })
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
        let _ = write!(
            s,
            "munmapq: {} process(es) loaded the library, {} reported at exit",
            self.loaded, self.reported
        );
        if self.forks > 0 {
            let _ = write!(s, " (and {} fork child(ren), counted in)", self.forks);
        }
        s.push('\n');
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

    /// One JSON object (schema [`SCHEMA`]): `schema`, `version`,
    /// `command`, `exit_code` and `signal` (one of them null), `elapsed_ms`,
    /// `loaded`, `reported`, `forks`, `not_interposed`, `incomplete` (null or why),
    /// `counters` (every counter by key), `git` (null, or `window_maps`,
    /// `window_bytes`, `settings` [{key, value, origin}], `advice`).
    pub fn json(&self, run: &Run, notes: &Notes) -> String {
        let num = |v: Option<i32>| v.map_or("null".to_string(), |v| v.to_string());
        let command: Vec<String> = run.command.iter().map(|a| json_str(Some(a))).collect();
        let mut s = format!(
            "{{\"schema\":{SCHEMA},\"version\":{},\"command\":[{}],\"exit_code\":{},\"signal\":{},\
             \"elapsed_ms\":{},\"loaded\":{},\"reported\":{},\"forks\":{},\"not_interposed\":{},\"incomplete\":{},\"counters\":{{",
            json_str(Some(env!("CARGO_PKG_VERSION"))),
            command.join(","),
            num(run.exit_code),
            num(run.signal),
            run.elapsed_ms,
            self.loaded,
            self.reported,
            self.forks,
            self.not_interposed,
            json_str(notes.incomplete.as_deref())
        );
        for (i, &c) in Counter::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}\"{}\":{}", c.key(), self.totals[i]);
        }
        s.push_str("},\"git\":");
        match &notes.git {
            None => s.push_str("null"),
            Some(g) => {
                let settings: Vec<String> = g
                    .settings
                    .iter()
                    .map(|(k, v, o)| {
                        format!(
                            "{{\"key\":{},\"value\":{},\"origin\":{}}}",
                            json_str(Some(k)),
                            json_str(Some(v)),
                            json_str(Some(o))
                        )
                    })
                    .collect();
                let _ = write!(
                    s,
                    "{{\"window_maps\":{},\"window_bytes\":{},\"settings\":[{}],\"advice\":{}}}",
                    g.window_maps,
                    g.window_bytes,
                    settings.join(","),
                    json_str(Some(&g.text))
                );
            }
        }
        s.push_str("}\n");
        s
    }
}

/// A JSON string (or null).
pub fn json_str(v: Option<&str>) -> String {
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
        assert!(r.json(&Run::default(), &notes).contains("\"deferred\":7"));
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
            git: Some(GitAdvice {
                text: "8 window maps \"here\"".into(),
                ..GitAdvice::default()
            }),
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
        let json = r.json(&Run::default(), &notes);
        assert!(json.starts_with("{\"schema\":2,\"version\":\""), "{json}");
        assert!(json.contains("\"incomplete\":\"sh was killed by SIGINT\""));
        assert!(
            json.ends_with("\"advice\":\"8 window maps \\\"here\\\"\"}}\n"),
            "{json}"
        );
        assert!(Report::default()
            .json(&Run::default(), &Notes::default())
            .contains("\"git\":null}"));
        assert!(!short.contains("not interposed"), "{short}");
    }

    #[test]
    fn a_process_loaded_but_not_interposed_is_said_in_one_line() {
        let r = Report::parse(
            "munmapq-loaded pid=1\nmunmapq-not-interposed pid=1\nmunmapq pid=1 mmap_calls=0\n\
             munmapq-loaded pid=2\nmunmapq pid=2 mmap_calls=3\n",
        );
        assert_eq!((r.loaded, r.reported, r.not_interposed), (2, 2, 1));
        let notes = Notes::default();
        let short = r.text(false, &notes);
        let lines: Vec<&str> = short
            .lines()
            .filter(|l| l.contains("not interposed"))
            .collect();
        assert_eq!(lines.len(), 1, "{short}");
        assert!(
            lines[0].starts_with("munmapq: loaded, not interposed: 1 of 2 process(es)"),
            "{short}"
        );
        assert!(r.text(true, &notes).contains("loaded, not interposed"));
        assert!(r
            .json(&Run::default(), &notes)
            .contains("\"not_interposed\":1,"));
    }

    #[test]
    fn processes_as_a_user_counts_them() {
        // bash -c '( : ); ( : )': bash loads; two fork children report.
        let r = Report::parse(
            "munmapq-loaded pid=1\nmunmapq pid=2 deferred=1\nmunmapq pid=3 deferred=1\n\
             munmapq pid=1 deferred=1\n",
        );
        assert_eq!((r.loaded, r.reported, r.forks, r.lost()), (1, 1, 2, 0));
        // sh -c 'exec true': one process, two programs, one report.
        let r = Report::parse("munmapq-loaded pid=5\nmunmapq-loaded pid=5\nmunmapq pid=5\n");
        assert_eq!((r.loaded, r.reported, r.forks), (1, 1, 0));
        // A report before an exec is not the last program's.
        let r = Report::parse("munmapq-loaded pid=5\nmunmapq pid=5\nmunmapq-loaded pid=5\n");
        assert_eq!((r.loaded, r.reported, r.lost()), (1, 0, 1));
    }
}
