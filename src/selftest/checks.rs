//! The parent side of `munmapq selftest`: each check runs children
//! (`munmapq __check ...`) with and without the library and compares them.

use super::child::{REUSE_CYCLES, REUSE_WINDOWS};
use crate::doctor::launcher;
use crate::platform::PRELOAD_VAR;
use crate::run::report::Report;
use munmapq_core::config::VAR_STATS_FILE;
use munmapq_core::stats::Counter;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Random sequences run with and without the library (x `RANDOM_STEPS`).
const RANDOM_SEEDS: u64 = 32;
const RANDOM_STEPS: usize = 200;
/// A child still running after this is killed and its check fails.
const CHILD_LIMIT: Duration = Duration::from_secs(10);

/// One child run: its output, how it ended, what the library reported.
struct Ran {
    stdout: Vec<u8>,
    status: Option<std::process::ExitStatus>,
    report: Report,
}

impl Ran {
    fn ended(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match self.status {
            None => "hung (killed)".into(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (_, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s:?}"),
            },
        }
    }
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

pub(super) struct Selftest {
    pub(super) exe: PathBuf,
    pub(super) lib: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) runs: usize,
}

impl Selftest {
    fn run(&mut self, args: &[&str], preload: bool, env: &[(&str, String)]) -> Ran {
        self.runs += 1;
        let stats = self.dir.join(format!("stats-{}", self.runs));
        let _ = std::fs::write(&stats, "");
        let mut c = Command::new(&self.exe);
        c.arg("__check").args(args).env_remove(PRELOAD_VAR);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if preload {
            c.env(PRELOAD_VAR, &self.lib).env(VAR_STATS_FILE, &stats);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let (stdout, status) = output_within(c, CHILD_LIMIT);
        let text = std::fs::read_to_string(&stats).unwrap_or_default();
        Ran {
            stdout,
            status,
            report: Report::parse(&text),
        }
    }

    /// Runs the same check without and with the library: both must succeed
    /// with identical output. Answers (matched, what the library reported).
    fn differential(&mut self, args: &[&str], env: &[(&str, String)]) -> Result<Report, String> {
        let plain = self.run(args, false, &[]);
        if !plain.ok() {
            return Err(format!("without the library: {}", plain.ended()));
        }
        let with = self.run(args, true, env);
        if !with.ok() {
            return Err(format!("with the library: {}", with.ended()));
        }
        if plain.stdout != with.stdout {
            let first = first_difference(&plain.stdout, &with.stdout);
            return Err(format!("output differs: {first}"));
        }
        Ok(with.report)
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (x, y) in a.lines().zip(b.lines()) {
        if x != y {
            return format!("without {x:?}, with {y:?}");
        }
    }
    format!("{} vs {} lines", a.lines().count(), b.lines().count())
}

/// Spawns `c` and collects stdout; None as status if it ran past `limit`.
fn output_within(mut c: Command, limit: Duration) -> (Vec<u8>, Option<std::process::ExitStatus>) {
    use std::io::Read;
    let Ok(mut child) = c.spawn() else {
        return (Vec::new(), None);
    };
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut v);
        }
        v
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    (reader.join().unwrap_or_default(), status)
}

/// One line of the report: a check's name, whether it matched, details.
pub(super) struct Line {
    pub(super) name: &'static str,
    pub(super) ok: bool,
    pub(super) detail: String,
}

/// How many checks [`checks`] makes when the library loads.
pub(super) const CHECKS: usize = 5;

/// The checks, in order; each after the load check needs the library loaded.
pub(super) fn checks(t: &mut Selftest) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut say = |name, r: Result<String, String>| {
        let ok = r.is_ok();
        lines.push(Line {
            name,
            ok,
            detail: r.unwrap_or_else(|e| e),
        });
        ok
    };
    if let Some(why) = launcher::would_kill(&t.exe, &t.lib) {
        say("load", Err(why));
        return lines;
    }
    let load = t.run(&["load"], true, &[]);
    let loaded = if !load.ok() {
        Err(format!(
            "a program with the library preloaded: {}",
            load.ended()
        ))
    } else if load.report.loaded == 0 {
        Err(format!("{PRELOAD_VAR} was set and the library never announced itself: not libmunmapq, or not loaded"))
    } else if let Some(line) = load.report.not_interposed_line() {
        Err(line)
    } else {
        Ok(format!("loaded into a child ({PRELOAD_VAR})"))
    };
    if !say("load", loaded) {
        return lines;
    }
    let file = t.dir.join("data.bin").to_string_lossy().into_owned();
    let _ = t.run(&["mkfile", &file, "64"], false, &[]);
    let inv = t.differential(&["invariants", &file], &[]).and_then(|r| {
        let (d, u) = (r.get(Counter::Deferred), r.get(Counter::Reused));
        if d == 0 {
            return Err(
                "identical output, but nothing was deferred: the library passed everything through"
                    .into(),
            );
        }
        Ok(format!(
            "identical output with and without ({d} deferred, {u} reused)"
        ))
    });
    say("invariants", inv);
    let dir = t.dir.to_string_lossy().into_owned();
    let mut random = Ok((0u64, 0usize));
    for seed in 1..=RANDOM_SEEDS {
        // Queue sizes cycle: a 1-entry queue flushes constantly.
        let caps = [(
            "MUNMAPQ_MAX_ENTRIES",
            ((seed % 4) * (seed % 4)).max(1).to_string(),
        )];
        let env = if seed % 4 == 0 { &caps[..0] } else { &caps[..] };
        let args = ["random", &dir, &seed.to_string(), &RANDOM_STEPS.to_string()];
        match (t.differential(&args, env), &mut random) {
            (Ok(r), Ok((d, n))) => {
                *d += r.get(Counter::Deferred);
                *n += 1;
            }
            (Err(e), Ok(_)) => random = Err(format!("seed {seed}: {e}")),
            _ => {}
        }
    }
    if let Ok((0, _)) = random {
        random = Err(
            "identical logs, but nothing was deferred: the library passed everything through"
                .into(),
        );
    }
    say(
        "random",
        random.map(|(d, n)| {
            format!(
                "{n} seeds x {RANDOM_STEPS} steps identical with and without ({d} munmaps deferred)"
            )
        }),
    );
    let reuse = t.run(&["reuse", &file], true, &[]);
    let (u, m) = (
        reuse.report.get(Counter::Reused),
        reuse.report.get(Counter::MmapCalls),
    );
    let reused = if !reuse.ok() {
        Err(format!("{} (wrong bytes or a failed call)", reuse.ended()))
    } else if u * 2 < REUSE_CYCLES as u64 {
        Err(format!("only {u} of {m} mmaps reused (expected most of {REUSE_CYCLES} over {REUSE_WINDOWS} windows)"))
    } else {
        Ok(format!(
            "{u} of {m} mmaps answered from the queue, bytes correct"
        ))
    };
    say("reuse", reused);
    // The hooks that end a file's name: what was queued of the file goes
    // at the unlink and at the rename over it (each counted as released).
    let names = t.differential(&["names", &dir], &[]).and_then(|r| {
        let (d, released) = (r.get(Counter::Deferred), r.get(Counter::ReleasedAtClose));
        if d == 0 {
            Err("identical output, but nothing was deferred".into())
        } else if released < 2 {
            Err(format!("{released} of 2 queued files released at unlink and rename: the unlink or rename hook was not reached"))
        } else {
            Ok(format!(
                "identical output; unlink and rename released {released} queued mappings"
            ))
        }
    });
    say("names", names);
    lines
}
