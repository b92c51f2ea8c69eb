//! One loaded object's dynamic symbol table, read as glibc's lookup reads
//! it (elf/dl-lookup.c `do_lookup_x` and `check_match`): its GNU hash
//! table (or its System V one), and which definition of a name counts for
//! a lookup without a version, as `dlsym`'s. The walk over the loaded
//! objects is `symbols.rs`'s.

/// What the walk found for one name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Found {
    /// Still looked for (after the walk: defined by no object after this
    /// library).
    Nowhere,
    At(usize),
    /// The walk cannot tell the address: ask `dlsym`.
    Undecided,
}

// The 64-bit ELF structures (<elf.h>, <link.h>): munmapq builds for 64-bit
// Linux targets only.
const _: () = assert!(core::mem::size_of::<usize>() == 8);

#[repr(C)]
pub(super) struct Dyn {
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
pub(super) struct Gnu {
    bloom: *const usize,
    bloom_mask: usize,
    shift: u32,
    buckets: *const u32,
    nbuckets: u32,
    chains: *const u32,
}

/// DT_HASH: buckets, and one chain entry per symbol.
pub(super) struct SysV {
    buckets: *const u32,
    nbuckets: u32,
    chains: *const u32,
    nchains: u32,
}

/// How one loaded object's symbols are found by name.
pub(super) enum Hash {
    Gnu(Gnu),
    SysV(SysV),
    /// A table with no bucket: it defines nothing.
    Empty,
}

/// One loaded object's dynamic symbol table.
pub(super) struct Object {
    base: usize,
    symtab: *const Sym,
    strtab: *const u8,
    /// The string table's length.
    strsz: usize,
    versym: *const u16,
    pub(super) hash: Hash,
}

/// The tables of the object whose dynamic section is at `ld`, `None` if it
/// has no symbol table or no hash table to search it by.
///
/// # Safety
/// `ld` is the dynamic section of a loaded object whose base is `base`.
pub(super) unsafe fn object(base: usize, ld: *const Dyn) -> Option<Object> {
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
    pub(super) fn may_hold(&self, h: u32) -> bool {
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
    pub(super) unsafe fn find_gnu(&self, g: &Gnu, name: &[u8], h: u32) -> Option<Found> {
        // SAFETY: our caller's contract; `i` indexes the symbol table.
        unsafe { self.lookup_gnu(g, name, h).and_then(|i| self.outcome(i)) }
    }

    /// `lookup_sysv` and what the definition gives.
    ///
    /// # Safety
    /// As for `lookup_sysv`.
    pub(super) unsafe fn find_sysv(&self, t: &SysV, name: &[u8], h: u32) -> Option<Found> {
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
