//! What `dlsym(RTLD_NEXT, name)` answers, for many names at once: one walk
//! of the symbol hash tables of the objects loaded after this library.
//!
//! `dlsym` takes the loader's lock and sets up an error frame per name, and
//! for a name no object defines (`mseal` before glibc 2.39, `mbind`, which
//! is libnuma's) it builds an error message with `malloc`: in a program
//! that never allocates, that alone starts the allocator (`getrandom`,
//! `brk`), and the message stays pending for the program's own `dlerror`.
//! The walk does what glibc's `_dl_lookup_symbol_x` does for `RTLD_NEXT`
//! (elf/dl-lookup.c `do_lookup_x` and `check_match`, elf/dl-sym.c
//! `do_sym`): the objects of the main namespace in load order, from the one
//! after this library; in each, the GNU hash table (or the System V one),
//! the bloom filter first; a definition counts if it has a value and a
//! code or data type, and, where the object versions its symbols, if it is
//! unversioned, or else the one version that is not hidden (`dlsym` asks
//! for the newest, the default `name@@VERSION`); the first object holding
//! a global or weak one gives the address. What the walk cannot decide
//! alone (an indirect function, whose address its resolver answers; a
//! unique, absolute or thread-local symbol; an object it cannot read) is
//! left to `dlsym`, which the name then certainly reaches an object for,
//! so it never takes the error path for a name the walk saw nowhere.
//!
//! The objects are those `dl_iterate_phdr` reports, in its order: the
//! namespace the program started with first, in load order, which is the
//! order of its global scope (the program, the preloaded libraries, then
//! their dependencies), under the lock that `dlopen` and `dlclose` take to
//! change the list. It goes on to other namespaces (`dlmopen`, `LD_AUDIT`
//! modules) after that: a name no object of the program's namespace
//! defines may be found there (a namespace's copy of the C library
//! defines what the program's does, so only a name no C library defines,
//! such as `mbind`, could). Load time only.

use super::dynsym::{object, Dyn, Found, Hash};
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicPtr, Ordering};

/// A name to find: where it is in the list of names (NUL-separated), and
/// its two ELF hashes, computed at build time (`names`). No pointer: a table
/// of these is no relocation for the loader.
#[derive(Clone, Copy)]
pub struct Name {
    at: u16,
    len: u16,
    gnu: u32,
    sysv: u32,
}

/// The `Name`s of `all`, names each followed by a NUL.
pub const fn names<const N: usize>(all: &str) -> [Name; N] {
    let b = all.as_bytes();
    let mut out = [Name {
        at: 0,
        len: 0,
        gnu: 0,
        sysv: 0,
    }; N];
    let (mut k, mut start, mut i) = (0, 0, 0);
    while i < b.len() {
        if b[i] == 0 {
            out[k] = Name {
                at: start as u16,
                len: (i - start) as u16,
                gnu: gnu_hash(b, start, i),
                sysv: sysv_hash(b, start, i),
            };
            k += 1;
            start = i + 1;
        }
        i += 1;
    }
    assert!(k == N && b.len() <= u16::MAX as usize);
    out
}

/// The most names one walk looks for.
const MAX_NAMES: usize = 96;

/// The DT_GNU_HASH function (binutils `bfd_elf_gnu_hash`) of `b[from..to]`.
const fn gnu_hash(b: &[u8], from: usize, to: usize) -> u32 {
    let mut h: u32 = 5381;
    let mut i = from;
    while i < to {
        h = h.wrapping_mul(33).wrapping_add(b[i] as u32);
        i += 1;
    }
    h
}

/// The System V ELF hash function (DT_HASH) of `b[from..to]`.
const fn sysv_hash(b: &[u8], from: usize, to: usize) -> u32 {
    let mut h: u32 = 0;
    let mut i = from;
    while i < to {
        h = (h << 4).wrapping_add(b[i] as u32);
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
        i += 1;
    }
    h
}

extern "C" {
    /// This object's own dynamic section (defined by the linker).
    static _DYNAMIC: Dyn;
}

struct Walk<'a> {
    all: &'a [u8],
    names: &'a [Name],
    found: &'a mut [Found],
    /// This library was found in the list.
    seen: bool,
    /// Only the objects after this library are searched (else every
    /// other one).
    after_us: bool,
    /// An address to look for among the objects after this library
    /// (`resolve`'s `mark`), and whether one of them holds it.
    mark: usize,
    mark_after_us: bool,
}

impl Walk<'_> {
    /// Looks every name still looked for up in `o`: `may_hold` rules a
    /// name out at once (the bloom filter, for most names and objects),
    /// `lookup` finds its definition. Whether some name is still looked
    /// for after it.
    #[inline(always)]
    fn look_in(
        &mut self,
        may_hold: impl Fn(&Name) -> bool,
        lookup: impl Fn(&[u8], &Name) -> Option<Found>,
    ) -> bool {
        let mut left = false;
        for (n, f) in self.names.iter().zip(self.found.iter_mut()) {
            if *f == Found::Nowhere {
                if !may_hold(n) {
                    left = true;
                    continue;
                }
                match lookup(bytes(self.all, n), n) {
                    Some(answer) => *f = answer,
                    None => left = true,
                }
            }
        }
        left
    }
}

/// The bytes of `n` in `all`, with the NUL after them.
fn bytes<'a>(all: &'a [u8], n: &Name) -> &'a [u8] {
    all.get(n.at as usize..n.at as usize + n.len as usize + 1)
        .unwrap_or(b"\0")
}

/// Called by `dl_iterate_phdr` for each loaded object in turn: looks the
/// names still looked for up in each object after this library, and stops
/// the walk once every name is found.
extern "C" fn walk(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `Walk` of `find`, alive for the call; `info`
    // the loader's record of one object, valid during the call, its
    // program headers `dlpi_phnum` long.
    let (walk, info) = unsafe { (&mut *data.cast::<Walk>(), &*info) };
    let phdrs = if info.dlpi_phdr.is_null() {
        &[][..]
    } else {
        // SAFETY: as above.
        unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let base = info.dlpi_addr as usize;
    let dynamic = phdrs
        .iter()
        .find(|p| p.p_type == libc::PT_DYNAMIC)
        .map(|p| base.wrapping_add(p.p_vaddr as usize) as *const Dyn);
    if dynamic == Some(core::ptr::addr_of!(_DYNAMIC)) {
        walk.seen = true;
        return 0;
    }
    if !walk.seen && walk.after_us {
        return 0;
    }
    if walk.seen && !walk.mark_after_us {
        walk.mark_after_us = phdrs.iter().any(|p| {
            let lo = base.wrapping_add(p.p_vaddr as usize);
            p.p_type == libc::PT_LOAD && walk.mark.wrapping_sub(lo) < p.p_memsz as usize
        });
    }
    // SAFETY: a loaded object's dynamic section and base.
    let Some(o) = dynamic.and_then(|d| unsafe { object(base, d) }) else {
        // Unreadable: what it defines is dlsym's to find.
        for f in walk.found.iter_mut().filter(|f| **f == Found::Nowhere) {
            *f = Found::Undecided;
        }
        return 1;
    };
    let left = match &o.hash {
        Hash::Gnu(g) => walk.look_in(
            |n| g.may_hold(n.gnu),
            // SAFETY: `o`'s tables are the loader's (`object`).
            |name, n| unsafe { o.find_gnu(g, name, n.gnu) },
        ),
        Hash::SysV(t) => walk.look_in(
            |_| true,
            // SAFETY: as above.
            |name, n| unsafe { o.find_sysv(t, name, n.sysv) },
        ),
        Hash::Empty => true,
    };
    // Every name found (and the mark, if it is after this library): the
    // rest of the list need not be seen.
    (!left && (walk.mark_after_us || !walk.after_us)).into()
}

/// Finds every name of `names` (in `all`) as `dlsym(RTLD_NEXT)` would, in
/// one walk, into `found`; false if this library is not in the main
/// namespace's list (then only `dlsym` knows what comes next).
fn find(all: &[u8], names: &[Name], found: &mut [Found], after_us: bool, mark: usize) -> Walked {
    let mut w = Walk {
        all,
        names,
        found,
        seen: false,
        after_us,
        mark,
        mark_after_us: false,
    };
    // SAFETY: a plain callback and a pointer to `w`, which outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(walk), (&mut w as *mut Walk).cast()) };
    Walked {
        seen: w.seen,
        mark_after_us: w.mark_after_us,
    }
}

/// What a walk saw.
struct Walked {
    /// This library, in the list.
    seen: bool,
    /// The mark, in an object after this library (among those walked
    /// before every name was found).
    mark_after_us: bool,
}

/// Fills `slots[k]` with the address of `names[k]` (in `all`, names each
/// followed by a NUL): from the walk, and for what it left undecided from
/// `dlsym`, itself found by the walk (`names[dlsym]`). A name no object
/// after this library defines leaves its slot as it was, and so does every name
/// if the walk could not see this library in the list (then `None`).
/// Answers whether an object after this library holds the address `mark`
/// (one the C library defines: then the walk goes on to the C library).
pub fn resolve(
    all: &[u8],
    names: &[Name],
    slots: &[AtomicPtr<()>],
    dlsym: usize,
    mark: usize,
) -> Option<bool> {
    let mut found = [Found::Nowhere; MAX_NAMES];
    let n = names.len().min(MAX_NAMES);
    let walked = find(all, &names[..n], &mut found[..n], true, mark);
    if !walked.seen {
        return None;
    }
    let dlsym = match found.get(dlsym) {
        Some(&Found::At(a)) => a,
        _ => 0,
    };
    for ((name, slot), &f) in names.iter().zip(slots).zip(&found[..n]) {
        let name = bytes(all, name);
        let address = match f {
            Found::At(a) => a,
            Found::Nowhere => 0,
            Found::Undecided if dlsym != 0 => {
                type Dlsym = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
                // SAFETY: the C library's dlsym (its prototype); a
                // NUL-terminated name; RTLD_NEXT finds the definition after
                // this library, the caller.
                unsafe {
                    let dlsym: Dlsym = core::mem::transmute(dlsym);
                    dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) as usize
                }
            }
            Found::Undecided => 0,
        };
        #[cfg(debug_assertions)]
        same_as_dlsym(name, f, address);
        if address != 0 {
            slot.store(address as *mut (), Ordering::Release);
        }
    }
    Some(walked.mark_after_us)
}

/// Fills each slot of `slots` still null with the first definition of its
/// name in any loaded object but this library (in load order), or leaves
/// it: for the C library's functions that the library calls for itself,
/// which a library loaded by `dlopen` (after the C library) does not find
/// after itself. Only what the walk decides alone is taken.
pub fn resolve_anywhere(all: &[u8], names: &[Name], slots: &[AtomicPtr<()>]) {
    if slots.iter().all(|s| !s.load(Ordering::Relaxed).is_null()) {
        return;
    }
    let mut found = [Found::Nowhere; MAX_NAMES];
    let n = names.len().min(MAX_NAMES);
    for (f, slot) in found.iter_mut().zip(slots) {
        if !slot.load(Ordering::Relaxed).is_null() {
            // Not looked for.
            *f = Found::Undecided;
        }
    }
    find(all, &names[..n], &mut found[..n], false, 0);
    for (&f, slot) in found[..n].iter().zip(slots) {
        if let Found::At(a) = f {
            if slot.load(Ordering::Relaxed).is_null() {
                slot.store(a as *mut (), Ordering::Release);
            }
        }
    }
}

/// Debug builds (those the tests run) check the walk against `dlsym` for
/// every name, and abort with one line if they differ.
#[cfg(debug_assertions)]
fn same_as_dlsym(name: &[u8], f: Found, address: usize) {
    if f == Found::Undecided {
        return;
    }
    // SAFETY: a NUL-terminated name; RTLD_NEXT finds the definition after
    // this library.
    let expected = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if f == Found::Nowhere {
        // SAFETY: clears the error the failed lookup left for the program.
        unsafe { libc::dlerror() };
    }
    if expected != address {
        let mut line = [0u8; 128];
        let mut n = 0;
        let name = &name[..name.len() - 1];
        for part in [
            &b"munmapq: the symbol walk and dlsym disagree on "[..],
            name,
            b"\n",
        ] {
            let k = part.len().min(line.len() - n);
            line[n..n + k].copy_from_slice(&part[..k]);
            n += k;
        }
        // SAFETY: `line` is valid for `n` bytes.
        unsafe { crate::selfio::write(2, line.as_ptr().cast(), n) };
        // SAFETY: abort has no preconditions.
        unsafe { libc::abort() };
    }
}
