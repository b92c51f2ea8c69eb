#!/usr/bin/env python3
"""Writes a cargo `local-registry` holding the packaged crates of this
workspace and every crate `ROOT` needs to build (normal and build
dependencies, not dev ones), taken from cargo's download cache.

    scripts/local-registry.py OUT_DIR PACKAGE_DIR ROOT

PACKAGE_DIR holds the workspace's `.crate` files (`cargo package`). With
`[source.crates-io] replace-with` pointing at OUT_DIR, cargo resolves and
downloads nothing from the network: the proof that the packaged crates
install does not depend on them being published.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys


def index_path(name):
    n = name.lower()
    if len(n) <= 2:
        return os.path.join(str(len(n)), n)
    if len(n) == 3:
        return os.path.join("3", n[0], n)
    return os.path.join(n[:2], n[2:4], n)


def cache_dirs():
    home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
    base = os.path.join(home, "registry", "cache")
    return [os.path.join(base, d) for d in sorted(os.listdir(base))] if os.path.isdir(base) else []


def find_crate(pkg, package_dir):
    file = f"{pkg['name']}-{pkg['version']}.crate"
    dirs = [package_dir] if pkg["source"] is None else cache_dirs()
    for d in dirs:
        p = os.path.join(d, file)
        if os.path.isfile(p):
            return p
    sys.exit(f"local-registry: {file} not found in {dirs} (run cargo fetch / cargo package first)")


def index_entry(pkg, cksum):
    deps = []
    # Dev-dependencies too, as crates.io's index has them: a feature may
    # name one (hashbrown's "nightly" names bumpalo), and an entry whose
    # feature names no dependency is refused as invalid.
    for d in pkg["dependencies"]:
        dep = {
            "name": d["rename"] or d["name"],
            "req": d["req"],
            "features": d["features"],
            "optional": d["optional"],
            "default_features": d["uses_default_features"],
            "target": d["target"],
            "kind": d["kind"] or "normal",
        }
        if d["rename"]:
            dep["package"] = d["name"]
        deps.append(dep)
    features, features2 = {}, {}
    for k, v in pkg["features"].items():
        new_syntax = any(x.startswith("dep:") or "?/" in x for x in v)
        (features2 if new_syntax else features)[k] = v
    entry = {
        "name": pkg["name"],
        "vers": pkg["version"],
        "deps": deps,
        "cksum": cksum,
        "features": features,
        "yanked": False,
        "links": pkg.get("links"),
    }
    if features2:
        entry["features2"] = features2
        entry["v"] = 2
    return entry


def main():
    out, package_dir, root = sys.argv[1], sys.argv[2], sys.argv[3]
    meta = json.loads(
        subprocess.check_output(
            [os.environ.get("CARGO", "cargo"), "metadata", "--format-version", "1", "--locked"]
        )
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    start = [i for i, p in packages.items() if p["name"] == root and p["source"] is None]
    needed, todo = set(), list(start)
    while todo:
        i = todo.pop()
        if i in needed:
            continue
        needed.add(i)
        for d in nodes[i]["deps"]:
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                todo.append(d["pkg"])
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "index"))
    for i in sorted(needed):
        pkg = packages[i]
        crate = find_crate(pkg, package_dir)
        data = open(crate, "rb").read()
        shutil.copyfile(crate, os.path.join(out, os.path.basename(crate)))
        line = json.dumps(index_entry(pkg, hashlib.sha256(data).hexdigest()))
        path = os.path.join(out, "index", index_path(pkg["name"]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(line + "\n")
        print(f"local-registry: {pkg['name']} {pkg['version']}")


if __name__ == "__main__":
    main()
