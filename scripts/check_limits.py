#!/usr/bin/env python3
"""scripts/check_limits.py: the size and shape limits of the tree (ctest
`limits`; README.md, "Contributing").

  source files (not tests/)           at most 1,500 lines
  functions (not tests/)              at most 150 lines
  folder READMEs (*/README.md)        at most 150 lines
  docs/*.md                           at most 400 lines
  object files of the library         no loop of files calling each other
                                      (from `nm` of the built objects)

A limit broken where the tree broke it before this check existed is
listed in scripts/limits-known.tsv with its size then: it may shrink,
never grow, and once it is within the limit its line must go (the check
fails until it is removed), so the list only gets shorter. Any other
breach fails at once, naming the file, the function and the size.

usage: check_limits.py SOURCE_DIR [OBJECT_DIR ...]
  OBJECT_DIR: where the built .o files are (the library's, the command's):
  the loop check needs them; each folder is checked on its own
"""
import fnmatch
import os
import re
import subprocess
import sys

LIMITS = {"file": 1500, "function": 150, "readme": 150, "doc": 400}


def tracked(src, *patterns):
    """The files of the tree matching patterns: git's list in a clone (tracked,
    and untracked ones not ignored), else
    every file outside build*/ and hidden folders (a source tarball)."""
    out = subprocess.run(["git", "-C", src, "ls-files", "--cached", "--others",
                          "--exclude-standard", "--", *patterns],
                         capture_output=True, text=True)
    if out.returncode == 0:
        return [f for f in out.stdout.split("\n") if f]
    found = []
    for root, dirs, names in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))]
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), src)
            if any(fnmatch.fnmatch(rel, p) for p in patterns):
                found.append(rel)
    return found


def lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


def count(path):
    n = len(lines(path))
    return n - 1 if n and lines(path)[-1] == "" else n


def functions(path):
    """(name, first line, length) of each function whose body opens with a
    '{' alone at column 0 and closes with a '}' alone at column 0 (the
    project's clang-format style)."""
    L = lines(path)
    out, start, name = [], None, None
    for i, l in enumerate(L):
        if l == "{" and i > 0:
            j = i - 1
            while j > 0 and L[j][:1] in (" ", "\t"):
                j -= 1
            m = re.search(r"([A-Za-z_]\w*)\s*\(", L[j])
            name, start = (m.group(1) if m else L[j].strip()[:40]), i
        elif l == "}" and start is not None:
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def measure(src):
    """{(kind, key): size} of every breach in the tree."""
    found = {}
    code = [f for f in tracked(src, "*.c", "*.h", "*.cu", "*.cc", "*.hpp", "*.cuh")
            if not f.startswith("tests/")]
    for f in code:
        n = count(os.path.join(src, f))
        if n > LIMITS["file"]:
            found[("file", f)] = n
        if f.endswith((".c", ".cu", ".cc")):
            for name, _, n in functions(os.path.join(src, f)):
                if n > LIMITS["function"]:
                    found[("function", "%s:%s" % (f, name))] = n
    for f in tracked(src, "*README.md"):
        if "/" in f:
            n = count(os.path.join(src, f))
            if n > LIMITS["readme"]:
                found[("readme", f)] = n
    for f in tracked(src, "docs/*.md"):
        n = count(os.path.join(src, f))
        if n > LIMITS["doc"]:
            found[("doc", f)] = n
    return found


def loops(objdir):
    """Strongly connected sets of more than one object file: files that call
    each other, directly or round a loop."""
    objs = []
    for root, _, names in os.walk(objdir):
        objs += [os.path.join(root, n) for n in names if n.endswith(".o")]
    if not objs:
        sys.exit("check_limits: no object files under %s" % objdir)
    defs, uses = {}, {}
    for o in objs:
        out = subprocess.run(["nm", "--defined-only", "-g", o], capture_output=True, text=True)
        for l in out.stdout.split("\n"):
            p = l.split()
            if len(p) == 3 and p[1] in "TDBRCV":
                defs[p[2]] = o
        out = subprocess.run(["nm", "-u", o], capture_output=True, text=True)
        uses[o] = {l.split()[-1] for l in out.stdout.split("\n") if l.strip()}
    edges = {o: {defs[s] for s in uses[o] if s in defs and defs[s] != o} for o in objs}
    # Tarjan's strongly connected components
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in objs:
        if v not in index:
            visit(v)

    def name(o):
        o = os.path.relpath(o, objdir)
        return re.sub(r"^.*?\.dir/", "", o)[:-2]

    return {("loop", " <-> ".join(sorted(name(o) for o in c))): len(c) for c in sccs}


def known(src):
    path = os.path.join(src, "scripts", "limits-known.tsv")
    out = {}
    for i, l in enumerate(lines(path), 1):
        if not l.strip() or l.startswith("#"):
            continue
        p = l.split("\t")
        if len(p) != 3 or p[0] not in ("file", "function", "readme", "doc", "loop") \
                or not p[2].isdigit():
            sys.exit("check_limits: %s:%d: want KIND<TAB>WHAT<TAB>SIZE" % (path, i))
        if (p[0], p[1]) in out:
            sys.exit("check_limits: %s:%d: %s %s listed twice" % (path, i, p[0], p[1]))
        out[(p[0], p[1])] = int(p[2])
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    found = measure(src)
    for objdir in sys.argv[2:]:
        found.update(loops(objdir))
    was = known(src)
    bad = []
    for (kind, what), n in sorted(found.items()):
        if (kind, what) not in was:
            lim = LIMITS.get(kind)
            bad.append("%s %s: %d%s" % (kind, what, n,
                       " (limit %d)" % lim if lim else " files call each other in a loop"))
        elif n > was[(kind, what)]:
            bad.append("%s %s: grew to %d (listed at %d in scripts/limits-known.tsv: "
                       "it may only shrink)" % (kind, what, n, was[(kind, what)]))
    for (kind, what), n in sorted(was.items()):
        if (kind, what) not in found and (kind != "loop" or len(sys.argv) > 2):
            bad.append("%s %s: within the limit now: remove its line from "
                       "scripts/limits-known.tsv" % (kind, what))
    left = sum(1 for k in was if k in found)
    if bad:
        print("check_limits: %d breach%s:" % (len(bad), "" if len(bad) == 1 else "es"))
        for b in bad:
            print("  " + b)
        return 1
    print("check_limits: within the limits (%d known breach%s left in "
          "scripts/limits-known.tsv)" % (left, "" if left == 1 else "es"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
