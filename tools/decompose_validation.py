#!/usr/bin/env python3
"""Splits measured and predicted iteration times into what grows with the layers and what
grows with the micro-batches, per configuration group (VALIDATION.md, "The measurements split by component").

Within a group of rows that differ only in layers L and global batch (so in micro-batches per
iteration m), an iteration of a pipeline-free run costs

    time = a*L*m + c*L + e*m + d

a: per layer and micro-batch (the layers' forward and backward), c: per layer and iteration
(the layers' optimizer step and gradient all-reduce), e: per micro-batch outside the layers
(embedding, LM head, loss, the load), d: per iteration outside the layers. The four are fitted
by least squares to the measured times and to each profile's predictions, so a profile's error
shows up in the component that carries it.

Usage: tools/decompose_validation.py ROWS.csv [ROWS2.csv ...] [--pp P]
ROWS.csv: `lynxsim validate CSV --format csv --profile NAME` output (one per profile; the
measured column is taken from the first). Prints markdown tables per (tp, hidden, micro-batch),
averaged over the groups' data-parallel degrees (the data's bias does not depend on dp).
"""
import argparse
import collections
import csv
import sys

import numpy as np

COMPONENTS = ("a", "c", "e", "d")


def read_rows(path):
    """The profile named in the '#' header line and the rows of a validate --format csv file."""
    with open(path) as f:
        lines = f.readlines()
    profile = next((l.rsplit(" on ", 1)[-1].strip() for l in lines if l.startswith("#")), path)
    return profile, list(csv.DictReader(l for l in lines if not l.startswith("#")))


def group_key(row):
    return tuple(int(row[k]) for k in ("tp", "pp", "dp", "micro_batch", "hidden"))


def decompose(points):
    """Least-squares a, c, e, d of time = a*L*m + c*L + e*m + d over (L, m, time) points, and the
    largest absolute residual; None when the points cannot separate the four (fewer than two
    distinct L or m)."""
    layers = {p[0] for p in points}
    micro_batches = {p[1] for p in points}
    if len(layers) < 2 or len(micro_batches) < 2:
        return None
    x = np.array([[L * m, L, m, 1.0] for L, m, _ in points])
    y = np.array([t for _, _, t in points])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return dict(zip(COMPONENTS, coef)), float(np.max(np.abs(x @ coef - y)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+")
    parser.add_argument("--pp", type=int, default=1, help="pipeline degree of the groups shown")
    args = parser.parse_args()

    tables = [read_rows(p) for p in args.csv]
    series = [("measured", "measured_ms", tables[0][1])] + [(name, "predicted_ms", rows) for name, rows in tables]
    # (tp, h, mb) -> series name -> list of component dicts (one per dp group)
    by_cell = collections.defaultdict(lambda: collections.defaultdict(list))
    worst_residual = collections.defaultdict(float)
    for name, column, rows in series:
        groups = collections.defaultdict(list)
        for r in rows:
            key = group_key(r)
            m = int(r["global_batch"]) // (key[3] * key[2])
            groups[key].append((int(r["layers"]), m, float(r[column])))
        for (tp, pp, dp, mb, h), points in groups.items():
            if pp != args.pp:
                continue
            fit = decompose(points)
            if fit is None:
                continue
            by_cell[(tp, h, mb)][name].append(fit[0])
            worst_residual[name] = max(worst_residual[name], fit[1])
    if not by_cell:
        sys.exit(f"no group with pp {args.pp} has two layer counts and two micro-batch counts")

    names = [s[0] for s in series]
    labels = {"a": "per layer and micro-batch", "c": "per layer and iteration",
              "e": "per micro-batch outside the layers", "d": "per iteration outside the layers"}
    for comp in COMPONENTS:
        print(f"\n{comp}: {labels[comp]} (ms), pp {args.pp}\n")
        print("| tp | h | micro-batch | " + " | ".join(names) + " |")
        print("|---|---|---|" + "---|" * len(names))
        for (tp, h, mb) in sorted(by_cell):
            cell = by_cell[(tp, h, mb)]
            values = [np.mean([f[comp] for f in cell[n]]) if cell[n] else float("nan") for n in names]
            print(f"| {tp} | {h} | {mb} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    print("\nlargest residual of a group's four-term fit (ms): " +
          ", ".join(f"{n} {worst_residual[n]:.2f}" for n in names))


if __name__ == "__main__":
    main()
