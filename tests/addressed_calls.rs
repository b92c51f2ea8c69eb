//! mmap at an address over what the library tracks: the range the kernel
//! takes is released first (queued windows unmapped, live ones forgotten),
//! whether the address is 0 (`MAP_FIXED`) or the call takes whole huge
//! pages beyond its length (`MAP_HUGETLB`); a region that grows down stops
//! the queue. Each C program runs without and
//! with the library (`common::same_as_without`) and must end the same, the
//! queue reached; it prints SKIPPED where the system refuses the mapping
//! it needs.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::time::Duration;

/// `tests/c/PROGRAM.c DIR MODE`, the same without and with the library:
/// its output holds `expect`, and the queue was reached.
fn program_mode(program: &str, mode: &str, expect: &str) {
    let name = format!("{program}-{mode}");
    same_and_queued(&name, program, &[mode], expect, Duration::from_secs(30));
}

/// `mmap(0, len, MAP_FIXED | MAP_ANONYMOUS)` replaces what the library
/// tracks in `[0, len)`, whether the gate is closed (a window queued) or
/// open: the old window is never handed out again, and the anonymous
/// memory in its range is never queued as that window
/// (`tests/c/fixedzero.c`; where mapping at 0 is refused, it prints
/// SKIPPED).
fn fixed_at_zero(mode: &str) {
    program_mode("fixedzero", mode, "the window mapped again reads 'x'");
}

#[test]
fn a_fixed_mapping_at_zero_over_a_queued_window_is_never_handed_out() {
    fixed_at_zero("queued");
}

#[test]
fn a_fixed_mapping_at_zero_over_a_live_window_with_one_queued_is_never_queued_as_it() {
    fixed_at_zero("live");
}

#[test]
fn a_fixed_mapping_at_zero_over_a_live_window_with_nothing_queued_is_never_queued_as_it() {
    fixed_at_zero("live-plain");
}

/// A huge page mapping of one small page at a 2 MiB boundary takes the
/// whole huge page, where a window the program unmapped lies: the call
/// gets the place as without the library, and the window mapped again is
/// a fresh one (`tests/c/hugefixed.c`).
fn huge_page(mode: &str) {
    program_mode("hugefixed", mode, "the window mapped again reads 'x'");
}

#[test]
fn a_fixed_huge_page_mapping_over_a_queued_window_is_never_handed_out() {
    huge_page("fixed");
}

#[test]
fn a_huge_page_mapping_without_replacing_finds_a_queued_window_gone() {
    huge_page("noreplace");
}

#[test]
fn a_huge_page_hint_over_a_queued_window_is_taken() {
    huge_page("hint");
}

/// `mremap` with `MREMAP_DONTUNMAP` takes its new address as a hint: where
/// the program unmapped a window, the move lands there as without the
/// library (`tests/c/dontunmap.c`), through glibc's `mremap` and libc's
/// `syscall`.
#[test]
fn a_dontunmap_move_hinted_at_a_queued_window_lands_there() {
    for via in ["libc", "syscall"] {
        program_mode("dontunmap", via, "mremap: ok, at the hint: yes, reads 'Z'");
    }
}

/// A region that grows down (`MAP_GROWSDOWN`) grows into room the program
/// unmapped, as without the library, whether it was mapped before the
/// window below it or after (`tests/c/growsdown.c`): the kernel grows it
/// only where no mapping lies within its guard gap, and a queued window
/// there stopped it with SIGSEGV.
#[test]
fn a_region_that_grows_down_grows_into_room_the_program_unmapped() {
    for mode in ["before", "after"] {
        program_mode("growsdown", mode, "to 64 KiB above the window's range: yes");
    }
}

/// The vDSO asked for at an address the program unmapped
/// (`arch_prctl(ARCH_MAP_VDSO_64)` through `syscall`, as a checkpoint's
/// restore places it) lands there; with a window queued there the kernel,
/// taking the address as a hint, put it elsewhere (`tests/c/vdsoat.c`).
/// With bits above the option's 32 set, which the kernel does not look at,
/// the same.
#[test]
fn the_vdso_asked_at_a_freed_address_lands_there() {
    for args in [&[][..], &["high"]] {
        same_and_queued(
            "vdsoat",
            "vdsoat",
            args,
            "the vDSO asked at a freed address: there",
            Duration::from_secs(30),
        );
    }
}

/// The heap grown (`sbrk`) into room the program unmapped right above it,
/// where the kernel placed a window once the space above was reserved:
/// granted; with the window queued there the kernel refused (ENOMEM)
/// (`tests/c/brkgrow.c`; the queue is reached by a window placed far above
/// the heap first).
#[test]
fn the_heap_grows_into_room_the_program_unmapped_above_it() {
    same_and_queued(
        "brkgrow",
        "brkgrow",
        &[],
        "the window placed in the gap above the heap: yes\nthe heap grown to the reservation: ok",
        Duration::from_secs(30),
    );
}

/// Advice that splits a mapping near `vm.max_map_count`, after the program
/// unmapped 64 windows: each split has room. The kernel answers a split it
/// has no room for with EAGAIN, which the library did not retry after a
/// flush as it retries ENOMEM: the queued windows' room was missing
/// (`tests/c/madvsplit.c`: `madvise`, `posix_madvise`, and `madvise`
/// through `syscall`).
#[test]
fn advice_that_splits_near_the_map_count_finds_the_room_the_program_freed() {
    for how in ["madvise", "posix", "syscall"] {
        same_and_queued(
            &format!("madvsplit-{how}"),
            "madvsplit",
            &[how],
            "splits: all",
            Duration::from_secs(30),
        );
    }
}
