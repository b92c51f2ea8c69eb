//! What the engine believes about a descriptor must be what the kernel
//! says: a number re-pointed between the engine's questions and the real
//! mmap (`close_seq.rs`), a hook running on another descriptor table
//! (`Os::fd_table`), a close that failed, a lock munmapq did not see taken.

use super::*;
use crate::os::FdTable;

/// Each test's own engine, for the fake's `racing` (a plain `fn`).
static REPOINTED: Engine = Engine::new();
static ASKED: Engine = Engine::new();

/// Another thread's `dup2` of file 77 onto `fd`, as the hooks report it.
fn dup2_other_file(e: &Engine, os: &FakeOs, fd: i32) {
    *os.racing.borrow_mut() = None;
    let c = e.closing(os, fd, fd);
    os.inode.borrow_mut()[fd as usize] = 77;
    e.closed(c, true);
}

#[test]
fn a_mapping_made_after_the_number_switched_files_is_not_recorded() {
    let os = started(&REPOINTED);
    let e = &REPOINTED;
    map_unmap(e, &os, 3, 0); // F_GETFL asked and kept for fd 3
                             // The dup2 lands between the statx and the real mmap of a miss.
    *os.racing.borrow_mut() = Some(|os, fd| dup2_other_file(&REPOINTED, os, fd));
    let a = map(e, &os, 3, PAGE as i64 * 4);
    assert_eq!(e.stats.get(Counter::Unconfirmed), 1);
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "untracked: its munmap is real");
}

#[test]
fn an_access_mode_asked_after_the_number_switched_is_neither_used_nor_kept() {
    let os = started(&ASKED);
    let e = &ASKED;
    // The dup2 lands between the statx and the F_GETFL.
    *os.racing.borrow_mut() = Some(|os, fd| dup2_other_file(&ASKED, os, fd));
    let fcntls = *os.fcntls.borrow();
    let a = map(e, &os, 3, 0);
    assert_eq!(*os.fcntls.borrow(), fcntls + 1);
    assert_eq!(e.stats.get(Counter::Eligible), 0, "not judged by it");
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None);
    map_unmap(e, &os, 3, 0);
    assert_eq!(*os.fcntls.borrow(), fcntls + 2, "nothing was kept");
}

#[test]
fn a_vfork_child_neither_uses_nor_changes_the_records() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    let b = map_unmap(e, &os, 4, 0);
    *os.fd_table.borrow_mut() = FdTable::VforkChild;
    // The child closes everything before its exec...
    let c = e.closing(&os, 0, i32::MAX);
    e.closed(c, true);
    assert_eq!(
        os.mapped(b),
        Some((4, 0)),
        "none of its closes is a last one"
    );
    // ... and maps through numbers of its own: nothing tracked or learned.
    let fcntls = *os.fcntls.borrow();
    let x = map(e, &os, 5, 0);
    unmap(e, &os, x);
    assert_eq!(os.mapped(x), None);
    *os.fd_table.borrow_mut() = FdTable::Own;
    map_unmap(e, &os, 5, 0);
    assert_eq!(
        *os.fcntls.borrow(),
        fcntls + 1,
        "the parent asks: nothing learned"
    );
    // The parent's records are whole: fd 3's live window, fd 4's queued one.
    let c = e.closing(&os, 3, 3);
    e.closed(c, true);
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "forgotten at the parent's close");
    let c = e.closing(&os, 4, 4);
    e.closed(c, true);
    assert_eq!(os.mapped(b), None, "released at the parent's close");
}

#[test]
fn a_thread_with_its_own_table_releases_conservatively_and_learns_nothing() {
    let (e, os) = fresh();
    let a = map(e, &os, 3, 0);
    let b = map_unmap(e, &os, 4, 0);
    *os.fd_table.borrow_mut() = FdTable::Unshared;
    let c = e.closing(&os, 3, 4);
    e.closed(c, true);
    assert_eq!(os.mapped(b), None, "maybe the last close: released");
    unmap(e, &os, a);
    assert_eq!(os.mapped(a), None, "forgotten: its munmap is real");
    let fcntls = *os.fcntls.borrow();
    let x = map_unmap(e, &os, 5, 0);
    assert_eq!(os.mapped(x), None);
    *os.fd_table.borrow_mut() = FdTable::Own;
    map_unmap(e, &os, 5, 0);
    assert_eq!(*os.fcntls.borrow(), fcntls + 1, "nothing learned");
}

#[test]
fn a_failed_close_keeps_the_mapped_bit_of_its_descriptor() {
    let (e, os) = fresh();
    // dup2(-1, 3): EBADF, nothing closed. The live mapping the failed
    // close forgot stays forgotten (its munmap goes to the kernel): it may
    // hold an open file the number no longer names.
    let b = map_large(e, &os, 3, 0);
    let c = e.closing(&os, 3, 3);
    e.closed(c, false);
    assert!(e.fd_has_records(3), "the bit survived the failed call");
    unmap_large(e, &os, b);
    assert_eq!(os.mapped(b), None, "not deferred");
}

/// A live mapping of a close that succeeded, the number opened again on
/// another open file of the same file, then a close of the number that
/// fails: the first mapping still holds the first open file, so it is never
/// deferred nor handed to a mmap through the number.
#[test]
fn a_failed_close_gives_no_orphan_of_its_number_to_the_next_open_file() {
    let (e, os) = fresh();
    let a = map_large(e, &os, 3, 0);
    let c = e.closing(&os, 3, 3);
    e.closed(c, true);
    // 3 names another open file of the same file now, mapped through.
    let b = map_large(e, &os, 3, LARGE as i64);
    unmap_large(e, &os, b);
    // dup2(-1, 3): EBADF, nothing closed.
    let c = e.closing(&os, 3, 3);
    e.closed(c, false);
    unmap_large(e, &os, a);
    assert_eq!(os.mapped(a), None, "not deferred");
    let mmaps = *os.mmaps.borrow();
    map_large(e, &os, 3, 0);
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "a fresh mapping");
}

#[test]
fn every_live_mapping_of_a_closed_descriptor_is_forgotten_unasked() {
    let (e, os) = fresh();
    // A flock (munmapq watches none) may be on the description of a large
    // live mapping: its munmap is the description's last close, and goes
    // to the kernel.
    let a = map_large(e, &os, 3, 0);
    let c = e.closing(&os, 3, 3);
    e.closed(c, true);
    assert_eq!(e.stats.get(Counter::Forgotten), 1);
    let munmaps = os.munmap_count();
    unmap_large(e, &os, a);
    assert_eq!(os.mapped(a), None, "not deferred: the lock goes with it");
    assert_eq!(os.munmap_count(), munmaps + 1);
    // Two large live mappings of one descriptor.
    let x = map_large(e, &os, 6, 0);
    let y = map_large(e, &os, 6, LARGE as i64);
    let c = e.closing(&os, 6, 6);
    e.closed(c, true);
    assert_eq!(e.stats.get(Counter::Forgotten), 3);
    unmap_large(e, &os, x);
    unmap_large(e, &os, y);
    assert_eq!(e.stats.get(Counter::Deferred), 0);
}
