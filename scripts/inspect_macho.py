#!/usr/bin/env python3
"""Checks a cross-built libmunmapq.dylib without a Mac: its __DATA,__interpose
section holds exactly one {replacement, original} pair per hook of macOS's
hook table (SRC/lib.rs's shared_hooks! followed by SRC/macos/mod.rs's
hook_table!, SRC being interpose/src), in that order, each original bound to
libSystem's symbol and each replacement pointing at our hook (the C function
NAME that macos/exports.rs generates, in its module `exports`), no two originals one address in libSystem
(scripts/libsystem_aliases.txt: dyld would keep one of the two pairs), and no
hook is exported under its bare C name; every libSystem entry point of the
system calls the hooks stand for (ENTRY_POINTS) is an original or one address
with one; the dylib imports no cancellation point but the originals
(CANCELABLE: a hook must not end the thread), loads no library but
libSystem, says minos 11.0 (MINOS), imports REQUIRED_IMPORTS and has the
install name INSTALL_NAME. Every slice of a universal (fat) file is checked; --archs
arm64,x86_64 requires those slices.
Usage: inspect_macho.py [--archs A,B] SRC DYLIB...
       inspect_macho.py --selftest   (the alias check on known aliases)
       inspect_macho.py --restrict-fixtures DIR EXE [MACHO...]
         writes real Mach-O files for the launcher's __RESTRICT rule to DIR:
         EXE as it is, EXE with a __RESTRICT,__restrict section added as
         `ld -sectcreate __RESTRICT __restrict /dev/null` adds it, and each
         MACHO (universal ones too), with LIEF's answer per slice in
         DIR/lief.txt, for the Rust test macho::tests::agrees_with_lief"""
import os
import re
import struct
import sys

import lief

lief.logging.disable()


def hook_names(path, macro):
    """The entries of a hook list: one `NAME(ARGS) -> RET...;` a line."""
    text = open(path).read()
    block = text.split("macro_rules! " + macro, 1)[1].split("};", 1)[0]
    return re.findall(r"^\s+(\w+)\(.*\)\s*->\s*[^;]+;\s*$", block, re.M)


def macos_hooks(src):
    """macOS's hooks, in the order of its interpose table."""
    return (hook_names(os.path.join(src, "lib.rs"), "shared_hooks")
            + hook_names(os.path.join(src, "macos", "mod.rs"), "hook_table"))


def link_names(src):
    """{rust name: C name} for the libSystem functions macos/real.rs declares
    under another link name (`msync_nocancel` is `msync$NOCANCEL`)."""
    text = open(os.path.join(src, "macos", "real.rs")).read()
    return dict((m.group(2), m.group(1)) for m in re.finditer(
        r'#\[link_name = "([^"]+)"\]\s*pub fn (\w+)', text))


def c_symbol(name, links):
    """The Mach-O symbol of a hook's original."""
    return "_" + links.get(name, name)


# Every libSystem (libsystem_kernel) symbol a program can bind to reach the
# system calls the shared hooks stand for: the C wrappers and the raw stubs
# they call (xnu libsyscall/wrappers/unix03/mmap.c and munmap.c call
# ___mmap and ___munmap), and the stubs' aliases (syscall.map). Each must be
# an interpose original or one address with one, else a program binding it
# maps, unmaps or changes memory unseen.
ENTRY_POINTS = [
    "_mmap", "___mmap", "_munmap", "___munmap",
    "_mprotect", "___mprotect", "_madvise", "_posix_madvise",
    "_msync", "___msync", "_msync$NOCANCEL", "___msync_nocancel",
    "_mlock", "_munlock", "_mlockall", "_munlockall", "_mincore",
    # The calls that end a file's name or a volume (macos/hooks.rs): the C
    # wrappers (xnu libsyscall/wrappers/unlink.c, unlinkat.c, rename.c,
    # renameat.c, renamex.c, carbon_delete.c) and unmount's stub; there is
    # no _delete (___carbon_delete is the Carbon-era delete).
    "_unlink", "_unlinkat", "_rename", "_renameat", "_renamex_np",
    "_renameatx_np", "_unmount", "___carbon_delete",
    # What a fork child inherits of a range and how it is paged (macos/hooks.rs):
    # the BSD call and the Mach MIG routines (xnu osfmk/mach/vm_map.defs,
    # mach_vm.defs), no two one address.
    "_minherit", "_vm_inherit", "_mach_vm_inherit", "_vm_behavior_set",
    "_mach_vm_behavior_set",
    # vfork, a fork that skips pthread_atfork handlers (Libc sys/fork.c).
    "_vfork",
]

# What the library must import, and why: the main executable's header, to
# read DYLD_DLSYM_RESULT before any dlsym (macos/real.rs, interposed: dyld
# halts a process whose dlsym it disabled with `abort`); sched_yield, the
# wait between tries at the table before a fork (macos/os.rs, pause).
REQUIRED_IMPORTS = ["__NSGetMachExecuteHeader", "_sched_yield"]

# The dylib's own install name (LC_ID_DYLIB): never the build machine's path
# (interpose/cdylib_build.rs).
INSTALL_NAME = "@rpath/libmunmapq.dylib"

# The oldest macOS the build supports (scripts/macos-build.sh sets
# MACOSX_DEPLOYMENT_TARGET): 11.0, the first with arm64. Every slice's
# LC_BUILD_VERSION (or LC_VERSION_MIN_MACOSX) must say it, not the host's
# default.
MINOS = (11, 0)

# The system calls that act on a pending pthread cancel (xnu bsd/: the ones
# that call __pthread_testcancel(1), kern_descrip.c sys_fcntl and sys_close,
# sys_generic.c read/write/select/poll and their p- and v- forms,
# vfs_syscalls.c open/openat/fsync/fdatasync, kern_mman.c msync, kern_exit.c
# wait4/waitid, kern_sig.c sigsuspend/__sigwait/__semwait_signal,
# uipc_syscalls.c, posix_sem.c sem_wait, sysv_msg.c, kern_aio.c
# aio_suspend), by the names libSystem exports for their cancelable forms.
# The library may import one only as an interpose original (the program's
# own call, passed through).
CANCELABLE = {
    "_fcntl", "_close", "_read", "_pread", "_readv", "_preadv", "_write",
    "_pwrite", "_writev", "_pwritev", "_select", "_select$DARWIN_EXTSN",
    "_pselect", "_pselect$DARWIN_EXTSN", "_poll", "_open", "_openat", "_fsync",
    "_fdatasync", "_msync", "_wait4", "_waitid", "_waitpid", "_sigsuspend",
    "_sigwait", "_accept", "_connect", "_recvfrom", "_recvmsg", "_sendmsg",
    "_sendto", "_sem_wait", "_msgrcv", "_msgsnd", "_aio_suspend",
    "_nanosleep", "_sleep", "_usleep", "_pause", "_pthread_join",
    "_pthread_cond_wait", "_pthread_cond_timedwait", "_pthread_testcancel",
}

LOAD_DYLIB_ONLY = ["/usr/lib/libSystem.B.dylib"]

# {rust name: C name}, from macos/real.rs (main fills it).
LINKS = {}


ALIASES_TXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libsystem_aliases.txt")


def load_aliases(path=ALIASES_TXT):
    """{arch: {alias: target}} from libsystem_aliases.txt."""
    table = {}
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        alias, target, archs = line
        for arch in archs.split(","):
            table.setdefault(arch, {})[alias] = target
    return table


def aliased_originals(originals, arch, aliases):
    """Groups of originals that are one address in libSystem for arch."""
    same = aliases.get(arch, {})
    groups = {}
    for name in originals:
        groups.setdefault(same.get(name, name), []).append(name)
    return [g for g in groups.values() if len(g) > 1]


def slice_arch(b):
    cpu = str(b.header.cpu_type).split(".")[-1]
    sub = b.header.cpu_subtype & 0x00FFFFFF
    if cpu == "ARM64":
        return "arm64e" if sub == 2 else "arm64"
    return {"X86_64": "x86_64"}.get(cpu, cpu.lower())


def uncovered_entry_points(originals, arch, aliases):
    """ENTRY_POINTS that are neither an original nor one address with one."""
    same = aliases.get(arch, {})
    covered = {same.get(o, o) for o in originals}
    return [e for e in ENTRY_POINTS if same.get(e, e) not in covered]


def slice_minos(b):
    """The minimum OS version a slice's load commands give, as a list."""
    if b.has_build_version:
        return list(b.build_version.minos)
    if b.has_version_min:
        return list(b.version_min.version)
    return None


def check(path, hooks, aliases):
    failures, archs = [], []
    fat = lief.MachO.parse(path)
    if fat is None:
        return [f"{path}: not a Mach-O file"], archs
    for i in range(fat.size):
        b = fat.at(i)
        arch = slice_arch(b)
        archs.append(arch)
        failures += check_slice(f"{path} [{arch}]", b, arch, hooks, aliases)
    return failures, archs


def check_slice(path, b, arch, hooks, aliases):
    failures = []
    if b.header.file_type != lief.MachO.Header.FILE_TYPE.DYLIB:
        failures.append(f"{path}: not a dylib")
    sections = [s for s in b.sections if s.segment_name == "__DATA" and s.name == "__interpose"]
    if len(sections) != 1:
        return [f"{path}: no __DATA,__interpose section"]
    sec = sections[0]
    lo = sec.virtual_address
    if sec.size != 16 * len(hooks):
        failures.append(f"{path}: {sec.size} bytes of pairs, expected {16 * len(hooks)} for {len(hooks)} hooks")
    binds = {}
    for bi in b.dyld_info.bindings if b.has_dyld_info else b.dyld_chained_fixups.bindings:
        if lo <= bi.address < lo + sec.size:
            lib = bi.library.name if bi.has_library else ""
            binds[bi.address - lo] = (bi.symbol.name, lib)
    by_addr = {}
    for s in b.symbols:
        if s.name:
            by_addr.setdefault(s.value, []).append(s.name)
    content = bytes(sec.content)
    originals = [binds[k][0] for k in sorted(binds) if k % 16 == 8]
    for group in aliased_originals(originals, arch, aliases):
        failures.append(f"{path}: originals {' and '.join(group)} are one address in libSystem "
                        f"(scripts/libsystem_aliases.txt): dyld keeps one of their pairs")
    for i, name in enumerate(hooks):
        if 16 * i + 16 > len(content):
            failures.append(f"{path}: no pair for {name}")
            continue
        sym, lib = binds.get(16 * i + 8, (None, ""))
        want = c_symbol(name, LINKS)
        if sym != want or "libSystem" not in lib:
            failures.append(f"{path}: pair {i} original binds {sym!r} from {lib!r}, expected {want} from libSystem")
        target = struct.unpack_from("<Q", content, 16 * i)[0]
        # Rust's v0 mangling puts a `_` between the length and an identifier
        # that starts with `_` or a digit (`__mmap` is `6___mmap`).
        sep = "_" if name[0] == "_" or name[0].isdigit() else ""
        mangled = f"7exports{len(name)}{sep}{name}"
        if not any(mangled in n for n in by_addr.get(target, [])):
            failures.append(f"{path}: pair {i} replacement {target:#x} is {by_addr.get(target)}, expected exports::{name}")
    for e in uncovered_entry_points(originals, arch, aliases):
        failures.append(f"{path}: libSystem's {e} is neither interposed nor an alias of an original")
    exported = {s.name for s in b.exported_symbols}
    for name in [c_symbol(h, LINKS) for h in hooks] + ["_mmap64", "_mremap", "_mlock2", "_posix_madvise"]:
        if name in exported:
            failures.append(f"{path}: exports bare {name}")
    minos = slice_minos(b)
    if minos is None or tuple(minos[:2]) != MINOS:
        failures.append(f"{path}: minimum macOS {minos}, expected {'.'.join(map(str, MINOS))} "
                        "(MACOSX_DEPLOYMENT_TARGET)")
    imported = {s.name for s in b.imported_symbols}
    for name in REQUIRED_IMPORTS:
        if name not in imported:
            failures.append(f"{path}: does not import {name}")
    ids = [c.name for c in b.commands if c.command == lief.MachO.LoadCommand.TYPE.ID_DYLIB]
    install_name = ids[0] if len(ids) == 1 else ids
    if install_name != INSTALL_NAME:
        failures.append(f"{path}: install name (LC_ID_DYLIB) {install_name!r}, expected {INSTALL_NAME}")
    for name in sorted((imported & CANCELABLE) - set(originals)):
        failures.append(f"{path}: imports the cancellation point {name} (use its $NOCANCEL variant)")
    load_kinds = {lief.MachO.LoadCommand.TYPE.LOAD_DYLIB, lief.MachO.LoadCommand.TYPE.LOAD_WEAK_DYLIB,
                  lief.MachO.LoadCommand.TYPE.REEXPORT_DYLIB, lief.MachO.LoadCommand.TYPE.LAZY_LOAD_DYLIB,
                  lief.MachO.LoadCommand.TYPE.LOAD_UPWARD_DYLIB}
    loads = [c.name for c in b.commands if c.command in load_kinds]
    if loads != LOAD_DYLIB_ONLY:
        failures.append(f"{path}: loads {loads}, expected only {LOAD_DYLIB_ONLY} (every program it is inserted into loads them)")
    return failures


def selftest():
    aliases = load_aliases()
    assert aliased_originals(["_madvise", "_posix_madvise"], "arm64", aliases) == [["_madvise", "_posix_madvise"]]
    assert aliased_originals(["_posix_madvise", "_mmap", "_madvise"], "x86_64", aliases)
    assert aliased_originals(["_fstat", "_fstat64"], "arm64", aliases)
    assert not aliased_originals(["_fstat", "_fstat64"], "x86_64", aliases)  # there: _fstat$INODE64
    assert not aliased_originals(["_mmap", "_munmap", "_mprotect", "_madvise", "_msync"], "arm64", aliases)
    # msync$NOCANCEL is its own system call, not msync's alias; ___mprotect is mprotect.
    assert not aliased_originals(["_msync", "_msync$NOCANCEL", "___mmap", "___munmap", "_mmap"], "x86_64", aliases)
    assert aliased_originals(["_msync$NOCANCEL", "___msync_nocancel"], "arm64", aliases)
    assert aliased_originals(["_mprotect", "___mprotect"], "arm64", aliases)
    full = ["_mmap", "_munmap", "_mprotect", "_madvise", "_mlock", "_munlock", "_mlockall",
            "_munlockall", "_msync", "_mincore", "___mmap", "___munmap", "_msync$NOCANCEL",
            "_unlink", "_unlinkat", "_rename", "_renameat", "_renamex_np", "_renameatx_np",
            "_unmount", "___carbon_delete", "_minherit", "_vm_inherit", "_mach_vm_inherit",
            "_vm_behavior_set", "_mach_vm_behavior_set", "_vfork"]
    for arch in ("arm64", "x86_64"):
        assert not uncovered_entry_points(full, arch, aliases)
        assert uncovered_entry_points([o for o in full if o != "___mmap"], arch, aliases) == ["___mmap"]
        assert uncovered_entry_points([o for o in full if o != "_msync$NOCANCEL"], arch, aliases) == \
            ["_msync$NOCANCEL", "___msync_nocancel"]
        assert uncovered_entry_points([o for o in full if o != "_renamex_np"], arch, aliases) == ["_renamex_np"]
        assert uncovered_entry_points([o for o in full if o != "_vm_inherit"], arch, aliases) == ["_vm_inherit"]
    assert link_names(os.path.join(os.path.dirname(ALIASES_TXT), "..", "interpose", "src")).get(
        "msync_nocancel") == "msync$NOCANCEL"
    print("inspect_macho selftest: the alias check refuses _madvise + _posix_madvise, accepts the hooks; "
          "the entry-point check refuses a table without ___mmap or msync$NOCANCEL")


def lief_restricted(b):
    """dyld's isRestricted as LIEF sees a slice: a section __restrict in segment __RESTRICT."""
    return any(s.name == "__restrict" and s.segment_name == "__RESTRICT" for s in b.sections)


def add_restrict_section(data):
    """A thin 64-bit Mach-O with one more LC_SEGMENT_64, __RESTRICT holding an
    empty __restrict section (loader.h layouts), written into the padding
    after the load commands, as the linker's -sectcreate would place it."""
    magic, _, _, _, ncmds, sizeofcmds = struct.unpack_from("<6I", data, 0)
    assert magic == 0xFEEDFACF, "not a thin 64-bit Mach-O"
    seg = struct.pack("<II16sQQQQiiII", 0x19, 72 + 80, b"__RESTRICT", 0, 0, 0, 0, 1, 1, 1, 0)
    sect = struct.pack("<16s16sQQ8I", b"__restrict", b"__RESTRICT", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    at = 32 + sizeofcmds
    assert data[at:at + len(seg + sect)] == bytes(len(seg + sect)), "no room after the load commands"
    data = bytearray(data)
    data[at:at + len(seg + sect)] = seg + sect
    struct.pack_into("<II", data, 16, ncmds + 1, sizeofcmds + len(seg + sect))
    return bytes(data)


def restrict_fixtures(out, exe, others):
    os.makedirs(out, exist_ok=True)
    plain = open(exe, "rb").read()
    files = {"plain": plain, "restricted": add_restrict_section(plain)}
    for i, path in enumerate(others):
        files[f"other{i}"] = open(path, "rb").read()
    lines = []
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        fat = lief.MachO.parse(os.path.join(out, name))
        assert fat is not None, f"LIEF cannot read {name}"
        for i in range(fat.size):
            b = fat.at(i)
            lines.append(f"{name} {slice_arch(b)} {int(lief_restricted(b))}")
    # The fixtures are what they are meant to be, as LIEF reads them.
    assert lines[0].endswith(" 0") and lines[1].endswith(" 1"), lines
    assert all(line.endswith(" 0") for line in lines[2:]), lines
    with open(os.path.join(out, "lief.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"restrict fixtures in {out}: " + "; ".join(lines))


def main():
    args = sys.argv[1:]
    if args == ["--selftest"]:
        return selftest()
    if args and args[0] == "--restrict-fixtures":
        return restrict_fixtures(args[1], args[2], args[3:])
    want = []
    if args and args[0] == "--archs":
        want, args = args[1].split(","), args[2:]
    hooks = macos_hooks(args[0])
    assert hooks, "no hooks found in " + args[0]
    LINKS.update(link_names(args[0]))
    aliases = load_aliases()
    passed = failed = 0
    for path in args[1:]:
        failures, archs = check(path, hooks, aliases)
        failures += [f"{path}: no {a} slice (has {', '.join(archs)})" for a in want if a not in archs]
        if failures:
            failed += 1
            print("\n".join(failures))
        else:
            passed += 1
            print(f"{path} ({' + '.join(archs)}): minos {'.'.join(map(str, MINOS))}, {len(hooks)} interpose pairs each "
                  f"({', '.join(c_symbol(h, LINKS)[1:] for h in hooks)}), originals bound to libSystem, none "
                  "aliases another, every entry point covered, no bare exports, no cancelable import, "
                  f"imports {', '.join(REQUIRED_IMPORTS)}, install name {INSTALL_NAME}, loads only libSystem")
    print(f"macho: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


main()
