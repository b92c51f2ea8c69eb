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
