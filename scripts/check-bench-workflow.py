#!/usr/bin/env python3
"""Checks that the macOS CI job that measures the seed's case measures it:
in .github/workflows/ci.yml's `macos-bench` job, every step that runs
`mq-bench --seed-only` runs on a pack larger than the window of each seed
row it runs (a pack within one window is mapped once: git never thrashes
and there is nothing to defer), names what it reproduces, has a time box of
its own and lets the job go on, the time boxes fit in the job's, and the
tables are uploaded whatever happened. The rows' windows are read from
probes/src/bin/mq-bench/seed.rs (`Row`'s `window_mib` and `min_windows`),
the default-window row must have at least 1.1 GiB.
Usage: check-bench-workflow.py [WORKFLOW]   (default .github/workflows/ci.yml)
       check-bench-workflow.py --selftest   (the check refuses the old 300 MiB job)"""
import copy
import os
import re
import shlex
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SEED_RS = os.path.join(ROOT, "probes", "src", "bin", "mq-bench", "seed.rs")
# mq-bench --seed-rows: which Row constants each value runs.
ROWS = {"default": ["DEFAULT_WINDOWS"], "scaled": ["SCALED"], "both": ["DEFAULT_WINDOWS", "SCALED"]}
# mq-bench's default --seed-pack-mib (probes/src/bin/mq-bench/main.rs).
DEFAULT_PACK_MIB = 1100
# The seed's case: git's default 1 GiB window, at least 1.1 GiB of pack.
DEFAULT_WINDOW_MIN_PACK_MIB = 1.1 * 1024


def rows_of(seed_rs=SEED_RS):
    """{name: (window MiB, least windows)} of seed.rs's `pub const NAME: Row`."""
    text = open(seed_rs).read()
    rows = {}
    for m in re.finditer(r"pub const (\w+): Row = Row \{(.*?)\n\};", text, re.S):
        body = m.group(2)
        window = int(re.search(r"window_mib: (\d+)", body).group(1))
        least = float(re.search(r"min_windows: ([\d.]+)", body).group(1))
        rows[m.group(1)] = (window, least)
    return rows


def check_command(name, line, rows, ran):
    """One `mq-bench --seed-only ...` command line: its pack against each
    row's window."""
    failures = []
    words = shlex.split(line.split("|")[0])
    opt = lambda flag, default: words[words.index(flag) + 1] if flag in words else default
    pack = int(opt("--seed-pack-mib", DEFAULT_PACK_MIB))
    which = opt("--seed-rows", "both")
    if which not in ROWS:
        return [f"{name!r}: --seed-rows {which}"]
    for row in ROWS[which]:
        ran.add(row)
        window, least = rows[row]
        if pack < least * window:
            failures.append(f"{name!r}: a {pack} MiB pack is {pack / window:.2f} windows of {window} MiB "
                            f"({row}): git would not thrash (at least {least} windows)")
        if row == "DEFAULT_WINDOWS" and pack < DEFAULT_WINDOW_MIN_PACK_MIB:
            failures.append(f"{name!r}: {pack} MiB is under 1.1 GiB for git's default 1 GiB window")
    return failures


def check(workflow, rows):
    failures = []
    job = workflow.get("jobs", {}).get("macos-bench")
    if not job:
        return ["no macos-bench job"]
    steps = job.get("steps", [])
    seed_steps = [s for s in steps if "mq-bench" in str(s.get("run", "")) and "--seed-only" in str(s.get("run", ""))]
    if not seed_steps:
        failures.append("macos-bench runs no seed row (mq-bench --seed-only)")
    ran = set()
    boxes = 0
    for s in seed_steps:
        name = s.get("name", "")
        for line in str(s["run"]).splitlines():
            if "mq-bench" in line and "--seed-only" in line:
                failures += check_command(name, line, rows, ran)

        if "seed" not in name.lower() or len(name) < 40:
            failures.append(f"{name!r}: a seed row's step says what it reproduces")
        if "timeout-minutes" not in s:
            failures.append(f"{name!r}: no time box of its own (timeout-minutes)")
        boxes += int(s.get("timeout-minutes", 0))
        if not s.get("continue-on-error"):
            failures.append(f"{name!r}: a timed-out row must not stop the upload (continue-on-error)")
        if "tee" not in str(s["run"]):
            failures.append(f"{name!r}: the table is not written as it goes (tee into the artifact)")
    if ran and ran != set(rows):
        failures.append(f"rows never run: {sorted(set(rows) - ran)}")
    if boxes and boxes >= int(job.get("timeout-minutes", 360)):
        failures.append(f"the seed rows' time boxes ({boxes} min) leave no time in the job's ({job.get('timeout-minutes')} min)")
    if not any("seed ratio" in str(s.get("run", "")) and s.get("if") == "always()" for s in steps):
        failures.append("the seed's ratio is not printed whatever happened")
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    if not uploads or any(u.get("if") != "always()" for u in uploads):
        failures.append("the tables are not uploaded whatever happened (upload-artifact, if: always())")
    return failures


def selftest(workflow, rows):
    assert not check(workflow, rows), check(workflow, rows)
    old = copy.deepcopy(workflow)
    for s in old["jobs"]["macos-bench"]["steps"]:
        if "--seed-only" in str(s.get("run", "")):
            s["run"] = s["run"].replace("--seed-pack-mib 1200", "--seed-pack-mib 300")
    bad = check(old, rows)
    assert any("would not thrash" in f for f in bad), bad
    assert any("under 1.1 GiB" in f for f in bad), bad
    untimed = copy.deepcopy(workflow)
    for s in untimed["jobs"]["macos-bench"]["steps"]:
        s.pop("timeout-minutes", None)
    assert any("time box" in f for f in check(untimed, rows))
    print("check-bench-workflow selftest: refuses a 300 MiB pack (no thrash under 1 GiB windows) and untimed rows")


def main():
    args = sys.argv[1:]
    rows = rows_of()
    assert set(rows) == {"DEFAULT_WINDOWS", "SCALED"}, rows
    path = os.path.join(ROOT, ".github", "workflows", "ci.yml")
    if args and args[0] != "--selftest":
        path = args[0]
    # PyYAML reads `on:` as True; only jobs matter here.
    workflow = yaml.safe_load(open(path))
    if args == ["--selftest"]:
        return selftest(workflow, rows)
    failures = check(workflow, rows)
    if failures:
        print("\n".join(f"{path}: {f}" for f in failures))
        sys.exit(1)
    print(f"{path}: macos-bench's seed rows thrash: " + "; ".join(
        f"{r} {rows[r][0]} MiB windows" for r in sorted(rows)) + ", each pack larger than its window, time-boxed, uploaded")


main()
