//! A reuse is what a fresh mmap would be in what the kernel takes from the
//! call's context: a mount's flags changed in place, the thread's
//! personality, a file system whose mappings cannot wait in a queue
//! (hugetlbfs), the name the file was opened through (hard links, as
//! `/proc/self/maps` shows it). Each test runs one program (`mq-probe
//! context SCENARIO`, probes/src/bin/mq-probe/context.rs) without and with
//! the library, with the defaults and a one-entry queue, and requires the
//! same output (`common::same_as_without`) and the queue to have been used.
//! Scenarios that need a mount namespace or huge pages print `SKIPPED: why`
//! and pass where they cannot be made.
//!
//! At d02eb11 every one differed: a window queued before a remount kept
//! the exec permission of the old flags (`mprotect(PROT_EXEC)` succeeded
//! on a `noexec` mount, and failed once the mount was exec again); a
//! window queued before `personality(READ_IMPLIES_EXEC)` came back `r--p`
//! where a fresh one is `r-xp` (and one another thread made executable
//! by `mprotect(PROT_READ)` under it came back `r-xp`); a queued hugetlbfs mapping kept its huge
//! page reserved (`fallocate`: ENOSPC), and `munmap` of one small page of
//! it answered 0, not EINVAL; a window mapped through one hard link came
//! back named by it for the other.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Runs `mq-probe context NAME DIR` with and without the library; answers
/// the deferred and reused counts of the run with the defaults (None when
/// it was skipped).
fn scenario(name: &str) -> Option<(u64, u64)> {
    let runs = same_as_without(
        &format!("context-{name}"),
        |dir: &Path| probe_cmd(&["context", name, dir.to_str().unwrap()]),
        &[],
        LIMIT,
    );
    let first = runs.first()?;
    let counts = (first.get(Counter::Deferred), first.get(Counter::Reused));
    assert!(counts.0 > 0, "{name}: the queue was never used: {counts:?}");
    Some(counts)
}

#[test]
fn a_remount_changes_what_a_window_mapped_again_may_become() {
    if let Some((_, reused)) = scenario("remount") {
        assert!(
            reused > 0,
            "the window is still reused while nothing changes"
        );
    }
}

#[test]
fn read_implies_exec_applies_to_a_window_mapped_again() {
    if let Some((_, reused)) = scenario("personality") {
        assert!(
            reused > 0,
            "the window is still reused under one personality"
        );
    }
}

#[test]
fn proc_names_the_hard_link_mapped_through() {
    if let Some((_, reused)) = scenario("hard-links") {
        assert!(reused > 0, "the window is still reused through one name");
    }
}

/// Sets `vm.nr_hugepages` one higher while it lives, where no huge page
/// is free (root only; nothing changes otherwise).
struct OneHugePage(Option<String>);

impl OneHugePage {
    const KNOB: &str = "/proc/sys/vm/nr_hugepages";

    fn get() -> Self {
        let free = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| {
                l.strip_prefix("HugePages_Free:")
                    .map(|v| v.trim().to_string())
            });
        if free.as_deref() != Some("0") {
            return OneHugePage(None);
        }
        let Ok(old) = std::fs::read_to_string(Self::KNOB) else {
            return OneHugePage(None);
        };
        let Ok(n) = old.trim().parse::<u64>() else {
            return OneHugePage(None);
        };
        match std::fs::write(Self::KNOB, format!("{}\n", n + 1)) {
            Ok(()) => OneHugePage(Some(old)),
            Err(e) => {
                println!("vm.nr_hugepages not raised: {e}");
                OneHugePage(None)
            }
        }
    }
}

impl Drop for OneHugePage {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(Self::KNOB, old);
        }
    }
}

#[test]
fn hugetlbfs_files_are_not_queued() {
    let _page = OneHugePage::get();
    scenario("hugetlbfs");
}
