#!/usr/bin/env python3
"""Checks a cross-built libmunmapq.dylib without a Mac: its __DATA,__interpose
section holds exactly one {replacement, original} pair per hook of
interpose/src/hooks.rs (common_hooks!), each original bound to libSystem's
symbol and each replacement pointing at our hook, and no hook is exported
under its bare C name. Usage: inspect_macho.py HOOKS_RS DYLIB..."""
import re
import struct
import sys

import lief

lief.logging.disable()


def hook_names(hooks_rs, macro="common_hooks"):
    text = open(hooks_rs).read()
    block = text.split("macro_rules! " + macro, 1)[1].split("};", 1)[0]
    return re.findall(r"^\s+(\w+)\(.*\)\s*->\s*[^;]+;\s*$", block, re.M)


def check(path, hooks):
    failures = []
    fat = lief.MachO.parse(path)
    b = fat.at(0)
    arch = str(b.header.cpu_type).split(".")[-1]
    if b.header.file_type != lief.MachO.Header.FILE_TYPE.DYLIB:
        failures.append(f"{path}: not a dylib")
    sections = [s for s in b.sections if s.segment_name == "__DATA" and s.name == "__interpose"]
    if len(sections) != 1:
        return [f"{path}: no __DATA,__interpose section"], arch
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
    for name in hooks + ["mmap64", "mremap", "mlock2"]:
        if "_" + name in exported:
            failures.append(f"{path}: exports bare _{name}")
    return failures, arch


def main():
    hooks = hook_names(sys.argv[1])
    # macOS-only hooks follow the common ones in the table (exports_macos.rs).
    hooks += hook_names(sys.argv[1].replace("hooks.rs", "exports_macos.rs"), "macos_only_hooks")
    assert hooks, "no hooks found in " + sys.argv[1]
    passed = failed = 0
    for path in sys.argv[2:]:
        failures, arch = check(path, hooks)
        if failures:
            failed += 1
            print("\n".join(failures))
        else:
            passed += 1
            print(f"{path} ({arch}): {len(hooks)} interpose pairs ({', '.join(hooks)}), originals bound to libSystem, no bare exports")
    print(f"macho: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


main()
