//! The child side of `munmapq selftest`: `munmapq __check WHAT ARGS...`,
//! run with and without the library.

use std::process::ExitCode;

/// Map/unmap cycles over `REUSE_WINDOWS` windows in the reuse check.
pub(super) const REUSE_CYCLES: usize = 400;
pub(super) const REUSE_WINDOWS: usize = 8;

/// `munmapq __check WHAT ARGS...`: the child side. Answers its exit status.
pub fn child(args: &[String]) -> ExitCode {
    use munmapq_check::{invariants, random, sys};
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let num = |i: usize| arg(i).parse::<usize>().unwrap_or(0);
    let code = match arg(0).as_str() {
        "load" => 0,
        "mkfile" => {
            sys::make_file(&arg(1), num(2));
            0
        }
        "invariants" => {
            invariants::run(&arg(1));
            0
        }
        "random" => random::run(&arg(1), num(2) as u64, num(3)),
        "reuse" => reuse_cycles(&arg(1)),
        "names" => lose_names(&arg(1)),
        _ => 2,
    };
    ExitCode::from(code as u8)
}

/// Maps window `i % REUSE_WINDOWS` of the file again and again, checking
/// its bytes: with the library most maps are answered from the queue.
fn reuse_cycles(file: &str) -> i32 {
    use munmapq_check::sys::*;
    let pg = page();
    let fd = open(file, libc::O_RDONLY);
    if fd < 0 {
        return 1;
    }
    let mut wrong = 0;
    for i in 0..REUSE_CYCLES {
        let off = (i % REUSE_WINDOWS) * 2 * pg;
        let Ok(a) = map_file(fd, off, 2 * pg) else {
            return 1;
        };
        wrong += wrong_bytes(a, off, 2 * pg, 97);
        if munmap(a, 2 * pg).is_err() {
            return 1;
        }
    }
    println!("wrong bytes: {wrong}");
    (wrong != 0) as i32
}

/// Queues a mapping of a file (map/unmap cycles, so that the queue keeps
/// it) and unlinks the file, then does the same to a file another one is
/// renamed over; the descriptors stay open meanwhile, so that only the
/// unlink and rename hooks can release what is queued (on macOS a queued
/// mapping keeps the vnode in use: the file's space, an unmount).
fn lose_names(dir: &str) -> i32 {
    use munmapq_check::sys::*;
    let pg = page();
    let (a, b, c) = (
        format!("{dir}/names-a"),
        format!("{dir}/names-b"),
        format!("{dir}/names-c"),
    );
    let queue_some = |file: &str| -> Option<i32> {
        make_file(file, 8);
        let fd = open(file, libc::O_RDONLY);
        for i in 0..REUSE_CYCLES / 4 {
            let off = (i % 2) * 2 * pg;
            let m = map_file(fd, off, 2 * pg).ok()?;
            if wrong_bytes(m, off, 2 * pg, 97) != 0 || munmap(m, 2 * pg).is_err() {
                return None;
            }
        }
        (fd >= 0).then_some(fd)
    };
    let Some(fa) = queue_some(&a) else { return 1 };
    let unlinked = std::fs::remove_file(&a).is_ok();
    let Some(fb) = queue_some(&b) else { return 1 };
    make_file(&c, 1);
    let renamed = std::fs::rename(&c, &b).is_ok();
    close(fa);
    close(fb);
    let _ = std::fs::remove_file(&b);
    println!("unlinked: {unlinked}, renamed over: {renamed}");
    !(unlinked && renamed) as i32
}
