//! `munmapq bench`: git with tiny pack windows on a generated repository
//! measured without and with the library (the report's fields, the
//! counters of the runs with the library, the JSON form), a command whose
//! output differs from run to run (no ratio, status 1), a failing command
//! (reported failing, not timed), a program the library does not load
//! into (no ratio), bad options (125), and `--seed` where it cannot run.
// Linux: on macOS /bin/sh and the system's git are SIP-protected, and
// dyld never inserts the library into them.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};

fn bench(args: &[&str], dir: &Path) -> Output {
    let mut c = Command::new(launcher());
    c.arg("bench")
        .arg("--lib")
        .arg(lib())
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("MUNMAPQ_STATS_FILE");
    output_within(&mut c, 4 * MINUTE)
}

/// Parses `json` with python3 and prints `expr` of it (`d` is the object).
fn json_field(json: &[u8], expr: &str) -> String {
    // A directory per call: the tests run in parallel.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = scratch(&format!("bench-json-{n}"));
    let file = dir.join("report.json");
    std::fs::write(&file, json).unwrap();
    let out = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import json,sys; d = json.load(open(sys.argv[1])); print({expr})"
        ))
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        text(json),
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

fn git_log(repo: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec!["git".into(), "-C".into(), repo.to_string_lossy().into()];
    v.extend(TINY_WINDOWS.iter().map(|s| s.to_string()));
    v.extend(["log".into(), "--raw".into()]);
    v
}

#[test]
fn git_with_tiny_windows_is_measured_both_ways() {
    let repo = scratch("bench-git");
    probe_repo(&repo, 300, 100, |dir| {
        let mut c = git_at("git", dir, dir);
        c.args(TINY_WINDOWS);
        c
    });
    let cmd = git_log(&repo);
    let mut args = vec!["--runs", "3", "--warmup", "1", "--"];
    args.extend(cmd.iter().map(String::as_str));
    let out = bench(&args, &repo);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    for field in [
        "munmapq bench: munmapq ",
        "library:  ",
        "FNV-1a",
        "runs:     3 pair(s) alternating",
        "identical in every run",
        "CPU s:",
        "wall s:",
        "peak RSS:",
        "faults:",
        "munmaps ",
        "git:      ",
        "core.packedGitLimit=32k",
        "paired CPU ratio (with/without): ",
        "verdict:  ",
    ] {
        assert!(report.contains(field), "{field:?} missing:\n{report}");
    }
    assert!(
        report.contains("verdict:  pays here: ")
            || report.contains("verdict:  does not pay here: "),
        "{report}"
    );
    // Progress on stderr.
    assert!(
        text(&out.stderr).contains("munmapq bench: pair 3 of 3"),
        "{}",
        text(&out.stderr)
    );
    // The library's counters, from the runs with it.
    let line = report
        .lines()
        .find(|l| l.starts_with("library:  1 process"))
        .unwrap_or_else(|| panic!("{report}"));
    let num = |after: &str| -> u64 {
        let rest = &line[line
            .find(after)
            .unwrap_or_else(|| panic!("{after}: {line}"))
            + after.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(num("maps, ") > 0 || line.contains(" reused"), "{line}");
    assert!(num("munmaps ") > 0, "nothing deferred: {line}");

    // The same as JSON.
    args.insert(0, "--json");
    let out = bench(&args, &repo);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j = &out.stdout;
    assert_eq!(
        json_field(j, "d['schema'], d['bench']['pairs'], d['bench']['problem']"),
        "1 3 None"
    );
    assert_eq!(
        json_field(
            j,
            "bool(d['platform']) and len(d['library']['fnv1a']) == 16 and bool(d['version'])"
        ),
        "True"
    );
    assert_eq!(
        json_field(j, "all(d['bench'][c]['cpu_s']['median'] > 0 and d['bench'][c]['wall_s']['min'] > 0 and d['bench'][c]['peak_rss_kib'] > 0 and d['bench'][c]['faults']['median'] > 0 for c in ('without', 'with'))"),
        "True"
    );
    assert_eq!(
        json_field(
            j,
            "d['bench']['counters']['deferred'] > 0 and d['bench']['counters']['reused'] > 0"
        ),
        "True"
    );
    assert_eq!(
        json_field(j, "d['bench']['cpu_ratio']['median'] > 0"),
        "True"
    );
    assert_eq!(
        json_field(j, "sorted(s['key'] for s in d['bench']['git']['settings'])"),
        "['core.packedGitLimit', 'core.packedGitWindowSize']"
    );
    assert_eq!(
        json_field(
            j,
            "d['bench']['verdict'].split(':')[0] in ('pays here', 'does not pay here')"
        ),
        "True"
    );
}

#[test]
fn different_outputs_give_no_ratio() {
    let dir = scratch("bench-differs");
    // Each run prints its own pid.
    let out = bench(&["--runs", "2", "sh", "-c", "echo $$"], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("OUTPUTS DIFFER: "), "{report}");
    assert!(!report.contains("paired CPU ratio"), "{report}");
    assert!(
        report.contains("verdict:  no verdict: outputs differ"),
        "{report}"
    );
    let out = bench(&["--json", "--runs", "2", "sh", "-c", "echo $$"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_field(
            &out.stdout,
            "d['bench']['cpu_ratio'], d['bench']['problem']['kind']"
        ),
        "None outputs differ"
    );
}

#[test]
fn a_failing_command_is_reported_failing_not_timed() {
    let dir = scratch("bench-fails");
    let out = bench(&["sh", "-c", "echo partial; echo oops >&2; exit 3"], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("FAILED: sh -c"), "{report}");
    assert!(
        report.contains("without munmapq: exit status 3"),
        "{report}"
    );
    assert!(report.contains("oops"), "{report}");
    assert!(
        !report.contains("CPU s:") && !report.contains("paired CPU ratio"),
        "{report}"
    );
}

#[test]
fn a_program_the_library_cannot_load_into_gets_no_ratio() {
    let dir = scratch("bench-static");
    // ldconfig is statically linked (on Ubuntu /sbin/ldconfig is a script
    // around ldconfig.real).
    let ldconfig = [
        "/sbin/ldconfig.real",
        "/usr/sbin/ldconfig.real",
        "/sbin/ldconfig",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("no ldconfig");
    let out = bench(&["--runs", "1", ldconfig, "-p"], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains(&format!("LIBRARY NOT LOADED: libmunmapq.so did not load into {ldconfig} (munmapq doctor {ldconfig} says why)")),
        "{report}"
    );
    assert!(!report.contains("paired CPU ratio"), "{report}");
}

#[test]
fn bad_options_are_refused_with_125() {
    let dir = scratch("bench-bad");
    for args in [
        &["--runs", "0", "true"][..],
        &["--runs"],
        &["--time", "soon", "true"],
        &["--json=yes", "true"],
        &["--rnus", "2", "true"],
        &["--seed", "git", "log"],
        &["--warmup", "-1", "true"],
    ] {
        let out = bench(args, &dir);
        assert_eq!(
            out.status.code(),
            Some(125),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).starts_with("munmapq: bench: "),
            "{}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    let out = output_within(Command::new(launcher()).arg("bench"), MINUTE);
    assert_eq!(out.status.code(), Some(125));
    let out = bench(&["no-such-command-here"], &dir);
    assert_eq!(out.status.code(), Some(127), "{}", text(&out.stderr));
    // --seed outside a repository: one line, 125.
    let out = bench(&["--seed"], &dir);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("inside a git repository"));
}

#[test]
fn seed_on_a_repository_too_small_to_thrash_says_so() {
    let dir = scratch("bench-seed-small");
    let repo = common::repo::small_repo(&dir, "r");
    common::repo::git(&repo, &dir, &["repack", "-adq"]);
    let out = bench(&["--seed", "--json"], &repo);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        json_field(&out.stdout, "[r['ok'] for r in d['seed']], all('would not thrash' in r['skipped'] for r in d['seed'])"),
        "[False, False] True"
    );
}
