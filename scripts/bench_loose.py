"""The loose-object workloads of scripts/bench-compare.py (`--only loose`)
and a program that maps nothing (`--only nothing`).

The repository is generated, so that anyone can rebuild it without a
network: `mq-probe fast-import 6000 600` (6,000 commits over 600 files in
nested directories, each commit editing a few lines of a few files)
imported by `git fast-import` with `fastimport.unpackLimit` above the
object count, so every object is written loose (about 100k objects, no
pack), at git's default settings otherwise, then checked out. It stands
for a shallow clone of a real project unpacked loose: git maps each loose
object whole (open, mmap, close, inflate, munmap) and reads many of them
again. The blame target is the file with the longest history."""
import os
import subprocess
import time

LOOSE_REPO = "loose-repo-6000-600"
COMMITS, FILES = 6000, 600
# Instructions (callgrind) are counted on a smaller run of the same kind.
SMALL_LOG = ["log", "--stat", "-n", "200"]


def loose_objects(repo):
    n = 0
    for d in os.listdir(os.path.join(repo, ".git/objects")):
        if len(d) == 2:
            n += len(os.listdir(os.path.join(repo, ".git/objects", d)))
    return n


def make_loose_repo(probe, log):
    """The repository under target/release/bench (kept: a `done` file)."""
    repo = os.path.abspath(os.path.join("target/release/bench", LOOSE_REPO))
    if os.path.exists(os.path.join(repo, ".git/done")):
        return repo
    log(f"generating {repo}")
    t = time.monotonic()
    subprocess.run(["rm", "-rf", repo], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    gen = subprocess.Popen([probe, "fast-import", str(COMMITS), str(FILES)], stdout=subprocess.PIPE)
    subprocess.run(["git", "-C", repo, "-c", "fastimport.unpackLimit=100000000", "fast-import", "--quiet"],
                   stdin=gen.stdout, check=True)
    gen.stdout.close()
    if gen.wait() != 0:
        raise SystemExit("bench-compare: mq-probe fast-import failed")
    subprocess.run(["git", "-C", repo, "reset", "-q", "--hard"], check=True)
    packs = [p for p in os.listdir(os.path.join(repo, ".git/objects/pack")) if p.endswith(".pack")]
    if packs:
        raise SystemExit(f"bench-compare: {repo} has packs: {packs}")
    open(os.path.join(repo, ".git/done"), "w").close()
    log(f"generated {repo} in {time.monotonic() - t:.0f} s: {loose_objects(repo)} loose objects")
    return repo


def longest_history(repo, env):
    """The file most commits changed (the first by name among equals)."""
    out = subprocess.run(["git", "-C", repo, "log", "--format=", "--name-only"], capture_output=True,
                         text=True, check=True, env=env).stdout
    counts = {}
    for line in out.splitlines():
        if line:
            counts[line] = counts.get(line, 0) + 1
    return min(counts, key=lambda f: (-counts[f], f)), max(counts.values())


def loose_workloads(args, lib_configs, git_env, log):
    repo = make_loose_repo(args.probe, log)
    env = dict(os.environ, **git_env())
    target, changes = longest_history(repo, env)
    n = loose_objects(repo)
    log(f"loose workloads on {repo} ({n} loose objects; blame {target}: {changes} commits)")
    bound = [("CPU new / no preload", "cpu", "none", 1.02), ("syscalls new / no preload", "syscalls", "none", 1.0)]
    base = ["git", "-C", repo]
    out = []
    for n_, what, args_ in [(1, "git log --stat -n 1500", ["log", "--stat", "-n", "1500"]),
                            (2, f"git blame -- {target}", ["blame", "--", target]),
                            (3, "git prune --dry-run --expire=now", ["prune", "--dry-run", "--expire=now"])]:
        w = {"title": f"L{n_}. loose objects: {what}, on {os.path.basename(repo)} ({n} loose objects)",
             "command": f"git -C {repo} {' '.join(args_)}", "configs": lib_configs(base + args_, git_env()),
             "targets": bound}
        if n_ == 1:
            w["instructions"] = base + SMALL_LOG
        out.append(w)
    return out


def nothing_workloads(args, lib_configs, git_env, log):
    argv = ["ls", "-l", "/usr/bin"]
    return [{"title": "N. a program that maps nothing: ls -l /usr/bin", "command": " ".join(argv),
             "configs": lib_configs(argv, {"LC_ALL": "C"}), "instructions": argv,
             "targets": [("CPU new / no preload", "cpu", "none", 1.02)]}]
