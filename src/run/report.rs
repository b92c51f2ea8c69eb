//! Reads what the processes of a run left (the lines each appended to the
//! statistics file, and under the launcher the file each kept its
//! counters in, [`read_live`]) and combines them as the core's protocol
//! says (sums add up, peaks take the largest: [`Totals`]); prints them as
//! JSON (`--stats=json`, [`Report::json`]) or text (summary.rs).

use munmapq_core::stats::{read_image, Counter, Image, Totals, COUNTERS, LOADED};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::Path;

/// The figures of a run, counted by process as a user counts them: a
/// process is a pid that started a program with the library (an exec in
/// the same pid is the same process; a fork child that never execs is
/// its parent's, and its counters are added to the totals).
#[derive(Default)]
pub struct Report {
    /// Processes that loaded the library.
    pub loaded: usize,
    /// Of those, the ones whose counters were read: kept in their file, or
    /// reported at exit.
    pub reported: usize,
    /// Fork children (no exec) whose counters were read.
    pub forks: usize,
    /// Processes that loaded the library without its hooks bound (on
    /// macOS: dyld loaded it but did not apply its interposing).
    pub not_interposed: usize,
    pub totals: [u64; COUNTERS],
}

/// What the launcher knows of the command itself.
#[derive(Default)]
pub struct Run {
    pub command: Vec<String>,
    /// Its exit code, or the signal that killed it.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed_ms: u64,
    /// What the command and the processes it waited for used (`wait4`),
    /// when known.
    pub usage: Option<super::usage::Usage>,
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
/// `exit_code`, `signal`, `elapsed_ms`, `forks`, `not_interposed`, and
/// `git` as an object; 3 `user_ms`, `sys_ms`, `max_rss_bytes`, and
/// `counters` null when no process's counters were read.
pub const SCHEMA: u32 = 3;

/// The counters each process kept in its file in `dir` (`live-PID-N`, see
/// the library's interpose/src/live.rs), however it ended.
pub fn read_live(dir: &Path) -> Vec<Image> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("live-"))
        })
        .filter_map(|e| read_image(&std::fs::read(e.path()).ok()?))
        .collect()
}

/// The lines a process would have appended at exit, for counters read from
/// their files: for a `MUNMAPQ_STATS_FILE` of the caller's.
pub fn lines_of(images: &[Image]) -> String {
    let mut s = String::new();
    for i in images {
        let _ = write!(s, "munmapq pid={}", i.pid);
        for (&c, v) in Counter::ALL.iter().zip(i.values) {
            let _ = write!(s, " {}={v}", c.key());
        }
        s.push('\n');
    }
    s
}

impl Report {
    /// From the lines of a statistics file alone.
    pub fn parse(text: &str) -> Report {
        Report::collect(text, &[])
    }

    /// From the lines of the statistics file and the counters processes
    /// kept in files (whose programs write no line at exit).
    pub fn collect(text: &str, images: &[Image]) -> Report {
        let mut t = Totals::default();
        t.add_text(text);
        for i in images {
            t.add(&i.values);
        }
        // Per pid: how many programs loaded the library in it, whether the
        // last one reported at exit, how many files of counters it left.
        #[derive(Default)]
        struct Pid {
            pid: u64,
            loads: usize,
            reported: bool,
            files: usize,
        }
        let mut pids: Vec<Pid> = Vec::new();
        fn entry(pids: &mut Vec<Pid>, pid: u64) -> usize {
            match pids.iter().position(|p| p.pid == pid) {
                Some(i) => i,
                None => {
                    pids.push(Pid {
                        pid,
                        ..Pid::default()
                    });
                    pids.len() - 1
                }
            }
        }
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
            let i = entry(&mut pids, pid);
            if loaded {
                pids[i].loads += 1;
                pids[i].reported = false;
            } else {
                pids[i].reported = true;
            }
        }
        for image in images {
            let i = entry(&mut pids, image.pid);
            pids[i].files += 1;
        }
        // A program keeps its counters in a file from its load on, so a
        // pid with as many files as loads left every program's.
        let counted = |p: &Pid| p.reported || (p.files > 0 && p.files >= p.loads);
        Report {
            loaded: pids.iter().filter(|p| p.loads > 0).count(),
            reported: pids.iter().filter(|p| p.loads > 0 && counted(p)).count(),
            forks: pids.iter().filter(|p| p.loads == 0 && counted(p)).count(),
            not_interposed: t.not_interposed,
            totals: t.values,
        }
    }

    /// Processes that loaded the library and left no counters: killed by
    /// a signal or ended with `_exit` where they could not keep them in a
    /// file.
    pub fn lost(&self) -> usize {
        self.loaded - self.reported
    }

    /// Whether any process's counters were read: else every figure is
    /// unknown, not zero.
    pub fn has_counters(&self) -> bool {
        self.reported + self.forks > 0
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.totals[c as usize]
    }

    /// The one line saying that processes loaded the library but their
    /// calls never reached it, if any did (without `munmapq: `).
    pub fn not_interposed_line(&self) -> Option<String> {
        (self.not_interposed > 0).then(|| {
            format!(
                "loaded, not interposed: {} of {} loaded the library but the dynamic loader did not bind their calls to it (on macOS: dyld may load an inserted library without the permission to interpose); munmapq did nothing there",
                self.not_interposed,
                super::units::count(self.loaded, "process", "processes")
            )
        })
    }

    /// mmap and munmap calls the program made, and how many of them never
    /// reached the kernel (a reused mmap; a munmap deferred and later
    /// unmapped with others in one flush, or never).
    pub fn saved(&self) -> (u64, u64) {
        let calls = self.get(Counter::MmapCalls) + self.get(Counter::MunmapCalls);
        let issued = self.get(Counter::MmapSyscalls) + self.get(Counter::MunmapSyscalls);
        (calls.saturating_sub(issued), calls)
    }

    /// One JSON object (schema [`SCHEMA`]): `schema`, `version`,
    /// `command`, `exit_code` and `signal` (one of them null), `elapsed_ms`,
    /// `user_ms`, `sys_ms`, `max_rss_bytes` (null when unknown), `loaded`,
    /// `reported`, `forks`, `not_interposed`, `incomplete` (null or why),
    /// `counters` (every counter by key; null when no process's counters
    /// were read), `git` (null, or `window_maps`, `window_bytes`,
    /// `settings` [{key, value, origin}], `advice`).
    pub fn json(&self, run: &Run, notes: &Notes) -> String {
        let u = run.usage.as_ref();
        let counters = self.has_counters().then(|| {
            Counter::ALL
                .iter()
                .zip(self.totals)
                .map(|(c, v)| (c.key().to_string(), Value::from(v)))
                .collect::<Map<_, _>>()
        });
        let git = notes.git.as_ref().map(|g| {
            json!({
                "window_maps": g.window_maps,
                "window_bytes": g.window_bytes,
                "settings": settings_json(&g.settings),
                "advice": g.text,
            })
        });
        let report = json!({
            "schema": SCHEMA,
            "version": env!("CARGO_PKG_VERSION"),
            "command": run.command,
            "exit_code": run.exit_code,
            "signal": run.signal,
            "elapsed_ms": run.elapsed_ms,
            "user_ms": u.map(|u| u.user.as_millis() as u64),
            "sys_ms": u.map(|u| u.sys.as_millis() as u64),
            "max_rss_bytes": u.and_then(|u| u.max_rss_bytes),
            "loaded": self.loaded,
            "reported": self.reported,
            "forks": self.forks,
            "not_interposed": self.not_interposed,
            "incomplete": notes.incomplete,
            "counters": counters,
            "git": git,
        });
        format!("{report}\n")
    }
}

/// Settings as the JSON reports list them: `[{key, value, origin}]`.
pub fn settings_json(settings: &[(String, String, String)]) -> Value {
    settings
        .iter()
        .map(|(k, v, o)| json!({"key": k, "value": v, "origin": o}))
        .collect()
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
        assert!(r.text(false, &Run::default(), &notes).contains("deferred"));
    }

    #[test]
    fn an_unreadable_proc_is_said() {
        let notes = Notes::default();
        let r = Report::parse("munmapq pid=1 deferred=3\n");
        assert!(!r
            .text(false, &Run::default(), &notes)
            .contains("could not be read"));
        let r = Report::parse("munmapq pid=1 deferred=3 unreadable=12\n");
        assert!(r
            .text(false, &Run::default(), &notes)
            .contains("12 failed reads of /proc"));
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
        let short = r.text(false, &Run::default(), &notes);
        assert!(short.lines().count() <= 12, "{short}");
        assert!(short.contains("saved 15 of 20 mmap and munmap"), "{short}");
        assert!(!short.contains("avoided"), "{short}");
        assert!(short.contains("munmapq: incomplete: sh was killed by SIGINT\n"));
        assert!(
            short.ends_with("munmapq: 8 window maps \"here\"\n"),
            "{short}"
        );
        let full = r.text(true, &Run::default(), &notes);
        assert_eq!(full.lines().count(), COUNTERS + 4, "{full}");
        let json = r.json(&Run::default(), &notes);
        assert!(json.starts_with("{\"schema\":3,\"version\":\""), "{json}");
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
        let short = r.text(false, &Run::default(), &notes);
        let lines: Vec<&str> = short
            .lines()
            .filter(|l| l.contains("not interposed"))
            .collect();
        assert_eq!(lines.len(), 1, "{short}");
        assert!(
            lines[0].starts_with("munmapq: loaded, not interposed: 1 of 2 processes"),
            "{short}"
        );
        assert!(r
            .text(true, &Run::default(), &notes)
            .contains("loaded, not interposed"));
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

    fn image(pid: u64, deferred: u64) -> Image {
        let mut values = [0; COUNTERS];
        values[Counter::Deferred as usize] = deferred;
        Image {
            pid,
            ended: false,
            values,
        }
    }

    #[test]
    fn counters_kept_in_files_count_however_the_process_ended() {
        // sh loaded, forked a child that exec'd a program (both kept their
        // counters in files, neither wrote an exit line), and a fork child
        // that never exec'd.
        let r = Report::collect(
            "munmapq-loaded pid=1\nmunmapq-loaded pid=2\n",
            &[image(1, 1), image(2, 0), image(2, 5), image(3, 2)],
        );
        assert_eq!((r.loaded, r.reported, r.forks, r.lost()), (2, 2, 1, 0));
        assert_eq!(r.get(Counter::Deferred), 8);
        // A program whose file could not be made reports at exit, or not.
        let r = Report::collect(
            "munmapq-loaded pid=1\nmunmapq-loaded pid=1\nmunmapq-loaded pid=4\n",
            &[image(1, 1)],
        );
        assert_eq!((r.loaded, r.reported, r.lost()), (2, 0, 2));
        assert!(lines_of(&[image(7, 3)]).starts_with("munmapq pid=7 mmap_calls=0 "));
        assert_eq!(
            Report::parse(&lines_of(&[image(7, 3)])).get(Counter::Deferred),
            3
        );
    }
}
