//! Running the command with the library: every setting checked and every
//! file it needs opened before it starts, signals as an exec wrapper treats
//! them (signals.rs), and its exit status or signal passed through.

use crate::cli::{fail, Options, StatsFormat};
use crate::doctor::launcher;
use crate::library::find_library;
use crate::out::why;
use crate::platform::{LIB_NAME, PRELOAD_LIST, PRELOAD_VAR};
pub mod report;
pub mod signals;

use crate::seccomp::Sandbox;
use munmapq_core::config::{VAR_SECCOMP, VAR_STATS_FILE, VAR_TRACE};
use report::{Notes, Report};
use signals::Forwarding;
use std::ffi::OsString;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `--stats` adds after the report for a command the caller knows
/// more about (git's pack windows): one line, or empty.
pub type Advice = fn(&[OsString], &Report) -> String;

/// A fresh file for the processes' reports, created exclusively (0600).
fn stats_file() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir();
    for n in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = dir.join(format!("munmapq-{}-{nanos}-{n}.stats", std::process::id()));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true).mode(0o600);
        match o.open(&p) {
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", p.display())),
        }
    }
    Err(format!(
        "cannot create a statistics file in {}",
        dir.display()
    ))
}

/// Opens a file the library would append to (`MUNMAPQ_STATS_FILE`,
/// `MUNMAPQ_TRACE`) as it would: created 0600, appended to.
fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// The files the settings name, opened before the command starts (as
/// `strace -o` does), so a bad path is refused before anything runs rather
/// than losing the figures after: `--stats-out` (created, truncated), and
/// the inherited `MUNMAPQ_STATS_FILE` and `MUNMAPQ_TRACE`.
struct Outputs {
    stats_out: Option<File>,
    /// The caller's `MUNMAPQ_STATS_FILE`: the launcher gives the command
    /// its own private file and appends what it collected to this one.
    stats_file: Option<File>,
}

fn open_outputs(o: &Options) -> Result<Outputs, String> {
    let stats_out = match &o.stats_out {
        Some(p) => {
            Some(File::create(p).map_err(|e| format!("--stats-out {}: {}", p.display(), why(&e)))?)
        }
        None => None,
    };
    let inherited = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    let stats_file = match inherited(VAR_STATS_FILE) {
        Some(p) => Some(open_append(Path::new(&p)).map_err(|e| {
            format!(
                "{VAR_STATS_FILE}={} (from the environment): {}",
                Path::new(&p).display(),
                why(&e)
            )
        })?),
        None => None,
    };
    if let Some(p) = inherited(VAR_TRACE) {
        open_append(Path::new(&p)).map_err(|e| {
            format!(
                "{VAR_TRACE}={} (from the environment): {}",
                Path::new(&p).display(),
                why(&e)
            )
        })?;
    }
    Ok(Outputs {
        stats_out,
        stats_file,
    })
}

pub fn run(o: Options, advice: Advice) -> ExitCode {
    let mut outputs = match open_outputs(&o) {
        Ok(f) => f,
        Err(msg) => return fail(&format!("{msg}; nothing was run"), 2),
    };
    let lib = match find_library(o.lib.clone()) {
        Ok(l) => l,
        Err(msg) => return fail(&msg, 1),
    };
    let report_path = match stats_file() {
        Ok(p) => p,
        Err(msg) => return fail(&msg, 1),
    };
    let name = o.command[0].to_string_lossy().into_owned();
    let mut cmd = Command::new(&o.command[0]);
    cmd.args(&o.command[1..]);
    // dyld kills a program whose inserted library it cannot load, and
    // ignores the variable for a restricted one (macOS: the doctor's
    // verdict, launcher::would_kill): such a program runs without munmapq,
    // after one line saying so.
    let killed_by = crate::program::resolve(&name).and_then(|p| launcher::would_kill(&p, &lib));
    // A shared ASan runtime aborts under any preload: say so first.
    if let Some(line) =
        crate::program::resolve(&name).and_then(|p| crate::program::asan::launcher_warning(&p))
    {
        eprintln!("munmapq: {line}");
    }
    match &killed_by {
        Some(why) => eprintln!("munmapq: warning: {name}: {why}; running it without munmapq"),
        None => {
            cmd.env(
                PRELOAD_VAR,
                PRELOAD_LIST.prepend(&lib, std::env::var_os(PRELOAD_VAR)),
            );
        }
    }
    cmd.env(VAR_STATS_FILE, &report_path);
    // Under a seccomp filter the library passes everything through unless
    // told the filter allows its calls (seccomp.rs); asked before any
    // thread of ours exists, as the probe forks. The caller's own setting
    // is kept.
    let sandbox = crate::seccomp::probe();
    if sandbox == Sandbox::Allows && std::env::var_os(VAR_SECCOMP).is_none() {
        cmd.env(VAR_SECCOMP, "trust");
    }
    for (k, v) in &o.vars {
        cmd.env(k, v);
    }
    let forwarding = Forwarding::install();
    forwarding.prepare(&mut cmd);
    let child = cmd.spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            forwarding.started(0);
            let _ = std::fs::remove_file(&report_path);
            return match e.kind() {
                ErrorKind::NotFound => fail(&format!("{name}: command not found"), 127),
                ErrorKind::PermissionDenied => fail(&format!("{name}: permission denied"), 126),
                _ => fail(&format!("{name}: cannot run: {e}"), 126),
            };
        }
    };
    forwarding.started(child.id());
    forwarding.wait_exited(child.id());
    let status = loop {
        match child.wait() {
            Ok(s) => break s,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return fail(&format!("waiting for {name}: {e}"), 1),
        }
    };
    let text = std::fs::read_to_string(&report_path).unwrap_or_default();
    let _ = std::fs::remove_file(&report_path);
    if let Some(f) = &mut outputs.stats_file {
        if let Err(e) = f.write_all(text.as_bytes()) {
            eprintln!("munmapq: {VAR_STATS_FILE}: {}", why(&e));
        }
    }
    let report = Report::parse(&text);
    let passed_through = sandbox == Sandbox::Refuses;
    if report.loaded == 0 && killed_by.is_none() && !passed_through {
        eprintln!(
            "munmapq: warning: {LIB_NAME} was not loaded into {name}: it ran without munmapq (see: munmapq doctor {name})"
        );
    }
    // With --stats the report says it.
    match report.not_interposed_line() {
        Some(line) if o.stats.is_none() => eprintln!("munmapq: warning: {line}"),
        _ => {}
    }
    if let Some(format) = o.stats {
        let notes = Notes {
            incomplete: incomplete(&name, status, &report).or_else(|| {
                passed_through.then(|| {
                    format!("{name} runs under a seccomp filter that does not allow munmapq's system calls: the library passed every call through and reported nothing")
                })
            }),
            git: Some(advice(&o.command, &report))
                .map(|l| l.trim_end().trim_start_matches("munmapq: ").to_string())
                .filter(|l| !l.is_empty()),
        };
        let t = match format {
            StatsFormat::Short => report.text(false, &notes),
            StatsFormat::Full => report.text(true, &notes),
            StatsFormat::Json => report.json(&notes),
        };
        match (&mut outputs.stats_out, &o.stats_out) {
            (Some(f), Some(path)) => {
                if let Err(e) = f.write_all(t.as_bytes()) {
                    eprintln!("munmapq: --stats-out {}: {}", path.display(), why(&e));
                }
            }
            _ => eprint!("{t}"),
        }
    }
    signals::pass_through(status)
}

/// Why the figures miss part of the run: a process killed by a signal
/// (the command, or processes of it when the launcher got a Ctrl-C or was
/// sent a signal) never reports its counters.
fn incomplete(name: &str, status: std::process::ExitStatus, r: &Report) -> Option<String> {
    let missing = format!(
        "{} of {} process(es) that loaded the library reported their counters",
        r.reported, r.loaded
    );
    if let Some(sig) = status.signal() {
        return Some(format!(
            "{name} was killed by {}; {missing}",
            signals::name(sig)
        ));
    }
    signals::interrupted().map(|sig| {
        format!(
            "munmapq got {} during the run; {missing}",
            signals::name(sig)
        )
    })
}
