//! `mq-replay`: runs eviction policies on a trace recorded with
//! `MUNMAPQ_TRACE=path` and prints, per policy, misses (real mmaps of
//! eligible windows), eviction munmaps, peak queued bytes and misses/OPT.
//!
//!     mq-replay TRACE [--cap SIZE] [--stats POLICY] [--distances] [--rules linux|macos|macos-unmap]
//!
//! `today` (`MUNMAPQ_EVICT=oldest`), `aged` and `all` are the real core
//! engine on the core's fake kernel ([`engine_replay`]); `lru` (exact,
//! one munmap per evicted window) and `opt` (Belady: evict the window reused
//! furthest in the future) are models over the same window sequence, under
//! the byte cap the engine had at each call. Configuration variables
//! (`MUNMAPQ_MAX_BYTES`, ...) are read from the environment as the library
//! reads them; `--cap SIZE` fixes the byte cap. `--stats POLICY` prints that
//! policy's counters line as the library writes it at exit (per process).
//! `--distances` prints reuse-distance percentiles. `--rules macos` replays
//! as macOS on arm64 would run it ([`engine_replay::Rules::Macos`]: 16 KiB
//! pages, no `vm.max_map_count`, no resident budget; `macos-unmap`: as an
//! older library ran there, which kept the budget and, unable to drop
//! pages, unmapped over it). Under the
//! table it prints how many times a real munmap removed a file's last
//! mapping, the unmap macOS charges most for ([`lastmap`]), and how many
//! files are still mapped at the end (the exit tears those down), with
//! `today`'s policy and without munmapq.
//!
//! Each process (pid) is replayed on its own, from an empty queue. A forked
//! child really starts with its parent's queue (and the fork handler clears
//! the table only if it was locked), so a child that maps a window its parent
//! had queued can replay differently; exec'd programs and the usual
//! single-process traces replay exactly (tests/trace.rs). Calls a program
//! makes while another thread holds the table pass through in the real run;
//! the replay, single-threaded, has no contention.

mod engine_replay;
mod lastmap;
mod models;
mod trace;

use engine_replay::Rules;
use munmapq_core::config::{self, Config, System};
use munmapq_core::table::Evict;
use std::collections::BTreeMap;

fn config(cap: Option<u64>, rules: Rules) -> Config {
    let sys = System {
        max_map_count: match rules {
            Rules::Linux => std::fs::read_to_string("/proc/sys/vm/max_map_count")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
            Rules::Macos | Rules::MacosUnmap => None,
        },
        address_space_limit: None,
    };
    let env: BTreeMap<&'static str, Vec<u8>> = config::VARIABLES
        .iter()
        .filter_map(|(k, _)| std::env::var(k).ok().map(|v| (*k, v.into_bytes())))
        .collect();
    let mut cfg = config::parse(sys, |k| env.get(k).map(|v| v.as_slice()))
        .unwrap_or_else(|e| panic!("{}: accepts {}", e.var, e.accepts));
    if let Some(c) = cap {
        cfg.max_bytes = Some(c as usize);
    }
    cfg.enabled = true;
    cfg
}

/// Runs `f` on a thread with room for the engine's table on its stack.
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let path = args.first().expect("usage: mq-replay TRACE [--cap SIZE]");
    let cap = opt("--cap").map(|v| config::parse_size(v.as_bytes()).expect("--cap SIZE"));
    let stats_policy = opt("--stats");
    let rules = match opt("--rules").as_deref() {
        None | Some("linux") => Rules::Linux,
        Some("macos") => Rules::Macos,
        Some("macos-unmap") => Rules::MacosUnmap,
        Some(r) => panic!("--rules {r}: linux, macos or macos-unmap"),
    };
    // Window maps, and last-mapping unmaps (and files mapped at the end)
    // with `today` and without munmapq.
    let (mut window_maps, mut last_today, mut last_none) = (0u64, 0u64, 0u64);
    let (mut end_today, mut end_none) = (0u64, 0u64);
    let data = std::fs::read(path).expect("read trace");
    let by_pid = trace::by_process(&data);
    let mut totals: BTreeMap<&str, (u64, u64, u64, u64)> = BTreeMap::new();
    for (pid, recs) in by_pid {
        let recs = std::sync::Arc::new(recs);
        let mut caps = Vec::new();
        for (name, evict) in [
            ("today", Evict::Oldest),
            ("aged", Evict::Aged),
            ("all", Evict::All),
        ] {
            let mut cfg = config(cap, rules);
            cfg.evict = evict;
            let rc = recs.clone();
            let o = big_stack(move || engine_replay::run(&rc, cfg, pid, rules));
            if stats_policy.as_deref() == Some(name) {
                print!("{}", o.stats_line);
            }
            if name == "today" {
                caps = o.caps.clone();
                window_maps += o.window_maps;
                last_today += o.last_unmaps;
                end_today += o.mapped_at_end;
            }
            let t = totals.entry(name).or_default();
            t.0 += o.misses;
            t.1 += o.evict_munmaps;
            t.2 = t.2.max(o.peak_bytes);
            t.3 += o.deferred;
        }
        let mut off = config(cap, rules);
        off.enabled = false;
        let rc = recs.clone();
        let none = big_stack(move || engine_replay::run(&rc, off, pid, rules));
        last_none += none.last_unmaps;
        end_none += none.mapped_at_end;
        let windows = models::windows(&recs);
        let max_n = config(cap, rules).max_entries;
        for (name, o) in [
            ("lru", models::lru(&windows, &caps, max_n)),
            ("opt", models::opt(&windows, &caps, max_n)),
        ] {
            let t = totals.entry(name).or_default();
            t.0 += o.misses;
            t.1 += o.evict_munmaps;
            t.2 = t.2.max(o.peak_bytes);
            t.3 += o.deferred;
        }
        if args.iter().any(|a| a == "--distances") {
            let (n, distinct, p50, p95) = models::reuse_distances(&windows);
            println!(
                "pid {pid}: {n} window maps over {distinct} distinct windows; reuse distance p50 {:.2} MiB, p95 {:.2} MiB",
                p50 as f64 / 1048576.0,
                p95 as f64 / 1048576.0
            );
        }
    }
    if stats_policy.is_some() {
        return;
    }
    let opt_misses = totals.get("opt").map_or(1, |t| t.0.max(1));
    println!("| policy | misses (real mmaps) | eviction munmaps | peak queued MiB | deferred | misses / OPT | misses / LRU | eviction munmaps / deferred |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let lru = totals.get("lru").map_or(1, |t| t.0.max(1));
    for name in ["today", "aged", "all", "lru", "opt"] {
        let t = totals[name];
        println!(
            "| {name} | {} | {} | {:.1} | {} | {:.3} | {:.3} | {:.4} |",
            t.0,
            t.1,
            t.2 as f64 / 1048576.0,
            t.3,
            t.0 as f64 / opt_misses as f64,
            t.0 as f64 / lru as f64,
            t.1 as f64 / t.3.max(1) as f64
        );
    }
    let pct = |n: u64| 100.0 * n as f64 / window_maps.max(1) as f64;
    println!(
        "\nlast-mapping unmaps: {last_today} of {window_maps} window maps ({:.2}%) under {} rules, and {end_today} files mapped at exit; without munmapq: {last_none} ({:.2}%), and {end_none} at exit",
        pct(last_today),
        rules.name(),
        pct(last_none)
    );
}
