//! `munmapq selftest`: on the user's own machine, in seconds, does the
//! library the launcher would preload load, behave exactly as without it,
//! and reuse mappings? The checks run in child processes that are this
//! executable itself (`munmapq __check ...`, hidden), with and without the
//! library, so an installed munmapq needs nothing else. Prints a verdict
//! and a short report to paste into a bug report; exits 0 only if every
//! check matched.

use crate::platform::{self, LIB_NAME, PRELOAD_VAR};
use crate::report::Report;
use munmapq_core::config::VAR_STATS_FILE;
use munmapq_core::stats::Counter;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Random sequences run with and without the library (x `RANDOM_STEPS`).
const RANDOM_SEEDS: u64 = 32;
const RANDOM_STEPS: usize = 200;
/// Map/unmap cycles over `REUSE_WINDOWS` windows in the reuse check.
const REUSE_CYCLES: usize = 400;
const REUSE_WINDOWS: usize = 8;
/// A child still running after this is killed and its check fails.
const CHILD_LIMIT: Duration = Duration::from_secs(10);

/// `munmapq __check WHAT ARGS...`: the child side. Answers its exit status.
pub fn child(args: &[String]) -> ExitCode {
    use munmapq_check::{invariants, random, sys};
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let num = |i: usize| arg(i).parse::<usize>().unwrap_or(0);
    let code = match arg(0).as_str() {
        "load" => 0,
        "mkfile" => {
            sys::make_file(&arg(1), num(2));
            0
        }
        "invariants" => {
            invariants::run(&arg(1));
            0
        }
        "random" => random::run(&arg(1), num(2) as u64, num(3)),
        "reuse" => reuse_cycles(&arg(1)),
        _ => 2,
    };
    ExitCode::from(code as u8)
}

/// Maps window `i % REUSE_WINDOWS` of the file again and again, checking
/// its bytes: with the library most maps are answered from the queue.
fn reuse_cycles(file: &str) -> i32 {
    use munmapq_check::sys::*;
    let pg = page();
    let fd = open(file, libc::O_RDONLY);
    if fd < 0 {
        return 1;
    }
    let mut wrong = 0;
    for i in 0..REUSE_CYCLES {
        let off = (i % REUSE_WINDOWS) * 2 * pg;
        let Ok(a) = map_file(fd, off, 2 * pg) else {
            return 1;
        };
        wrong += wrong_bytes(a, off, 2 * pg, 97);
        if munmap(a, 2 * pg).is_err() {
            return 1;
        }
    }
    println!("wrong bytes: {wrong}");
    (wrong != 0) as i32
}

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

struct Selftest {
    exe: PathBuf,
    lib: PathBuf,
    dir: PathBuf,
    runs: usize,
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
struct Line {
    name: &'static str,
    ok: bool,
    detail: String,
}

/// The checks, in order; each after the load check needs the library loaded.
fn checks(t: &mut Selftest) -> Vec<Line> {
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
    if let Some(why) = platform::would_kill(&t.exe, &t.lib) {
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
    lines
}

/// The machine, for the report.
fn system() -> String {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::uname(&mut u) };
    let field = |f: &[libc::c_char]| {
        let b: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    let (os, release, machine) = (field(&u.sysname), field(&u.release), field(&u.machine));
    #[cfg(not(target_os = "macos"))]
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| format!(" ({})", v.trim_matches('"')))
        })
        .unwrap_or_default();
    #[cfg(target_os = "macos")]
    let pretty = format!(
        " (macOS {}, {:?})",
        macos_version(),
        crate::macho::Host::this()
    );
    format!("{os} {release}{pretty}, {machine}")
}

#[cfg(target_os = "macos")]
fn macos_version() -> String {
    let mut buf = [0u8; 64];
    let Some(len) = crate::macho::sysctl(c"kern.osproductversion", &mut buf) else {
        return "?".into();
    };
    String::from_utf8_lossy(&buf[..len.saturating_sub(1)]).into_owned()
}

/// The library's architectures, from its header.
fn library_kind(lib: &Path) -> String {
    let head = crate::macho::head(lib).unwrap_or_default();
    if let Some(archs) = crate::macho::archs(&head) {
        return format!("Mach-O {}", crate::macho::names(&archs));
    }
    if head.starts_with(b"\x7fELF") && head.len() > 19 {
        let machine = u16::from_le_bytes([head[18], head[19]]);
        let name = match machine {
            62 => "x86_64".to_string(),
            183 => "aarch64".into(),
            3 => "i386".into(),
            m => format!("machine {m}"),
        };
        return format!("ELF {name}");
    }
    "not a library (neither ELF nor Mach-O)".into()
}

pub fn run(lib: Option<PathBuf>) -> ExitCode {
    let started = Instant::now();
    let lib = match crate::library::find_library(lib) {
        Ok(l) => l,
        Err(msg) => return crate::cli::fail(&format!("selftest: {msg}"), 1),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return crate::cli::fail(&format!("selftest: cannot find myself: {e}"), 1),
    };
    let dir = std::env::temp_dir().join(format!("munmapq-selftest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return crate::cli::fail(&format!("selftest: {}: {e}", dir.display()), 1);
    }
    let mut t = Selftest {
        exe,
        lib: lib.clone(),
        dir: dir.clone(),
        runs: 0,
    };
    let lines = checks(&mut t);
    let _ = std::fs::remove_dir_all(&dir);
    let all = lines.iter().all(|l| l.ok) && lines.len() == 4;
    let vars: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("MUNMAPQ_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!("munmapq selftest report (paste this into a bug report)");
    println!("  munmapq     {}", env!("CARGO_PKG_VERSION"));
    println!("  system      {}", system());
    println!("  library     {} ({})", lib.display(), library_kind(&lib));
    if !vars.is_empty() {
        println!("  variables   {}", vars.join(" "));
    }
    for l in &lines {
        let mark = if l.ok { "ok" } else { "FAILED" };
        println!("  {:<11} {mark}: {}", l.name, l.detail);
    }
    let skipped = 4 - lines.len();
    if skipped > 0 {
        println!("  ({skipped} check(s) not run: the library did not load)");
    }
    println!(
        "munmapq selftest: {} ({} processes, {:.1} s)",
        if all {
            "PASS: every check matched"
        } else {
            "FAIL: see the lines marked FAILED"
        },
        t.runs,
        started.elapsed().as_secs_f64()
    );
    if !all && LIB_NAME.ends_with(".dylib") {
        println!(
            "munmapq selftest: on macOS first see `munmapq doctor PROGRAM` for what dyld allows"
        );
    }
    ExitCode::from(if all { 0 } else { 1 })
}
