//! What loading the library costs a process that never uses it, in exact
//! counts, above an empty preloaded library (`tests/c/empty_library.c`)
//! measured in the same run: user-space instructions of the whole process
//! (callgrind) for `/bin/true` and `ls /`, system calls (strace -f -c), and
//! minor page faults of `/bin/true` and of a program that never calls
//! malloc (wait4 of the child, the median of many runs: address
//! randomisation moves them by one or two). And a program that never calls
//! malloc (`tests/c/nomalloc.c`) still never starts the allocator: the
//! library of d02eb11 looked up names no object defines with `dlsym`,
//! whose error message is built with malloc (`getrandom` and two `brk`).
//!
//! The library is measured as the launcher ships it (built here, as the
//! launcher's build script builds it), or `MUNMAPQ_TEST_LIB`. `scripts/bench-load.sh` prints the same
//! counts for more programs and libraries side by side.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Most user-space instructions the library may add to a process's load
/// and exit above the empty library, in an environment of one variable
/// besides `LD_PRELOAD`. This library adds about 20,800 to `/bin/true` and
/// 23,200 to `ls /` (more objects after it to search): the walk of the
/// symbol tables that finds its functions costs about 225 instructions a
/// name, the loader's binding of its five imports (`__errno_location`,
/// `dl_iterate_phdr`, `memcpy`, `memmove`, `memset`) about 2,500.
/// libeatmydata, which resolves a few names with dlsym, adds 21,000; the
/// library of d02eb11 added 76,700 to `/bin/true`.
const MAX_INSTRUCTIONS: u64 = 25_000;

/// The system calls the library may add at load, each by name: the
/// anonymous mapping of its `.bss` (the engine's tables, which the loader
/// maps). Whether a seccomp filter was inherited (`prctl(PR_GET_SECCOMP)`)
/// is asked at the engine's first call of its own, not at load (the
/// library on 8c6216e asked every process at load).
const EXTRA_CALLS: [(&str, usize); 1] = [("mmap", 1)];

/// Most page faults the library may add at load (the median over `RUNS`):
/// +3 for `/bin/true` here, the median moving by one or two with the
/// address layout between machines.
const MAX_FAULTS: i64 = 6;
const RUNS: usize = 31;

/// The library as the launcher ships it (the release profile builds it as
/// build.rs builds the one it embeds: link-time optimisation, one codegen
/// unit), built here if need be; or `MUNMAPQ_TEST_LIB`.
fn release_library() -> PathBuf {
    if let Some(p) = std::env::var_os("MUNMAPQ_TEST_LIB") {
        return p.into();
    }
    release_build("lto", &["-p", "munmapq-cdylib"]).join("libmunmapq.so")
}

/// The empty library, built with the C compiler into `dir`.
fn empty_library(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/empty_library.c");
    let lib = dir.join("libempty.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("cc (the C compiler) must be installed");
    assert!(out.status.success(), "cc: {}", text(&out.stderr));
    lib
}

/// The two libraries compared: the empty one, then munmapq's.
fn libraries(dir: &Path) -> [PathBuf; 2] {
    [empty_library(dir), release_library()]
}

/// Callgrind's total of user-space instructions for `cmd` with `lib`
/// preloaded.
fn instructions(dir: &Path, lib: &Path, cmd: &[&str]) -> u64 {
    let out_file = dir.join("callgrind.out");
    let mut c = Command::new("valgrind");
    // The same environment on every machine: the library reads it once
    // (`environment.rs`), a few instructions a variable, and a CI runner
    // has a hundred more than a terminal.
    c.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .args(cmd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LD_PRELOAD", lib)
        .stdout(Stdio::null());
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "valgrind: {}", text(&out.stderr));
    let report = std::fs::read_to_string(&out_file).unwrap();
    report
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no totals in {}", out_file.display()))
}

/// The system calls of `cmd` with `lib` preloaded, by name (strace -f -c).
fn calls(dir: &Path, lib: &Path, cmd: &[&str]) -> BTreeMap<String, usize> {
    let log = dir.join("strace.out");
    let mut c = Command::new("strace");
    c.args(["-f", "-c", "-o"])
        .arg(&log)
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", lib.display()))
        .args(cmd)
        .stdout(Stdio::null());
    let out = output_within(&mut c, MINUTE);
    assert!(out.status.success(), "strace: {}", text(&out.stderr));
    let report = std::fs::read_to_string(&log).unwrap();
    // "% time seconds usecs/call calls [errors] syscall": the calls are the
    // fourth column, the name the last.
    report
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = *f.last()?;
            let n = f.get(3)?.parse().ok()?;
            (name != "total").then(|| (name.to_string(), n))
        })
        .collect()
}

/// The minor page faults of one run of `cmd` with `lib` preloaded.
// The child is reaped by wait4, which answers its resource usage.
#[allow(clippy::zombie_processes)]
fn faults_once(lib: &Path, cmd: &[&str]) -> i64 {
    let child = Command::new(cmd[0])
        .args(&cmd[1..])
        .env("LD_PRELOAD", lib)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // SAFETY: plain data, filled in by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status = 0;
    // SAFETY: waits for our own child, reaped here (never by `child`).
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, child.id() as i32, "wait4");
    assert_eq!(status, 0, "{cmd:?} failed");
    usage.ru_minflt
}

/// The median of `RUNS` runs' minor page faults.
fn faults(lib: &Path, cmd: &[&str]) -> i64 {
    let mut all: Vec<i64> = (0..RUNS).map(|_| faults_once(lib, cmd)).collect();
    all.sort_unstable();
    all[RUNS / 2]
}

#[test]
fn loading_the_library_costs_few_instructions() {
    let dir = scratch("load-instructions");
    let [empty, lib] = libraries(&dir);
    let mut over = Vec::new();
    for cmd in [&["/bin/true"][..], &["ls", "/"]] {
        let base = instructions(&dir, &empty, cmd);
        let with = instructions(&dir, &lib, cmd);
        let added = with as i64 - base as i64;
        println!(
            "{cmd:?}: {base} instructions with the empty library, {with} with munmapq ({added:+})"
        );
        if added > MAX_INSTRUCTIONS as i64 {
            over.push(format!("{cmd:?}: {added:+} instructions"));
        }
    }
    assert!(
        over.is_empty(),
        "more than {MAX_INSTRUCTIONS} instructions above the empty library: {over:?}"
    );
}

#[test]
fn loading_the_library_makes_only_its_one_system_call() {
    let dir = scratch("load-calls");
    let [empty, lib] = libraries(&dir);
    let nomalloc = c_program("nomalloc", &dir);
    let nomalloc = nomalloc.to_str().unwrap();
    for cmd in [&["/bin/true"][..], &["ls", "/"], &[nomalloc]] {
        let base = calls(&dir, &empty, cmd);
        let with = calls(&dir, &lib, cmd);
        let mut extra: BTreeMap<String, i64> = BTreeMap::new();
        for name in base.keys().chain(with.keys()) {
            let d = *with.get(name).unwrap_or(&0) as i64 - *base.get(name).unwrap_or(&0) as i64;
            if d != 0 {
                extra.insert(name.clone(), d);
            }
        }
        let total: i64 = extra.values().sum();
        println!("{cmd:?}: {total:+} system calls above the empty library: {extra:?}");
        let allowed: BTreeMap<String, i64> = EXTRA_CALLS
            .iter()
            .map(|&(name, n)| (name.to_string(), n as i64))
            .collect();
        assert_eq!(
            extra, allowed,
            "{cmd:?}: the system calls added at load (the empty library's: {base:?})"
        );
    }
}

#[test]
fn a_program_that_never_allocates_still_never_starts_the_allocator() {
    let dir = scratch("load-allocator");
    let [empty, lib] = libraries(&dir);
    let nomalloc = c_program("nomalloc", &dir);
    let cmd = [nomalloc.to_str().unwrap()];
    let base = calls(&dir, &empty, &cmd);
    let with = calls(&dir, &lib, &cmd);
    for name in ["brk", "getrandom"] {
        let (b, w) = (base.get(name).unwrap_or(&0), with.get(name).unwrap_or(&0));
        println!("{name}: {b} with the empty library, {w} with munmapq");
        assert_eq!(w, b, "{name}: the library started the allocator");
    }
}

#[test]
fn loading_the_library_costs_few_page_faults() {
    let dir = scratch("load-faults");
    let [empty, lib] = libraries(&dir);
    let nomalloc = c_program("nomalloc", &dir);
    let nomalloc = nomalloc.to_str().unwrap();
    // `ls /` is printed, not bounded: its closes and its stdio reach the
    // hooks, which touch the engine's records of those descriptors (a page
    // fault each the first time), a cost of the calls, not of the load.
    for (cmd, bounded) in [
        (&["/bin/true"][..], true),
        (&[nomalloc], true),
        (&["ls", "/"], false),
    ] {
        let base = faults(&empty, cmd);
        let with = faults(&lib, cmd);
        println!(
            "{cmd:?}: {base} minor faults with the empty library, {with} with munmapq ({:+}; medians of {RUNS})",
            with - base
        );
        assert!(
            !bounded || with - base <= MAX_FAULTS,
            "{cmd:?}: {:+} page faults above the empty library (at most {MAX_FAULTS})",
            with - base
        );
    }
}
