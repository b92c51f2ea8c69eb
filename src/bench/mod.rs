//! `munmapq bench [OPTIONS] [--] COMMAND [ARGS...]`: does munmapq pay for
//! this command on this machine? Warm-up runs, then pairs of runs without
//! and with the library in alternating order, until `--runs` pairs or
//! `--time` seconds; each run's output hashed (a difference is reported,
//! with no ratio); CPU from `wait4`; the library's counters as `--stats`
//! collects them. `--seed`: the seed's case in this git repository
//! (seed.rs).

mod options;
mod report;
mod sample;
mod seed;

use crate::cli::OWN_FAILURE;
use crate::library::find_library;
use crate::platform::{LIB_NAME, PRELOAD_LIST, PRELOAD_VAR};
use crate::quote::quote_path;
use crate::seccomp::Sandbox;
use options::BenchOptions;
use report::{Outcome, Problem};
use sample::{failure, run_once, Fnv, Sample};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// A bench that measured nothing worth a ratio (a failing command,
/// different outputs, a library that did not load).
const NO_RESULT: u8 = 1;

/// What every run of one bench shares.
struct Setup {
    lib: PathBuf,
    sandbox: Sandbox,
    /// Private directory for the reports and the stderr of each run.
    scratch: PathBuf,
    progress: bool,
}

pub fn run(args: &[OsString]) -> ExitCode {
    let o = match options::parse(args) {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("munmapq: {msg}");
            eprintln!("Try 'munmapq help bench' for more information.");
            return ExitCode::from(OWN_FAILURE);
        }
    };
    let lib = match find_library(o.lib.clone()) {
        Ok(l) => l,
        Err(e) => return crate::cli::fail(&format!("bench: {}", e.msg), OWN_FAILURE),
    };
    if !o.seed {
        let name = o.command[0].to_string_lossy().into_owned();
        let program = crate::program::resolve(&name);
        if program.is_none() || program.as_ref().is_some_and(|p| p.is_dir()) {
            let e = std::io::Error::from(std::io::ErrorKind::NotFound);
            return crate::program::cannot_run::cannot_run(&o.command[0], program.as_deref(), &e);
        }
    }
    let scratch = match crate::run::sentinel::stats_dir() {
        Ok(d) => d,
        Err(msg) => return crate::cli::fail(&format!("bench: {msg}"), OWN_FAILURE),
    };
    // SAFETY: isatty has no preconditions.
    let progress = unsafe { libc::isatty(2) } == 1;
    let setup = Setup {
        sandbox: crate::seccomp::probe(),
        lib,
        scratch,
        progress,
    };
    let status = if o.seed {
        seed::run(&o, &setup)
    } else {
        one(&o, &setup)
    };
    let _ = std::fs::remove_dir_all(&setup.scratch);
    status
}

/// `munmapq bench COMMAND`.
fn one(o: &BenchOptions, setup: &Setup) -> ExitCode {
    let mut command = o.command.clone();
    // A munmapq linked as git is the git wrapper, which may preload the
    // library: the runs without it need the real git.
    if crate::program::resolve(&command[0].to_string_lossy())
        .is_some_and(|p| crate::git::locate::is_me(&p))
    {
        command[0] = crate::git::repo::git_program().into_os_string();
    }
    let mut outcome = measure(
        o,
        setup,
        &|| {
            let mut c = Command::new(&command[0]);
            c.args(&command[1..]);
            c
        },
        strings(&command),
    );
    outcome.git = git_settings(&command);
    let failed = outcome.problem.is_some();
    let text = if o.json {
        let mut report = header_json(setup);
        report.insert("bench".into(), outcome.json());
        format!("{}\n", serde_json::Value::Object(report))
    } else {
        format!("{}{}", header_text(setup), outcome.text(""))
    };
    match crate::out::emit(&text) {
        s if s != ExitCode::SUCCESS => s,
        _ if failed => ExitCode::from(NO_RESULT),
        s => s,
    }
}

fn strings(v: &[OsString]) -> Vec<String> {
    v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

/// The caller's preload list without any libmunmapq: the runs without
/// the library are without it even in a shell that preloads it.
fn without_library(cmd: &mut Command) {
    let Some(list) = std::env::var_os(PRELOAD_VAR) else {
        return;
    };
    let kept: Vec<&std::ffi::OsStr> = PRELOAD_LIST
        .split(&list)
        .into_iter()
        .filter(|p| Path::new(p).file_name().is_none_or(|n| n != LIB_NAME))
        .collect();
    if kept.is_empty() {
        cmd.env_remove(PRELOAD_VAR);
    } else {
        cmd.env(PRELOAD_VAR, PRELOAD_LIST.join(kept));
    }
}

/// Runs `make()`'s command once, with or without the library.
fn once(setup: &Setup, make: &dyn Fn() -> Command, with: bool) -> Result<Sample, String> {
    let mut cmd = make();
    if with {
        cmd.envs(crate::run::library_vars(Some(&setup.lib), setup.sandbox));
    } else {
        without_library(&mut cmd);
    }
    run_once(&mut cmd, &setup.scratch, with)
}

/// Why a run spoils the bench: it failed, the library did not load, or
/// its output is not the first run's.
fn problem(s: &Sample, with: bool, first: Option<(u64, u64)>, name: &str) -> Option<Problem> {
    let how = if with { "with" } else { "without" };
    if let Some(f) = failure(s.status) {
        let err = if s.stderr_tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended: {}", s.stderr_tail.replace('\n', " | "))
        };
        return Some(Problem::Failed(format!("{name} {how} munmapq: {f}{err}")));
    }
    if s.report.as_ref().is_some_and(|r| r.loaded == 0) {
        let program = name.split(' ').next().unwrap_or(name);
        return Some(Problem::NotLoaded(format!(
            "{LIB_NAME} did not load into {program} (munmapq doctor {program} says why)"
        )));
    }
    let (hash, bytes) = first?;
    (hash != s.hash || bytes != s.bytes).then(|| {
        Problem::Differs(format!(
            "a run {how} munmapq wrote {} bytes (FNV-1a {:016x}), the first run without it {bytes} bytes ({hash:016x}): no ratio",
            s.bytes, s.hash
        ))
    })
}

/// Warm-up, then alternating pairs until the run count or the time
/// budget; stops at the first run that spoils the bench.
fn measure(
    o: &BenchOptions,
    setup: &Setup,
    make: &dyn Fn() -> Command,
    command: Vec<String>,
) -> Outcome {
    let name = report::shell_words(&command);
    let mut out = Outcome {
        command,
        warmup: o.warmup,
        without: Vec::new(),
        with: Vec::new(),
        timed_out: false,
        problem: None,
        git: None,
    };
    // macOS: dyld kills a program whose inserted library it cannot load
    // (the launcher then runs it without, run/mod.rs): said, not run.
    if cfg!(target_os = "macos") {
        let program = make().get_program().to_string_lossy().into_owned();
        let why =
            crate::program::resolve(&program).and_then(|p| crate::doctor::predict(&p, &setup.lib));
        if let Some(why) = why {
            out.problem = Some(Problem::NotLoaded(format!(
                "{program}: {why} (munmapq doctor {program} says more)"
            )));
            return out;
        }
    }
    let started = Instant::now();
    // The first run's output (hash, bytes): a run without the library.
    let mut first: Option<(u64, u64)> = None;
    let mut step = |with: bool, keep: bool, out: &mut Outcome| -> bool {
        let s = match once(setup, make, with) {
            Ok(s) => s,
            Err(e) => {
                out.problem = Some(Problem::Failed(format!("{name}: {e}")));
                return false;
            }
        };
        if let Some(p) = problem(&s, with, first, &name) {
            out.problem = Some(p);
            return false;
        }
        first.get_or_insert((s.hash, s.bytes));
        if keep {
            if with {
                &mut out.with
            } else {
                &mut out.without
            }
            .push(s);
        }
        true
    };
    for w in 0..o.warmup {
        progress(
            setup,
            &format!("warm-up {} of {}", w + 1, o.warmup),
            started,
            o.time,
        );
        if !step(false, false, &mut out) || !step(true, false, &mut out) {
            return done(setup, out);
        }
    }
    for i in 0..o.runs {
        if i > 0 && started.elapsed().as_secs_f64() >= o.time {
            out.timed_out = true;
            break;
        }
        progress(
            setup,
            &format!("pair {} of {}", i + 1, o.runs),
            started,
            o.time,
        );
        // Alternate which configuration runs first: neither always gets
        // the other's warm caches.
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        if !step(order[0], true, &mut out) || !step(order[1], true, &mut out) {
            break;
        }
    }
    done(setup, out)
}

fn done(setup: &Setup, out: Outcome) -> Outcome {
    if setup.progress {
        eprint!("\r\x1b[K");
    }
    out
}

/// The progress line on stderr: how far the bench is.
fn progress(setup: &Setup, what: &str, started: Instant, budget: f64) {
    progress_line(
        setup,
        &format!(
            "munmapq bench: {what} ({:.0} s of at most {budget:.0} s)",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// A progress line: rewritten in place on a terminal, a line each
/// elsewhere (a CI log).
fn progress_line(setup: &Setup, line: &str) {
    if setup.progress {
        eprint!("\r\x1b[K{line}");
    } else {
        eprintln!("{line}");
    }
}

/// For git: the pack settings `munmapq doctor git` names, its line, and
/// the settings as (key, value, where).
fn git_settings(command: &[OsString]) -> Option<report::GitSettings> {
    let prefix = crate::git::repo::git_prefix(command)?;
    let line = match crate::git::check::doctor_lines(command)? {
        Ok(l) | Err(l) => l.trim_start_matches("munmapq doctor: ").to_string(),
    };
    let settings = crate::git::check::packs(&prefix)
        .map(|p| {
            [
                ("core.packedGitLimit", p.limit),
                ("core.packedGitWindowSize", p.window),
            ]
            .into_iter()
            .map(|(k, s)| match s {
                Some(s) => (k.to_string(), s.raw, s.origin),
                None => (k.to_string(), "default".into(), "git's default".into()),
            })
            .collect()
        })
        .unwrap_or_default();
    Some((line, settings))
}

/// The platform: `uname`, and on macOS the product version.
fn platform() -> String {
    // SAFETY: a zeroed utsname is valid; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into our struct.
    if unsafe { libc::uname(&mut u) } != 0 {
        return std::env::consts::OS.into();
    }
    let field = |f: &[libc::c_char]| {
        // SAFETY: uname's fields are NUL-terminated within their arrays.
        let s = unsafe { std::ffi::CStr::from_ptr(f.as_ptr()) };
        s.to_string_lossy().into_owned()
    };
    let mut s = format!(
        "{} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.machine)
    );
    if cfg!(target_os = "macos") {
        if let Ok(out) = Command::new("sw_vers").arg("-productVersion").output() {
            s = format!(
                "macOS {} ({s})",
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
    }
    s
}

/// The library's identity: its path, size and FNV-1a hash.
fn library_identity(lib: &Path) -> (u64, String) {
    let bytes = std::fs::read(lib).unwrap_or_default();
    let mut h = Fnv::new();
    h.add(&bytes);
    (bytes.len() as u64, format!("{:016x}", h.0))
}

fn header_text(setup: &Setup) -> String {
    let (size, hash) = library_identity(&setup.lib);
    format!(
        "munmapq bench: munmapq {} on {}\nlibrary:  {} ({size} bytes, FNV-1a {hash})\n",
        env!("CARGO_PKG_VERSION"),
        platform(),
        quote_path(&setup.lib)
    )
}

/// The JSON fields every bench starts with.
fn header_json(setup: &Setup) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::json;
    let (size, hash) = library_identity(&setup.lib);
    let mut m = serde_json::Map::new();
    m.insert("schema".into(), json!(1));
    m.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    m.insert("platform".into(), json!(platform()));
    m.insert(
        "library".into(),
        json!({"path": setup.lib.to_string_lossy(), "bytes": size, "fnv1a": hash}),
    );
    m
}
