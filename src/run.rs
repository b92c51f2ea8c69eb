//! Finding the library, running the command with it, and passing the
//! command's exit status or signal through.

use crate::cli::{fail, Options, StatsFormat};
use crate::gitcheck;
use crate::library::find_library;
use crate::platform::{self, LIB_NAME, PRELOAD_LIST, PRELOAD_VAR};
use crate::report::Report;
use std::io::ErrorKind;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

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
        o.write(true).create_new(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
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

pub fn run(o: Options) -> ExitCode {
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
    // verdict, platform::would_kill): such a program runs without munmapq,
    // after one line saying so.
    let killed_by = crate::program::resolve(&name).and_then(|p| platform::would_kill(&p, &lib));
    match &killed_by {
        Some(why) => eprintln!("munmapq: warning: {name}: {why}; running it without munmapq"),
        None => {
            cmd.env(
                PRELOAD_VAR,
                PRELOAD_LIST.prepend(&lib, std::env::var_os(PRELOAD_VAR)),
            );
        }
    }
    cmd.env(munmapq_core::config::VAR_STATS_FILE, &report_path);
    for (k, v) in &o.vars {
        cmd.env(k, v);
    }
    // SAFETY: only async-signal-safe calls between fork and exec: restore
    // the default dispositions the launcher changed.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
    // The terminal sends SIGINT/SIGQUIT to the command itself; the launcher
    // waits for it as a shell would. SIGTERM and SIGHUP are passed on.
    // SAFETY: installing handlers that only call kill().
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::signal(
            libc::SIGTERM,
            forward_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGHUP,
            forward_signal as *const () as libc::sighandler_t,
        );
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&report_path);
            return match e.kind() {
                ErrorKind::NotFound => fail(&format!("{name}: command not found"), 127),
                ErrorKind::PermissionDenied => fail(&format!("{name}: permission denied"), 126),
                _ => fail(&format!("{name}: cannot run: {e}"), 126),
            };
        }
    };
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    let status = loop {
        match child.wait() {
            Ok(s) => break s,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return fail(&format!("waiting for {name}: {e}"), 1),
        }
    };
    let text = std::fs::read_to_string(&report_path).unwrap_or_default();
    let _ = std::fs::remove_file(&report_path);
    let report = Report::parse(&text);
    if report.loaded == 0 && killed_by.is_none() {
        eprintln!(
            "munmapq: warning: {LIB_NAME} was not loaded into {name}: it ran without munmapq (see: munmapq doctor {name})"
        );
    }
    let text = match o.stats {
        Some(StatsFormat::Text) => Some(report.text() + &gitcheck::stats_line(&o.command, &report)),
        Some(StatsFormat::Json) => Some(report.json()),
        None => None,
    };
    match (text, &o.stats_out) {
        (Some(t), Some(path)) => {
            if let Err(e) = std::fs::write(path, t) {
                eprintln!("munmapq: --stats-out {}: {e}", path.display());
            }
        }
        (Some(t), None) => eprint!("{t}"),
        _ => {}
    }
    pass_through(status)
}

/// Exits as the command did: same code, or the same signal.
fn pass_through(status: std::process::ExitStatus) -> ExitCode {
    if let Some(code) = status.code() {
        return ExitCode::from(code as u8);
    }
    let sig = status.signal().unwrap_or(libc::SIGKILL);
    // SAFETY: restore the default action and re-raise, so our parent sees
    // the same signal; if we survive it (ignored by design), fall back.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    ExitCode::from(128 + sig as u8)
}
