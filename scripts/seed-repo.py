#!/usr/bin/env python3
"""Makes a repository where `git log --raw` under the seed's settings maps
and unmaps pack windows once or twice per commit, as the seed's Linux
kernel repository did (3,072,538 window maps): three branches whose
commits alternate in date, merged at the tip, so git log takes one commit
from each in turn; in the pack (fast-import writes objects in stream
order) each branch's commits and trees lie together, the first separated
from the others by PAD1 MiB of padding (more than git's default 1 GiB
window, which starts at a multiple of 512 MiB) and the second from the
third by PAD2 MiB (more than a 64 MiB window): with default windows under
core.packedGitLimit=128m git alternates between two windows, with 64 MiB
windows between three, two of which fit under the limit.
The padding blobs are stored uncompressed (core.compression=0) and no
commit refers to them: git log never reads them.

Usage: seed-repo.py DIR [COMMITS_PER_BRANCH] [PAD1_MIB] [PAD2_MIB]
       (default 55000, 1100, 100; needs git in PATH)"""
import os
import subprocess
import sys

MIB = 1 << 20


def stream(out, per_branch, pad1, pad2):
    w = out.write
    zeros = bytes(MIB)
    mark = 0
    tips = []
    for b, name in enumerate("abc"):
        if b:
            mib = pad1 if b == 1 else pad2
            mark += 1
            w(b"blob\nmark :%d\ndata %d\n" % (mark, mib * MIB))
            for _ in range(mib):
                w(zeros)
            w(b"\n")
        prev = None
        for i in range(per_branch):
            mark += 1
            when = 1_000_000_000 + 3 * i + b
            content = b"%s %d\n" % (name.encode(), i)
            w(b"commit refs/heads/%s\nmark :%d\n" % (name.encode(), mark))
            w(b"committer Seed <seed@example.com> %d +0000\n" % when)
            msg = b"%s %d\n" % (name.encode(), i)
            w(b"data %d\n%s" % (len(msg), msg))
            if prev:
                w(b"from :%d\n" % prev)
            w(b"M 100644 inline %s/file\ndata %d\n%s\n" % (name.encode(), len(content), content))
            prev = mark
        tips.append(prev)
    mark += 1
    msg = b"merge\n"
    w(b"commit refs/heads/main\nmark :%d\n" % mark)
    w(b"committer Seed <seed@example.com> %d +0000\n" % (1_000_000_000 + 3 * per_branch + 3))
    w(b"data %d\n%sfrom :%d\nmerge :%d\nmerge :%d\n\n" % (len(msg), msg, tips[0], tips[1], tips[2]))


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__)
        sys.exit(2)
    repo = args[0]
    per_branch = int(args[1]) if len(args) > 1 else 55000
    pad1 = int(args[2]) if len(args) > 2 else 1100
    pad2 = int(args[3]) if len(args) > 3 else 100
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    git = ["git", "-C", repo, "-c", "core.compression=0", "-c", "pack.compression=0"]
    fi = subprocess.Popen(git + ["fast-import", "--quiet"], stdin=subprocess.PIPE)
    stream(fi.stdin, per_branch, pad1, pad2)
    fi.stdin.close()
    if fi.wait() != 0:
        sys.exit("git fast-import failed")
    subprocess.run(["git", "-C", repo, "checkout", "-q", "main"], check=True)
    pack = os.path.join(repo, ".git", "objects", "pack")
    size = sum(os.path.getsize(os.path.join(pack, f)) for f in os.listdir(pack) if f.endswith(".pack"))
    print(f"{repo}: {3 * per_branch + 1} commits, a {size >> 20} MiB pack")


main()
