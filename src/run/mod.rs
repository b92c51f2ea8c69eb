//! Running the command with the library. Every setting is checked and
//! every file it needs opened before it starts; what the library cannot
//! do for the program is said before, from what the doctor knows. Then:
//!
//! - no report asked for: the launcher execs the command (one process, the
//!   command's pid, signals, job control, core dumps), and sets no
//!   `MUNMAPQ_STATS_FILE`;
//! - `--stats`/`--stats-out`: it stays the command's parent, as `time`
//!   does, relays signals (signals.rs), collects the reports in a private
//!   directory (sentinel.rs) and prints them (report.rs).

use crate::cli::{fail, Options, StatsFormat, StatsOut, OWN_FAILURE};
use crate::inherited;
use crate::library::find_library;
use crate::out::why;
use crate::platform::{self, LIB_NAME, PRELOAD_LIST, PRELOAD_VAR};
pub mod outputs;
pub mod report;
pub mod sentinel;
pub mod signals;
pub mod summary;
pub mod units;
pub mod usage;

use crate::quote::quote_path;
use crate::seccomp::Sandbox;
use munmapq_core::config::{VAR_SECCOMP, VAR_STATS_DIR, VAR_STATS_FILE};
use outputs::{discard, open_outputs, Outputs};
use report::{GitAdvice, Notes, Report, Run};
use signals::Relay;
use std::ffi::OsString;
use std::io::{Seek, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// What `--stats` adds after the report for a command the caller knows
/// more about (git's pack windows).
pub type Advice = fn(&[OsString], &Report) -> Option<GitAdvice>;

pub fn run(o: Options, advice: Advice) -> ExitCode {
    let outputs = match open_outputs(&o) {
        Ok(f) => f,
        Err(msg) => return fail(&format!("{msg}; nothing was run"), OWN_FAILURE),
    };
    // As messages show it (quoted where needed); the command itself is
    // o.command[0], byte for byte.
    let name = crate::quote::quote(&o.command[0]);
    // The report's directory first: without one `--stats` refuses to run,
    // and that is all there is to say (not first that the command would
    // run without a library).
    let dir = match o.stats.map(|_| sentinel::stats_dir()) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(msg)) => {
            discard(&outputs);
            return fail(&format!("{msg}; nothing was run"), OWN_FAILURE);
        }
    };
    let lib = match find_library(o.lib.clone()) {
        Ok(l) => Some(l),
        // No cache directory for the built-in library: run without it,
        // as ld.so does with a library it cannot find.
        Err(e) if e.no_cache => {
            if !o.quiet {
                eprintln!(
                    "munmapq: warning: {}; running {name} without munmapq",
                    e.msg
                );
            }
            None
        }
        Err(e) => {
            if let Some(d) = &dir {
                let _ = std::fs::remove_dir_all(d);
            }
            discard(&outputs);
            return fail(&e.msg, OWN_FAILURE);
        }
    };
    let mut cmd = Command::new(&o.command[0]);
    cmd.args(&o.command[1..]);
    let program = o.command[0].to_str().and_then(crate::program::resolve);
    // What the library cannot do for the program, said before it runs.
    let mut predicted = None;
    if let (Some(p), Some(lib)) = (&program, &lib) {
        if let Some(line) = crate::program::asan::launcher_warning(p) {
            eprintln!("munmapq: {line}");
        }
        predicted = crate::doctor::predict(p, lib);
        if let (Some(why), false) = (&predicted, o.quiet) {
            eprintln!(
                "munmapq: warning: {name}: {why}; it runs without munmapq (munmapq doctor {name} says more; -q: no warning)"
            );
        }
    }
    // macOS: dyld kills a program whose inserted library it cannot load,
    // and ignores the variable for a restricted one: such a program runs
    // without it. Linux: a static or setuid program's children may still
    // load it.
    let preload = lib.filter(|_| !(cfg!(target_os = "macos") && predicted.is_some()));
    // The variables the command gets on top of ours.
    // The seccomp probe is asked before any thread of ours exists, as it
    // forks.
    let sandbox = crate::seccomp::probe();
    let mut vars = library_vars(preload.as_deref(), sandbox);
    for (k, v) in &o.vars {
        vars.push((k.into(), v.into()));
    }
    let (Some(format), Some(dir)) = (o.stats, dir) else {
        platform::put_in_environment(&vars);
        let err = inherited::exec(&mut cmd);
        return crate::program::cannot_run::cannot_run(&o.command[0], program.as_deref(), &err);
    };
    let expect_load = preload.is_some() && predicted.is_none() && sandbox != Sandbox::Refuses;
    let parent = Parent {
        o: &o,
        vars,
        dir,
        name,
        program,
        outputs,
        format,
        expect_load,
        sandbox,
    };
    parent.run(cmd, advice)
}

/// The variables that preload `lib` into a command, before what the
/// caller preloads; and under a seccomp filter that allows the library's
/// calls, the one that says so (else it passes everything through,
/// seccomp.rs), unless the caller set it.
pub fn library_vars(lib: Option<&Path>, sandbox: Sandbox) -> Vec<(OsString, OsString)> {
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    if let Some(lib) = lib {
        vars.push((
            PRELOAD_VAR.into(),
            PRELOAD_LIST.prepend(lib, platform::preloaded_now(), crate::library::is_a_munmapq),
        ));
    }
    if sandbox == Sandbox::Allows && std::env::var_os(VAR_SECCOMP).is_none() {
        vars.push((VAR_SECCOMP.into(), "trust".into()));
    }
    vars
}

/// A run that reports: the launcher stays the command's parent.
struct Parent<'a> {
    o: &'a Options,
    /// The variables the command gets (set just before it starts).
    vars: Vec<(OsString, OsString)>,
    /// The report's directory (sentinel.rs).
    dir: PathBuf,
    name: String,
    program: Option<PathBuf>,
    outputs: Outputs,
    format: StatsFormat,
    /// The library should load (the prediction said nothing against it).
    expect_load: bool,
    sandbox: Sandbox,
}

impl Parent<'_> {
    fn run(mut self, mut cmd: Command, advice: Advice) -> ExitCode {
        let dir = self.dir.clone();
        let mut relay = Relay::block();
        let sentinel = match sentinel::Sentinel::start(&dir) {
            Ok(s) => s,
            Err(msg) => {
                let _ = std::fs::remove_dir_all(&dir);
                discard(&self.outputs);
                return fail(&msg, OWN_FAILURE);
            }
        };
        let report_path = sentinel.report_file();
        // After the sentinel's fork: its process loads nothing.
        let mut vars = std::mem::take(&mut self.vars);
        vars.push((VAR_STATS_FILE.into(), report_path.clone().into()));
        vars.push((VAR_STATS_DIR.into(), dir.clone().into()));
        let before = platform::put_in_environment(&vars);
        relay.prepare(&mut cmd);
        let started = std::time::Instant::now();
        let spawned = cmd.spawn();
        platform::restore_environment(before);
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                sentinel.finish();
                discard(&self.outputs);
                return crate::program::cannot_run::cannot_run(
                    &self.o.command[0],
                    self.program.as_deref(),
                    &e,
                );
            }
        };
        let pid = child.id() as libc::pid_t;
        if let Some((f, _, _)) = &mut self.outputs.stats_out {
            if f.metadata().is_ok_and(|m| m.is_file()) {
                let _ = f.set_len(0);
            }
        }
        sentinel.command_started(pid);
        let ran = relay.run(pid, &sentinel);
        let elapsed = started.elapsed();
        let text = std::fs::read_to_string(&report_path).unwrap_or_default();
        let images = report::read_live(&dir);
        sentinel.finish();
        let (status, usage) = match ran {
            Ok(s) => s,
            Err(e) => {
                return fail(
                    &format!("waiting for {}: {}", self.name, why(&e)),
                    OWN_FAILURE,
                )
            }
        };
        // A report that cannot be written is munmapq's failure (125), not
        // the command's status.
        let mut failed = false;
        if let Some(f) = &mut self.outputs.stats_file {
            let lines = text.clone() + &report::lines_of(&images);
            if let Err(e) = f.write_all(lines.as_bytes()) {
                eprintln!("munmapq: {VAR_STATS_FILE}: {}", why(&e));
                failed = true;
            }
        }
        let report = Report::collect(&text, &images);
        if report.loaded == 0 && self.expect_load && !self.o.quiet {
            eprintln!(
                "munmapq: warning: {LIB_NAME} was not loaded into {}: it ran without munmapq (see: munmapq doctor {})",
                self.name, self.name
            );
        }
        let notes = Notes {
            incomplete: self.incomplete(status, &report, relay.interrupted),
            git: advice(&self.o.command, &report),
        };
        let run = Run {
            command: self
                .o
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code: status.code(),
            signal: status.signal(),
            elapsed_ms: elapsed.as_millis() as u64,
            usage,
        };
        let t = match self.format {
            StatsFormat::Short => report.text(false, &run, &notes),
            StatsFormat::Full => report.text(true, &run, &notes),
            StatsFormat::Json => report.json(&run, &notes),
        };
        if let Err(msg) = self.write_report(&t) {
            eprintln!("munmapq: {msg}");
            failed = true;
        }
        if failed {
            return ExitCode::from(OWN_FAILURE);
        }
        signals::pass_through(status)
    }

    /// Writes the report where it was asked for; what failed.
    fn write_report(&mut self, t: &str) -> Result<(), String> {
        match (&mut self.outputs.stats_out, &self.o.stats_out) {
            // A file is written from its start (truncated once the command
            // started); a pipe, FIFO or terminal cannot seek, and is just
            // written to, as `time -o` does.
            (Some((f, path, _)), _) => match f.rewind() {
                Err(e) if e.raw_os_error() == Some(libc::ESPIPE) => Ok(()),
                r => r,
            }
            .and_then(|()| f.write_all(t.as_bytes()))
            .map_err(|e| format!("--stats-out {}: {}", quote_path(path), why(&e))),
            (None, Some(StatsOut::Stdout)) => {
                if inherited::was_closed(1) {
                    return Err("--stats-out -: bad file descriptor".into());
                }
                let mut out = std::io::stdout().lock();
                out.write_all(t.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("--stats-out -: {}", why(&e)))
            }
            _ => {
                if inherited::was_closed(2) {
                    return Err("--stats: the report: bad file descriptor".into());
                }
                std::io::stderr()
                    .lock()
                    .write_all(t.as_bytes())
                    .map_err(|e| format!("--stats: the report: {}", why(&e)))
            }
        }
    }

    /// Why the figures miss part of the run: processes that loaded the
    /// library and left no counters (each keeps them in a file of the
    /// report's directory, which outlives it; where that could not be
    /// made, only a process that reaches its exit handlers reports).
    fn incomplete(
        &self,
        status: std::process::ExitStatus,
        r: &Report,
        interrupted: Option<libc::c_int>,
    ) -> Option<String> {
        if self.sandbox == Sandbox::Refuses {
            return Some(format!("{} runs under a seccomp filter that does not allow munmapq's system calls: the library passed every call through and reported nothing", self.name));
        }
        let lost = r.lost();
        if lost == 0 {
            return None;
        }
        let missing = format!(
            "{lost} of {} that loaded the library left no counters, which are lost",
            units::count(r.loaded, "process", "processes")
        );
        if let Some(sig) = status.signal() {
            return Some(format!(
                "{} was killed by {}; {missing}",
                self.name,
                signals::name(sig)
            ));
        }
        if let Some(sig) = interrupted {
            return Some(format!(
                "munmapq got {} during the run; {missing}",
                signals::name(sig)
            ));
        }
        Some(format!(
            "{missing} (they could not keep them in a file, and were killed by a signal or ended with _exit before their exit handlers)"
        ))
    }
}
