//! A queued mapping is handed back only under the context it was made in
//! (`crate::context`): not after a mount-table call, and not to a thread
//! whose personality adds `PROT_EXEC` where its maker's did not.

use super::*;

#[test]
fn a_mount_call_makes_every_earlier_mapping_stale() {
    static E: Engine = Engine::new();
    let os = started(&E);
    let a = map_unmap(&E, &os, 3, 0);
    assert_eq!(map_unmap(&E, &os, 3, 0), a, "reused while nothing changed");
    // A live mapping (reused) made before the call, unmapped after it.
    let live = map(&E, &os, 3, 0);
    E.mounts_changed();
    unmap(&E, &os, live);
    let mmaps = *os.mmaps.borrow();
    map(&E, &os, 3, 0);
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "a fresh mapping");
    assert_eq!(E.stats.get(Counter::Stale), 1, "the old one unmapped");
    assert_eq!(E.stats.get(Counter::Reused), 2);
    assert_eq!(*os.personality_reads.borrow(), 0, "nothing asked");
}

#[test]
fn the_personality_is_asked_only_once_a_thread_changed_it() {
    static E: Engine = Engine::new();
    let os = started(&E);
    map_unmap(&E, &os, 3, 0);
    assert_eq!(*os.personality_reads.borrow(), 0);
    E.personalities_split();
    // Made under the personality the process started with, which is no
    // longer known to be the caller's: not handed back.
    *os.read_implies_exec.borrow_mut() = Some(true);
    let a = map_unmap(&E, &os, 3, 0);
    assert_eq!(E.stats.get(Counter::Stale), 1);
    assert_eq!(map_unmap(&E, &os, 3, 0), a, "same personality: reused");
    *os.read_implies_exec.borrow_mut() = Some(false);
    map_unmap(&E, &os, 3, 0);
    assert_eq!(
        E.stats.get(Counter::Stale),
        2,
        "made executable: not reused"
    );
    assert_eq!(*os.personality_reads.borrow(), 3);
    // Where the personality cannot be read, nothing is tracked.
    *os.read_implies_exec.borrow_mut() = None;
    let b = map(&E, &os, 3, PAGE as i64 * 8);
    unmap(&E, &os, b);
    assert_eq!(os.mapped(b), None, "passed through");
}

/// Closes `fd` as the close hooks report it.
fn close(e: &Engine, os: &FakeOs, fd: i32) {
    let c = e.closing(os, fd, fd);
    e.closed(c, true);
}

#[test]
fn a_file_with_several_links_is_keyed_by_its_name_asked_once_per_description() {
    static E: Engine = Engine::new();
    let os = started(&E);
    *os.nlink.borrow_mut() = 2;
    *os.link.borrow_mut() = 11;
    let a = map_unmap(&E, &os, 3, 0);
    assert_eq!(map_unmap(&E, &os, 3, 0), a, "reused through the same name");
    assert_eq!(*os.link_reads.borrow(), 1, "asked once, kept");
    // The number closed and opened again through the other link: its
    // name is asked again.
    close(&E, &os, 3);
    *os.link.borrow_mut() = 22;
    let mmaps = *os.mmaps.borrow();
    map_unmap(&E, &os, 3, 0);
    assert_eq!(*os.mmaps.borrow(), mmaps + 1, "not the first link's window");
    assert_eq!(*os.link_reads.borrow(), 2, "asked again after the close");
    // A file with one name asks nothing.
    *os.nlink.borrow_mut() = 1;
    map_unmap(&E, &os, 4, 0);
    assert_eq!(*os.link_reads.borrow(), 2);
}
