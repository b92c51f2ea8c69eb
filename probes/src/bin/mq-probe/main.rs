//! `mq-probe SCENARIO ARGS...`: programs the integration tests run with and
//! without libmunmapq. Exit status 0 means every check inside passed.

// pkey_mprotect, shmat, mseal: Linux calls.
#[cfg(target_os = "linux")]
mod attacks;
mod dropcost;
// RLIMIT_AS, vm.max_map_count, pthread barriers: Linux.
#[cfg(target_os = "linux")]
mod headroom;
// flock/OFD locks, mount namespaces, inotify, leases: Linux.
#[cfg(target_os = "linux")]
mod lastclose;
// fork, vm.max_map_count: Linux.
#[cfg(target_os = "linux")]
mod cliffs;
// mount flags, personality, hugetlbfs, /proc's names: Linux.
#[cfg(target_os = "linux")]
mod context;
// syscall numbers, shm_unlink, mbind, process_madvise: Linux.
#[cfg(target_os = "linux")]
mod pasthooks;
mod rewrite;
mod stress;

use munmapq_check::{invariants, random, sys};
use munmapq_probes::repo;

fn arg(args: &[String], i: usize, default: usize) -> usize {
    args.get(i)
        .map(|a| a.parse().expect("number"))
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = args.get(1).cloned().unwrap_or_default();
    // The scenario's numbers: argument i, or its default.
    let n = |i, default| arg(&args, i, default);
    let code = match args.first().map(String::as_str) {
        Some("mkfile") => {
            sys::make_file(&file, n(2, 256));
            0
        }
        Some("fast-import") => {
            let out = std::io::stdout();
            let mut w = std::io::BufWriter::new(out.lock());
            repo::fast_import(n(1, 1000), n(2, 400), &mut w).expect("write stream");
            0
        }
        Some("fast-import-big") => {
            let out = std::io::stdout();
            let mut w = std::io::BufWriter::new(out.lock());
            repo::fast_import_big(n(1, 3000), n(2, 1000), n(3, 200), &mut w).expect("write stream");
            0
        }
        #[cfg(target_os = "linux")]
        Some("as-room") => {
            headroom::as_room(&file, n(2, 12), n(3, 3072), n(4, 10));
            0
        }
        #[cfg(target_os = "linux")]
        Some("as-headroom") => {
            headroom::as_headroom(&file, n(2, 3072));
            0
        }
        #[cfg(target_os = "linux")]
        Some("map-room") => {
            headroom::map_room(&file, n(2, 150), n(3, 100), n(4, 50));
            0
        }
        Some("random") => random::run(&file, n(2, 1) as u64, n(3, 200)),
        Some("invariants") => {
            invariants::run(&file);
            0
        }
        #[cfg(target_os = "linux")]
        Some("attacks") => {
            attacks::run(&file, args.get(2).map(String::as_str));
            0
        }
        #[cfg(target_os = "linux")]
        Some("last-close") => last_close(&args),
        #[cfg(target_os = "linux")]
        Some("context") => context(&args),
        #[cfg(target_os = "linux")]
        Some("past-hooks") => past_hooks(&args),
        Some("drop-cost") => dropcost::run(&file, n(2, 4), n(3, 10000)),
        Some("cycle") => stress::cycle(
            &file,
            n(2, 1000),
            n(3, 64),
            args.get(4).is_some_and(|a| a == "leak"),
        ),
        Some("threads") => stress::threads(&file, n(2, 4), n(3, 10000)),
        Some("forks") => stress::forks(&file, n(2, 100)),
        Some("rewrite") => rewrite::run(&file, n(2, 6)),
        Some("signals") => stress::signals(&file, n(2, 100000)),
        _ => {
            eprintln!("usage: mq-probe mkfile|fast-import|fast-import-big|as-room|as-headroom|map-room|random|invariants|attacks|last-close|cycle|threads|forks|signals|rewrite FILE [N...]");
            2
        }
    };
    std::process::exit(code);
}

/// `mq-probe past-hooks SCENARIO DIR|FILE [N M]`.
#[cfg(target_os = "linux")]
fn past_hooks(args: &[String]) -> i32 {
    let at = args.get(2).map(String::as_str).unwrap_or(".");
    match args.get(1).map(String::as_str) {
        Some("raw-unlink") => pasthooks::raw_unlink(at),
        Some("shm-unlink") => pasthooks::shm_unlink(),
        Some("raw-mremap") => pasthooks::raw_mremap(at),
        Some("raw-calls") => pasthooks::raw_calls(at),
        Some("mbind") => pasthooks::mbind(at),
        Some("process-madvise") => pasthooks::process_madvise_self(at),
        Some("busy-unlink") => pasthooks::busy_unlink(at, arg(args, 3, 4), arg(args, 4, 500)),
        Some("busy-mlockall") => pasthooks::busy_whole(at, "mlockall", arg(args, 3, 300)),
        Some("busy-process-madvise") => {
            pasthooks::busy_whole(at, "process-madvise", arg(args, 3, 300))
        }
        Some("near-map-count") => {
            cliffs::near_map_count(at, arg(args, 3, 65000), arg(args, 4, 50000))
        }
        Some("fork-queue") => {
            let how = args.get(5).map(String::as_str).unwrap_or("fork");
            cliffs::fork_with_a_full_queue(at, arg(args, 3, 4000), arg(args, 4, 20), how)
        }
        _ => {
            eprintln!("usage: mq-probe past-hooks raw-unlink|shm-unlink|raw-mremap|raw-calls|mbind|process-madvise|busy-unlink|busy-mlockall|busy-process-madvise|fork-queue|near-map-count DIR|FILE [N M [fork|_Fork|syscall|clone]]");
            return 2;
        }
    }
    0
}

/// `mq-probe context SCENARIO DIR`.
#[cfg(target_os = "linux")]
fn context(args: &[String]) -> i32 {
    let at = args.get(2).map(String::as_str).unwrap_or(".");
    match args.get(1).map(String::as_str) {
        Some("remount") => context::remount(at),
        Some("personality") => context::personality(at),
        Some("hugetlbfs") => context::hugetlbfs(at),
        Some("hard-links") => context::hard_links(at),
        _ => {
            eprintln!("usage: mq-probe context remount|personality|hugetlbfs|hard-links DIR");
            return 2;
        }
    }
    0
}

/// `mq-probe last-close SCENARIO DIR|FILE [ARG]`.
#[cfg(target_os = "linux")]
fn last_close(args: &[String]) -> i32 {
    let at = args.get(2).map(String::as_str).unwrap_or(".");
    let extra = args.get(3).map(String::as_str).unwrap_or("");
    match args.get(1).map(String::as_str) {
        Some("flock") => lastclose::locks(at, "flock"),
        Some("ofd") => lastclose::locks(at, "ofd"),
        Some("exec") => lastclose::exec_written(at),
        Some("tmpfs-space") => lastclose::tmpfs_space(at),
        Some("tmpfs-umount") => lastclose::tmpfs_umount(at),
        Some("busy-umount") => lastclose::busy_umount(at),
        Some("noexec") => lastclose::noexec(at),
        Some("inotify") => lastclose::inotify(at),
        Some("lease") => lastclose::lease(at),
        Some("shm-space") => lastclose::shm_space(at),
        Some("maps-name") => lastclose::maps_name_after_unlink(at),
        Some("rlimit-malloc") => lastclose::rlimit_lowered(at, "malloc"),
        Some("rlimit-map") => lastclose::rlimit_lowered(at, "map"),
        Some("fork") => return lastclose::fork_queued(at, extra, arg(args, 4, 300)),
        _ => {
            eprintln!("usage: mq-probe last-close flock|ofd|exec|tmpfs-space|tmpfs-umount|busy-umount|noexec|inotify|lease|shm-space|maps-name|rlimit-malloc|rlimit-map|fork DIR|FILE [OTHER N]");
            return 2;
        }
    }
    0
}
