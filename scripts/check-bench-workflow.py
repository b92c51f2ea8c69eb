#!/usr/bin/env python3
"""Checks that the macOS CI job that measures the seed's case tells the
truth: in .github/workflows/ci.yml's `macos-bench` job,

- the seed rows are measured by `munmapq bench --seed` (what a user runs),
  as JSON into bench-out/, with a time box of their own, inside a
  repository made by scripts/seed-repo.py with enough commits for at
  least 100,000 window maps per row and padding that puts the branches in
  different windows (more than 1 GiB, then more than 64 MiB);
- no step hides a failure (continue-on-error, `|| echo`, `|| true`,
  `|| :`, `set +e`);
- the tables are uploaded whatever happened (if: always()), and after the
  upload a step (if: always()) runs `check-bench-workflow.py --seed-json`
  on the seed's JSON, which fails the job when the library did not load,
  a row deferred nothing or made fewer than 100,000 window maps;
- the time boxes fit in the job's, and `--time` (per row) in the step's.

Usage: check-bench-workflow.py [WORKFLOW]    (default .github/workflows/ci.yml)
       check-bench-workflow.py --selftest    (refuses workflows that mask failures)
       check-bench-workflow.py --seed-json FILE
                                             (munmapq bench --seed --json's output:
                                              prints each row, fails if one measured nothing)"""
import copy
import json
import os
import re
import shlex
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SEED_REPO_PY = os.path.join(ROOT, "scripts", "seed-repo.py")
# What CI's seed rows must show.
MIN_WINDOW_MAPS = 100_000
# In seed-repo.py's repository, git log --raw under default 1 GiB windows
# alternates between two windows (the first branch; the other two), a map
# for two commits of three; under 64 MiB windows between three, a map per
# commit: per row, at least two maps per commit of a branch.
MAPS_PER_BRANCH_COMMIT = 2
MASKS = [(r"continue-on-error", "continue-on-error"), (r"\|\|\s*echo", "|| echo"), (r"\|\|\s*true", "|| true"),
         (r"\|\|\s*:", "|| :"), (r"set\s+\+e", "set +e"), (r"\|\|\s*exit\s+0", "|| exit 0")]


def seed_repo_defaults():
    """(commits per branch, pad1 MiB, pad2 MiB) that seed-repo.py uses
    when not given."""
    text = open(SEED_REPO_PY).read()
    m = re.search(r"\(default (\d+), (\d+), (\d+);", text)
    return tuple(int(x) for x in m.groups())


def check_seed_repo(line):
    failures = []
    words = shlex.split(line.split("|")[0])
    at = [i for i, w in enumerate(words) if w.endswith("seed-repo.py")][0]
    args = words[at + 2:]
    values = list(seed_repo_defaults())
    for i, a in enumerate(args[:3]):
        values[i] = int(a)
    per_branch, pad1, pad2 = values
    if per_branch * MAPS_PER_BRANCH_COMMIT < MIN_WINDOW_MAPS:
        failures.append(f"seed-repo.py {per_branch} commits per branch: about {per_branch * MAPS_PER_BRANCH_COMMIT} "
                        f"window maps, under {MIN_WINDOW_MAPS}")
    if pad1 <= 1024:
        failures.append(f"seed-repo.py: {pad1} MiB of padding is within git's default 1 GiB window")
    if pad2 <= 64:
        failures.append(f"seed-repo.py: {pad2} MiB of padding is within a 64 MiB window")
    return failures


def check(workflow):
    failures = []
    job = workflow.get("jobs", {}).get("macos-bench")
    if not job:
        return ["no macos-bench job"]
    steps = job.get("steps", [])
    run = lambda s: str(s.get("run", ""))
    for s in steps:
        text = run(s) + ("\ncontinue-on-error" if "continue-on-error" in s else "")
        for mask, label in MASKS:
            if re.search(mask, text):
                failures.append(f"{s.get('name', run(s)[:40])!r}: hides a failure ({label})")
    if "continue-on-error" in job:
        failures.append("the job hides a failure (continue-on-error)")
    repos = [s for s in steps if "seed-repo.py" in run(s)]
    if not repos:
        failures.append("no step makes the seed's repository (scripts/seed-repo.py)")
    for s in repos:
        for line in run(s).splitlines():
            if "seed-repo.py" in line:
                failures += check_seed_repo(line)
    seeds = [i for i, s in enumerate(steps) if re.search(r"munmapq\"?\s+bench\b.*--seed", run(s))]
    if not seeds:
        failures.append("no step runs munmapq bench --seed")
    boxes = sum(int(s.get("timeout-minutes", 0)) for s in steps)
    for i in seeds:
        s = steps[i]
        name = s.get("name", "")
        if "seed" not in name.lower() or len(name) < 40:
            failures.append(f"{name!r}: the seed rows' step says what it reproduces")
        if "timeout-minutes" not in s:
            failures.append(f"{name!r}: no time box of its own (timeout-minutes)")
        words = shlex.split(run(s).split("|")[0])
        if "--json" not in words or "bench-out/seed.json" not in run(s):
            failures.append(f"{name!r}: the JSON is not written to bench-out/seed.json")
        per_row = float(words[words.index("--time") + 1]) if "--time" in words else 120.0
        if 2 * per_row >= 60 * int(s.get("timeout-minutes", 0)):
            failures.append(f"{name!r}: two rows of --time {per_row:.0f} s do not fit its time box")
    if boxes >= int(job.get("timeout-minutes", 360)):
        failures.append(f"the steps' time boxes ({boxes} min) leave no time in the job's ({job.get('timeout-minutes')} min)")
    uploads = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    if not uploads or any(steps[i].get("if") != "always()" for i in uploads):
        failures.append("the tables are not uploaded whatever happened (upload-artifact, if: always())")
    verdicts = [i for i, s in enumerate(steps) if "--seed-json" in run(s) and "bench-out/seed.json" in run(s)]
    if not verdicts:
        failures.append("no step fails the job on the seed's figures (check-bench-workflow.py --seed-json bench-out/seed.json)")
    for i in verdicts:
        if steps[i].get("if") != "always()":
            failures.append("the seed's figures are not checked whatever happened (if: always())")
        if uploads and i < max(uploads):
            failures.append("the seed's figures are checked before the tables are uploaded")
        if seeds and i < max(seeds):
            failures.append("the seed's figures are checked before they are measured")
    return failures


def check_seed_json(path, say=print):
    """munmapq bench --seed --json's report: each row's figures printed;
    the failures."""
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        return [f"{path}: no report ({e}): the seed rows did not finish"]
    say(f"munmapq {d.get('version')} on {d.get('platform')}; library {d.get('library', {}).get('path')}")
    failures = []
    rows = d.get("seed") or []
    if len(rows) != 2:
        failures.append(f"{len(rows)} seed row(s), not 2")
    for r in rows:
        name = r.get("row")
        say(f"{name}: {r.get('summary')}")
        b = r.get("bench") or {}
        say(f"  git log --raw -n {r.get('max_count')} of {r.get('commits')} commits; verdict: {b.get('verdict')}")
        counters = b.get("counters")
        if r.get("skipped"):
            failures.append(f"{name}: skipped: {r['skipped']}")
        elif b.get("problem"):
            failures.append(f"{name}: {b['problem']['kind']}: {b['problem']['why']}")
        if not r.get("skipped") and (counters is None or counters.get("processes", 0) == 0):
            failures.append(f"{name}: the library did not load into git")
        if not r.get("skipped") and r.get("deferred", 0) == 0:
            failures.append(f"{name}: nothing deferred")
        if r.get("window_maps", 0) < MIN_WINDOW_MAPS:
            failures.append(f"{name}: {r.get('window_maps', 0)} window maps, under {MIN_WINDOW_MAPS}")
    return failures


def selftest(workflow):
    assert not check(workflow), check(workflow)

    def mutated(change):
        w = copy.deepcopy(workflow)
        change(w["jobs"]["macos-bench"]["steps"])
        return check(w)

    def seed_step(steps):
        return [s for s in steps if "--seed" in str(s.get("run", "")) and "bench" in str(s.get("run", ""))][0]

    bad = mutated(lambda st: seed_step(st).update({"continue-on-error": True}))
    assert any("continue-on-error" in f for f in bad), bad
    bad = mutated(lambda st: seed_step(st).update({"run": seed_step(st)["run"].rstrip() + ' || echo "no seed row"\n'}))
    assert any("hides a failure (|| echo)" in f for f in bad), bad
    bad = mutated(lambda st: st[:] and [s.pop("if", None) for s in st])
    assert any("uploaded whatever happened" in f for f in bad), bad
    bad = mutated(lambda st: st.remove([s for s in st if "--seed-json" in str(s.get("run", ""))][0]))
    assert any("no step fails the job" in f for f in bad), bad
    bad = mutated(lambda st: [s.update({"run": s["run"].replace("55000", "20000")}) for s in st if "seed-repo.py" in str(s.get("run", ""))])
    assert any("under 100000" in f for f in bad), bad
    bad = mutated(lambda st: seed_step(st).pop("timeout-minutes"))
    assert any("time box" in f for f in bad), bad
    # The seed's JSON: a good row passes, a row that loaded nothing,
    # deferred nothing or mapped too little fails.
    good = {"row": "r", "commits": 165001, "max_count": 165001, "skipped": None, "deferred": 110000,
            "window_maps": 110003, "munmaps_saved": 110000, "ok": True, "summary": "s",
            "bench": {"problem": None, "counters": {"processes": 1}, "verdict": "pays here: 0.50x CPU"}}
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        def verdict(rows):
            path = os.path.join(tmp, "seed.json")
            json.dump({"version": "t", "platform": "t", "library": {"path": "t"}, "seed": rows}, open(path, "w"))
            return check_seed_json(path, say=lambda _: None)
        assert not verdict([good, good])
        unloaded = copy.deepcopy(good)
        unloaded.update({"deferred": 0, "window_maps": 0})
        unloaded["bench"]["counters"] = {"processes": 0}
        assert any("did not load" in f for f in verdict([good, unloaded]))
        nothing = dict(good, deferred=0)
        assert any("nothing deferred" in f for f in verdict([nothing, good]))
        few = dict(good, window_maps=250)
        assert any("under 100000" in f for f in verdict([good, few]))
        assert check_seed_json(os.path.join(tmp, "absent.json"), say=lambda _: None)
    print("check-bench-workflow selftest: refuses continue-on-error, || echo, an upload that is not always(), "
          "no check of the seed's figures, too few commits for 100,000 window maps, an untimed seed step; "
          "the figures check refuses no load, nothing deferred, too few window maps")


def main():
    args = sys.argv[1:]
    if args[:1] == ["--seed-json"]:
        failures = check_seed_json(args[1])
        if failures:
            print("\n".join(f"FAILED: {f}" for f in failures))
            sys.exit(1)
        print("every seed row: the library loaded, deferred munmaps of at least 100,000 window maps")
        return
    import yaml

    path = os.path.join(ROOT, ".github", "workflows", "ci.yml")
    if args and args[0] != "--selftest":
        path = args[0]
    # PyYAML reads `on:` as True; only jobs matter here.
    workflow = yaml.safe_load(open(path))
    if args == ["--selftest"]:
        return selftest(workflow)
    failures = check(workflow)
    if failures:
        print("\n".join(f"{path}: {f}" for f in failures))
        sys.exit(1)
    print(f"{path}: macos-bench measures the seed with munmapq bench --seed on a repository of at least "
          f"{MIN_WINDOW_MAPS} window maps per row, hides no failure, uploads its tables, then fails on no load, "
          "nothing deferred or too few window maps")


main()
