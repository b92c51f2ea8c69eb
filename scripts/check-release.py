#!/usr/bin/env python3
"""Checks the release: .github/workflows/release.yml runs scripts/dist.sh
on a version tag and publishes every archive, SHA256SUMS and the filled-in
formula; the archives scripts/dist.sh built into DIST (scripts/dist.sh
--host in CI) hold what they must, their binaries run and their
completions are what the binary generates, and SHA256SUMS checks; the
Homebrew formula (packaging/homebrew/munmapq.rb) builds from the source
archive that dist.sh names, with Homebrew's Rust, installs the man page
and completions, and tests with `munmapq selftest`; `ruby -c` accepts it
(and the filled-in one) where ruby is installed.
Usage: check-release.py DIST        (default dist)
       check-release.py --selftest  (the checks refuse broken variants)"""
import copy
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
WORKFLOW = os.path.join(ROOT, ".github", "workflows", "release.yml")
FORMULA = os.path.join(ROOT, "packaging", "homebrew", "munmapq.rb")
DIST_SH = os.path.join(ROOT, "scripts", "dist.sh")
MEMBERS = ["munmapq", "munmapq.1", "LICENSE-MIT", "LICENSE-APACHE", "README.md",
           "completions/munmapq.bash", "completions/_munmapq", "completions/munmapq.fish"]
SHELLS = {"bash": "completions/munmapq.bash", "zsh": "completions/_munmapq",
          "fish": "completions/munmapq.fish"}
PUBLISHED = ["dist/*.tar.gz", "dist/SHA256SUMS", "dist/munmapq.rb"]


def dist_sh(*args):
    return subprocess.run([DIST_SH, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def workflow_errors(wf):
    errs = []
    # PyYAML reads the key `on` as True.
    on = wf.get("on", wf.get(True)) or {}
    tags = ((on.get("push") or {}).get("tags")) if isinstance(on, dict) else None
    if tags != ["v*"]:
        errs.append(f"not run on a version tag (on.push.tags is {tags!r}, want ['v*'])")
    if not isinstance(on, dict) or set(on) != {"push"} or set(on["push"] or {}) != {"tags"}:
        errs.append("runs on more than a pushed tag")
    if (wf.get("permissions") or {}).get("contents") != "write":
        errs.append("no `permissions: contents: write` (a release cannot be created)")
    steps = [s for j in (wf.get("jobs") or {}).values() for s in j.get("steps") or []]
    runs = [i for i, s in enumerate(steps) if re.search(r"(^|\s)scripts/dist\.sh\s*$",
                                                        s.get("run", ""), re.M)]
    pubs = [i for i, s in enumerate(steps)
            if str(s.get("uses", "")).startswith("softprops/action-gh-release@")]
    if not runs:
        errs.append("no step runs scripts/dist.sh (all archives)")
    if len(pubs) != 1:
        errs.append("not exactly one softprops/action-gh-release step")
    elif runs and pubs[0] < runs[0]:
        errs.append("publishes before scripts/dist.sh runs")
    else:
        with_ = steps[pubs[0]].get("with") or {}
        files = str(with_.get("files", "")).split()
        for f in PUBLISHED:
            if f not in files:
                errs.append(f"the release does not publish {f}")
        if with_.get("fail_on_unmatched_files") is not True:
            errs.append("a missing archive would not fail the release")
    return errs


def formula_errors(text, source_url, version):
    errs = []
    url = re.search(r'^  url "([^"]*)"$', text, re.M)
    sha = re.search(r'^  sha256 "([^"]*)"$', text, re.M)
    if not url or url.group(1) != source_url:
        errs.append(f"url is not dist.sh's source archive {source_url}")
    if not sha or not re.fullmatch(r"[0-9a-f]{64}", sha.group(1)):
        errs.append("sha256 is not 64 hex digits")
    if url and f"/v{version}/munmapq-{version}.tar.gz" not in url.group(1):
        errs.append(f"url is not version {version}'s")
    for need, why in [
        (r'^  depends_on "rust" => :build$', "Homebrew's Rust as a build dependency"),
        (r'system "cargo", "install", \*std_cargo_args', "cargo install *std_cargo_args"),
        (r'man1\.install "munmapq\.1"', "the man page"),
        (r'generate_completions_from_executable\(bin/"munmapq", "completions"\)',
         "the completions"),
        (r'test do\n(.*\n)*?\s+system bin/"munmapq", "selftest"\n(.*\n)*?  end', "a selftest test"),
    ]:
        if not re.search(need, text, re.M):
            errs.append(f"no {why}")
    return errs


def ruby_errors(path):
    if not shutil.which("ruby"):
        return []
    r = subprocess.run(["ruby", "-c", path], capture_output=True, text=True)
    return [] if r.returncode == 0 else [f"ruby -c {path}: {r.stderr.strip()}"]


def archive_errors(path, host_completions):
    errs = []
    name = os.path.basename(path)[: -len(".tar.gz")]
    with tarfile.open(path) as t:
        names = set(t.getnames())
        for m in MEMBERS:
            if f"{name}/{m}" not in names:
                errs.append(f"{name}: no {m}")
        if errs:
            return errs
        binary = t.getmember(f"{name}/munmapq")
        if binary.mode & 0o111 == 0:
            errs.append(f"{name}: munmapq is not executable")
        for shell, member in SHELLS.items():
            if t.extractfile(f"{name}/{member}").read() != host_completions[shell]:
                errs.append(f"{name}: {member} is not `munmapq completions {shell}`")
        if t.extractfile(f"{name}/munmapq.1").read() != open(os.path.join(ROOT, "munmapq.1"), "rb").read():
            errs.append(f"{name}: munmapq.1 is not the repository's")
    return errs


def host_archive_runs(path, out):
    """The host archive's launcher runs from where it was unpacked."""
    name = os.path.basename(path)[: -len(".tar.gz")]
    with tarfile.open(path) as t:
        t.extractall(out, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(out)
    binary = os.path.join(out, name, "munmapq")
    r = subprocess.run([binary, "--version"], capture_output=True, text=True)
    return [] if r.returncode == 0 and r.stdout.startswith("munmapq ") else [
        f"{name}: munmapq --version: {r.returncode} {r.stdout}{r.stderr}"]


def dist_errors(dist):
    errs = []
    version = dist_sh("--source-name")[len("munmapq-"): -len(".tar.gz")]
    sums = {}
    for line in open(os.path.join(dist, "SHA256SUMS")):
        digest, name = line.split()
        sums[name] = digest
    archives = sorted(os.path.basename(p) for p in glob.glob(os.path.join(dist, "*.tar.gz")))
    if sorted(sums) != archives:
        errs.append(f"SHA256SUMS lists {sorted(sums)}, dist has {archives}")
    for name in archives:
        digest = hashlib.sha256(open(os.path.join(dist, name), "rb").read()).hexdigest()
        if sums.get(name) != digest:
            errs.append(f"SHA256SUMS: {name} does not match")
    source = f"munmapq-{version}.tar.gz"
    if source not in archives:
        errs.append(f"no source archive {source}")
    host = subprocess.run(["rustc", "-vV"], capture_output=True, text=True).stdout
    host = re.search(r"^host: (\S+)", host, re.M).group(1)
    host_archive = f"munmapq-{version}-{host}.tar.gz"
    if host_archive not in archives:
        return errs + [f"no host archive {host_archive}"]
    launcher = os.path.join(ROOT, "target", "release", "munmapq")
    completions = {s: subprocess.run([launcher, "completions", s], check=True,
                                     capture_output=True).stdout for s in SHELLS}
    for name in archives:
        if name != source:
            errs += archive_errors(os.path.join(dist, name), completions)
    unpacked = os.path.join(dist, "unpacked")
    try:
        errs += host_archive_runs(os.path.join(dist, host_archive), unpacked)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)
    filled = open(os.path.join(dist, "munmapq.rb")).read()
    errs += [f"dist/munmapq.rb: {e}" for e in formula_errors(filled, dist_sh("--source-url"), version)]
    if sums.get(source) and f'sha256 "{sums[source]}"' not in filled:
        errs.append("dist/munmapq.rb does not carry the source archive's SHA-256")
    errs += ruby_errors(os.path.join(dist, "munmapq.rb"))
    return errs


def repo_errors():
    version = dist_sh("--source-name")[len("munmapq-"): -len(".tar.gz")]
    errs = workflow_errors(yaml.safe_load(open(WORKFLOW)))
    errs += [f"formula: {e}" for e in formula_errors(open(FORMULA).read(), dist_sh("--source-url"), version)]
    errs += ruby_errors(FORMULA)
    return errs


def selftest():
    wf = yaml.safe_load(open(WORKFLOW))
    assert not workflow_errors(wf), workflow_errors(wf)
    broken = []
    w = copy.deepcopy(wf); w[True] = {"push": {"branches": ["main"]}}; broken.append(w)
    w = copy.deepcopy(wf); del w["permissions"]; broken.append(w)
    w = copy.deepcopy(wf)
    for j in w["jobs"].values():
        for s in j["steps"]:
            if "with" in s:
                s["with"]["files"] = "dist/*.tar.gz\n"
    broken.append(w)
    w = copy.deepcopy(wf)
    for j in w["jobs"].values():
        j["steps"] = [s for s in j["steps"] if "scripts/dist.sh" not in s.get("run", "")]
    broken.append(w)
    for i, w in enumerate(broken):
        assert workflow_errors(w), f"broken workflow {i} passed"
    text = open(FORMULA).read()
    url, version = dist_sh("--source-url"), dist_sh("--source-name")[8:-7]
    assert not formula_errors(text, url, version)
    for bad in [text.replace(f"munmapq-{version}.tar.gz", f"munmapq-v{version}.tar.gz"),
                text.replace('sha256 "', 'sha256 "x'),
                text.replace('"selftest"', '"--version"'),
                text.replace('depends_on "rust" => :build', "")]:
        assert formula_errors(bad, url, version), "a broken formula passed"
    filled = dist_sh("--fill-formula", "ab" * 32)
    assert not formula_errors(filled, url, version) and 'sha256 "' + "ab" * 32 in filled
    print("check-release: selftest: broken workflows and formulas refused")


def main():
    args = sys.argv[1:]
    if args == ["--selftest"]:
        return selftest()
    dist = args[0] if args else os.path.join(ROOT, "dist")
    errs = repo_errors() + dist_errors(dist)
    for e in errs:
        print(f"check-release: {e}", file=sys.stderr)
    if errs:
        sys.exit(1)
    print(f"check-release: release workflow, formula and the archives in {dist} are well-formed")


if __name__ == "__main__":
    main()
