#!/usr/bin/env python3
"""Checks a cross-built libmunmapq.dylib without a Mac: its __DATA,__interpose
section holds exactly one {replacement, original} pair per hook of macOS's
hook table (SRC/lib.rs's shared_hooks! followed by SRC/macos/mod.rs's
hook_table!, SRC being interpose/src), in that order, each original bound to
libSystem's symbol and each replacement pointing at our hook (a function
NAME in a module `hooks`), no two originals one address in libSystem
(scripts/libsystem_aliases.txt: dyld would keep one of the two pairs), and no
hook is exported under its bare C name. Every slice of a universal (fat) file
is checked; --archs arm64,x86_64 requires those slices.
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
        if sym != "_" + name or "libSystem" not in lib:
            failures.append(f"{path}: pair {i} original binds {sym!r} from {lib!r}, expected _{name} from libSystem")
        target = struct.unpack_from("<Q", content, 16 * i)[0]
        mangled = f"5hooks{len(name)}{name}"
        if not any(mangled in n for n in by_addr.get(target, [])):
            failures.append(f"{path}: pair {i} replacement {target:#x} is {by_addr.get(target)}, expected hooks::{name}")
    exported = {s.name for s in b.exported_symbols}
    for name in hooks + ["mmap64", "mremap", "mlock2", "posix_madvise"]:
        if "_" + name in exported:
            failures.append(f"{path}: exports bare _{name}")
    return failures


def selftest():
    aliases = load_aliases()
    assert aliased_originals(["_madvise", "_posix_madvise"], "arm64", aliases) == [["_madvise", "_posix_madvise"]]
    assert aliased_originals(["_posix_madvise", "_mmap", "_madvise"], "x86_64", aliases)
    assert aliased_originals(["_fstat", "_fstat64"], "arm64", aliases)
    assert not aliased_originals(["_fstat", "_fstat64"], "x86_64", aliases)  # there: _fstat$INODE64
    assert not aliased_originals(["_mmap", "_munmap", "_mprotect", "_madvise", "_msync"], "arm64", aliases)
    print("inspect_macho selftest: the alias check refuses _madvise + _posix_madvise, accepts the hooks")


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
            print(f"{path} ({' + '.join(archs)}): {len(hooks)} interpose pairs each ({', '.join(hooks)}), "
                  "originals bound to libSystem and none aliases another, no bare exports")
    print(f"macho: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


main()
