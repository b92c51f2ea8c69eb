//! Invariant 5: a malformed variable gets one line on stderr naming it and
//! what it accepts; the program runs exactly as without munmapq.
#![cfg(target_os = "linux")] // LD_PRELOAD, strace and /proc: Linux only

mod common;
use common::*;

#[test]
fn malformed_values_warn_once_and_pass_through() {
    let (_dir, file) = scratch_with_data("config", 64);
    let plain = run(&mut probe_cmd(&["invariants", &file]), false, &[], MINUTE);
    for (var, value, accepts) in [
        ("MUNMAPQ_MAX_ENTRIES", "lots", "an integer from 1 to 8192"),
        ("MUNMAPQ_MAX_BYTES", "-5", "a size"),
        ("MUNMAPQ_REUSE", "yes", "0 or 1"),
        ("MUNMAPQ_EVICT", "random", "oldest or all"),
        ("MUNMAPQ_DISABLE", "true", "0 or 1"),
        ("MUNMAPQ_STATS", "2", "0 or 1"),
    ] {
        let with = run(
            &mut probe_cmd(&["invariants", &file]),
            true,
            &[(var, value)],
            MINUTE,
        );
        let err = with.stderr();
        assert_eq!(err.lines().count(), 1, "{var}: {err}");
        assert!(
            err.contains(var) && err.contains(accepts) && err.contains(value),
            "{err}"
        );
        assert!(err.contains("passes through"), "{err}");
        assert_eq!(with.out.status.code(), plain.out.status.code());
        assert_eq!(with.out.stdout, plain.out.stdout, "{var}");
        // Pass-through really: nothing deferred.
        assert_eq!(with.get(munmapq_core::stats::Counter::Deferred), 0);
    }
    println!("config: 6 malformed variables: one line each naming it and what it accepts; output and status as without munmapq, nothing deferred");
}

#[test]
fn nothing_is_printed_without_a_problem() {
    let (_dir, file) = scratch_with_data("config-quiet", 64);
    let with = run(&mut probe_cmd(&["invariants", &file]), true, &[], MINUTE);
    assert!(with.out.stderr.is_empty(), "{}", with.stderr());
    println!("config: valid settings: nothing on stderr");
}

#[test]
fn disable_means_pure_pass_through() {
    let (_dir, file) = scratch_with_data("config-disable", 64);
    let probe = probe();
    let args = [probe.to_str().unwrap(), "cycle", &file, "2000", "64"];
    let env = [("MUNMAPQ_DISABLE", "1")];
    let munmaps = strace_count(&args, true, &env, "munmap");
    assert!(munmaps >= 2000);
    println!("config: MUNMAPQ_DISABLE=1: {munmaps} munmap syscalls for 2000 unmaps (strace): all passed through");
}
