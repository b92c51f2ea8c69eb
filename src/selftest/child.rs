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
