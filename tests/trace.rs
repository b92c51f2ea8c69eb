//! `MUNMAPQ_TRACE` and `mq-replay`: a real run's trace, replayed through the
//! core engine on a fake address space, gives the real run's counters; a
//! trace written by many processes and threads holds whole records only.
#![cfg(target_os = "linux")] // LD_PRELOAD: Linux only here

mod common;
use common::*;
use munmapq_core::stats::{parse_line, Counter, COUNTERS};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use munmapq_core::trace::{Record, KIND_LOCK_ALL, KIND_MMAP, KIND_MUNMAP, RECORD_BYTES as RECORD};

fn git(repo: &Path) -> Command {
    git_at("git", repo, repo)
}

/// `mq-replay TRACE --stats POLICY`: the counters of the replay, summed
/// over processes.
fn replay_counters(trace: &Path, policy: &str, env: &[(&str, &str)]) -> [u64; COUNTERS] {
    let mut c = Command::new(target_dir().join("mq-replay"));
    c.arg(trace).args(["--stats", policy]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = output_within(&mut c, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sum = [0u64; COUNTERS];
    for v in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(parse_line)
    {
        for i in 0..COUNTERS {
            sum[i] += v[i];
        }
    }
    sum
}

#[test]
fn replaying_a_git_trace_gives_the_real_runs_counters() {
    let dir = scratch("trace-git");
    let repo = dir.join("repo");
    probe_repo(&repo, 600, 200, git);
    // A small byte cap, so that eviction decides what is reused.
    for (policy, evict) in [("aged", "aged"), ("today", "oldest")] {
        let trace = dir.join(format!("{policy}.trace"));
        let trace_s = trace.to_string_lossy().into_owned();
        let env = [
            ("MUNMAPQ_MAX_BYTES", "256K"),
            ("MUNMAPQ_EVICT", evict),
            ("MUNMAPQ_TRACE", trace_s.as_str()),
        ];
        let mut cmd = git(&repo);
        cmd.args(TINY_WINDOWS).args(["log", "--raw"]);
        let real = run(&mut cmd, true, &env, Duration::from_secs(120));
        assert!(real.out.status.success(), "{}", real.stderr());
        assert_eq!(real.processes, 1);
        let size = std::fs::metadata(&trace).unwrap().len() as usize;
        assert_eq!(size % RECORD, 0, "whole records only");
        assert!(
            real.get(Counter::Flushes) > 2 && real.get(Counter::Reused) > 100,
            "{policy}: the run must evict and reuse to test anything: {:?}",
            real.counters
        );
        let replayed = replay_counters(&trace, policy, &env[..2]);
        for c in Counter::ALL {
            assert_eq!(
                replayed[*c as usize],
                real.get(*c),
                "{policy}: {} replayed vs real",
                c.key()
            );
        }
        let [mmaps, munmaps, reused, flushes] = real.counts([
            Counter::MmapSyscalls,
            Counter::MunmapSyscalls,
            Counter::Reused,
            Counter::Flushes,
        ]);
        eprintln!(
            "{policy}: real and replay agree: {} records, mmap_syscalls={mmaps} munmap_syscalls={munmaps} reused={reused} flushes={flushes}",
            size / RECORD,
        );
    }
}

#[test]
fn forked_children_and_threads_append_whole_records_under_their_own_pid() {
    let (dir, file) = scratch_with_data("trace-forks", 64);
    let trace = dir.join("forks.trace");
    let trace_s = trace.to_string_lossy().into_owned();
    let mut cmd = probe_cmd(&["forks", &file, "20"]);
    let ran = run(
        &mut cmd,
        true,
        &[("MUNMAPQ_TRACE", trace_s.as_str())],
        Duration::from_secs(120),
    );
    assert!(ran.out.status.success(), "{}", ran.stderr());
    let data = std::fs::read(&trace).unwrap();
    assert_eq!(data.len() % RECORD, 0, "whole records only");
    // Per pid: (mmap records, munmap records).
    let mut per_pid: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    for r in data.chunks_exact(RECORD) {
        let Record { kind, pid, .. } = Record::decode(r.try_into().unwrap());
        assert!(
            (KIND_MMAP..=KIND_LOCK_ALL).contains(&kind),
            "record kind {kind}"
        );
        let e = per_pid.entry(pid).or_default();
        match kind {
            KIND_MMAP => e.0 += 1,
            KIND_MUNMAP => e.1 += 1,
            _ => {}
        }
    }
    assert_eq!(per_pid.len(), 21, "the parent and 20 children: {per_pid:?}");
    // Each child maps and unmaps 200 windows, all of them traced.
    let children = per_pid.values().filter(|&&c| c == (200, 200)).count();
    assert_eq!(children, 20, "{per_pid:?}");
    println!(
        "trace: 20 forked children and the parent in one trace: {} whole records, each child's 200 maps and 200 unmaps under its own pid",
        data.len() / RECORD
    );
}
