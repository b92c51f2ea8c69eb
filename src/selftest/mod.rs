//! `munmapq selftest`: on the user's own machine, in seconds, does the
//! library the launcher would preload load, behave exactly as without it,
//! and reuse mappings? The checks run in child processes that are this
//! executable itself (`munmapq __check ...`, hidden), with and without the
//! library, so an installed munmapq needs nothing else. Prints a verdict
//! and a short report to paste into a bug report; exits 0 only if every
//! check matched.

mod checks;
mod child;

use crate::platform::LIB_NAME;
use crate::quote::quote_path;
use checks::{checks, Selftest, CHECKS};
pub use child::child;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

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
            // c_char is i8 on x86_64 and u8 on arm64: its byte either way.
            .map(|&c| c.to_ne_bytes()[0])
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
        Err(e) => {
            return crate::cli::fail(&format!("selftest: {}", e.msg), crate::cli::OWN_FAILURE)
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return crate::cli::fail(
                &format!("selftest: cannot find myself: {e}"),
                crate::cli::OWN_FAILURE,
            )
        }
    };
    let dir = std::env::temp_dir().join(format!("munmapq-selftest-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return crate::cli::fail(
            &format!("selftest: {}: {e}", quote_path(&dir)),
            crate::cli::OWN_FAILURE,
        );
    }
    let mut t = Selftest {
        exe,
        lib: lib.clone(),
        dir: dir.clone(),
        runs: 0,
    };
    let lines = checks(&mut t);
    let _ = std::fs::remove_dir_all(&dir);
    let all = lines.iter().all(|l| l.ok) && lines.len() == CHECKS;
    let vars: Vec<String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("MUNMAPQ_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!("munmapq selftest report (paste this into a bug report)");
    println!("  munmapq     {}", env!("CARGO_PKG_VERSION"));
    println!("  system      {}", system());
    println!(
        "  library     {} ({})",
        quote_path(&lib),
        library_kind(&lib)
    );
    if !vars.is_empty() {
        println!("  variables   {}", vars.join(" "));
    }
    for l in &lines {
        let mark = if l.ok { "ok" } else { "FAILED" };
        println!("  {:<11} {mark}: {}", l.name, l.detail);
    }
    let skipped = CHECKS - lines.len();
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
