//! The resident budget through a read of the usage that a longjmp left
//! half done: `read` writes the baseline, then makes one more system call
//! (the address-space limit) before the derived budget is refreshed. A
//! signal handler that longjmps out of that call (a panic caught here)
//! must not leave the deferrals that follow judged against the older,
//! larger budget.
use core::cell::Cell;
use munmapq_core::config::{Config, System};
use munmapq_core::file::FileFacts;
use munmapq_core::os::{Errno, Mmap, Os, PerThread, SignalStack, Usage};
use munmapq_core::sizing::Sizing;

const MIB: usize = 1 << 20;

/// An Os whose usage is set by the test, with no peak, and whose
/// address-space limit can be made to jump out once.
struct UsageOs {
    resident: Cell<usize>,
    jump_in_limit: Cell<bool>,
}

impl Os for UsageOs {
    fn mmap(&self, _: Mmap) -> Result<usize, Errno> {
        unreachable!("sizing maps nothing")
    }
    fn munmap(&self, _: usize, _: usize) -> Result<(), Errno> {
        unreachable!("sizing unmaps nothing")
    }
    fn file_facts(&self, _: i32) -> Option<FileFacts> {
        None
    }
    fn open_flags(&self, _: i32) -> i32 {
        0
    }
    fn usage(&self) -> Option<Usage> {
        Some(Usage {
            size: 1 << 40,
            resident: self.resident.get(),
            peak: None,
        })
    }
    fn map_count(&self) -> Option<usize> {
        None
    }
    fn address_space_limit(&self) -> Option<usize> {
        if self.jump_in_limit.replace(false) {
            panic!("a longjmp out of the hook");
        }
        None
    }
    fn drop_pages(&self, _: usize, _: usize) -> bool {
        true
    }
    fn thread_cells(&self) -> Option<&'static PerThread> {
        None
    }
    fn this_thread(&self) -> usize {
        1
    }
    fn signal_stack(&self) -> SignalStack {
        SignalStack::Elsewhere
    }
}

#[test]
fn a_read_left_by_a_longjmp_keeps_the_budget_of_the_new_baseline() {
    let mut cfg = Config::defaults(System {
        max_map_count: None,
        address_space_limit: None,
    });
    cfg.max_bytes = None; // the resident guard
    cfg.map_count_limit = None;
    cfg.address_space_limit = None;
    let os = UsageOs {
        resident: Cell::new(400 * MIB),
        jump_in_limit: Cell::new(false),
    };
    let mut s = Box::new(Sizing::new());
    s.start(&cfg);
    // The first deferral reads at once: baseline 400 MiB with nothing
    // queued and no peak known, a budget of 100 MiB.
    s.caps(&os, 0, 0, MIB);
    // The program's RSS fell; a fork child's first deferral reads again,
    // and jumps out after the baseline was written.
    os.resident.set(40 * MIB);
    s.reset_after_fork();
    os.jump_in_limit.set(true);
    // The jump is expected: not printed as a failure.
    let printer = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let jumped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.caps(&os, 0, 0, MIB);
    }));
    std::panic::set_hook(printer);
    assert!(jumped.is_err());
    // Baseline 40 MiB: a budget of 10 MiB. 50 MiB warm queued, RSS 90 MiB:
    // the queue's share, 50 MiB, is over it.
    os.resident.set(90 * MIB);
    let over = s.over_budget(&os, 50 * MIB, 50 * MIB);
    assert!(
        over.is_some(),
        "50 MiB warm over a 10 MiB budget must cool some: {over:?}"
    );
}
