//! Programs built with AddressSanitizer: gcc's shared ASan runtime aborts
//! under any LD_PRELOAD unless `ASAN_OPTIONS=verify_asan_link_order=0`;
//! the doctor and the launcher say so, and what to do. Built here with
//! `cc -fsanitize=address` (gcc's libasan, which scripts/test.sh
//! installs); SKIPPED, with a line saying so, where it cannot be built.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Maps one page of its own executable 100 times.
const PROGRAM: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open("/proc/self/exe", O_RDONLY);
    long sum = 0;
    for (int i = 0; i < 100; i++) {
        char *p = mmap(0, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) return 2;
        sum += p[1];
        munmap(p, 4096);
    }
    printf("%ld\n", sum);
    return 0;
}
"#;

fn build(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join("m.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .ok()?;
    if !out.status.success() {
        println!(
            "SKIPPED: cc {flags:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        );
        return None;
    }
    // Built is not enough: the runtime must be there to run it.
    let ran = Command::new(&exe).output().ok()?;
    if !ran.status.success() {
        println!("SKIPPED: {name} does not run here without munmapq");
        return None;
    }
    Some(exe)
}

fn munmapq(args: &[&std::ffi::OsStr], asan_options: Option<&str>) -> Output {
    let mut c = Command::new(launcher());
    c.args(args).env_remove("ASAN_OPTIONS");
    if let Some(o) = asan_options {
        c.env("ASAN_OPTIONS", o);
    }
    output_within(&mut c, MINUTE)
}

#[test]
fn shared_asan_runtime_is_named_with_what_to_do() {
    let dir = scratch("asan-shared");
    let Some(exe) = build(&dir, "asan", &["-fsanitize=address", "-g"]) else {
        return;
    };
    let exe = exe.as_os_str();
    let out = munmapq(&["doctor".as_ref(), exe], None);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("AddressSanitizer (libasan.so") && said.contains("verify_asan_link_order=0"),
        "{said}"
    );
    let out = munmapq(&["doctor".as_ref(), exe], Some("verify_asan_link_order=0"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    // The launcher's line comes first; ASan then aborts the program.
    let out = munmapq(&[exe], None);
    let err = text(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.starts_with("munmapq: warning:")
            && first.contains("AddressSanitizer")
            && first.contains("verify_asan_link_order=0"),
        "{err}"
    );
    assert!(!out.status.success(), "{err}");

    // With the check off it runs, with munmapq, and says nothing.
    let stats = dir.join("stats");
    let out = output_within(
        Command::new(launcher())
            .args([
                "--stats=json".as_ref(),
                "--stats-out".as_ref(),
                stats.as_os_str(),
                exe,
            ])
            .env("ASAN_OPTIONS", "verify_asan_link_order=0"),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("AddressSanitizer"),
        "{}",
        text(&out.stderr)
    );
    let report = std::fs::read_to_string(&stats).unwrap();
    let reused: u64 = report
        .split("\"reused\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(reused > 0, "{report}");
    println!("ASan (shared runtime): doctor exit 1 naming it, 0 with verify_asan_link_order=0; launcher warns first, then the program aborts; with the option it runs with munmapq: {reused} of 100 mmaps reused");
}

#[test]
fn static_asan_runtime_is_named_and_loads() {
    let dir = scratch("asan-static");
    let Some(exe) = build(
        &dir,
        "asan-static",
        &["-fsanitize=address", "-static-libasan"],
    ) else {
        return;
    };
    let out = munmapq(&["doctor".as_ref(), exe.as_os_str()], None);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("static AddressSanitizer runtime"), "{said}");
    let out = munmapq(&[exe.as_os_str()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    println!("ASan (static runtime): doctor names it, exit 0; the launcher runs it without a word");
}
