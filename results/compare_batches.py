#!/usr/bin/python3
"""lynx-heu's simulated speedup over full recomputation and over the best Megatron strategy
that fits (none, full, selective), per paper scenario, at the paper's global batches and at
production ones, from the CSVs of `lynxsim figures` and `lynxsim figures --global-batch N`.

usage: compare_batches.py RESULTS_DIR...   (e.g. results/paper results/paper-gb512 results/paper-gb1536)

Prints a Markdown table (results/paper-batches.md is this script's output on the committed
sets). Standard library only.
"""
import csv
import os
import sys

MEGATRON = ("none", "full", "selective")


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        lines = [line for line in f.read().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def speedups(rows):
    """{(cluster, model): (layout, global batch, m, vs full, vs best Megatron, best name)}."""
    by = {}
    for r in rows:
        by.setdefault((r["cluster"], r["model"]), {})[r["strategy_requested"]] = r
    out = {}
    for key, runs in by.items():
        lynx = runs.get("lynx-heu")
        if lynx is None:
            continue
        def tokens(name):
            r = runs.get(name)
            return None if r is None or r["oom"] == "true" else float(r["tokens_per_s"])
        lynx_t = tokens("lynx-heu")
        full_t = tokens("full")
        fits = [(tokens(s), s) for s in MEGATRON if tokens(s) is not None]
        best_t, best = max(fits) if fits else (None, None)
        layout = f"tp{lynx['tp']} pp{lynx['pp']} dp{lynx['dp']} b{lynx['micro_batch']}"
        out[key] = (layout, lynx["global_batch"], lynx["micro_batches"],
                    lynx_t / full_t if lynx_t and full_t else None,
                    lynx_t / best_t if lynx_t and best_t else None, best)
    return out


def cell(x):
    return "-" if x is None else f"{x:.3f}"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    sets = [speedups(read(os.path.join(d, "paper_results.csv"))) for d in argv[1:]]
    keys = sorted(set().union(*sets), key=lambda k: (k[0], float(k[1].split("-")[-1].rstrip("b"))))
    head = "| cluster | model | layout |" + "".join(
        f" B (m) | vs full | vs best Megatron |" for _ in sets)
    print(head)
    print("|" + "---|" * (3 + 3 * len(sets)))
    for key in keys:
        layout = next(s[key][0] for s in sets if key in s)
        line = f"| {key[0]} | {key[1]} | {layout} |"
        for s in sets:
            if key not in s:
                line += " - | - | - |"
                continue
            _, batch, m, vs_full, vs_best, best = s[key]
            line += f" {batch} ({m}) | {cell(vs_full)} | {cell(vs_best)} ({best or 'none fits'}) |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
