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

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

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

/// What the walk found for one name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Found {
    /// Still looked for (after the walk: defined by no object after this
    /// library).
    Nowhere,
    At(usize),
    /// The walk cannot tell the address: ask `dlsym`.
    Undecided,
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

// The 64-bit ELF structures (<elf.h>, <link.h>): munmapq builds for 64-bit
// Linux targets only.
const _: () = assert!(core::mem::size_of::<usize>() == 8);

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

extern "C" {
    /// This object's own dynamic section (defined by the linker).
    static _DYNAMIC: Dyn;
}

const DT_NULL: i64 = 0;
const DT_HASH: i64 = 4;
const DT_STRTAB: i64 = 5;
const DT_STRSZ: i64 = 10;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const DT_VERSYM: i64 = 0x6fff_fff0;

const SHN_UNDEF: u16 = 0;
const SHN_ABS: u16 = 0xfff1;
const STT_NOTYPE: u8 = 0;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const STT_COMMON: u8 = 5;
const STT_TLS: u8 = 6;
const STT_GNU_IFUNC: u8 = 10;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const STB_GNU_UNIQUE: u8 = 10;
/// glibc's `ALLOWED_STT`: the types that define code or data.
const ALLOWED_STT: u32 = (1 << STT_NOTYPE)
    | (1 << STT_OBJECT)
    | (1 << STT_FUNC)
    | (1 << STT_COMMON)
    | (1 << STT_TLS)
    | (1 << STT_GNU_IFUNC);

/// DT_GNU_HASH: a bloom filter of address-sized words, buckets, and one
/// chain word per hashed symbol (`chains` is indexed by symbol).
struct Gnu {
    bloom: *const usize,
    bloom_mask: usize,
    shift: u32,
    buckets: *const u32,
    nbuckets: u32,
    chains: *const u32,
}

/// DT_HASH: buckets, and one chain entry per symbol.
struct SysV {
    buckets: *const u32,
    nbuckets: u32,
    chains: *const u32,
    nchains: u32,
}

/// How one loaded object's symbols are found by name.
enum Hash {
    Gnu(Gnu),
    SysV(SysV),
    /// A table with no bucket: it defines nothing.
    Empty,
}

/// One loaded object's dynamic symbol table.
struct Object {
    base: usize,
    symtab: *const Sym,
    strtab: *const u8,
    /// The string table's length.
    strsz: usize,
    versym: *const u16,
    hash: Hash,
}

/// The tables of the object whose dynamic section is at `ld`, `None` if it
/// has no symbol table or no hash table to search it by.
///
/// # Safety
/// `ld` is the dynamic section of a loaded object whose base is `base`.
unsafe fn object(base: usize, ld: *const Dyn) -> Option<Object> {
    let (mut symtab, mut strtab, mut strsz, mut versym, mut gnu, mut sysv) = (0, 0, 0, 0, 0, 0);
    // The loader adds the base to these entries in place, except where the
    // dynamic section is read-only (the vDSO, some targets): there they
    // are still offsets, below the base.
    let at = |v: u64| {
        let v = v as usize;
        if v != 0 && v < base {
            v + base
        } else {
            v
        }
    };
    let mut d = ld;
    loop {
        // SAFETY: the dynamic section ends with DT_NULL (our caller's
        // contract).
        let e = unsafe { &*d };
        match e.tag {
            DT_NULL => break,
            DT_SYMTAB => symtab = at(e.val),
            DT_STRTAB => strtab = at(e.val),
            DT_STRSZ => strsz = e.val as usize,
            DT_VERSYM => versym = at(e.val),
            DT_GNU_HASH => gnu = at(e.val),
            DT_HASH => sysv = at(e.val),
            _ => {}
        }
        // SAFETY: still inside the section (not at DT_NULL yet).
        d = unsafe { d.add(1) };
    }
    if symtab == 0 || strtab == 0 {
        return None;
    }
    let hash = if gnu != 0 {
        let h = gnu as *const u32;
        // SAFETY: the DT_GNU_HASH layout: four words (buckets, first hashed
        // symbol, bloom words, bloom shift), the bloom filter, the buckets,
        // then the chains from the first hashed symbol on.
        unsafe {
            let (nbuckets, first, nbloom, shift) = (*h, *h.add(1), *h.add(2), *h.add(3));
            if nbuckets == 0 || nbloom == 0 {
                Hash::Empty
            } else {
                let bloom = h.add(4).cast::<usize>();
                let buckets = bloom.add(nbloom as usize).cast::<u32>();
                Hash::Gnu(Gnu {
                    bloom,
                    bloom_mask: nbloom as usize - 1,
                    shift,
                    buckets,
                    nbuckets,
                    chains: buckets.add(nbuckets as usize).wrapping_sub(first as usize),
                })
            }
        }
    } else if sysv != 0 {
        let h = sysv as *const u32;
        // SAFETY: the DT_HASH layout: bucket and chain counts, the buckets,
        // the chains.
        unsafe {
            let (nbuckets, nchains) = (*h, *h.add(1));
            if nbuckets == 0 {
                Hash::Empty
            } else {
                Hash::SysV(SysV {
                    buckets: h.add(2),
                    nbuckets,
                    chains: h.add(2 + nbuckets as usize),
                    nchains,
                })
            }
        }
    } else {
        return None;
    };
    Some(Object {
        base,
        symtab: symtab as *const Sym,
        strtab: strtab as *const u8,
        strsz,
        versym: versym as *const u16,
        hash,
    })
}

/// What `check_match` makes of a symbol for a name looked up without a
/// version, as `dlsym` does.
enum Match {
    No,
    /// A definition of another version than the default: counts only if
    /// it is the only one not hidden.
    Versioned,
    Yes,
}

impl Gnu {
    /// Whether the bloom filter lets a symbol of hash `h` be here.
    #[inline(always)]
    fn may_hold(&self, h: u32) -> bool {
        // SAFETY: the word is inside the filter (`bloom_mask`).
        let word = unsafe { *self.bloom.add((h as usize / 64) & self.bloom_mask) };
        let mask = (1usize << (h % 64)) | (1usize << ((h >> self.shift) % 64));
        word & mask == mask
    }
}

impl Object {
    /// Whether the string at `at` in the string table is `name` (whose
    /// bytes end with its only NUL).
    #[inline(always)]
    fn same_name(&self, at: usize, name: &[u8]) -> bool {
        let p = self.strtab.wrapping_add(at);
        if at.saturating_add(name.len()) <= self.strsz {
            // All of `name`'s length lies in the table: compared a word at
            // a time.
            let mut k = 0;
            while k + 8 <= name.len() {
                // SAFETY: inside the table (above); unaligned reads.
                let (a, b) = unsafe {
                    (
                        p.add(k).cast::<u64>().read_unaligned(),
                        name.as_ptr().add(k).cast::<u64>().read_unaligned(),
                    )
                };
                if a != b {
                    return false;
                }
                k += 8;
            }
            // SAFETY: as above, byte by byte for the rest.
            return name[k..]
                .iter()
                .enumerate()
                .all(|(j, &c)| unsafe { *p.add(k + j) } == c);
        }
        let mut k = 0;
        while k < name.len() {
            // SAFETY: the table's strings end with a NUL; every byte
            // before `k` matched one of `name`, which holds its only NUL
            // last, so `k` is inside the string.
            if unsafe { *p.add(k) } != name[k] {
                return false;
            }
            k += 1;
        }
        true
    }

    /// Symbol `i` against `name` (its bytes and the NUL after them).
    ///
    /// # Safety
    /// `i` indexes this object's symbol table.
    #[inline(always)]
    unsafe fn check(&self, i: usize, name: &[u8]) -> Match {
        // SAFETY: our caller's contract.
        let s = unsafe { &*self.symtab.add(i) };
        let stt = s.info & 0xf;
        if (s.value == 0 && s.shndx != SHN_ABS && stt != STT_TLS)
            || (1u32 << stt) & ALLOWED_STT == 0
        {
            return Match::No;
        }
        if !self.same_name(s.name as usize, name) {
            return Match::No;
        }
        if !self.versym.is_null() {
            // SAFETY: the version table has one entry per symbol.
            let v = unsafe { *self.versym.add(i) };
            if v & 0x7fff >= 2 {
                return if v & 0x8000 == 0 {
                    Match::Versioned
                } else {
                    Match::No
                };
            }
        }
        Match::Yes
    }

    /// The definition of `name` (whose bytes end with a NUL, GNU hash
    /// `h`, which the bloom filter let through) in this object, as
    /// `do_lookup_x` picks it.
    ///
    /// # Safety
    /// `g` is this object's table (`object`).
    #[inline(always)]
    unsafe fn lookup_gnu(&self, g: &Gnu, name: &[u8], h: u32) -> Option<usize> {
        // A definition of another version than the default, and how many
        // there were.
        let (mut versioned, mut count) = (0, 0);
        // SAFETY: inside the tables (`object`); a chain ends with a word
        // whose bit 0 is set.
        unsafe {
            let mut i = *g.buckets.add((h % g.nbuckets) as usize) as usize;
            if i == 0 {
                return None;
            }
            loop {
                let c = *g.chains.add(i);
                if (c ^ h) >> 1 == 0 {
                    match self.check(i, name) {
                        Match::Yes => return Some(i),
                        Match::Versioned => {
                            count += 1;
                            versioned = i;
                        }
                        Match::No => {}
                    }
                }
                if c & 1 != 0 {
                    break;
                }
                i += 1;
            }
        }
        // Several versions none of which is hidden: glibc takes none of
        // them here.
        (count == 1).then_some(versioned)
    }

    /// As `lookup_gnu`, by the System V hash `h`.
    ///
    /// # Safety
    /// `t` is this object's table (`object`).
    unsafe fn lookup_sysv(&self, t: &SysV, name: &[u8], h: u32) -> Option<usize> {
        let (mut versioned, mut count) = (0, 0);
        // SAFETY: inside the tables (`object`); index 0 ends a chain.
        unsafe {
            let mut i = *t.buckets.add((h % t.nbuckets) as usize) as usize;
            while i != 0 && i < t.nchains as usize {
                match self.check(i, name) {
                    Match::Yes => return Some(i),
                    Match::Versioned => {
                        count += 1;
                        versioned = i;
                    }
                    Match::No => {}
                }
                i = *t.chains.add(i) as usize;
            }
        }
        (count == 1).then_some(versioned)
    }

    /// `lookup_gnu` and what the definition gives (kept out of the loop
    /// over the names, which the bloom filter mostly ends).
    ///
    /// # Safety
    /// As for `lookup_gnu`.
    #[inline(never)]
    unsafe fn find_gnu(&self, g: &Gnu, name: &[u8], h: u32) -> Option<Found> {
        // SAFETY: our caller's contract; `i` indexes the symbol table.
        unsafe { self.lookup_gnu(g, name, h).and_then(|i| self.outcome(i)) }
    }

    /// `lookup_sysv` and what the definition gives.
    ///
    /// # Safety
    /// As for `lookup_sysv`.
    unsafe fn find_sysv(&self, t: &SysV, name: &[u8], h: u32) -> Option<Found> {
        // SAFETY: our caller's contract; `i` indexes the symbol table.
        unsafe { self.lookup_sysv(t, name, h).and_then(|i| self.outcome(i)) }
    }

    /// What definition `i` gives, `None` if it is passed over (a local
    /// one: the next object is searched).
    ///
    /// # Safety
    /// `i` indexes this object's symbol table.
    unsafe fn outcome(&self, i: usize) -> Option<Found> {
        // SAFETY: our caller's contract.
        let s = unsafe { &*self.symtab.add(i) };
        let (bind, stt) = (s.info >> 4, s.info & 0xf);
        match bind {
            STB_GLOBAL | STB_WEAK
                if s.shndx != SHN_ABS
                    && s.shndx != SHN_UNDEF
                    && stt != STT_GNU_IFUNC
                    && stt != STT_TLS =>
            {
                Some(Found::At(self.base.wrapping_add(s.value as usize)))
            }
            STB_GLOBAL | STB_WEAK | STB_GNU_UNIQUE => Some(Found::Undecided),
            _ => None,
        }
    }
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
    // Every name found: the rest of the list need not be seen.
    (!left).into()
}

/// Finds every name of `names` (in `all`) as `dlsym(RTLD_NEXT)` would, in
/// one walk, into `found`; false if this library is not in the main
/// namespace's list (then only `dlsym` knows what comes next).
fn find(all: &[u8], names: &[Name], found: &mut [Found], after_us: bool) -> bool {
    let mut w = Walk {
        all,
        names,
        found,
        seen: false,
        after_us,
    };
    // SAFETY: a plain callback and a pointer to `w`, which outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(walk), (&mut w as *mut Walk).cast()) };
    w.seen
}

/// Fills `slots[k]` with the address of `names[k]` (in `all`, names each
/// followed by a NUL): from the walk, and for what it left undecided from
/// `dlsym`, itself found by the walk (`names[dlsym]`). A name no object
/// after this library defines leaves its slot at 0, and so does every name
/// if the walk could not see this library in the list (then false).
pub fn resolve(all: &[u8], names: &[Name], slots: &[AtomicUsize], dlsym: usize) -> bool {
    let mut found = [Found::Nowhere; MAX_NAMES];
    let n = names.len().min(MAX_NAMES);
    if !find(all, &names[..n], &mut found[..n], true) {
        return false;
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
        slot.store(address, Ordering::Release);
    }
    true
}

/// Fills each slot of `slots` still 0 with the first definition of its
/// name in any loaded object but this library (in load order), or leaves
/// it: for the C library's functions that the library calls for itself,
/// which a library loaded by `dlopen` (after the C library) does not find
/// after itself. Only what the walk decides alone is taken.
pub fn resolve_anywhere(all: &[u8], names: &[Name], slots: &[AtomicUsize]) {
    if slots.iter().all(|s| s.load(Ordering::Relaxed) != 0) {
        return;
    }
    let mut found = [Found::Nowhere; MAX_NAMES];
    let n = names.len().min(MAX_NAMES);
    for (f, slot) in found.iter_mut().zip(slots) {
        if slot.load(Ordering::Relaxed) != 0 {
            // Not looked for.
            *f = Found::Undecided;
        }
    }
    find(all, &names[..n], &mut found[..n], false);
    for (&f, slot) in found[..n].iter().zip(slots) {
        if let Found::At(a) = f {
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(a, Ordering::Release);
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
