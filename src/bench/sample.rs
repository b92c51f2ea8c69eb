//! One run of the command: its standard output hashed as it is read, its
//! resources from `wait4` (CPU, peak RSS and faults of the command and
//! the children it waited for, on Linux and macOS alike), and with the
//! library the counters its processes reported, read as `--stats` reads
//! them (run/report.rs).

use crate::out::why;
use crate::quote::quote_path;
use crate::run::report::Report;
use munmapq_core::config::VAR_STATS_FILE;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

pub struct Sample {
    /// User + system CPU, seconds.
    pub cpu: f64,
    pub wall: f64,
    pub peak_rss_kib: u64,
    /// Minor and major page faults.
    pub faults: u64,
    /// Standard output: its hash and length.
    pub hash: u64,
    pub bytes: u64,
    pub status: ExitStatus,
    /// The end of its standard error, for a run that failed.
    pub stderr_tail: String,
    /// With the library: what its processes reported.
    pub report: Option<Report>,
}

/// FNV-1a, 64 bits: enough to tell two outputs apart in one bench.
pub struct Fnv(pub u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// Peak RSS from `ru_maxrss`: KiB on Linux, bytes on macOS.
fn peak_rss_kib(ru: &libc::rusage) -> u64 {
    let v = ru.ru_maxrss.max(0) as u64;
    if cfg!(target_os = "macos") {
        v / 1024
    } else {
        v
    }
}

fn seconds(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// Runs `cmd` once (stdin from /dev/null, stdout hashed, stderr kept in
/// `scratch/stderr`); with `stats`, the library reports to that file.
/// Err: it could not be started or waited for.
pub fn run_once(cmd: &mut Command, scratch: &Path, stats: bool) -> Result<Sample, String> {
    let report_file = scratch.join("report");
    let err_file = scratch.join("stderr");
    let err = std::fs::File::create(&err_file)
        .map_err(|e| format!("{}: {}", quote_path(&err_file), why(&e)))?;
    if stats {
        std::fs::write(&report_file, "")
            .map_err(|e| format!("{}: {}", quote_path(&report_file), why(&e)))?;
        cmd.env(VAR_STATS_FILE, &report_file);
    } else {
        cmd.env_remove(VAR_STATS_FILE);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(err);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| why(&e))?;
    let mut out = child.stdout.take().ok_or("no pipe for the output")?;
    let mut h = Fnv::new();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                h.add(&buf[..n]);
                bytes += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading its output: {}", why(&e))),
        }
    }
    drop(out);
    let pid = child.id() as libc::pid_t;
    let mut st = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills it and the status.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting for our own child, into our int and rusage.
        let r = unsafe { libc::wait4(pid, &mut st, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waiting for it: {}", why(&e)));
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let stderr = std::fs::read(&err_file).unwrap_or_default();
    let tail = &stderr[stderr.len().saturating_sub(600)..];
    Ok(Sample {
        cpu: seconds(ru.ru_utime) + seconds(ru.ru_stime),
        wall,
        peak_rss_kib: peak_rss_kib(&ru),
        faults: (ru.ru_minflt + ru.ru_majflt).max(0) as u64,
        hash: h.0,
        bytes,
        status: ExitStatus::from_raw(st),
        stderr_tail: String::from_utf8_lossy(tail).trim_end().to_string(),
        report: stats
            .then(|| Report::parse(&std::fs::read_to_string(&report_file).unwrap_or_default())),
    })
}

/// How a run ended, when it did not end well.
pub fn failure(status: ExitStatus) -> Option<String> {
    if let Some(sig) = status.signal() {
        return Some(format!("killed by {}", crate::run::signals::name(sig)));
    }
    match status.code() {
        Some(0) => None,
        Some(c) => Some(format!("exit status {c}")),
        None => Some("ended abnormally".into()),
    }
}
