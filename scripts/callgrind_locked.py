#!/usr/bin/env python3
"""Counts the locked instructions one object executed in a callgrind run.

    callgrind_locked.py CALLGRIND_OUT OBJECT

CALLGRIND_OUT comes from `valgrind --tool=callgrind --dump-instr=yes`.
Prints how many times instructions of OBJECT that lock the memory bus ran:
on x86_64 those with a `lock` prefix and `xchg` with memory (locked
whether prefixed or not); the atomic read-modify-writes a call pays
most for, which callgrind counts as one instruction each like any other.
Callgrind gives the addresses of a shared object's instructions relative
to the object, as `objdump` shows them. Other architectures print 0.
"""
import re
import subprocess
import sys


def locked_addresses(obj):
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                         capture_output=True, text=True, check=True).stdout
    found = set()
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(lock\b|xchg\s+%\w+,-?(0x)?[0-9a-f]*\()", line)
        if m:
            found.add(int(m.group(1), 16))
    return found


def executed(out, obj):
    """Yields (address, count) for each cost line of OBJECT's code."""
    name = obj.rsplit("/", 1)[-1]
    objects = {}
    current = None
    addr = 0
    after_calls = False
    with open(out) as f:
        for line in f:
            m = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                if m.group(3):
                    objects[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    current = objects.get(m.group(2), "")
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            m = re.match(r"^(0x[0-9a-f]+|\+\d+|-\d+|\*)\s+\S+\s+(\d+)", line)
            if not m:
                continue
            a = m.group(1)
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] == "+":
                addr += int(a[1:])
            elif a[0] == "-":
                addr -= int(a[1:])
            # The line after `calls=` is the call's inclusive cost.
            if after_calls:
                after_calls = False
                continue
            if current and current.rsplit("/", 1)[-1] == name:
                yield addr, int(m.group(2))


def main():
    out, obj = sys.argv[1], sys.argv[2]
    locked = locked_addresses(obj)
    print(sum(n for a, n in executed(out, obj) if a in locked))


if __name__ == "__main__":
    main()
