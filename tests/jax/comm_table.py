"""comm_table.py COMM.tsv: the cost model's predicted communication beside
the collectives XLA inserted, bytes per device per training step, one row
per exported strategy, then the ops where they differ most."""
import collections
import sys

rows = collections.defaultdict(list)
for line in open(sys.argv[1]).read().splitlines()[1:]:
    s, op, pb, xb, kinds = line.split("\t")
    rows[s].append((op, float(pb), float(xb), kinds))
print("%-26s %14s %14s %7s" % ("strategy", "predicted B", "XLA B", "ratio"))
for s, r in rows.items():
    tot = [x for x in r if x[0] == "TOTAL"][0]
    ratio = "%.2f" % (tot[2] / tot[1]) if tot[1] else "-"
    print("%-26s %14.0f %14.0f %7s" % (s, tot[1], tot[2], ratio))
print()
print("largest differences per strategy (op: predicted / XLA bytes, XLA's collectives):")
for s, r in rows.items():
    ops = sorted((x for x in r if x[0] != "TOTAL"), key=lambda x: -abs(x[2] - x[1]))[:3]
    print("  %s: %s" % (s, "; ".join("%s %.0f/%.0f %s" % (o, p, x, k) for o, p, x, k in ops)))
