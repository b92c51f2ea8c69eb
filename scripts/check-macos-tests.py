#!/usr/bin/env python3
"""Checks that nothing in the macOS test set puts a SIP-protected program
between a test and the command it runs under the library: dyld deletes every
DYLD_* variable for such a program (dyld-1378 dyld/DyldProcessConfig.cpp,
`ProcessConfig::Security`: a platform binary under SIP gets no path variables,
and `pruneEnvVars` removes them from what it passes on), so `/bin/sh -c
"git ..."` runs git without the library and a differential test fails with
"the library reported nothing" on every Mac. SIP covers /bin, /sbin, /usr/bin,
/usr/sbin, /usr/libexec and /System: the shells, /usr/bin/env, the
/usr/bin/git shim, xcrun.

The set: the integration tests scripts/test.sh runs on Darwin (`--test NAME`),
read in tests/NAME.rs with Linux-only items (`#[cfg(target_os = "linux")]`)
left out; and the `munmapq COMMAND` lines of the `macos` job of
.github/workflows/ci.yml. Refused in a test: a string literal naming a shell,
env, xcrun or a path under a SIP directory, and `Command::new("git")` (on a
Mac, PATH's git is /usr/bin/git). Refused in the job: such a program as the
command munmapq runs.
Usage: check-macos-tests.py [--selftest]"""
import os
import re
import sys

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

SHELLS_AND_SHIMS = {"sh", "bash", "zsh", "dash", "csh", "tcsh", "ksh", "env", "xcrun", "git"}
SIP_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/libexec/", "/System/")
OWN_WORDS = {"doctor", "selftest", "preload-env", "shell-init", "help", "version"}


def darwin_tests(test_sh):
    """The `--test NAME` of scripts/test.sh's Darwin branch."""
    text = open(test_sh).read()
    branch = text.split('if [ "$(uname -s)" = Darwin ]; then', 1)[1].split("\nfi\n", 1)[0]
    return re.findall(r"--test (\w+)", branch)


def without_linux_items(code):
    """The code with each item under #[cfg(target_os = "linux")] removed."""
    out, i = [], 0
    marker = '#[cfg(target_os = "linux")]'
    while True:
        at = code.find(marker, i)
        if at < 0:
            out.append(code[i:])
            return "".join(out)
        out.append(code[i:at])
        j = at + len(marker)
        # The item ends at its `;` or at the `}` closing its first `{`.
        depth = 0
        while j < len(code):
            c = code[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif c == ";" and depth == 0:
                j += 1
                break
            j += 1
        i = j


def refused_literal(s):
    name = s.strip()
    return name in SHELLS_AND_SHIMS - {"git"} or name.startswith(SIP_DIRS)


def test_failures(name, code):
    code = without_linux_items(re.sub(r"//[^\n]*", "", code))
    failures = []
    for lit in sorted(set(re.findall(r'"((?:[^"\\]|\\.)*)"', code))):
        if refused_literal(lit):
            failures.append(f"tests/{name}.rs: runs or names {lit!r}, SIP-protected on macOS: "
                            "dyld drops DYLD_* for it and whatever it starts")
    if re.search(r'Command::new\(\s*"git"\s*\)', code):
        failures.append(f"tests/{name}.rs: Command::new(\"git\"): on a Mac that is /usr/bin/git, "
                        "a SIP-protected shim (use Homebrew's git)")
    return failures


def job_failures(workflow, job="macos"):
    """`munmapq [OPTIONS] COMMAND` lines of the job whose COMMAND is refused."""
    text = open(workflow).read()
    body = text.split(f"\n  {job}:\n", 1)[1]
    body = re.split(r"\n  [\w-]+:\n", body, 1)[0]
    failures = []
    for line in body.splitlines():
        for m in re.finditer(r"munmapq((?:\s+[^\s;|&<>]+)*)", line):
            words = m.group(1).split()
            command = next((w for w in words if not w.startswith("-")), None)
            if command is None or command in OWN_WORDS or command.startswith("$"):
                continue
            base = command.strip("'\"")
            if base in SHELLS_AND_SHIMS or base.startswith(SIP_DIRS):
                failures.append(f"{workflow}: the {job} job runs {base} under munmapq: "
                                f"SIP-protected on macOS ({line.strip()})")
    return failures


def selftest():
    bad = 'let mut c = Command::new("sh");\nc.arg("-c").arg("git log");'
    assert test_failures("x", bad), "a shell between the test and git"
    assert test_failures("x", 'Command::new("/usr/bin/env")')
    assert test_failures("x", 'Command::new("git")')
    assert not test_failures("x", '#[cfg(target_os = "linux")]\nfn f() { Command::new("sh"); }\n')
    assert not test_failures("x", 'let g = "/opt/homebrew/bin/git"; // not "sh"\n')
    print("check-macos-tests selftest: refuses sh, /usr/bin/env and PATH's git in a macOS test, "
          "not in a Linux-only item")


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    names = darwin_tests(os.path.join(TOP, "scripts", "test.sh"))
    assert names, "no --test in scripts/test.sh's Darwin branch"
    failures = []
    for name in names:
        failures += test_failures(name, open(os.path.join(TOP, "tests", f"{name}.rs")).read())
    failures += job_failures(os.path.join(TOP, ".github", "workflows", "ci.yml"))
    print("\n".join(failures) if failures else
          f"macos tests: no SIP-protected program between a test and its command in "
          f"{', '.join(names)} or the macos job")
    sys.exit(1 if failures else 0)


main()
