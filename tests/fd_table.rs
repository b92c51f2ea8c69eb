//! What munmapq keeps per descriptor (which ones mappings were made
//! through, what `F_GETFL` said) describes the
//! process's descriptor table, and a lock belongs to the open file
//! description. Each scenario runs without and with the library, under
//! the defaults and `MUNMAPQ_MAX_ENTRIES=1` (`common::same_as_without`).
//!
//! - `tests/c/fdtable.c`: hooks running on another table, a vfork child's
//!   (Python's `subprocess`, or `vfork` + `close_range`/`closefrom`/
//!   `close`/`dup2` + `execve`) or a thread's after `unshare(CLONE_FILES)`,
//!   must neither clear the process's records (then the parent's map,
//!   close and unmap leave the file locked) nor teach it what their own
//!   numbers name (then the parent's write-only descriptor gets a mapping
//!   where the kernel says EACCES).
//! - `tests/c/fdlocks.c`: a close-type call that fails closes nothing and
//!   must clear nothing; a lock taken through a copy munmapq did not see
//!   made (SCM_RIGHTS to itself, `pidfd_getfd` on itself) or by a fork
//!   child through its inherited descriptor must be released at the last
//!   close all the same (every live mapping is forgotten at its
//!   descriptor's close, and munmapq watches no lock call); so must one
//!   taken through libc's `syscall` (`SYS_flock`, `SYS_fcntl` with
//!   `F_OFD_SETLK`) or carried by a copy made there (`SYS_dup`, `SYS_fcntl`
//!   with `F_DUPFD`), and one taken, or a copy made, by the `syscall`
//!   instruction itself, past libc.
//! - `tests/c/cancelclose.c`: a close cancelled at its entry, an fclose
//!   cancelled at its flush, and an fclose with nothing to flush (no
//!   cancellation point in glibc's).
//! - `tests/c/fclose.c`: an fclose left without returning (by a cookie
//!   stream's write function, by `longjmp`) leaves nothing of the hook's
//!   registered or undone, and an fclose of a stream with no descriptor
//!   keeps errno.
//! - `tests/c/aliases.c`: glibc's other names of hooked functions
//!   (`__close`, `__dup2`, `_IO_fclose`, `__vfork`, `__clone`) act as the
//!   plain names do.
//!
//! The library on main (4781e2d) fails every one: "round 0: Resource
//! temporarily unavailable" (the lock still held after the last close),
//! or "mmap through the write-only descriptor succeeded".
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::trace::{Record, KIND_CLOSE, RECORD_BYTES};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A run killed after this is a hang.
const LIMIT: Duration = Duration::from_secs(30);

const GRANTED: &str = "round 0: lock granted\nround 1: lock granted\nround 2: lock granted\n";

/// `tests/c/PROGRAM.c DIR ARGS...`, the same without and with the library;
/// answers the runs with it.
fn scenario(program: &str, args: &[&str], expect: &str) -> Vec<Ran> {
    let name = format!("{program}-{}", args.join("-"));
    let build = scratch(&name);
    let exe = c_program(program, &build);
    let mut runs = Vec::new();
    for r in same_as_without(
        &name,
        |dir: &Path| {
            let mut c = Command::new(&exe);
            c.arg(dir).args(args);
            c
        },
        &[],
        LIMIT,
    ) {
        assert_contains(&r.out.stdout, expect);
        runs.push(r);
    }
    runs
}

#[test]
fn a_vfork_childs_close_range_leaves_the_parents_last_close() {
    scenario("fdtable", &["lock", "close_range"], GRANTED);
}

#[test]
fn a_vfork_childs_closefrom_leaves_the_parents_last_close() {
    scenario("fdtable", &["lock", "closefrom"], GRANTED);
}

#[test]
fn a_vfork_childs_close_leaves_the_parents_last_close() {
    scenario("fdtable", &["lock", "close"], GRANTED);
}

#[test]
fn a_vfork_childs_dup2_leaves_the_parents_last_close() {
    scenario("fdtable", &["lock", "dup2"], GRANTED);
}

#[test]
fn an_unshared_threads_close_leaves_the_process_last_close() {
    scenario("fdtable", &["lock", "unshare"], GRANTED);
}

const EACCES: &str = "mmap through the write-only descriptor: Permission denied\n";

#[test]
fn a_vfork_child_reopening_a_number_teaches_the_parent_nothing() {
    scenario("fdtable", &["reopen", "vfork"], EACCES);
}

#[test]
fn an_unshared_thread_reopening_a_number_teaches_the_process_nothing() {
    scenario("fdtable", &["reopen", "unshare"], EACCES);
}

/// Python 3.10+'s `subprocess` (vfork, then `close_range` in the child)
/// between a flock and a map, close and unmap. The system's Python: a
/// build that does not use vfork shows nothing.
#[test]
fn python_subprocess_between_a_flock_and_a_map_leaves_no_lock() {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(python) = python else {
        println!("SKIPPED: no python3");
        return;
    };
    let script = r#"
import fcntl, mmap, os, subprocess, sys
path = os.path.join(sys.argv[1], "locked")
with open(path, "wb") as f:
    f.write(b"x" * 65536)
for round in range(3):
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    subprocess.run(["/bin/true"], check=True)
    m = mmap.mmap(fd, 16384, mmap.MAP_PRIVATE, mmap.PROT_READ)
    os.close(fd)
    m.close()
    other = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("round", round, "lock granted")
    except BlockingIOError:
        print("round", round, "EAGAIN: the lock is still held")
    os.close(other)
"#;
    for r in same_as_without(
        "python-subprocess-flock",
        |dir: &Path| {
            let mut c = Command::new(python);
            c.args(["-c", script]).arg(dir);
            c
        },
        &[],
        LIMIT,
    ) {
        assert_contains(&r.out.stdout, "round 2 lock granted\n");
    }
}

#[test]
fn a_failed_dup2_keeps_the_last_close() {
    scenario("fdlocks", &["dup2-ebadf"], GRANTED);
}

#[test]
fn a_failed_dup3_keeps_the_last_close() {
    scenario("fdlocks", &["dup3-flags"], GRANTED);
}

#[test]
fn a_failed_close_range_keeps_the_last_close() {
    scenario("fdlocks", &["range-flags"], GRANTED);
}

#[test]
fn a_failed_syscall_dup3_keeps_the_last_close() {
    scenario("fdlocks", &["syscall-dup3"], GRANTED);
}

#[test]
fn a_lock_taken_before_an_scm_rights_copy_is_released_at_the_last_close() {
    scenario("fdlocks", &["scm-rights"], GRANTED);
}

#[test]
fn a_lock_taken_before_a_pidfd_getfd_copy_is_released_at_the_last_close() {
    scenario("fdlocks", &["pidfd-getfd"], GRANTED);
}

#[test]
fn a_fork_childs_flock_is_released_at_the_parents_last_close() {
    scenario("fdlocks", &["fork-flock"], GRANTED);
}

#[test]
fn a_flock_by_syscall_is_released_at_the_last_close() {
    scenario("fdlocks", &["sys-flock"], GRANTED);
}

#[test]
fn an_ofd_lock_by_syscall_is_released_at_the_last_close() {
    scenario("fdlocks", &["sys-ofd"], GRANTED);
}

#[test]
fn a_lock_carried_by_a_syscall_dup_is_released_at_the_last_close() {
    scenario("fdlocks", &["sys-dup"], GRANTED);
}

#[test]
fn a_lock_carried_by_a_syscall_f_dupfd_is_released_at_the_last_close() {
    scenario("fdlocks", &["sys-dupfd"], GRANTED);
}

/// Locks no hook sees, taken by the `syscall` instruction (Rust's rustix):
/// the small window is forgotten at the close (its munmap goes to the
/// kernel), the large one is kept only where the kernel, asked at the
/// close, lists no lock. The library on 8c6216e did not ask at the close
/// of a description it took for the process's alone (rounds 1 and 2:
/// "Resource temporarily unavailable").
#[test]
fn a_flock_past_libc_is_released_at_the_last_close() {
    scenario("fdlocks", &["raw-flock"], GRANTED);
}

#[test]
fn a_flock_past_libc_on_a_large_mapping_is_released_at_the_last_close() {
    scenario("fdlocks", &["raw-flock-large"], GRANTED);
}

#[test]
fn an_ofd_lock_past_libc_is_released_at_the_last_close() {
    scenario("fdlocks", &["raw-ofd"], GRANTED);
}

#[test]
fn a_lock_carried_by_a_dup_past_libc_is_released_at_the_last_close() {
    scenario("fdlocks", &["raw-dup"], GRANTED);
}

/// `tests/c/cancelclose.c`: a thread cancelled at the entry of `close()`
/// leaves the descriptor open. The library at d02eb11 had cleared its
/// records before glibc acted on the request: the lock taken afterwards
/// stayed with the queued mapping ("round 0: Resource temporarily
/// unavailable").
#[test]
fn a_close_cancelled_at_its_entry_keeps_the_descriptors_records() {
    scenario("cancelclose", &[], GRANTED);
}

/// A thread cancelled at the entry of `close()` of a descriptor nothing was
/// mapped through, in a process with threads: the mappings later made
/// through its number must still be reused. The library at 23c01f1 left
/// that close's place in line under way (it never returned to the hook),
/// and tracked nothing through the number again ("reused 0").
#[test]
fn a_close_cancelled_at_its_entry_leaves_its_number_tracked() {
    every_run_reused(scenario("cancelclose", &["unrecorded-low"], "cycled\n"));
}

/// The same for number 4096, past the numbers with a place in line of
/// their own: the library at 23c01f1 tracked nothing again, through any
/// number.
#[test]
fn a_close_of_a_high_number_cancelled_at_its_entry_leaves_every_number_tracked() {
    every_run_reused(scenario("cancelclose", &["unrecorded-high"], "cycled\n"));
}

/// The same for `fclose` of a stream with a byte to flush: glibc acts on
/// the request at the flush's `write`, before it closes the descriptor.
/// The library at 23c01f1 left the close's place under way ("reused 0").
#[test]
fn an_fclose_cancelled_at_its_flush_leaves_its_number_tracked() {
    every_run_reused(scenario("cancelclose", &["unrecorded-fclose"], "cycled\n"));
}

/// A thread with a cancellation pending that calls `fclose` of a stream
/// with nothing to flush is not cancelled there (glibc's `fclose` then
/// reaches no cancellation point), and the descriptor is closed. The
/// library at d58e387 acted on the request at the hook's entry ("cancelled,
/// the descriptor open").
#[test]
fn an_fclose_with_nothing_to_flush_is_no_cancellation_point() {
    scenario(
        "cancelclose",
        &["fclose-unflushed"],
        "not cancelled, the descriptor closed\n",
    );
}

/// The same where a window was mapped through the stream's descriptor:
/// the library at 23c01f1 acted on the request at the hook's entry.
#[test]
fn an_fclose_of_a_mapped_descriptor_with_nothing_to_flush_is_no_cancellation_point() {
    scenario(
        "cancelclose",
        &["fclose-unflushed-mapped"],
        "not cancelled, the descriptor closed\n",
    );
}

/// A cookie stream's write function that leaves `fclose` by `setcontext`
/// (as a coroutine switching stacks would), then, at the same depth, one
/// that calls `pthread_exit`. The library at 857ea23 registered its
/// cleanup handler across the program's write function: left there, it
/// stayed registered, the next `fclose` registered the same frame over it
/// (linked to itself), and the thread's exit ran the handler for ever.
#[test]
fn an_fclose_left_by_a_cookie_streams_write_leaves_no_handler_behind() {
    scenario("fclose", &["setcontext"], "the thread exited\n");
}

/// glibc's `fileno` sets EBADF for a stream with no descriptor: the
/// library at 857ea23 asked it outside the errno it keeps, and a
/// successful `fclose` of a `fopencookie` or `fmemopen` stream left errno 9.
#[test]
fn an_fclose_of_a_stream_with_no_descriptor_keeps_errno() {
    scenario(
        "fclose",
        &["errno"],
        "cookie stream: fclose 0, errno 0\nmemory stream: fclose 0, errno 0\n",
    );
}

/// An `fclose` left by `longjmp` after glibc closed the descriptor (from
/// the program's own `free`): glibc's `longjmp` runs the hook's cleanup
/// handler, which must tell the engine the descriptor was closed. The
/// library at 857ea23 told it the close had failed (the trace's close
/// record said -1), giving a closed number back its records.
#[test]
fn an_fclose_left_by_longjmp_after_its_close_is_told_as_a_close() {
    let dir = scratch("fclose-longjmp");
    let exe = c_program("fclose", &dir);
    let trace = dir.join("trace");
    let trace_s = trace.to_string_lossy().into_owned();
    let r = run(
        Command::new(&exe).arg(&*dir).arg("longjmp"),
        true,
        &[("MUNMAPQ_TRACE", &trace_s)],
        LIMIT,
    );
    assert!(r.out.status.success(), "{}{}", r.stdout(), r.stderr());
    assert_contains(&r.out.stdout, "closed\n");
    let bytes = std::fs::read(&trace).expect("the trace");
    let closes: Vec<Record> = bytes
        .chunks_exact(RECORD_BYTES)
        .map(|b| Record::decode(b.try_into().expect("one record")))
        .filter(|r| r.kind == KIND_CLOSE)
        .collect();
    assert!(!closes.is_empty(), "no close traced");
    for c in &closes {
        assert_eq!(c.result, 0, "a close told as failed: {c:?}");
    }
}

/// The same where the program opened the file again (taking the closed
/// number) before the jump: the handler must not give that number the
/// closed open file's records. The library at a759ece asked the kernel
/// whether the number was open and, told it was, gave them back: a live
/// window made through the old open file was queued at its munmap and
/// handed to a mmap through the new one, whose lock then went at its
/// close though that window was still mapped ("lock granted").
#[test]
fn an_fclose_left_by_longjmp_after_its_number_was_opened_again_gives_it_nothing() {
    scenario("fclose", &["longjmp-reopen"], "lock held\n");
}

// glibc's other names of the hooked functions, exported at a public version. The
// library at d5088f6 exported none of them: "lock held: Resource
// temporarily unavailable" (the queued window kept the closed open file's
// lock, or the child's queue kept its lock past its exit), and "mmap:
// mapped" where the kernel says EACCES.

#[test]
fn double_underscore_close_releases_the_queued_window_first() {
    scenario("aliases", &["close"], "lock granted\n");
}

#[test]
fn double_underscore_dup2_releases_the_queued_window_first() {
    scenario("aliases", &["dup2"], "lock granted\n");
}

#[test]
fn double_underscore_dup2_onto_a_number_voids_what_it_was_known_as() {
    scenario("aliases", &["dup2-wronly"], "mmap: Permission denied\n");
}

#[test]
fn io_fclose_releases_the_queued_window_first() {
    scenario("aliases", &["fclose"], "lock granted\n");
}

#[test]
fn a_double_underscore_vfork_childs_mappings_are_not_the_parents() {
    scenario("aliases", &["vfork"], "lock granted\n");
}

#[test]
fn a_double_underscore_clone_vm_childs_mappings_are_not_the_parents() {
    scenario("aliases", &["clone"], "lock granted\n");
}

/// Each run's maps of one window after the cancelled close were answered
/// from the queue (a scenario this machine cannot run has no runs).
fn every_run_reused(runs: Vec<Ran>) {
    for r in runs {
        let reused = r.get(munmapq_core::stats::Counter::Reused);
        assert!(reused > 0, "reused {reused}:\n{}{}", r.stdout(), r.stderr());
    }
}

/// glibc's `clone(CLONE_VM | CLONE_VFORK)` (not `vfork`): its child runs in
/// the parent's memory on a copy of the table. The library at d02eb11 let
/// it write the parent's records ("mmap through the write-only descriptor
/// succeeded").
#[test]
fn a_clone_vm_childs_reopening_a_number_teaches_the_parent_nothing() {
    scenario("fdtable", &["reopen", "clone"], EACCES);
}

#[test]
fn a_clone_vm_childs_close_leaves_the_parents_last_close() {
    scenario("fdtable", &["lock", "clone"], GRANTED);
}

/// Children of glibc's `clone()` and `_Fork()`, which run no atfork
/// handler: the library at d02eb11 took the parent's descriptions for its
/// own alone, and the child's lock stayed with the queued mapping.
#[test]
fn a_clone_childs_flock_is_released_at_the_parents_last_close() {
    scenario("fdlocks", &["clone-flock"], GRANTED);
}

#[test]
fn an_underscore_fork_childs_flock_is_released_at_the_parents_last_close() {
    scenario("fdlocks", &["_fork-flock"], GRANTED);
}
