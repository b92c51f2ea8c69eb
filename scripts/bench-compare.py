#!/usr/bin/env python3
"""The measuring half of scripts/bench-compare.sh (usage and what is
measured: that script's header). It is given the built libraries and probe;
it generates or finds the repositories, runs every workload's
configurations alternating, and prints markdown tables."""
import argparse
import ctypes
import hashlib
import math
import os
import re
import statistics
import subprocess
import sys
import time

from bench_loose import loose_workloads, nothing_workloads

TINY = ["-c", "core.packedGitWindowSize=16k", "-c", "core.packedGitLimit=32k"]  # mq-bench's measure.rs
GIT_REPO = "bench-repo-20000-8000"  # mq-bench --eviction's "20000 commits x 8000 files"
SEED_REPO = "seed-repo-4400-256"  # mq-bench --seed-only's (a 1100 MiB pack)
COUNTED = 20000  # cycles the exact micro counts are per-cycle over
LIB_KEYS = ["mmap_calls", "eligible", "reused", "deferred", "pass_payoff", "mmap_syscalls", "munmap_syscalls",
            "pages_dropped", "peak_queued"]


def die(msg):
    sys.exit(f"bench-compare: {msg}")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Config:
    """One configuration: a command, its environment, maybe a library."""

    def __init__(self, key, label, argv, lib=None, env=None):
        self.key, self.label, self.argv, self.lib = key, label, argv, lib
        self.env = env or {}

    def environ(self, **extra):
        e = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MUNMAPQ_")}
        e.update(self.env)
        if self.lib:
            e["LD_PRELOAD"] = self.lib
        e.update(extra)
        return e


class FixedLayout:
    """personality(ADDR_NO_RANDOMIZE) while the counting runs start: page
    faults depend on where mappings land (fault-around maps the cached pages
    of an aligned 64 KiB block, clipped to the mapping: a 16 KiB window across
    a block boundary takes 2 faults, not 1), so a count under ASLR moves with
    it. Set here, inherited by the children (not in a preexec_fn: the forked
    Python's own page faults would count as the child's)."""

    def __enter__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.old = self.libc.personality(0xFFFFFFFF)
        self.libc.personality(self.old | 0x0040000)

    def __exit__(self, *exc):
        self.libc.personality(self.old)


def run(cfg, argv=None, **extra):
    """One run: CPU (user+sys), wall, ru_maxrss KiB, faults, sha256 of stdout."""
    argv = argv or cfg.argv
    with open(ARGS.work + "/stderr", "wb") as err:
        t = time.monotonic()
        p = subprocess.Popen(argv, env=cfg.environ(**extra), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=err)
        h = hashlib.sha256()
        for chunk in iter(lambda: p.stdout.read(1 << 16), b""):
            h.update(chunk)
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        die(f"{cfg.label}: {' '.join(argv)} exited {p.returncode}:\n" + open(ARGS.work + "/stderr").read()[-2000:])
    return {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rss": ru.ru_maxrss,
            "faults": ru.ru_minflt + ru.ru_majflt, "hash": h.hexdigest()}


def syscalls(cfg, argv=None):
    """Total system calls of one run, `strace -f -c`'s total line."""
    out = ARGS.work + "/strace.out"
    subprocess.run(["strace", "-f", "-c", "-o", out, "--"] + (argv or cfg.argv), env=cfg.environ(),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    for line in open(out):
        f = line.split()
        if f and f[-1] == "total":
            return int(f[3])
    die(f"no total line in {out}")


def instructions(cfg, argv):
    """User-space instructions of one run (callgrind's Ir total)."""
    out = ARGS.work + "/callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                   env=cfg.environ(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    m = re.search(r"^(?:summary|totals):\s+(\d+)", open(out).read(), re.M)
    return int(m.group(1)) if m else die(f"no summary in {out}")


def lib_counters(cfg):
    """The library's counters of one run (MUNMAPQ_STATS_FILE), summed over
    its processes (peaks: the largest), or None if it wrote none."""
    path = ARGS.work + "/stats"
    if os.path.exists(path):
        os.unlink(path)
    run(cfg, MUNMAPQ_STATS_FILE=path)
    total = None
    for line in open(path) if os.path.exists(path) else []:
        if line.startswith("munmapq pid="):
            total = total or {}
            for k, v in (kv.split("=", 1) for kv in line.split()[1:]):
                total[k] = max(total.get(k, 0), int(v)) if k.startswith("peak_") else total.get(k, 0) + int(v)
    return total


# A half of the rounds holds at least this much CPU time of the longest
# configuration: a workload of a fifth of a second runs more rounds than 9
# (up to MAX_ROUNDS a half), else its median moves with a few scheduler
# ticks of a shared machine.
MIN_HALF_CPU = 4.0
MAX_ROUNDS = 40


def measure(w):
    """Times `w`'s configurations, 2 x rounds rounds alternating (two halves,
    one CPU median each; more rounds where runs are short, decided after the
    first), then counts one run of each exactly. Answers the results, the
    output's hash and the rounds of a half."""
    cfgs, rounds, n = w["configs"], ARGS.rounds, len(w["configs"])
    runs = {c.key: [[], []] for c in cfgs}
    r = 0
    while r < 2 * rounds:
        for k in range(n):
            c = cfgs[(k + r) % n]
            runs[c.key][r // rounds].append(run(c))
        if r == 0 and not ARGS.quick:
            longest = max(runs[c.key][0][0]["cpu"] for c in cfgs)
            rounds = max(rounds, min(MAX_ROUNDS, math.ceil(MIN_HALF_CPU / max(longest, 1e-3))))
        r += 1
    res, hashes = {}, set()
    for c in cfgs:
        both = runs[c.key][0] + runs[c.key][1]
        hashes |= {s["hash"] for s in both}
        res[c.key] = {"cpu": [statistics.median(s["cpu"] for s in h) for h in runs[c.key]],
                      "cpu_runs": [[s["cpu"] for s in h] for h in runs[c.key]],
                      "wall": statistics.median(s["wall"] for s in both),
                      "rss": max(s["rss"] for s in both),
                      "faults_range": (min(s["faults"] for s in both), max(s["faults"] for s in both))}
        with FixedLayout():
            count(w, c, res[c.key], hashes)
    if len(hashes) != 1:
        die(f"{w['title']}: outputs differ between runs or configurations ({len(hashes)} distinct sha256)")
    return res, hashes.pop(), rounds


def count(w, c, r, hashes):
    """The exact counts of configuration `c` into `r`."""
    one = run(c)
    hashes.add(one["hash"])
    r["faults"] = one["faults"]
    r["syscalls"] = syscalls(c)
    if c.lib:
        r["lib"] = lib_counters(c)
    if w.get("instructions"):  # exact user-space instructions of a smaller run of the same kind
        r["instructions"] = instructions(c, w["instructions"])
    if w.get("micro"):  # exact per-cycle counts: (64 + COUNTED cycles) - (64 cycles)
        short, long_ = ([ARGS.probe, "cycle", ARGS.file, str(cycles), "64"] for cycles in (64, 64 + COUNTED))
        r["counts"] = {"instructions": (instructions(c, short), instructions(c, long_)),
                       "syscalls": (syscalls(c, short), syscalls(c, long_)),
                       "faults": (run(c, short)["faults"], run(c, long_)["faults"])}
        for k, (x, y) in r["counts"].items():
            r[k + "_pc"] = (y - x) / COUNTED


def ratio(res, metric, a, b):
    """res[a]/res[b]. For CPU, paired: in each round every configuration
    runs back to back, so a round's ratio a/b is measured under one state of
    the machine (a shared VM drifts by a tenth within minutes, and that
    drift cancels in a pair); the ratio is the median of the rounds' ratios
    of a half, the worse (larger) of the two halves'."""
    if a not in res or b not in res:
        return None
    if metric == "cpu":
        return max(statistics.median(x / y if y else float("inf") for x, y in zip(xs, ys))
                   for xs, ys in zip(res[a]["cpu_runs"], res[b]["cpu_runs"]))
    x, y = res[a].get(metric), res[b].get(metric)
    return None if x is None or not y else x / y


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def report(w, res, digest, secs, rounds):
    micro = w.get("micro")
    print(f"\n## {w['title']}\n")
    print(f"`{w['command']}`; {2 * rounds} rounds alternating ({rounds} + {rounds}: "
          f"one CPU median each half); output sha256 {digest[:16]}, identical in every run; {secs:.0f} s.\n")
    print("| configuration | CPU s (median 1 / median 2) | median wall s | peak RSS KiB (max) | page faults (one run) | page faults (timed runs: min-max) | syscalls (strace -f -c, one run) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for c in w["configs"]:
        r = res[c.key]
        print(f"| {c.label} | {r['cpu'][0]:.4f} / {r['cpu'][1]:.4f} | {r['wall']:.4f} | {r['rss']} | {r['faults']} | {r['faults_range'][0]}-{r['faults_range'][1]} | {r['syscalls']} |")
    if w.get("instructions"):
        print(f"\nUser-space instructions (callgrind) of `{' '.join(w['instructions'])}`: " +
              ", ".join(f"{c.label} {res[c.key]['instructions']:,}" for c in w["configs"]) + ".")
    if micro:
        print(f"\nExact counts at 64 and {64 + COUNTED} cycles; per cycle = the difference / {COUNTED} "
              f"(every one of those cycles is {w['per']}):\n")
        print(f"| configuration | instructions (callgrind, user) | per {w['per_word']} | syscalls | per {w['per_word']} | page faults | per {w['per_word']} |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for c in w["configs"]:
            r = res[c.key]
            cells = " | ".join(f"{r['counts'][k][0]} / {r['counts'][k][1]} | {r[k + '_pc']:.2f}"
                               for k in ("instructions", "syscalls", "faults"))
            print(f"| {c.label} | {cells} |")
    libs = [c for c in w["configs"] if c.lib]
    print("\nThe library's counters (MUNMAPQ_STATS_FILE, one run):\n")
    print("| library | " + " | ".join(LIB_KEYS) + " |")
    print("| --- " * (len(LIB_KEYS) + 1) + "|")
    for c in libs:
        cnt = res[c.key].get("lib")
        cells = " | ".join(str(cnt.get(k, "-")) for k in LIB_KEYS) if cnt else " | ".join("-" * len(LIB_KEYS))
        print(f"| {c.label} | {cells} |")
    if w.get("check"):
        print("\n" + w["check"](res))
    metrics = [("cpu", "CPU (paired, worse half)"), ("wall", "wall"), ("rss", "peak RSS")]
    metrics += ([("instructions_pc", "instructions / cycle"), ("syscalls_pc", "syscalls / cycle"),
                 ("faults_pc", "page faults / cycle")] if micro else
                [("faults", "page faults"), ("syscalls", "syscalls")])
    metrics += [("instructions", "instructions (callgrind, smaller run)")] if w.get("instructions") else []
    floor = w.get("floor")
    print(f"\n| ratio | new / no preload | old / no preload | new / old |{f' new / {floor} |' if floor else ''}")
    print("| --- | --- | --- | --- |" + (" --- |" if floor else ""))
    for m, name in metrics:
        cells = [ratio(res, m, "new", "none"), ratio(res, m, "old", "none"), ratio(res, m, "new", "old")]
        cells += [ratio(res, m, "new", "floor")] if floor else []
        print(f"| {name} | " + " | ".join(fmt(v, 4) for v in cells) + " |")
    if w["targets"]:
        print("\n| target | new | old | bound | new |\n| --- | --- | --- | --- | --- |")
        for name, m, den, bound in w["targets"]:
            v, o = ratio(res, m, "new", den), ratio(res, m, "old", den)
            verdict = "-" if v is None else "met" if v <= bound else "not met"
            print(f"| {name} | {fmt(v, 4)} | {fmt(o, 4)} | <= {bound} | {verdict} |")
    sys.stdout.flush()


def find_repo(name, given):
    """`given`, else NAME under target/release/bench of this tree or of the
    main worktree (a `done` file: generated to the end), else None."""
    if given:
        return given if os.path.isdir(given) else die(f"{given}: no such repository")
    top = subprocess.run(["git", "worktree", "list", "--porcelain"], capture_output=True, text=True).stdout
    trees = [os.getcwd()] + [l[9:] for l in top.splitlines() if l.startswith("worktree ")][:1]
    for t in trees:
        p = os.path.join(t, "target/release/bench", name)
        if os.path.exists(os.path.join(p, "done")):
            return p
    return None


def generate(name, stream, fast_import, repack):
    """Generates NAME under this tree's target/release/bench as mq-bench does."""
    repo = os.path.abspath(os.path.join("target/release/bench", name))
    log(f"generating {repo}")
    t = time.monotonic()
    subprocess.run(["rm", "-rf", repo], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    gen = subprocess.Popen([ARGS.probe] + stream, stdout=subprocess.PIPE)
    subprocess.run(["git", "-C", repo] + fast_import, stdin=gen.stdout, check=True)
    gen.stdout.close()
    if gen.wait() != 0:
        die(f"mq-probe {' '.join(stream)} failed")
    if repack:
        subprocess.run(["git", "-C", repo, "repack", "-adq"], check=True)
    open(os.path.join(repo, "done"), "w").close()
    log(f"generated {repo} in {time.monotonic() - t:.0f} s")
    return repo


def lib_configs(argv, env=None):
    return [Config("none", "no preload", argv, env=env),
            Config("old", f"old ({ARGS.old_name})", argv, ARGS.old_lib, env),
            Config("new", f"new ({ARGS.new_name})", argv, ARGS.new_lib, env)]


def micro_workloads():
    page = os.sysconf("SC_PAGE_SIZE")
    env = {"MQ_WINDOW_PAGES": str(16384 // page)}
    pages = 64 * 16384 // page + 1
    if not os.path.exists(ARGS.file) or os.path.getsize(ARGS.file) != pages * page:
        subprocess.run([ARGS.probe, "mkfile", ARGS.file, str(pages)], check=True, stdout=subprocess.DEVNULL)
    argv = [ARGS.probe, "cycle", ARGS.file, str(ARGS.cycles), "64"]
    cmd = f"mq-probe cycle FILE {ARGS.cycles} 64 (64 windows of 16 KiB in turn)"

    def reuse_check(res):
        got = (res["new"].get("lib") or {}).get("reused")
        want = ARGS.cycles - 64
        return f"Reuse path check (new library): reused {got} of the {want} cycles after the first 64: " + \
            ("yes." if got == want else "NO: not every later cycle was a reuse.")

    def miss_check(res):
        lib = res["new"].get("lib") or {}
        ok = lib.get("reused") == 0 and lib.get("mmap_syscalls", 0) >= ARGS.cycles
        return f"Miss path check (new library): reused {lib.get('reused')}, mmap syscalls {lib.get('mmap_syscalls')} " + \
            f"for {ARGS.cycles} cycles: " + ("every mmap a miss." if ok else "NOT every mmap a miss!")

    return [
        {"title": "1. micro, reuse path", "command": cmd, "configs": lib_configs(argv, env), "micro": True,
         "per": "a reuse", "per_word": "reuse", "check": reuse_check,
         "targets": [("CPU new / no preload (micro)", "cpu", "none", 0.08),
                     ("syscalls per cycle new / no preload", "syscalls_pc", "none", 0.70),
                     ("page faults per cycle new / no preload", "faults_pc", "none", 0.60)]},
        {"title": "2. micro, miss path (MUNMAPQ_MAX_ENTRIES=1)", "command": "MUNMAPQ_MAX_ENTRIES=1 " + cmd,
         "configs": lib_configs(argv, dict(env, MUNMAPQ_MAX_ENTRIES="1")), "micro": True,
         "per": "a miss", "per_word": "miss", "check": miss_check, "targets": []},
    ]


def git_env():
    return {"GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat"}  # as mq-bench's git_command


def git_workloads():
    repo = find_repo(GIT_REPO, ARGS.git_repo) or generate(
        GIT_REPO, ["fast-import", "20000", "8000"], ["fast-import", "--quiet"], True)
    log(f"git workload on {repo}")
    base = ["git", "-C", repo]
    cfgs = [Config("floor", "floor: git's default windows, no preload", base + ["log", "--raw"], env=git_env())]
    cfgs += lib_configs(base + TINY + ["log", "--raw"], git_env())
    return [{"title": f"3. long reuse distance: git log --raw, tiny windows, on {os.path.basename(repo)}",
             "command": f"git -C {repo} {' '.join(TINY)} log --raw", "configs": cfgs, "floor": "floor",
             "targets": [("syscalls new / no preload", "syscalls", "none", 0.70),
                         ("page faults new / no preload", "faults", "none", 0.60),
                         ("CPU new / no preload", "cpu", "none", 0.87),
                         ("CPU new / floor (git's default windows)", "cpu", "floor", 1.30),
                         ("peak RSS new / no preload", "rss", "none", 1.4)]}]


def seed_workloads():
    repo = find_repo(SEED_REPO, ARGS.seed_repo) or generate(
        SEED_REPO, ["fast-import-big", "4400", "300", "256"],
        ["-c", "pack.compression=0", "-c", "core.compression=0", "fast-import", "--quiet"], False)
    log(f"seed workloads on {repo}")
    out = []
    for n, settings, cpu_bound in [(1, ["core.packedGitLimit=128m"], 1.02),
                                   (2, ["core.packedGitWindowSize=64m", "core.packedGitLimit=128m"], 0.87)]:
        dash_c = [a for s in settings for a in ("-c", s)]
        cfgs = [Config("floor", "reference: git's default config, no preload",
                       ["git", "-C", repo, "log", "--raw"], env=git_env())]
        cfgs += lib_configs(["git", "-C", repo] + dash_c + ["log", "--raw"], git_env())
        out.append({"title": f"4.{n} the seed's case: git {' '.join(dash_c)} log --raw",
                    "command": f"git -C {repo} {' '.join(dash_c)} log --raw", "configs": cfgs, "floor": "reference",
                    "targets": [("CPU new / no preload", "cpu", "none", cpu_bound),
                                ("peak RSS new / no preload", "rss", "none", 1.6),
                                ("syscalls new / no preload", "syscalls", "none", 0.70),
                                ("page faults new / no preload", "faults", "none", 0.60)]})
    return out


def main():
    global ARGS
    p = argparse.ArgumentParser(description="see scripts/bench-compare.sh")
    for a in ("--old-lib", "--new-lib", "--old-name", "--new-name", "--probe", "--work"):
        p.add_argument(a, required=True)
    p.add_argument("--rounds", type=int)
    p.add_argument("--only", choices=["micro", "git", "seed", "loose", "nothing"], action="append")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--git-repo")
    p.add_argument("--seed-repo")
    ARGS = p.parse_args()
    ARGS.cycles = 20000 if ARGS.quick else 200000
    ARGS.rounds = ARGS.rounds or (1 if ARGS.quick else 9)
    ARGS.file = ARGS.work + "/micro.bin"
    parts = ARGS.only or ["micro", "git", "seed", "loose", "nothing"]
    print(f"# bench-compare: old = {ARGS.old_name}, new = {ARGS.new_name}; {2 * ARGS.rounds} rounds "
          f"({ARGS.rounds} + {ARGS.rounds}{'' if ARGS.quick else f', more where a half would hold under {MIN_HALF_CPU:.0f} s of its longest configuration'})"
          f"{' (quick)' if ARGS.quick else ''}; {os.cpu_count()} cores, "
          f"{' '.join(os.uname()[i] for i in (0, 2, 4))}, "
          f"{subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()}")
    print("\nCPU: user+sys of the child (getrusage); the seconds shown are two medians, one of each half of the "
          "rounds; a CPU ratio a / b is paired: the median, over a half's rounds, of a's run over b's run of the "
          "same round (every configuration runs once per round, back to back), the worse of the two halves'. "
          "Peak RSS: the largest ru_maxrss of the timed runs. Page faults: "
          "minflt+majflt of one run; the counting runs (faults, syscalls, the library's counters) run without "
          "address randomization, which moves page faults (fault-around), the timed runs with it.")
    extra = (ARGS, lib_configs, git_env, log)
    for part, make in (("micro", micro_workloads), ("git", git_workloads), ("seed", seed_workloads),
                       ("loose", lambda: loose_workloads(*extra)), ("nothing", lambda: nothing_workloads(*extra))):
        if part not in parts:
            continue
        for w in make():
            log(f"{w['title']}")
            t = time.monotonic()
            res, digest, rounds = measure(w)
            report(w, res, digest, time.monotonic() - t, rounds)


if __name__ == "__main__":
    main()
