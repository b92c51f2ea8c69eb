//! What the library costs per call, in exact counts: `scripts/bench-calls.sh`
//! runs the same programs with and without it under callgrind, at two sizes
//! so that the load cancels out, and prints the library's instructions and
//! locked instructions (atomic read-modify-writes) per call. This test
//! holds them under the ceilings below.
//!
//! The library is measured as the launcher ships it (built here, link-time
//! optimised), or `MUNMAPQ_TEST_LIB`. Skips, printing SKIPPED, where
//! valgrind, a C compiler or git is missing.
//!
//! The ceilings are where the library stands, not where it is meant to
//! end: a call passing straight by should cost at most 60 instructions, a
//! reuse 500 and a window of `git log` 600 (BENCHMARKS.md, per call).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

/// One row's ceilings: instructions, then locked instructions, per call.
struct Ceiling {
    row: &'static str,
    instructions: f64,
    locked: f64,
}

const CEILINGS: [Ceiling; 3] = [
    // A reuse takes the table twice (one compare-and-swap each) and lets
    // it go twice (one swap each, so that a record made just as the
    // holder lets go is seen by one of them): about 735 instructions. Its
    // calls leave the hooks' plain ways at once, on the gate word that
    // says something is queued; the mmap's way is told once, its kind
    // the queue takes out of line with its length, descriptor and offset
    // alone; a deferral reads whether the counters are read once, finds
    // its entry by slot number, and asks the resident budget with one
    // compare (`core/src/sizing.rs`'s `warm_fits`); the table's bucket is
    // hashed from the file's identity the mmap has already. The library
    // of ac042bb: 851; of 7dd85b3: 856; of 95ca34b: 1,005 and 7.
    Ceiling {
        row: "reuse",
        instructions: 742.0,
        locked: 4.0,
    },
    // A loose object read as git reads one (open, mmap, close, munmap),
    // every call passing by: about 85 instructions, and one locked add,
    // the close's place in line (`core/src/close_seq.rs`). With nothing
    // queued, traced or counted (one word, `core/src/gate.rs`), mmap is told
    // from its arguments (the gate and the address by one test) and made
    // with one bound read after it (38),
    // munmap is a jump to the real function (8), and close takes a lane of
    // its own out of line (6 and 33), told by one byte that says at once
    // one thread, on the process's table, untraced (`table_owner.rs`). A
    // real function is called through its slot with no test: the slot
    // holds its stand-in until it is found (`linux/real.rs`). No hook
    // frame is recorded. The library of ac042bb: 96; of 7dd85b3: 109; of
    // b36efb9: 153 and 1; of 95ca34b: 449 and 4.
    Ceiling {
        row: "aside",
        instructions: 88.0,
        locked: 1.0,
    },
    // An mmap of `git log --raw` at 16 KiB windows: about 810, 4.4 locked
    // (2.3 before the release's swaps). The library of ac042bb: 927-930;
    // of 95ca34b: 1,083 and 7.5.
    Ceiling {
        row: "window",
        instructions: 820.0,
        locked: 5.0,
    },
];

fn library() -> PathBuf {
    if let Some(p) = std::env::var_os("MUNMAPQ_TEST_LIB") {
        return p.into();
    }
    release_build("lto", &["-p", "munmapq-cdylib"]).join("libmunmapq.so")
}

/// A table row's numbers: `| name | own | library's | locked |`.
fn row_numbers(line: &str) -> Option<(String, f64, f64)> {
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let [_, name, _, lib, locked, _] = cells.as_slice() else {
        return None;
    };
    let num = |s: &str| s.replace(',', "").parse::<f64>().ok();
    Some((name.to_string(), num(lib)?, num(locked)?))
}

#[test]
fn each_call_costs_no_more_than_its_ceiling() {
    for tool in ["valgrind", "cc", "git"] {
        if !have(tool) {
            eprintln!("SKIPPED: {tool} is not installed");
            return;
        }
    }
    let lib = library();
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/bench-calls.sh"))
        .arg(&lib)
        .current_dir(root)
        .output()
        .unwrap();
    let table = text(&out.stdout);
    assert!(
        out.status.success(),
        "bench-calls.sh: {}{table}",
        text(&out.stderr)
    );
    eprintln!("{table}");
    for c in CEILINGS {
        let (name, instructions, locked) = table
            .lines()
            .filter_map(row_numbers)
            .find(|(name, ..)| name.starts_with(c.row))
            .unwrap_or_else(|| panic!("no `{}` row in:\n{table}", c.row));
        assert!(
            instructions <= c.instructions && locked <= c.locked,
            "{name}: {instructions} instructions and {locked} locked per call, \
             ceilings {} and {}",
            c.instructions,
            c.locked
        );
    }
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}
