//! `munmapq bench --seed`: the seed's case in the current repository.
//! The seed: `git log --raw` under `core.packedGitLimit=128m` with git's
//! default 1 GiB windows (64-bit), where git maps and unmaps its pack
//! windows over and over (3,072,538 maps on the Linux kernel repository
//! on macOS: 518 min without the queue, 2 min 26 s with it); and the same
//! scaled to 64 MiB windows. Each row is bounded in time: `git log --raw
//! -n N`, N grown from 1000 until a run without the library takes about
//! an eighth of the row's `--time`, or covers the whole history.

use super::report::Outcome;
use super::{measure, BenchOptions, Setup, NO_RESULT};
use crate::git::check::{Packs, Setting};
use crate::git::repo::{git, git_program, repo};
use munmapq_core::stats::Counter;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::process::{Command, ExitCode};
use std::time::Instant;

/// One row: its name, git's settings (key, value, bytes).
struct Row {
    name: &'static str,
    settings: [(&'static str, &'static str, u64); 2],
}

const ROWS: [Row; 2] = [
    Row {
        name: "the seed: default 1 GiB windows under core.packedGitLimit=128m",
        settings: [
            ("core.packedGitLimit", "128m", 128 << 20),
            ("core.packedGitWindowSize", "1g", 1 << 30),
        ],
    },
    Row {
        name: "the seed scaled: 64 MiB windows under core.packedGitLimit=128m",
        settings: [
            ("core.packedGitLimit", "128m", 128 << 20),
            ("core.packedGitWindowSize", "64m", 64 << 20),
        ],
    },
];

/// What one row found.
struct RowResult {
    row: &'static Row,
    commits: u64,
    /// `-n`: the commits each run logs.
    count: u64,
    /// Why the row was not measured.
    skipped: Option<String>,
    outcome: Option<Outcome>,
}

impl RowResult {
    /// A row that measured the seed's case: a result, and munmaps deferred.
    fn ok(&self) -> bool {
        self.outcome.as_ref().is_some_and(|o| {
            o.problem.is_none() && o.counters().is_some_and(|r| r.get(Counter::Deferred) > 0)
        })
    }

    fn summary(&self) -> String {
        let Some(o) = &self.outcome else {
            return format!("row skipped: {}", self.skipped.as_deref().unwrap_or(""));
        };
        let Some(r) = o.counters() else {
            return "no figures".into();
        };
        let wall = |v: &[super::Sample]| {
            super::report::spread(v.iter().map(|s| s.wall).collect()).map_or(f64::NAN, |p| p.median)
        };
        let calls = r.get(Counter::MunmapCalls);
        let mut s = format!(
            "window maps {}; time without / with munmapq: {:.2} s / {:.2} s wall; munmaps saved: {} of {}",
            r.get(Counter::Eligible),
            wall(&o.without),
            wall(&o.with),
            calls.saturating_sub(r.get(Counter::MunmapSyscalls)),
            calls
        );
        if r.get(Counter::Deferred) == 0 {
            s.push_str("; NOTHING DEFERRED: this row did not measure the seed's case");
        }
        s
    }
}

pub fn run(o: &BenchOptions, setup: &Setup) -> ExitCode {
    let here = match repo(&[]) {
        Ok(r) => r,
        Err(why) => {
            return crate::cli::fail(
                &format!("bench --seed: run it inside a git repository ({why})"),
                super::OWN_FAILURE,
            )
        }
    };
    let commits = git(&[], &["rev-list", "--count", "HEAD"])
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let sizes = here.pack_sizes();
    let results: Vec<RowResult> = ROWS
        .iter()
        .map(|row| one_row(o, setup, row, commits, &sizes))
        .collect();
    let all_ok = results.iter().all(RowResult::ok);
    let text = if o.json {
        let mut report = super::header_json(setup);
        report.insert("seed".into(), results.iter().map(row_json).collect());
        format!("{}\n", Value::Object(report))
    } else {
        let mut s = super::header_text(setup);
        for r in &results {
            let _ = writeln!(
                s,
                "\n## {} ({} of {} commits)",
                r.row.name, r.count, r.commits
            );
            if let Some(out) = &r.outcome {
                s.push_str(&out.text(""));
            }
            let _ = writeln!(s, "seed row: {}", r.summary());
        }
        let _ = writeln!(s, "\nThe seed (macOS, Linux kernel repository, git log --raw, packedGitLimit=128m): 3,072,538 window maps, 518 min without the queue, 2 min 26 s with it.");
        s
    };
    match crate::out::emit(&text) {
        s if s != ExitCode::SUCCESS => s,
        _ if !all_ok => ExitCode::from(NO_RESULT),
        s => s,
    }
}

fn git_log(row: &Row, count: u64) -> Command {
    let mut c = Command::new(git_program());
    for (k, v, _) in row.settings {
        c.arg("-c").arg(format!("{k}={v}"));
    }
    c.args(["log", "--raw", "-n", &count.to_string()]);
    c
}

fn one_row(
    o: &BenchOptions,
    setup: &Setup,
    row: &'static Row,
    commits: u64,
    sizes: &[u64],
) -> RowResult {
    let mut r = RowResult {
        row,
        commits,
        count: 0,
        skipped: None,
        outcome: None,
    };
    let setting = |i: usize| {
        let (key, raw, bytes) = row.settings[i];
        Some(Setting {
            key,
            raw: raw.into(),
            bytes,
            origin: "command line".into(),
        })
    };
    let packs = Packs {
        limit: setting(0),
        window: setting(1),
        sizes: sizes.to_vec(),
    };
    if packs.culprits().is_empty() {
        r.skipped = Some(format!(
            "git would not thrash here: {} pack(s), the largest {} MiB, fit the windows and the limit",
            sizes.len(),
            sizes.iter().max().copied().unwrap_or(0) >> 20
        ));
        return r;
    }
    if commits == 0 {
        r.skipped = Some("no commits (git rev-list --count HEAD)".into());
        return r;
    }
    // Grow -n until a run without the library takes an eighth of the
    // row's time, or logs the whole history.
    let started = Instant::now();
    let target = o.time / 8.0;
    let mut count = commits.min(1000);
    let make_at = |n: u64| move || git_log(row, n);
    loop {
        progress(setup, row, count, commits);
        let (ok, took) = match super::once(setup, &make_at(count), false) {
            Ok(s) => (super::failure(s.status).is_none(), s.wall.max(1e-3)),
            Err(_) => (false, 0.0),
        };
        if !ok || count >= commits || took >= target / 2.0 {
            break;
        }
        let factor = (target / took).clamp(2.0, 16.0);
        count = commits.min((count as f64 * factor) as u64);
    }
    r.count = count;
    let rest = BenchOptions {
        runs: o.runs,
        time: (o.time - started.elapsed().as_secs_f64()).max(1.0),
        warmup: o.warmup,
        json: o.json,
        lib: None,
        seed: true,
        command: Vec::new(),
    };
    let make = make_at(count);
    let cmd = make();
    let mut words = vec!["git".to_string()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let mut outcome = measure(&rest, setup, &make, words);
    outcome.git = Some((
        packs.advice().unwrap_or_default(),
        row.settings
            .iter()
            .map(|(k, v, _)| (k.to_string(), v.to_string(), "command line".to_string()))
            .collect(),
    ));
    r.outcome = Some(outcome);
    r
}

fn progress(setup: &Setup, row: &Row, count: u64, commits: u64) {
    super::progress_line(
        setup,
        &format!(
            "munmapq bench --seed: {}: timing git log --raw -n {count} (of {commits} commits) without munmapq",
            row.name
        ),
    );
}

fn row_json(r: &RowResult) -> Value {
    let counters = r.outcome.as_ref().and_then(|o| o.counters());
    let get = |c| counters.map_or(0, |x| x.get(c));
    let calls = get(Counter::MunmapCalls);
    json!({
        "row": r.row.name,
        "commits": r.commits,
        "max_count": r.count,
        "skipped": r.skipped,
        "deferred": get(Counter::Deferred),
        "window_maps": get(Counter::Eligible),
        "munmaps_saved": calls.saturating_sub(get(Counter::MunmapSyscalls)),
        "ok": r.ok(),
        "summary": r.summary(),
        "bench": r.outcome.as_ref().map(|o| o.json()),
    })
}
