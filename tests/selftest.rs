//! `munmapq selftest` through the real binary: the library built here
//! passes every check in well under 15 s; a library that is not libmunmapq,
//! or one that passes everything through, fails it with status 1.

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

fn selftest(lib: &std::path::Path, env: &[(&str, &str)]) -> (i32, String, Duration) {
    let mut c = Command::new(launcher());
    c.args(["selftest", "--lib"]).arg(lib);
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let out = output_within(&mut c, MINUTE);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text, start.elapsed())
}

#[test]
fn the_built_library_passes_in_seconds() {
    let (code, text, took) = selftest(&lib(), &[]);
    println!("{text}");
    assert_eq!(code, 0, "{text}");
    for check in ["load", "invariants", "random", "reuse", "names"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(check) && l.contains(" ok: ")),
            "{check} not ok:\n{text}"
        );
    }
    assert!(text.contains("PASS"), "{text}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

#[test]
fn a_sabotaged_library_fails() {
    // Loaded, but passing every call through: nothing deferred or reused.
    let (code, text, _) = selftest(&lib(), &[("MUNMAPQ_DISABLE", "1")]);
    println!("{text}");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("reuse       FAILED"), "{text}");
    assert!(text.contains("FAIL: see the lines marked FAILED"), "{text}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_foreign_library_fails_through_munmapq_lib() {
    // Another shared library under our name: it loads, but it is not libmunmapq.
    let dir = scratch("selftest-foreign");
    let foreign = dir.join(LIB_NAME);
    // This architecture's first: another's is refused before any check.
    let own = format!("/lib/{}-linux-gnu/libm.so.6", std::env::consts::ARCH);
    let libm = [
        own.as_str(),
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .expect("a libm to copy");
    std::fs::copy(libm, &foreign).unwrap();
    let out = output_within(
        Command::new(launcher())
            .arg("selftest")
            .env("MUNMAPQ_LIB", &foreign),
        MINUTE,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("load        FAILED"), "{text}");
    assert!(text.contains(&foreign.display().to_string()), "{text}");
    // Not a library at all: refused before any check, in one line.
    std::fs::write(&foreign, b"not a library").unwrap();
    let out = output_within(
        Command::new(launcher()).args(["selftest".as_ref(), "--lib".as_ref(), foreign.as_os_str()]),
        MINUTE,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("neither ELF nor Mach-O") && err.lines().count() == 1,
        "{err}"
    );
}
