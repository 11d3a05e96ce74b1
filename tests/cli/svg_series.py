#!/usr/bin/env python3
"""tests/cli/svg_series.py: checks a gnuplot SVG figure (tests/cli/figures.sh).

usage: svg_series.py FILE.svg SERIES [SERIES ...] [--also TITLE ...]

Each gnuplot plot element is a group <g id="gnuplot_plot_N"><title>NAME
</title> ... whose first stroke=, fill= or color='rgb(...)' (single-quoted) is its colour.
Fails (exit 1, saying why) unless every SERIES is there as a plot title,
each SERIES's colour differs from every other SERIES's, the SERIES come in
the order given (the legend's fixed order), and every --also TITLE (a line
such as 'y = x') is a plot title too. Prints the titles and colours found."""
import re
import sys


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, rest = argv[1], argv[2:]
    also = []
    if "--also" in rest:
        k = rest.index("--also")
        rest, also = rest[:k], rest[k + 1:]
    with open(path, encoding="utf-8") as f:
        svg = f.read()
    marks = list(re.finditer(r'<g id="gnuplot_plot_(\d+)[a-z]?" ><title>(.*?)</title>', svg))
    found = []  # (title, colour) in drawing order
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(svg)
        c = re.search(r"(?:stroke|fill|color)\s*=\s*'rgb\(\s*(\d+),\s*(\d+),\s*(\d+)\)'",
                      svg[m.end():end])
        found.append((m.group(2), c.groups() if c else None))
    titles = [t for t, _ in found]
    print(path + ": " + ", ".join("%s %s" % (t, c) for t, c in found))
    errors = []
    for t in rest + also:
        if t not in titles:
            errors.append("no plot titled '%s'" % t)
    order = [t for t in titles if t in rest]
    if not errors and order[:len(rest)] != rest:
        errors.append("series in the order %s, not %s" % (order, rest))
    seen = {}
    for t, c in found:
        if t not in rest:
            continue
        if c is None:
            errors.append("series '%s' has no colour" % t)
        elif c in seen and seen[c] != t:
            errors.append("series '%s' and '%s' share the colour rgb%s" % (seen[c], t, c))
        else:
            seen[c] = t
    for e in errors:
        print("%s: %s" % (path, e), file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
